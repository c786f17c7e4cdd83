// @ts-check
// #/rollout: the keys a window in shadow mode would have refused (24 h and 7 d), and the what-if: a plan's keys that
// new limits would have refused, from the usage ledger, a page of keys at a time.
import { Component } from '../vendor/preact.js';
import { api, alertLine, Bar, errorText, fmt, html, iso, keyHref, Unauthorized } from '../lib.js';

/** @typedef {import('../api.d.ts').Answers} Answers */
/** @typedef {Answers['POST /plans/simulate']} WhatIf */

/** Keys per page of the what-if: the most refused first, the rest a page at a time ("More keys"). */
const WHATIF_PAGE = 20;

/**
 * Keys with shadow refusals in the period (GET /usage sorted by shadowRefused, only keys above 0: usually one page, so
 * no report is kept for pages that are never asked), by id.
 * @param {number} fromMs
 */
async function shadowRefusals(fromMs) {
  const r = await api('GET /usage', { query: { sort: 'shadowRefused', nonzero: true, limit: 1000, from: iso(fromMs) } });
  return new Map((r.keys ?? []).filter((k) => k.shadowRefused > 0).map((k) => [k.id, k]));
}

/** A simulated window's cell: not simulated, kept by the key's own limit, or its lower bound in points. @param {import('../api.d.ts').SimulatedWindow} w */
function windowCell(w) {
  if (w === null) return '-';
  if (w.override) return `own limit ${fmt(w.limit)} (unaffected)`;
  return w.pointsRefusedAtLeast > 0 ? `≥ ${fmt(w.pointsRefusedAtLeast)} pts` : '0';
}

/** @typedef {NonNullable<WhatIf['keys']>} WhatIfKeys */

/** The consumer a key belongs to now, or "-". @param {string | null | undefined} c */
const consumerCell = (c) => c || '-';

/** One row per key of a what-if page. @param {WhatIfKeys} keys */
function whatIfRows(keys) {
  /** @param {WhatIfKeys[number]['hours'][number]} x */
  const hourText = (x) =>
    `${x.start.slice(0, 13).replace('T', ' ')}:00 UTC: peak ${fmt(x.peakMinute)} pts, ≥ ${fmt(x.pointsRefusedAtLeast)} pts (${fmt(x.requests)} requests)`;
  return keys.map(
    (k) =>
      html`<tr>
        <td><a href=${keyHref(k.id)}>${k.id}</a></td>
        <td class="key-name">${k.name || '-'}</td>
        <td class="consumer">${consumerCell(k.consumer)}</td>
        <td>${windowCell(k.minute)}</td>
        <td>${windowCell(k.day)}</td>
        <td>${fmt(k.pointsRefusedAtLeast)}</td>
        <td class="hours">
          ${k.hours.length === 0 ? '-' : k.hours.slice(0, 3).map(hourText).join('; ') + (k.hoursAffected > 3 ? ` (+${fmt(k.hoursAffected - 3)} hours)` : '')}
        </td>
      </tr>`,
  );
}

/** @typedef {{ busy?: boolean, error?: string, first?: WhatIf, keys: WhatIfKeys, next?: string | null, moreError?: string, loadingMore?: boolean }} WhatIfState */

/**
 * The what-if's form and answer: its totals, then one row per key listed, most refused first; further keys a page at
 * a time (the answer's cursor), appended to the table. Figures are points: a request takes its route's cost from a window.
 * @extends {Component<{ plans: Answers['GET /plans'], signIn: (message?: string) => void }, WhatIfState>}
 */
class WhatIfPanel extends Component {
  /** @type {WhatIfState} */
  state = { keys: [] };

  /** @param {unknown} err @param {(message: string) => void} say */
  fail(err, say) {
    if (err instanceof Unauthorized) return this.props.signIn();
    say(errorText(err));
  }

  /** @param {SubmitEvent} e */
  simulate = async (e) => {
    e.preventDefault();
    const form = /** @type {HTMLFormElement} */ (e.currentTarget);
    const field = (/** @type {string} */ name) => /** @type {HTMLInputElement} */ (form.elements.namedItem(name)).value;
    /** @type {Record<string, unknown>} */
    const body = { plan: field('plan'), from: iso(Date.now() - Number(field('days')) * 86_400_000), limit: WHATIF_PAGE };
    if (field('perMinute')) body.perMinute = Number(field('perMinute'));
    if (field('perDay')) body.perDay = Number(field('perDay'));
    this.setState({ busy: true, error: undefined, first: undefined, moreError: undefined });
    try {
      const r = await api('POST /plans/simulate', { body });
      this.setState({ busy: false, first: r, keys: r.keys ?? [], next: r.nextCursor });
    } catch (err) {
      this.fail(err, (error) => this.setState({ busy: false, error }));
    }
  };

  more = async () => {
    this.setState({ loadingMore: true });
    try {
      const page = await api('POST /plans/simulate', { body: { cursor: this.state.next, limit: WHATIF_PAGE } });
      this.setState({ loadingMore: false, keys: [...this.state.keys, ...(page.keys ?? [])], next: page.nextCursor });
    } catch (err) {
      this.fail(err, (moreError) => this.setState({ loadingMore: false, moreError }));
    }
  };

  result() {
    const { busy, error, first, keys, next, moreError, loadingMore } = this.state;
    if (busy) return html`<p class="muted">Reading the usage ledger…</p>`;
    if (error) return alertLine(error);
    if (!first) return null;
    const t = first.totals;
    // This form asks by key: its totals are the keys'.
    const [affected, inPlan] = 'keysInPlan' in t ? [t.keysAffected, t.keysInPlan] : [t.consumersAffected, t.consumersInPlan];
    return html`
      <p id="whatif-summary">${fmt(affected)} of ${fmt(inPlan)} keys affected, ${fmt(t.hours)} hours, at least ${fmt(t.pointsRefusedAtLeast)} points refused</p>
      <p class="muted">Points: a request takes its route’s cost (1 by default) from each window.</p>
      ${
        keys.length === 0
          ? null
          : html`<table id="whatif-table">
                <thead>
                  <tr>
                    <th>key</th>
                    <th>name</th>
                    <th>consumer</th>
                    <th>minute</th>
                    <th>day</th>
                    <th>points refused at least</th>
                    <th>most refused hours</th>
                  </tr>
                </thead>
                <tbody>
                  ${whatIfRows(keys)}
                </tbody>
              </table>
              <div class="actions">
                ${
                  moreError
                    ? alertLine(moreError)
                    : html`<button type="button" id="whatif-more" hidden=${!next} disabled=${loadingMore} onClick=${this.more}>More keys</button>`
                }
              </div>`
      }
    `;
  }

  render() {
    return html`
      <form id="whatif-form" class="inline" onSubmit=${this.simulate}>
        <label for="whatif-plan">Plan</label>
        <select id="whatif-plan" name="plan">
          ${this.props.plans.plans.map((p) => html`<option value=${p.name}>${p.name} (${fmt(p.perMinute)}/min, ${fmt(p.perDay)}/day)</option>`)}
        </select>
        <label for="whatif-minute">points per minute</label>
        <input id="whatif-minute" name="perMinute" type="number" min="1" step="1" inputmode="numeric" />
        <label for="whatif-day">points per day</label>
        <input id="whatif-day" name="perDay" type="number" min="1" step="1" inputmode="numeric" />
        <label for="whatif-days">over the last</label>
        <select id="whatif-days" name="days">
          <option value="1">24 hours</option>
          <option value="7" selected>7 days</option>
        </select>
        <button type="submit" class="primary">Simulate</button>
      </form>
      <div id="whatif-result">${this.result()}</div>
    `;
  }
}

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const now = Date.now();
  const [day, week, plans] = await Promise.all([shadowRefusals(now - 86_400_000), shadowRefusals(now - 7 * 86_400_000), api('GET /plans')]);
  const rows = [...week.values()].sort((a, b) => b.shadowRefused - a.shadowRefused || (a.id < b.id ? -1 : 1));
  const most = rows.length ? rows[0].shadowRefused : 0;
  return html`
    <h1>Rollout</h1>
    <div class="panel">
      <h2>Shadow refusals</h2>
      <p class="muted">Requests a window in shadow mode would have refused (they were proxied), per key.</p>
      ${
        rows.length === 0
          ? html`<p class="muted" id="shadow-none">No request was refused in shadow mode in the last 7 days.</p>`
          : html`<table id="shadow-table">
              <thead>
                <tr>
                  <th>key</th>
                  <th>name</th>
                  <th>consumer</th>
                  <th>plan</th>
                  <th>24 h</th>
                  <th>7 d</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                ${rows.map(
                  (k) =>
                    html`<tr>
                      <td><a href=${keyHref(k.id)}>${k.id}</a></td>
                      <td class="key-name">${k.name || '-'}</td>
                      <td class="consumer">${consumerCell(k.consumer)}</td>
                      <td>${k.plan}</td>
                      <td>${fmt(day.get(k.id)?.shadowRefused ?? 0)}</td>
                      <td>${fmt(k.shadowRefused)}</td>
                      <td><${Bar} share=${Math.round((100 * k.shadowRefused) / most)} /></td>
                    </tr>`,
                )}
              </tbody>
            </table>`
      }
    </div>
    <div class="panel">
      <h2>What if</h2>
      <p class="muted">A plan's keys that new limits would have refused, from the usage ledger: lower bounds (docs/keys-and-limits.md).</p>
      <${WhatIfPanel} plans=${plans} signIn=${ctx.signIn} />
    </div>
  `;
}
