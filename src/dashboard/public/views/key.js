// @ts-check
// #/keys/<id>: one key, its windows and ban, its last 24 hours of traffic (with its hourly cap when the traffic comes
// near it), and the changes an operator makes to it: plan, rotate (with the old key's grace), unban, reset, revoke.
import { Component } from '../vendor/preact.js';
import { api, Chart, consumerHref, errorText, fmt, html, iso, showKeyOnce, tile, Unauthorized } from '../lib.js';

/** @typedef {import('../api.d.ts').Answers} Answers */

/**
 * The hourly cap is drawn only when the busiest hour reached this share of it: a line far above the traffic would
 * squash the traffic into a flat line at zero, and a cap that far off is not what the chart is for.
 */
const CAP_IN_SIGHT = 0.25;

/**
 * The most requests a key can be admitted in one hour: its per-minute limit × 60, or its day quota when that is
 * smaller (a 5/min plan with 50 a day can never see 300 in an hour). Undefined without a usable plan.
 * @param {import('../api.d.ts').Window[] | null} windows
 */
function hourlyCap(windows) {
  const minute = windows?.find((w) => w.name === 'minute');
  const day = windows?.find((w) => w.name === 'day');
  return minute && day ? Math.min(minute.limit * 60, day.limit) : undefined;
}

/** @param {string} sel */
const $ = (sel) => /** @type {HTMLElement} */ (document.querySelector(sel));

/**
 * Asks for the grace of a rotation in the rotate dialog (index.html), and, for a key with a recorded prefix (an
 * imported one), whether the new key keeps it: undefined when cancelled.
 * @param {string | undefined} prefix
 * @returns {Promise<{ graceSeconds: number, keepPrefix: boolean } | undefined>}
 */
function askRotation(prefix) {
  const dialog = /** @type {HTMLDialogElement} */ ($('#rotate-key'));
  const input = /** @type {HTMLInputElement} */ ($('#rotate-grace'));
  const keep = /** @type {HTMLInputElement} */ ($('#rotate-keep-prefix'));
  $('#rotate-keep-prefix-row').hidden = prefix === undefined;
  $('#rotate-prefix').textContent = prefix ?? '';
  keep.checked = false;
  input.value = '24';
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener(
      'close',
      () => {
        const hours = Number(input.value);
        resolve(
          dialog.returnValue === 'rotate' && Number.isFinite(hours) && hours >= 0
            ? { graceSeconds: Math.round(hours * 3600), keepPrefix: prefix !== undefined && keep.checked }
            : undefined,
        );
      },
      { once: true },
    );
    dialog.showModal();
  });
}

/**
 * @typedef {object} KeyPageProps
 * @property {Answers['GET /keys/{id}']} k
 * @property {Answers['GET /keys/{id}/usage']} usage
 * @property {Answers['GET /plans']} plans
 * @property {import('../app.js').ViewContext} ctx
 */

/** @extends {Component<KeyPageProps, { message: string }>} */
class KeyPage extends Component {
  state = { message: this.props.ctx.note ?? '' };

  /**
   * A button running `fn`; its failure is said under the buttons, an ended session goes to the sign-in form.
   * @param {string} label
   * @param {() => Promise<void>} fn
   * @param {string} [cls]
   */
  act(label, fn, cls) {
    const run = async () => {
      try {
        await fn();
      } catch (err) {
        if (err instanceof Unauthorized) return this.props.ctx.signIn('Your session ended. Sign in again.');
        this.setState({ message: errorText(err) });
      }
    };
    return html`<button type="button" class=${cls} onClick=${run}>${label}</button>`;
  }

  render() {
    const { k, usage, plans, ctx } = this.props;
    const params = { id: k.id };
    /** Posts a change, then shows the key afresh with `note`. @param {'reset' | 'revoke' | 'unban'} what @param {string} note */
    const change = async (what, note) => {
      await api(`POST /keys/{id}/${what}`, { params, body: {} });
      ctx.refresh(note);
    };
    const rotate = async () => {
      const asked = await askRotation(k.prefix);
      if (asked === undefined) return;
      const { graceSeconds, keepPrefix } = asked;
      const r = await api('POST /keys/{id}/rotate', { params, body: { graceSeconds, ...(keepPrefix ? { keepPrefix } : {}) } });
      showKeyOnce(
        r.key,
        graceSeconds > 0
          ? `The old key keeps working until ${new Date(Date.now() + graceSeconds * 1000).toLocaleString()}.`
          : 'The old key has stopped working.',
      );
    };
    const changePlan = async () => {
      const plan = /** @type {HTMLSelectElement} */ ($('#plan-select')).value;
      await api('PATCH /keys/{id}', { params, body: { plan } });
      ctx.refresh(`Plan changed to ${plan}.`);
    };
    const cap = hourlyCap(k.windows);
    const peak = Math.max(0, ...usage.buckets.map((b) => b.admitted));
    const capInSight = cap !== undefined && peak >= cap * CAP_IN_SIGHT;
    /** @type {Array<[string, import('../lib.js').Children]>} */
    const fields = [
      ['id', k.id],
      // The consumer's plan is in force for its keys: the key's own is kept for when it leaves the consumer.
      ['consumer', k.consumer ? html`<a href=${consumerHref(k.consumer)}>${k.consumer}</a>` : undefined],
      ['plan', k.consumer ? `${k.plan} (its own; while it belongs to a consumer, the consumer's plan is in force)` : k.plan],
      ['created', k.createdAt],
      ['expires', k.expiresAt || 'never'],
      ['prefix', k.prefix],
      ['rotated', k.rotatedAt],
      ['revoked', k.revokedAt],
      ['metadata', k.metadata ? JSON.stringify(k.metadata) : undefined],
    ];
    return html`
      <p><a href="#/keys">← Keys</a></p>
      <h1>${k.name || k.id}</h1>
      <p>
        <span class="badge ${k.status}" id="key-status-badge">${k.status}</span>${' '}
        ${k.ban ? html`<span class="badge banned">banned until ${new Date(k.ban.until).toLocaleString()}</span>` : null}
      </p>
      <div class="tiles">
        ${(k.windows || []).map((w) => tile(`${w.name} window: used of ${fmt(w.limit)}`, fmt(w.used)))} ${tile('requests, 24 h', fmt(usage.totals.admitted))}
        ${tile('refused, 24 h', fmt(usage.totals.rateLimited + usage.totals.banned))} ${tile('ban level', String(k.banLevel))}
        ${tile('would-be bans, 24 h', fmt(usage.totals.wouldBan))} ${tile('failed validation, 24 h', fmt(usage.totals.validationFailed))}
      </div>
      <div class="panel">
        <h2>Last 24 hours, by hour</h2>
        <${Chart} id="key-chart" buckets=${usage.buckets} limit=${capInSight ? { label: `hourly cap (${fmt(cap)})`, value: cap } : undefined} />
        ${
          cap !== undefined && !capInSight
            ? html`<p class="muted" id="cap-note">
                Hourly cap ${fmt(cap)} not drawn: the busiest hour used ${fmt(peak)} (under ${CAP_IN_SIGHT * 100}% of it), so the chart scales to the traffic.
              </p>`
            : null
        }
      </div>
      <div class="panel">
        <h2>Key</h2>
        <table>
          <tbody>
            ${fields
              .filter(([, v]) => v)
              .map(
                ([a, b]) =>
                  html`<tr>
                    <th>${a}</th>
                    <td>${b}</td>
                  </tr>`,
              )}
          </tbody>
        </table>
      </div>
      ${
        k.status === 'active'
          ? html`<div class="actions">
              <select id="plan-select" aria-label="Plan">
                ${plans.plans.map(
                  (p) => html`<option value=${p.name} selected=${p.name === k.plan}>${p.name} (${fmt(p.perMinute)}/min, ${fmt(p.perDay)}/day)</option>`,
                )}
              </select>
              ${this.act('Change plan', changePlan)} ${this.act('Rotate', rotate, 'primary')}
              ${k.ban || k.banLevel > 0 ? this.act('Unban', () => change('unban', 'Unbanned. Its windows are as they were: Reset windows empties them.')) : null}
              ${this.act('Reset windows', async () => {
                if (!confirm("Empty this key's minute and day windows? Its next request starts them afresh.")) return;
                await change('reset', 'Windows reset: the key is admitted again up to its quota.');
              })}
              ${this.act(
                'Revoke',
                async () => {
                  if (!confirm('Revoke this key? It stops working on every gateway within a second, for good.')) return;
                  await change('revoke', 'Revoked.');
                },
                'danger',
              )}
            </div>`
          : null
      }
      <p id="key-message" role="status">${this.state.message}</p>
    `;
  }
}

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const id = decodeURIComponent(ctx.path.replace(/^\/keys\//, ''));
  const now = Date.now();
  const [k, usage, plans] = await Promise.all([
    api('GET /keys/{id}', { params: { id } }),
    api('GET /keys/{id}/usage', { params: { id }, query: { granularity: 'hour', from: iso(now - 24 * 3600e3), to: iso(now) } }),
    api('GET /plans'),
  ]);
  return html`<${KeyPage} k=${k} usage=${usage} plans=${plans} ctx=${ctx} />`;
}
