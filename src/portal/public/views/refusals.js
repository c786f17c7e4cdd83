// @ts-check
// #/refusals: what was refused in the last 30 days and why, the bans in force now, and what a limit that is coming
// would have refused had it been in force (shadow limits): a warning before it bites.
import { api, can, day, fmt, fromNow, html, when, windowName } from '../lib.js';

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const [r, keys] = await Promise.all([api('GET /api/refusals'), can(ctx.me, 'keys:read') ? api('GET /api/keys') : undefined]);
  const masked = new Map((keys?.keys ?? []).map((k) => [k.id, k.masked]));
  const days = r.refusals.byDay.filter((d) => d.rateLimited + d.banned > 0);
  return html`
    <h1>Refusals</h1>
    <div class="tiles">
      <div class="tile" id="refused-limited">
        <div class="value">${fmt(r.refusals.rateLimited)}</div>
        <div class="label">rate limited, last ${r.days} days</div>
        <p class="reason">A window of your limits was full: the request was refused with 429 and a Retry-After.</p>
      </div>
      <div class="tile" id="refused-banned">
        <div class="value">${fmt(r.refusals.banned)}</div>
        <div class="label">refused while banned, last ${r.days} days</div>
        <p class="reason">A key kept going past its limits, so it was shut out for a while: every request with it was refused until the ban ended.</p>
      </div>
    </div>
    <section class="panel" id="shadow">
      <h2>Limits that are coming</h2>
      ${
        r.shadow.length === 0
          ? html`<p class="muted" id="shadow-none">No new limit is announced for your plan.</p>`
          : html`<ul class="sentences">
                ${r.shadow.map(
                  (s) =>
                    html`<li class="shadow-line">
                      ${`${s.enforceFrom === undefined ? 'A coming limit' : `A limit coming on ${onDay(s.enforceFrom)}`} (${fmt(s.limit)} ${windowName(s.window)}) would have refused `}<strong>${fmt(s.wouldHaveRefused)}</strong>${` of your requests since ${day(s.since)}.`}
                    </li>`,
                )}
              </ul>
              <p class="muted">It is counted now but not enforced yet. To stay under it, spread your requests or ask your provider about your plan.</p>`
      }
    </section>
    <section class="panel" id="bans">
      <h2>Bans in force now</h2>
      ${
        r.bans.length === 0
          ? html`<p class="ok-text" id="bans-none">None: no key of yours is banned.</p>`
          : html`<table>
              <thead>
                <tr>
                  <th>key</th>
                  <th>until</th>
                  <th>level</th>
                  <th>why</th>
                </tr>
              </thead>
              <tbody>
                ${r.bans.map(
                  (b) =>
                    html`<tr>
                      <td><code>${masked.get(b.key) ?? b.key}</code></td>
                      <td>${when(b.until)} <span class="muted">(${fromNow(b.until)})</span></td>
                      <td>${b.level}</td>
                      <td class="wrap">${b.reason}</td>
                    </tr>`,
                )}
              </tbody>
            </table>`
      }
    </section>
    <section class="panel" id="by-day">
      <h2>By day</h2>
      ${
        days.length === 0
          ? html`<p class="ok-text" id="by-day-none">Nothing was refused in the last ${r.days} days.</p>`
          : html`<table>
              <thead>
                <tr>
                  <th>day</th>
                  <th class="num">rate limited</th>
                  <th class="num">banned</th>
                </tr>
              </thead>
              <tbody>
                ${days.map(
                  (d) =>
                    html`<tr>
                      <td>${day(d.start)}</td>
                      <td class="num">${fmt(d.rateLimited)}</td>
                      <td class="num">${fmt(d.banned)}</td>
                    </tr>`,
                )}
              </tbody>
            </table>`
      }
    </section>
  `;
}

export const refreshMs = 30_000;

/**
 * The day a coming limit is announced for: a date alone (2027-01-15) is that day wherever the reader is, not the local
 * day of its midnight UTC; a date-time is the reader's local day.
 * @param {string} t
 */
function onDay(t) {
  return /^\d{4}-\d{2}-\d{2}$/.test(t) ? new Date(t).toLocaleDateString('en-GB', { dateStyle: 'medium', timeZone: 'UTC' }) : day(t);
}
