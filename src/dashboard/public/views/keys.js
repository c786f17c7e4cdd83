// @ts-check
// #/keys?name=&status=&cursor=: the keys a page at a time, found by name prefix and status, each with its day window
// as a bar of its quota.
import { api, Bar, fmt, html, keyHref } from '../lib.js';

/** @type {import('../app.js').Load} */
export async function load({ params }) {
  const name = params.get('name') || '';
  const status = params.get('status') || '';
  const cursor = params.get('cursor') || '';
  // windows=true: each key comes with its windows, so the page is one request, not one per row.
  const page = await api('GET /keys', {
    query: { limit: 20, name: name || undefined, status: status || undefined, cursor: cursor || undefined, windows: 'true' },
  });
  /** @param {string} [next] */
  const go = (next) => {
    const p = new URLSearchParams();
    const search = /** @type {HTMLInputElement} */ (document.getElementById('key-search')).value;
    const chosen = /** @type {HTMLSelectElement} */ (document.getElementById('key-status')).value;
    if (search) p.set('name', search);
    if (chosen) p.set('status', chosen);
    if (next) p.set('cursor', next);
    location.hash = `#/keys?${p}`;
  };
  /** @param {Event} e */
  const submit = (e) => {
    e.preventDefault();
    go();
  };
  const rows = page.keys.map((k) => {
    const day = 'windows' in k ? k.windows?.find((w) => w.name === 'day') : undefined;
    const share = day ? Math.min(100, Math.round((100 * day.used) / day.limit)) : 0;
    return html`<tr>
      <td><a href=${keyHref(k.id)}>${k.name || k.id}</a></td>
      <td class="muted">${k.id}</td>
      <td>${k.plan}</td>
      <td><span class="badge ${k.status}">${k.status}</span></td>
      <td>${day ? html`<div title="${day.used} of ${day.limit} today"><${Bar} share=${share} />${fmt(day.used)} / ${fmt(day.limit)}</div>` : '-'}</td>
    </tr>`;
  });
  return html`
    <h1>Keys</h1>
    <form class="filters" onSubmit=${submit}>
      <input type="search" id="key-search" placeholder="name starts with" value=${name} aria-label="Search keys by name" />
      <select id="key-status" aria-label="Status">
        ${['', 'active', 'revoked', 'expired'].map((s) => html`<option value=${s} selected=${s === status}>${s || 'any status'}</option>`)}
      </select>
      <button type="submit">Search</button>
    </form>
    <div class="panel">
      <table id="keys-table">
        <thead>
          <tr>
            <th>name</th>
            <th>id</th>
            <th>plan</th>
            <th>status</th>
            <th>day window vs quota</th>
          </tr>
        </thead>
        <tbody>
          ${rows}
        </tbody>
      </table>
      ${page.keys.length === 0 ? html`<p class="muted">No keys match.</p>` : null}
    </div>
    <div class="actions">
      ${cursor ? html`<button type="button" onClick=${() => go()}>First page</button>` : null}
      ${page.nextCursor ? html`<button type="button" id="next-page" onClick=${() => go(page.nextCursor ?? undefined)}>Next page</button>` : null}
    </div>
  `;
}
