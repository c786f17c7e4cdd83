// @ts-check
// #/deprecated: each route with a deprecation date, its sunset countdown, and the keys that called it in the period.
import { api, fmt, html, keyHref } from '../lib.js';

/** @param {string | null | undefined} sunset */
function countdown(sunset) {
  if (!sunset) return 'no sunset';
  const ms = Date.parse(sunset) - Date.now();
  if (ms <= 0) return 'past its sunset';
  const d = Math.floor(ms / 86400e3);
  const hrs = Math.floor((ms % 86400e3) / 3600e3);
  return `sunset in ${d} d ${hrs} h`;
}

/** @type {import('../app.js').Load} */
export async function load() {
  const r = await api('GET /routes/deprecated');
  return html`
    <h1>Deprecated routes</h1>
    <p><a href="/routes/deprecated.csv" id="export-csv" download="deprecated-routes.csv">Export CSV</a></p>
    ${r.routes.length === 0 ? html`<p class="muted">No route in the config has a deprecation date.</p>` : null}
    ${r.routes.map(
      (route) =>
        html`<div class="panel deprecated-route">
          <h2>${route.method} ${route.path}${route.operationId ? html` <span class="muted">(${route.operationId})</span>` : null}</h2>
          <p>
            <span class="badge expired">${countdown(route.sunset)}</span>${' '}${route.sunset ? `(${route.sunset})` : ''}
            ${route.link ? html` · <a href=${route.link} rel="noopener">migration guide</a>` : null}
          </p>
          ${
            route.keys.length === 0
              ? html`<p class="muted">No key has called it in the period.</p>`
              : html`<table>
                  <thead>
                    <tr>
                      <th>key</th>
                      <th>name</th>
                      <th>consumer</th>
                      <th>calls</th>
                      <th>last seen</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${route.keys.map(
                      (k) =>
                        html`<tr>
                          <td><a href=${keyHref(k.id)}>${k.id}</a></td>
                          <td class="key-name">${k.name || '-'}</td>
                          <td class="consumer">${k.consumer || '-'}</td>
                          <td>${fmt(k.calls)}</td>
                          <td>${k.lastSeen ? new Date(k.lastSeen).toLocaleString() : '-'}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>`
          }
        </div>`,
    )}
  `;
}
