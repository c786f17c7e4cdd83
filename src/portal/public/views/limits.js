// @ts-check
// #/limits: the account's windows live, read again every 10 seconds: the pool every key shares, then each key's own
// windows and ban. Each bar is as long as the share of the window used; its reset time says when it empties.
import { api, can, fromNow, html, UsedBar, when, windowName } from '../lib.js';

/** @typedef {import('../api.d.ts').Window} Window */

/** @param {{ windows: Window[], id: string, empty: string }} props */
function Windows(props) {
  if (props.windows.length === 0) return html`<p class="muted">${props.empty}</p>`;
  return html`<table class="windows" id=${props.id}>
    <thead>
      <tr>
        <th>window</th>
        <th class="bar-cell">used</th>
        <th>empties</th>
      </tr>
    </thead>
    <tbody>
      ${props.windows.map(
        (w) =>
          html`<tr data-window=${w.name} data-used=${w.used} data-limit=${w.limit}>
            <td>
              ${windowName(w.name)}${w.mode === 'shadow' ? html` <span class="badge coming" title="counted, not enforced yet">coming, not enforced</span>` : null}
            </td>
            <td class="bar-cell"><${UsedBar} used=${w.used} limit=${w.limit} label=${`${windowName(w.name)} used`} /></td>
            <td>${when(w.resetAt)} <span class="muted">(${fromNow(w.resetAt)})</span></td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const [windows, keys] = await Promise.all([api('GET /api/windows'), can(ctx.me, 'keys:read') ? api('GET /api/keys') : undefined]);
  const masked = new Map((keys?.keys ?? []).map((k) => [k.id, k.masked]));
  const bans = windows.keys.filter((k) => k.ban);
  return html`
    <h1>Limits</h1>
    <p class="muted" id="limits-live">Live: read again every 10 seconds while this tab is open. Last read at ${new Date().toLocaleTimeString('en-GB')}.</p>
    ${
      bans.length
        ? html`<div class="panel warn" id="limits-bans">
            <h2>Banned keys</h2>
            <p>A key that keeps going past its limits is shut out for a while. Requests with it are refused until then.</p>
            <ul>
              ${bans.map((k) => html`<li><code>${masked.get(k.id) ?? k.id}</code>: banned until ${when(k.ban?.until ?? 0)} (${fromNow(k.ban?.until ?? 0)}), level ${k.ban?.level}</li>`)}
            </ul>
          </div>`
        : html`<p id="limits-no-bans" class="ok-text">No key is banned.</p>`
    }
    <section class="panel">
      <h2>Shared by all your keys</h2>
      <p class="muted">Every request with any of your keys counts here.</p>
      <${Windows} windows=${windows.pool} id="pool-windows" empty="Your plan sets no limit shared by your keys." />
    </section>
    ${windows.keys.map(
      (k) =>
        html`<section class="panel key-windows" data-key=${k.id}>
          <h2>Key <code>${masked.get(k.id) ?? k.id}</code></h2>
          ${k.ban ? html`<p class="error">Banned until ${when(k.ban.until)} (${fromNow(k.ban.until)}).</p>` : null}
          <${Windows} windows=${k.windows} id=${`key-windows-${k.id}`} empty="No limit of its own: its requests count in the shared windows above." />
        </section>`,
    )}
  `;
}

export const refreshMs = 10_000;
