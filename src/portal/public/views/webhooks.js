// @ts-check
// #/webhooks (only for a session with webhooks:write on a gateway that allows it): the account's webhook endpoints
// with their delivery state, registering one (its signing secret shown once) and deleting one after asking.
import { Component } from '../vendor/preact.js';
import { api, confirmIt, errorText, html, showSecretOnce, Unauthorized, when } from '../lib.js';

/** The events an endpoint can receive, in words. */
const TYPES = /** @type {const} */ ([
  ['quota.threshold', 'a limit is nearly used up'],
  ['quota.shadow_threshold', 'a coming limit would be nearly used up'],
  ['key.banned', 'a key is banned'],
  ['consumer.suspended', 'your account is suspended'],
  ['deprecated.called', 'you call a deprecated operation'],
  ['key.expiring', 'a key expires soon'],
]);

/** @param {import('../api.d.ts').Webhook['delivery']} d */
function deliveryWords(d) {
  if (!d) return html`<span class="muted">nothing sent yet</span>`;
  const parts = [`${d.delivered} delivered`, `${d.queued} waiting`];
  if (d.failed) parts.push(`${d.failed} failed`);
  return html`${d.disabled ? html`<strong class="error">stopped: your endpoint answered 410 Gone, or your provider paused it</strong><br />` : null}${parts.join(', ')}
  ${d.lastError ? html`<br /><span class="error">last error: ${d.lastError}${d.lastStatus ? ` (HTTP ${d.lastStatus})` : ''}</span>` : null}`;
}

/**
 * @typedef {object} HooksProps
 * @property {import('../api.d.ts').Webhook[]} endpoints
 * @property {import('../app.js').ViewContext} ctx
 */

/** @extends {Component<HooksProps, { error: string }>} */
class WebhooksPage extends Component {
  state = { error: '' };

  /** @param {() => Promise<void>} fn */
  async run(fn) {
    this.setState({ error: '' });
    try {
      await fn();
    } catch (err) {
      if (err instanceof Unauthorized) return this.props.ctx.signIn('Your session ended. Sign in again.');
      this.setState({ error: errorText(err, 'webhooks:write') });
    }
  }

  /** @param {SubmitEvent} e */
  register = (e) => {
    e.preventDefault();
    const form = /** @type {HTMLFormElement} */ (e.currentTarget);
    const data = new FormData(form);
    const types = data.getAll('types').map(String);
    const thresholds = String(data.get('thresholds') || '')
      .split(/[\s,]+/)
      .filter(Boolean)
      .map(Number);
    if (thresholds.some((t) => !Number.isInteger(t) || t < 1 || t > 100))
      return this.setState({ error: 'Percents are whole numbers from 1 to 100, separated by commas (e.g. 80, 100).' });
    return this.run(async () => {
      const made = await api('POST /api/webhooks', {
        body: { url: String(data.get('url')), ...(types.length ? { types } : {}), ...(thresholds.length ? { thresholds } : {}) },
      });
      form.reset();
      showSecretOnce(made.secret);
      this.props.ctx.refresh(`Endpoint ${made.url} registered.`);
    });
  };

  /** @param {import('../api.d.ts').Webhook} w */
  remove = (w) =>
    this.run(async () => {
      if (!(await confirmIt({ title: 'Delete this endpoint?', text: `${w.url} gets no more events.`, yes: 'Delete the endpoint' }))) return;
      await api('DELETE /api/webhooks/{id}', { params: { id: w.id } });
      this.props.ctx.refresh('Endpoint deleted.');
    });

  render() {
    const { endpoints, ctx } = this.props;
    return html`
      <h1>Webhooks</h1>
      <p class="muted">Your endpoints receive events as signed HTTPS POSTs, so your systems learn of them without watching this page.</p>
      ${this.state.error ? html`<p class="error" role="alert" id="webhooks-error">${this.state.error}</p>` : null}
      ${ctx.note ? html`<p class="ok-text" role="status">${ctx.note}</p>` : null}
      <section class="panel">
        <h2>Your endpoints</h2>
        ${
          endpoints.length === 0
            ? html`<p class="muted" id="webhooks-empty">You have no endpoint yet: register one below.</p>`
            : html`<div class="scroll">
                <table id="webhooks-table">
                  <thead>
                    <tr>
                      <th>address</th>
                      <th>events</th>
                      <th>delivery</th>
                      <th>registered</th>
                      <th><span class="sr-only">actions</span></th>
                    </tr>
                  </thead>
                  <tbody>
                    ${endpoints.map(
                      (w) =>
                        html`<tr>
                          <td class="wrap"><code>${w.url}</code></td>
                          <td class="wrap">
                            ${w.types.join(', ')}${w.thresholds ? html`<br /><span class="muted">at ${w.thresholds.join(', ')} %</span>` : null}
                          </td>
                          <td class="wrap">${deliveryWords(w.delivery)}</td>
                          <td>${when(w.createdAt)}</td>
                          <td><button type="button" class="danger" onClick=${() => this.remove(w)}>Delete</button></td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>`
        }
      </section>
      <section class="panel">
        <h2>Register an endpoint</h2>
        <form id="webhook-form" class="stack" onSubmit=${this.register}>
          <label for="webhook-url">Address (https://…, reachable from the internet)</label>
          <input id="webhook-url" name="url" type="url" required placeholder="https://example.com/hooks/api" />
          <fieldset>
            <legend>Events (none ticked: all of them)</legend>
            ${TYPES.map(
              ([t, words]) =>
                html`<label class="check"
                  ><input type="checkbox" name="types" value=${t} /><span>${words} <code>${t}</code></span></label
                >`,
            )}
          </fieldset>
          <label for="webhook-thresholds">Warn at these percents of a limit (optional, e.g. 80, 100)</label>
          <input id="webhook-thresholds" name="thresholds" inputmode="numeric" />
          <div class="actions"><button type="submit" class="primary">Register</button></div>
        </form>
      </section>
    `;
  }
}

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  if (!ctx.me.canRegisterWebhooks)
    return html`<h1>Webhooks</h1>
      <p class="panel" id="webhooks-off">Webhooks cannot be registered for your account on this portal.</p>`;
  if (!ctx.me.session.scopes.includes('webhooks:write'))
    return html`<h1>Webhooks</h1>
      <p class="panel" id="webhooks-off">Your session cannot manage webhooks: ask your provider for a sign-in link with webhooks:write.</p>`;
  const r = await api('GET /api/webhooks');
  return html`<${WebhooksPage} endpoints=${r.webhooks} ctx=${ctx} />`;
}
