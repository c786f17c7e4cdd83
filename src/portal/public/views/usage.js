// @ts-check
// #/usage: the last 30 days of requests by hour or by day (a uPlot chart scaled to the data), their totals, and this
// month so far against the plan's monthly quota.
import { api, fmt, html, UsageChart, UsedBar, when } from '../lib.js';

/** @param {string} label @param {number} value @param {string} [id] */
const tile = (label, value, id) =>
  html`<div class="tile" id=${id}>
    <div class="value">${fmt(value)}</div>
    <div class="label">${label}</div>
  </div>`;

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const by = ctx.params.get('by') === 'hour' ? 'hour' : 'day';
  const u = await api('GET /api/usage', { query: { granularity: by } });
  const m = u.month;
  const any = u.buckets.some((b) => b.admitted + b.rateLimited + b.banned > 0);
  return html`
    <h1>Usage</h1>
    <section class="panel" id="month">
      <h2>This month so far</h2>
      ${
        m.perMonth
          ? html`<p class="big" id="month-text">${fmt(m.used)} of ${fmt(m.perMonth)} requests</p>
              <${UsedBar} used=${m.used} limit=${m.perMonth} label="requests this month" />`
          : html`<p class="big" id="month-text">
              ${fmt(m.used)} ${m.used === 1 ? 'request' : 'requests'} <span class="muted">(your plan has no monthly limit)</span>
            </p>`
      }
      <p class="muted">Counted from ${when(m.from)}; starts again ${when(m.to)}.</p>
    </section>
    <section class="panel">
      <div class="title-row">
        <h2>Last 30 days, by ${by}</h2>
        <div class="toggle" role="group" aria-label="granularity">
          <a href="#/usage?by=day" class=${by === 'day' ? 'current' : ''} id="by-day">by day</a>
          <a href="#/usage?by=hour" class=${by === 'hour' ? 'current' : ''} id="by-hour">by hour</a>
        </div>
      </div>
      ${any ? null : html`<p class="muted" id="usage-empty">No requests in the last 30 days.</p>`}
      <${UsageChart} id="usage-chart" buckets=${u.buckets} granularity=${by} />
      <div class="tiles">
        ${tile('requests admitted, 30 days', u.totals.admitted, 'total-admitted')} ${tile('refused: over a limit', u.totals.rateLimited, 'total-limited')}
        ${tile('refused: key banned', u.totals.banned, 'total-banned')} ${tile('failed upstream', u.totals.upstreamFailed, 'total-upstream')}
      </div>
    </section>
  `;
}

export const refreshMs = 60_000;
