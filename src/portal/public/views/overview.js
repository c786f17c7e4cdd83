// @ts-check
// #/overview: the deprecated operations this account still calls first (what will break), then who is signed in and
// for how long, and this month's use against the plan's monthly quota.
import { api, can, fmt, fromNow, html, SCOPE_WORDS, UsedBar, when } from '../lib.js';
import { DeprecatedPanel } from './deprecated.js';

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const { me } = ctx;
  const s = me.session;
  const [deprecated, usage, keys] = await Promise.all([
    can(me, 'usage:read') ? api('GET /api/deprecated') : undefined,
    can(me, 'usage:read') ? api('GET /api/usage', { query: { granularity: 'day' } }) : undefined,
    s.kind === 'key' && can(me, 'keys:read') ? api('GET /api/keys') : undefined,
  ]);
  const own = keys?.keys.find((k) => k.id === s.keyId);
  const signedIn =
    s.kind === 'link'
      ? html`as <strong>${s.actor}</strong>, with a link from your provider`
      : html`with the key <code>${own?.masked ?? s.keyId}</code>: <strong>read-only</strong>`;
  const month = usage?.month;
  return html`
    <h1 id="account-name">${me.consumer.name || me.consumer.id}</h1>
    ${
      deprecated
        ? html`<${DeprecatedPanel} operations=${deprecated.operations} />`
        : html`<p class="note" id="no-usage">
            Your session cannot see usage, refusals or deprecated operations: ask your provider for a sign-in link with usage:read.
          </p>`
    }
    <div class="cards">
      <section class="panel" id="identity">
        <h2>Your account and session</h2>
        <table class="fields">
          <tbody>
            <tr>
              <th>account</th>
              <td>${me.consumer.name || me.consumer.id} <span class="muted">(${me.consumer.id})</span></td>
            </tr>
            <tr>
              <th>plan</th>
              <td>
                ${me.consumer.plan}${me.consumer.maxKeys !== undefined ? html` <span class="muted">(up to ${fmt(me.consumer.maxKeys)} keys)</span>` : null}
              </td>
            </tr>
            <tr>
              <th>signed in</th>
              <td id="signed-in">${signedIn}</td>
            </tr>
            <tr>
              <th>you can</th>
              <td id="can">${s.scopes.map((sc) => SCOPE_WORDS[sc]).join(', ')}</td>
            </tr>
            <tr>
              <th>session ends</th>
              <td id="session-ends">${when(s.expiresAt)} <span class="muted">(${fromNow(s.expiresAt)})</span></td>
            </tr>
          </tbody>
        </table>
        ${
          s.kind === 'key'
            ? html`<p class="muted">To create, rotate or revoke keys, open a sign-in link from your provider: it gives a full session.</p>`
            : null
        }
      </section>
      ${
        month
          ? html`<section class="panel" id="month">
              <h2>This month so far</h2>
              ${
                month.perMonth
                  ? html`<p class="big" id="month-text">${fmt(month.used)} of ${fmt(month.perMonth)} requests</p>
                      <${UsedBar} used=${month.used} limit=${month.perMonth} label="requests this month" />
                      <p class="muted">Counted from ${when(month.from)}; starts again ${when(month.to)}.</p>`
                  : html`<p class="big" id="month-text">${fmt(month.used)} ${month.used === 1 ? 'request' : 'requests'}</p>
                      <p class="muted">Your plan has no monthly limit. Counted from ${when(month.from)}.</p>`
              }
              <p><a href="#/usage">Usage by day or hour →</a></p>
            </section>`
          : null
      }
    </div>
  `;
}

export const refreshMs = 30_000;
