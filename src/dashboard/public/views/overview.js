// @ts-check
// #/overview: Redis's state, the last 24 hours and days of traffic (tiles and charts), and the plans in force.
import { api, Chart, fmt, html, iso, tile } from '../lib.js';

/** "12 s", "3 min": how long ago, roughly. @param {number} ms */
function ageOf(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 120 ? `${s} s` : `${Math.round(s / 60)} min`;
}

/** @type {import('../app.js').Load} */
export async function load() {
  const now = Date.now();
  const status = await api('GET /status');
  const days = Math.min(7, status.usageRetentionDays + 1);
  const [hourly, daily] = await Promise.all([
    api('GET /usage/summary', { query: { granularity: 'hour', from: iso(now - 24 * 3600e3), to: iso(now) } }),
    api('GET /usage/summary', { query: { granularity: 'day', from: iso(now - days * 86400e3), to: iso(now) } }),
  ]);
  return html`
    <h1>Overview</h1>
    <p>Redis: <span class="badge ${status.redis}" id="redis-state">${status.redis === 'none' ? 'not used (memory)' : status.redis}</span></p>
    <!-- The figures are computed at most once a minute and shared by every viewer: say how old they are. -->
    <p id="figures-as-of">Usage figures as of ${new Date(hourly.asOf).toLocaleTimeString()} (${ageOf(now - Date.parse(hourly.asOf))} ago)</p>
    <div class="tiles">
      ${tile('requests, 24 h', fmt(hourly.totals.admitted))} ${tile('rate limited, 24 h', fmt(hourly.totals.rateLimited))}
      ${tile('banned, 24 h', fmt(hourly.totals.banned))} ${tile(`requests, ${days} d`, fmt(daily.totals.admitted))}
      ${tile(`refusals, ${days} d`, fmt(daily.totals.rateLimited + daily.totals.banned))}
      <!-- What bans in shadow mode would have refused, and requests that did not match their OpenAPI description: what
        an operator watches before turning bans or validation to enforce. -->
      ${tile('would-be bans, 24 h', fmt(hourly.totals.wouldBan))} ${tile('failed validation, 24 h', fmt(hourly.totals.validationFailed))}
    </div>
    <div class="panel">
      <h2>Last 24 hours, by hour</h2>
      <${Chart} id="chart-24h" buckets=${hourly.buckets} />
    </div>
    <div class="panel">
      <h2>Last ${days} days, by day</h2>
      <${Chart} id="chart-7d" buckets=${daily.buckets} />
    </div>
    <div class="panel">
      <h2>Plans</h2>
      <table>
        <thead>
          <tr>
            <th>plan</th>
            <th>per minute</th>
            <th>per day</th>
          </tr>
        </thead>
        <tbody>
          ${status.plans.map(
            (p) =>
              html`<tr>
                <td>${p.name}</td>
                <td>${fmt(p.perMinute)}</td>
                <td>${fmt(p.perDay)}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </div>
  `;
}
