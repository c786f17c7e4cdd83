// @ts-check
// #/keys: the account's keys, masked (prefix…last 4). A full session (a link with keys:write) creates a key (its
// plaintext shown once) where the consumer's plan lets it (me.canCreateKeys; otherwise a sentence says the provider
// issues them), rotates one with an overlap during which the old key keeps working, and revokes one after asking,
// whatever the plan. A key session sees its own key and no controls.
import { Component } from '../vendor/preact.js';
import { $, api, ask, can, confirmIt, errorText, html, showKeyOnce, Unauthorized, when } from '../lib.js';

/** @typedef {import('../api.d.ts').Key} KeyView */

/** Each status in words: its badge, and what it means (the badge's tooltip). */
const STATUS = {
  active: ['active', 'works'],
  grace: ['rotating', 'rotated: the new key works, and the old one still does for a while'],
  expired: ['expired', 'past its expiry date: refused'],
  revoked: ['revoked', 'refused for good'],
};

/** @param {number} seconds */
const overlapWords = (seconds) => (seconds === 0 ? 'no time' : seconds === 3600 ? '1 hour' : seconds === 86400 ? '1 day' : `${seconds / 86400} days`);

/**
 * @typedef {object} KeysProps
 * @property {KeyView[]} keys
 * @property {import('../app.js').ViewContext} ctx
 */

/** @extends {Component<KeysProps, { message: string, error: string }>} */
class KeysPage extends Component {
  state = { message: this.props.ctx.note ?? '', error: '' };

  /**
   * Runs an action; its failure is said under the title in words, an ended session goes to the sign-in form.
   * @param {() => Promise<void>} fn
   */
  async run(fn) {
    this.setState({ error: '', message: '' });
    try {
      await fn();
    } catch (err) {
      if (err instanceof Unauthorized) return this.props.ctx.signIn('Your session ended. Sign in again.');
      this.setState({ error: errorText(err, 'keys:write') });
    }
  }

  create = () =>
    this.run(async () => {
      const input = /** @type {HTMLInputElement} */ ($('#create-key-name'));
      input.value = '';
      if ((await ask('#create-key')) !== 'create') return;
      const name = input.value.trim();
      input.value = '';
      const made = await api('POST /api/keys', { body: name ? { name } : {} });
      showKeyOnce(made.key, 'Your new key', `${made.name ? `"${made.name}", ` : ''}${made.masked}. It works from now on.`, `Key ${made.masked} created.`);
    });

  /** @param {KeyView} k */
  rotate = (k) =>
    this.run(async () => {
      $('#rotate-key-masked').textContent = k.masked;
      const select = /** @type {HTMLSelectElement} */ ($('#rotate-overlap'));
      select.value = '86400';
      const until = () => {
        const s = Number(select.value);
        $('#rotate-until').textContent =
          s === 0 ? 'The old key stops working as soon as you rotate.' : `The old key keeps working until about ${when(Date.now() + s * 1000)}.`;
      };
      until();
      select.onchange = until;
      if ((await ask('#rotate-key')) !== 'rotate') return;
      const overlapSeconds = Number(select.value);
      const r = await api('POST /api/keys/{id}/rotate', { params: { id: k.id }, body: { overlapSeconds } });
      const old =
        overlapSeconds === 0
          ? 'The old key has stopped working.'
          : `The old key keeps working until ${when(r.overlapUntil)} (${overlapWords(overlapSeconds)}).`;
      showKeyOnce(r.key, 'Your rotated key', `${r.masked} replaces ${k.masked}. ${old} Put the new key in place before then.`, `Key rotated. ${old}`);
    });

  /** @param {KeyView} k */
  revoke = (k) =>
    this.run(async () => {
      const yes = await confirmIt({
        title: `Revoke ${k.masked}?`,
        text: 'Requests with this key are refused within a second, for good. This cannot be undone: a revoked key never works again.',
        yes: 'Revoke the key',
      });
      if (!yes) return;
      await api('POST /api/keys/{id}/revoke', { params: { id: k.id } });
      this.props.ctx.refresh(`Key ${k.masked} revoked.`);
    });

  render() {
    const { keys, ctx } = this.props;
    const write = can(ctx.me, 'keys:write');
    // keys:write, and a plan whose keys the consumer creates itself (plans.<plan>.selfServiceKeys).
    const create = write && ctx.me.canCreateKeys;
    const keySession = ctx.me.session.kind === 'key';
    return html`
      <div class="title-row">
        <h1>Keys</h1>
        ${create ? html`<button type="button" id="create-key-open" class="primary" onClick=${this.create}>Create key</button>` : null}
      </div>
      ${
        write
          ? html`${
                create
                  ? null
                  : html`<p id="provider-issued" class="note">
                      Keys on your plan are issued by your provider: ask them for a new key. You can still rotate or revoke your keys here.
                    </p>`
              }
              <p class="muted">Each key is shown whole only once, when it is made. Here it is masked: its start and its last 4 characters.</p>`
          : html`<p id="read-only" class="note">
              ${keySession ? 'You signed in with a key, so you see that key only, and' : 'Your session'} cannot create, rotate or revoke keys. For that, ask
              your provider for a sign-in link with keys:write.
            </p>`
      }
      ${this.state.error ? html`<p class="error" role="alert" id="keys-error">${this.state.error}</p>` : null}
      <p id="keys-message" role="status" class="ok-text">${this.state.message}</p>
      ${
        keys.length === 0
          ? html`<p class="panel" id="keys-empty">You have no keys yet.${create ? ' Create one with the button above.' : ''}</p>`
          : html`<div class="panel scroll">
              <table id="keys-table">
                <thead>
                  <tr>
                    <th>key</th>
                    <th>name</th>
                    <th>status</th>
                    <th>created</th>
                    <th>rotated</th>
                    <th>expires</th>
                    ${write ? html`<th><span class="sr-only">actions</span></th>` : null}
                  </tr>
                </thead>
                <tbody>
                  ${keys.map(
                    (k) =>
                      html`<tr data-key=${k.id}>
                        <td><code class="masked">${k.masked}</code></td>
                        <td class="wrap">${k.name || html`<span class="muted">-</span>`}</td>
                        <td class="status">
                          <span class=${`badge ${k.status}`} title=${STATUS[k.status][1]}>${STATUS[k.status][0]}</span>
                          ${k.graceUntil ? html`<div class="muted small">old key works until ${when(k.graceUntil)}</div>` : null}
                        </td>
                        <td>${when(k.createdAt)}</td>
                        <td>${k.rotatedAt ? when(k.rotatedAt) : html`<span class="muted">never</span>`}</td>
                        <td>${k.expiresAt ? when(k.expiresAt) : html`<span class="muted">never</span>`}</td>
                        ${
                          write
                            ? html`<td>
                                ${
                                  k.status === 'active' || k.status === 'grace'
                                    ? html`<div class="row-actions">
                                        <button type="button" class="rotate" onClick=${() => this.rotate(k)}>Rotate</button>
                                        <button type="button" class="revoke danger" onClick=${() => this.revoke(k)}>Revoke</button>
                                      </div>`
                                    : null
                                }
                              </td>`
                            : null
                        }
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
    `;
  }
}

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const r = await api('GET /api/keys');
  return html`<${KeysPage} keys=${r.keys} ctx=${ctx} />`;
}
