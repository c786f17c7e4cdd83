// @ts-check
// #/keys?q=&status=&cursor=: the keys a page at a time, found by id, name or metadata value (GET /keys?q=) and
// status, each with its day window as a bar of its quota; and the New key dialog (new-key.js).
import { api, Bar, fmt, html, keyHref } from '../lib.js';
import { NewKey } from './new-key.js';

/** Keys a page shows. */
const PAGE = 20;
/**
 * The most requests one page of the view makes: a search that matches few keys gets short pages from the API (each
 * reads at most 10,000 records), followed here until the page is full, up to this many.
 */
const MAX_REQUESTS = 10;

/** @type {import('../app.js').Load} */
export async function load({ params, signIn }) {
  const q = params.get('q') || '';
  const status = params.get('status') || '';
  const cursor = params.get('cursor') || '';
  /** @type {import('../api.d.ts').Answers['GET /keys']['keys']} */
  const keys = [];
  let next = cursor || undefined;
  let requests = 0;
  do {
    // windows=true: each key comes with its windows, so a page is one request, not one per row.
    const page = await api('GET /keys', {
      query: { limit: PAGE - keys.length, q: q || undefined, status: status || undefined, cursor: next, windows: 'true' },
    });
    keys.push(...page.keys);
    next = page.nextCursor ?? undefined;
    requests++;
  } while (next && keys.length < PAGE && requests < MAX_REQUESTS);
  /**
   * To a page of this search (the first, or the one at `at`); a search typed into the form starts at its first page.
   * @param {{ q: string, status: string }} search
   * @param {string} [at]
   */
  const go = (search, at) => {
    const p = new URLSearchParams();
    if (search.q) p.set('q', search.q);
    if (search.status) p.set('status', search.status);
    if (at) p.set('cursor', at);
    location.hash = `#/keys?${p}`;
  };
  /** @param {Event} e */
  const submit = (e) => {
    e.preventDefault();
    const typed = /** @type {HTMLInputElement} */ (document.getElementById('key-search')).value.trim();
    const chosen = /** @type {HTMLSelectElement} */ (document.getElementById('key-status')).value;
    go({ q: typed, status: chosen });
  };
  const rows = keys.map((k) => {
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
    <div class="title-row">
      <h1>Keys</h1>
      <${NewKey} onSignIn=${signIn} />
    </div>
    <form class="filters" onSubmit=${submit}>
      <input
        type="search"
        id="key-search"
        placeholder="id, name or metadata value"
        maxlength="256"
        value=${q}
        aria-label="Search keys by id, name or metadata value"
      />
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
      ${
        keys.length === 0
          ? html`<p class="muted" id="keys-none">${next ? 'No keys match among those searched so far: Next page searches on.' : 'No keys match.'}</p>`
          : null
      }
    </div>
    <div class="actions">
      ${cursor ? html`<button type="button" onClick=${() => go({ q, status })}>First page</button>` : null}
      ${next ? html`<button type="button" id="next-page" onClick=${() => go({ q, status }, next)}>Next page</button>` : null}
    </div>
  `;
}
