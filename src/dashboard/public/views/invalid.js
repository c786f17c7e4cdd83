// @ts-check
// #/invalid: who sends requests that do not match the API's description, to which operation: each operation whose
// requests are validated against its service's OpenAPI document (shadow or enforce), and the keys whose requests
// failed in the period, with how many, when last, and where the last one first failed.
import { api, fmt, html, keyHref } from '../lib.js';

/** @type {import('../app.js').Load} */
export async function load() {
  const r = await api('GET /usage/invalid-requests');
  const failing = r.operations.filter((op) => op.keys.length > 0);
  const clean = r.operations.length - failing.length;
  return html`
    <h1>Invalid requests</h1>
    <p class="muted">
      Requests that do not match their operation's OpenAPI description, by key, since ${new Date(r.from).toLocaleDateString()}. In shadow mode they were proxied
      all the same; in enforce mode refused with 400.
    </p>
    ${r.operations.length === 0 ? html`<p class="muted">No operation validates requests: no service's OpenAPI document has validate shadow or enforce.</p>` : null}
    ${r.operations.length > 0 && failing.length === 0 ? html`<p class="muted">No key sent an invalid request in the period.</p>` : null}
    ${failing.map(
      (op) =>
        html`<div class="panel invalid-operation">
          <h2>${op.operation}</h2>
          <p>
            <span class="badge ${op.mode === 'enforce' ? 'expired' : ''}">${op.mode}</span>${' '}<code>${op.method} ${op.path}</code
            >${' '}·${' '}service${' '}${op.service}
          </p>
          <table>
            <thead>
              <tr>
                <th>key</th>
                <th>name</th>
                <th>consumer</th>
                <th>invalid requests</th>
                <th>last seen</th>
                <th>last failed at</th>
              </tr>
            </thead>
            <tbody>
              ${op.keys.map(
                (k) =>
                  html`<tr>
                    <td><a href=${keyHref(k.id)}>${k.id}</a></td>
                    <td class="key-name">${k.name || '-'}</td>
                    <td class="consumer">${k.consumer || '-'}</td>
                    <td>${fmt(k.calls)}</td>
                    <td>${k.lastSeen ? new Date(k.lastSeen).toLocaleString() : '-'}</td>
                    <td><code class="pointer">${k.pointer ?? '-'}</code></td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>`,
    )}
    ${clean > 0 && failing.length > 0 ? html`<p class="muted">${fmt(clean)} more validated operation${clean === 1 ? '' : 's'} had no invalid request.</p>` : null}
  `;
}
