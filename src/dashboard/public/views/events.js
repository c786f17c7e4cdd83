// @ts-check
// #/events: the webhook endpoints whose deliveries fail (disabled, failed attempts, or undelivered events), each with
// its undelivered events, a Replay button that queues them again (POST /events/endpoints/{endpoint}/replay) and, for a
// disabled one, Enable. Endpoints that deliver without failures are only counted. Read again every few seconds.
import { Component } from '../vendor/preact.js';
import { api, errorText, fmt, html, Unauthorized } from '../lib.js';

/** @typedef {import('../api.d.ts').Answers} Answers */
/** @typedef {import('../api.d.ts').EventEndpoint} EventEndpoint */
/** @typedef {import('../api.d.ts').UndeliveredEvent} UndeliveredEvent */

/** The page re-reads the endpoints this often while it is shown (a replay's deliveries land within seconds). */
export const refreshMs = 10_000;

/** Undelivered events listed per endpoint; the rest are counted. */
const EVENTS_SHOWN = 20;

/** @param {EventEndpoint} e */
const failing = (e) => e.delivery.disabled || e.delivery.failed > 0 || e.delivery.undelivered > 0 || e.delivery.dropped > 0;

/** Its last error in words, with the status it answered when the words do not say it. @param {EventEndpoint['delivery']} d */
function lastError(d) {
  if (d.lastError !== null) return d.lastStatus === null || d.lastError.includes(String(d.lastStatus)) ? d.lastError : `${d.lastError} (HTTP ${d.lastStatus})`;
  return d.lastStatus === null ? '-' : `answered ${d.lastStatus}`;
}

/**
 * @typedef {object} EventsProps
 * @property {EventEndpoint[]} endpoints every endpoint
 * @property {Record<string, Answers['GET /events/endpoints/{endpoint}/undelivered']>} undelivered the first page of each failing endpoint's undelivered events
 * @property {import('../app.js').ViewContext} ctx
 */

/** @extends {Component<EventsProps, { message: string, busy: string }>} */
class EventsPage extends Component {
  state = { message: this.props.ctx.note ?? '', busy: '' };

  /**
   * Replays (or enables) an endpoint, then shows the page afresh with what happened.
   * @param {EventEndpoint} e
   * @param {'replay' | 'enable'} what
   */
  act = async (e, what) => {
    const { ctx } = this.props;
    this.setState({ busy: e.id, message: '' });
    try {
      if (what === 'replay') {
        const done = await api('POST /events/endpoints/{endpoint}/replay', { params: { endpoint: e.id }, body: {} });
        ctx.refresh(`Replayed ${fmt(done.replayed)} event${done.replayed === 1 ? '' : 's'} of ${e.id}: queued again, due now.`);
      } else {
        await api('POST /events/endpoints/{endpoint}/enable', { params: { endpoint: e.id }, body: {} });
        ctx.refresh(`Enabled ${e.id}: its queue is delivered again.`);
      }
    } catch (err) {
      if (err instanceof Unauthorized) return ctx.signIn('Your session ended. Sign in again.');
      this.setState({ message: errorText(err), busy: '' });
    }
  };

  render() {
    const { endpoints, undelivered } = this.props;
    const { message, busy } = this.state;
    const bad = endpoints.filter(failing);
    const fine = endpoints.length - bad.length;
    return html`
      <h1>Events</h1>
      <p class="muted">
        Webhook endpoints whose deliveries fail: disabled, or with events given up after every attempt failed (undelivered: kept for a replay). Replay queues an
        endpoint's undelivered events again, due now.
      </p>
      <p id="events-message" role="status">${message}</p>
      ${endpoints.length === 0 ? html`<p class="muted">No webhook endpoint: none in the config's events.webhooks, none registered for a consumer.</p>` : null}
      ${endpoints.length > 0 && bad.length === 0 ? html`<p class="muted" id="events-none-failing">Every endpoint delivers without failures.</p>` : null}
      ${
        bad.length > 0
          ? html`<div class="panel">
              <table id="events-failing">
                <thead>
                  <tr>
                    <th>endpoint</th>
                    <th>consumer</th>
                    <th>state</th>
                    <th>queued</th>
                    <th>undelivered</th>
                    <th title="events given up after their last attempt, since the queue was first used">failed (total)</th>
                    <th>last error</th>
                    <th></th>
                  </tr>
                </thead>
                <tbody>
                  ${bad.map(
                    (e) =>
                      html`<tr data-endpoint=${e.id}>
                        <td class="endpoint">
                          <code>${e.id}</code>
                          <div class="muted endpoint-url">${e.url}</div>
                        </td>
                        <td>${e.consumer ?? html`<span class="muted">config</span>`}</td>
                        <td class="endpoint-state">
                          ${
                            e.delivery.disabled
                              ? html`<span class="badge revoked">disabled</span
                                  >${e.delivery.disabledReason ? html`<div class="muted">${e.delivery.disabledReason}</div>` : null}`
                              : html`<span class="badge expired">failing</span>`
                          }
                        </td>
                        <td class="queued">${fmt(e.delivery.queued)}</td>
                        <td class="undelivered">${fmt(e.delivery.undelivered)}</td>
                        <td>${fmt(e.delivery.failed)}</td>
                        <td class="endpoint-error">${lastError(e.delivery)}</td>
                        <td>
                          <div class="actions row-actions">
                            <button
                              type="button"
                              class="primary replay"
                              disabled=${busy !== '' || e.delivery.undelivered === 0}
                              onClick=${() => this.act(e, 'replay')}
                            >
                              Replay
                            </button>
                            ${
                              e.delivery.disabled
                                ? html`<button type="button" class="enable" disabled=${busy !== ''} onClick=${() => this.act(e, 'enable')}>Enable</button>`
                                : null
                            }
                          </div>
                        </td>
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
          : null
      }
      ${bad
        .filter((e) => (undelivered[e.id]?.events.length ?? 0) > 0)
        .map((e) => {
          const page = undelivered[e.id];
          const events = page?.events ?? [];
          const more = e.delivery.undelivered - events.length;
          return html`<div class="panel undelivered-events" data-endpoint=${e.id}>
            <h2>Undelivered to <code>${e.id}</code></h2>
            <table>
              <thead>
                <tr>
                  <th>event</th>
                  <th>type</th>
                  <th>subject</th>
                  <th>attempts</th>
                  <th>given up</th>
                  <th>last error</th>
                </tr>
              </thead>
              <tbody>
                ${events.map(
                  (ev) =>
                    html`<tr>
                      <td><code>${ev.id}</code></td>
                      <td>${ev.type}</td>
                      <td>${ev.subject ?? '-'}</td>
                      <td>${fmt(ev.attempts)}</td>
                      <td>${ev.deadAt ? new Date(ev.deadAt).toLocaleString() : '-'}</td>
                      <td class="endpoint-error">${ev.lastError ?? '-'}</td>
                    </tr>`,
                )}
              </tbody>
            </table>
            ${more > 0 ? html`<p class="muted">and ${fmt(more)} more</p>` : null}
          </div>`;
        })}
      ${fine > 0 && bad.length > 0 ? html`<p class="muted">${fmt(fine)} more endpoint${fine === 1 ? '' : 's'} deliver${fine === 1 ? 's' : ''} without failures.</p>` : null}
    `;
  }
}

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const { endpoints } = await api('GET /events/endpoints');
  const bad = endpoints.filter((e) => failing(e) && e.delivery.undelivered > 0);
  const pages = await Promise.all(
    bad.map((e) => api('GET /events/endpoints/{endpoint}/undelivered', { params: { endpoint: e.id }, query: { limit: EVENTS_SHOWN } })),
  );
  /** @type {EventsProps['undelivered']} */
  const undelivered = {};
  bad.forEach((e, i) => (undelivered[e.id] = pages[i]));
  return html`<${EventsPage} endpoints=${endpoints} undelivered=${undelivered} ctx=${ctx} />`;
}
