// The Tollgate dashboard: a small single page on the admin API. Sign in exchanges an admin token for an HttpOnly
// session cookie (the script never sees it again); every other call is the admin API itself, sent with that cookie.
// Views: #/overview, #/keys, #/keys/<id>, #/deprecated, #/rollout, #/services, #/import. Text from the API is only ever set as text, never as HTML.
/* global uPlot */
'use strict';

const $ = (sel) => document.querySelector(sel);
const view = $('#view');
let charts = [];

/** An element: h('td', { class: 'x' }, 'text', child). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== undefined && c !== null) el.append(c instanceof Node ? c : String(c));
  return el;
}

/** Puts a view's content in place: nested lists flattened, empty (null) parts left out. */
function show(...children) {
  view.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
}

class Unauthorized extends Error {}

async function api(path, opts = {}) {
  const raw = opts.raw !== undefined;
  const res = await fetch(path, {
    method: opts.method || 'GET',
    credentials: 'same-origin',
    headers: raw ? { 'content-type': opts.type } : opts.body !== undefined ? { 'content-type': 'application/json' } : {},
    body: raw ? opts.raw : opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
  });
  if (res.status === 401) throw new Unauthorized();
  const text = await res.text();
  const body = text ? JSON.parse(text) : {};
  if (!res.ok) throw new Error(body.message || `HTTP ${res.status}`);
  return body;
}

const fmt = (n) => Number(n).toLocaleString('en');
const iso = (ms) => new Date(ms).toISOString();

function showSignIn(message) {
  $('#nav').hidden = true;
  view.hidden = true;
  $('#sign-in').hidden = false;
  const err = $('#sign-in-error');
  err.hidden = !message;
  err.textContent = message || '';
  $('#token').focus();
}

$('#sign-in-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const token = $('#token').value;
  const res = await fetch('/session', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  $('#token').value = '';
  if (res.status === 204) {
    location.hash = '#/overview';
    return route();
  }
  const body = await res.json().catch(() => ({}));
  showSignIn(res.status === 429 ? body.message : 'That token is not valid.');
});

$('#sign-out').addEventListener('click', async () => {
  await fetch('/session/end', { method: 'POST', credentials: 'same-origin' });
  // Not location.hash = '': that would route, meet a 401 and show the form without this message.
  history.replaceState(null, '', location.pathname);
  showSignIn('Signed out.');
});

/**
 * A line chart of usage buckets (admitted, rate limited, banned), optionally with a limit line. The y-axis scales to
 * what is drawn: the data, and the limit line when there is one.
 */
function chart(box, buckets, limit) {
  const xs = buckets.map((b) => Date.parse(b.start) / 1000);
  const series = [
    {},
    { label: 'admitted', stroke: '#2457c5', width: 2 },
    { label: 'rate limited', stroke: '#b35c00', width: 2 },
    { label: 'banned', stroke: '#b3261e', width: 2 },
  ];
  const data = [xs, buckets.map((b) => b.admitted), buckets.map((b) => b.rateLimited), buckets.map((b) => b.banned)];
  if (limit !== undefined) {
    series.push({ label: limit.label, stroke: '#5d6b7a', dash: [6, 4], width: 1 });
    data.push(xs.map(() => limit.value));
  }
  const width = Math.max(260, box.clientWidth - 4);
  const plot = new uPlot({ width, height: 220, series, axes: [{}, { size: 60 }], scales: { x: { time: true } } }, data, box);
  charts.push({ plot, box });
}

window.addEventListener('resize', () => {
  for (const c of charts) c.plot.setSize({ width: Math.max(260, c.box.clientWidth - 4), height: 220 });
});

function tile(label, value, cls) {
  return h('div', { class: 'tile' }, h('div', { class: `value ${cls || ''}` }, value), h('div', { class: 'label' }, label));
}

/** "12 s", "3 min": how long ago, roughly. */
function ageOf(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 120 ? `${s} s` : `${Math.round(s / 60)} min`;
}

async function overview() {
  const now = Date.now();
  const status = await api('/status');
  const days = Math.min(7, status.usageRetentionDays + 1);
  const [hourly, daily] = await Promise.all([
    api(`/usage/summary?granularity=hour&from=${iso(now - 24 * 3600e3)}&to=${iso(now)}`),
    api(`/usage/summary?granularity=day&from=${iso(now - days * 86400e3)}&to=${iso(now)}`),
  ]);
  const c24 = h('div', { class: 'chart', id: 'chart-24h' });
  const c7 = h('div', { class: 'chart', id: 'chart-7d' });
  show(
    h('h1', {}, 'Overview'),
    h('p', {}, 'Redis: ', h('span', { class: `badge ${status.redis}`, id: 'redis-state' }, status.redis === 'none' ? 'not used (memory)' : status.redis)),
    // The figures are computed at most once a minute and shared by every viewer: say how old they are.
    h('p', { id: 'figures-as-of' }, `Usage figures as of ${new Date(hourly.asOf).toLocaleTimeString()} (${ageOf(now - Date.parse(hourly.asOf))} ago)`),
    h(
      'div',
      { class: 'tiles' },
      tile('requests, 24 h', fmt(hourly.totals.admitted)),
      tile('rate limited, 24 h', fmt(hourly.totals.rateLimited)),
      tile('banned, 24 h', fmt(hourly.totals.banned)),
      tile(`requests, ${days} d`, fmt(daily.totals.admitted)),
      tile(`refusals, ${days} d`, fmt(daily.totals.rateLimited + daily.totals.banned)),
    ),
    h('div', { class: 'panel' }, h('h2', {}, 'Last 24 hours, by hour'), c24),
    h('div', { class: 'panel' }, h('h2', {}, `Last ${days} days, by day`), c7),
    h(
      'div',
      { class: 'panel' },
      h('h2', {}, 'Plans'),
      h(
        'table',
        {},
        h('thead', {}, h('tr', {}, h('th', {}, 'plan'), h('th', {}, 'per minute'), h('th', {}, 'per day'))),
        h(
          'tbody',
          {},
          status.plans.map((p) => h('tr', {}, h('td', {}, p.name), h('td', {}, fmt(p.perMinute)), h('td', {}, fmt(p.perDay)))),
        ),
      ),
    ),
  );
  chart(c24, hourly.buckets);
  chart(c7, daily.buckets);
}

/**
 * A quota bar's fill, `share` percent wide. The width is set through the CSSOM: the page's Content-Security-Policy
 * (style-src 'self') blocks style attributes in markup, and one set with setAttribute, but not element.style.
 */
function barFill(share) {
  const fill = h('span');
  fill.style.width = `${share}%`;
  return fill;
}

async function keysView(params) {
  const name = params.get('name') || '';
  const status = params.get('status') || '';
  const cursor = params.get('cursor') || '';
  const q = new URLSearchParams({ limit: '20' });
  if (name) q.set('name', name);
  if (status) q.set('status', status);
  if (cursor) q.set('cursor', cursor);
  const page = await api(`/keys?${q}`);
  const details = await Promise.all(page.keys.map((k) => api(`/keys/${encodeURIComponent(k.id)}`).catch(() => undefined)));
  const search = h('input', { type: 'search', id: 'key-search', placeholder: 'name starts with', value: name, 'aria-label': 'Search keys by name' });
  const statusSel = h(
    'select',
    { id: 'key-status', 'aria-label': 'Status' },
    ['', 'active', 'revoked', 'expired'].map((s) => h('option', { value: s, selected: s === status }, s || 'any status')),
  );
  const go = (extra) => {
    const p = new URLSearchParams();
    if (search.value) p.set('name', search.value);
    if (statusSel.value) p.set('status', statusSel.value);
    if (extra) p.set('cursor', extra);
    location.hash = `#/keys?${p}`;
  };
  const rows = page.keys.map((k, i) => {
    const day = details[i] && details[i].windows ? details[i].windows.find((w) => w.name === 'day') : undefined;
    const share = day ? Math.min(100, Math.round((100 * day.used) / day.limit)) : 0;
    return h(
      'tr',
      {},
      h('td', {}, h('a', { href: `#/keys/${encodeURIComponent(k.id)}` }, k.name || k.id)),
      h('td', { class: 'muted' }, k.id),
      h('td', {}, k.plan),
      h('td', {}, h('span', { class: `badge ${k.status}` }, k.status)),
      h(
        'td',
        {},
        day
          ? h('div', { title: `${day.used} of ${day.limit} today` }, h('div', { class: 'bar' }, barFill(share)), `${fmt(day.used)} / ${fmt(day.limit)}`)
          : '-',
      ),
    );
  });
  show(
    h('h1', {}, 'Keys'),
    h('form', { class: 'filters', onsubmit: (e) => (e.preventDefault(), go()) }, search, statusSel, h('button', { type: 'submit' }, 'Search')),
    h(
      'div',
      { class: 'panel' },
      h(
        'table',
        { id: 'keys-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'name'), h('th', {}, 'id'), h('th', {}, 'plan'), h('th', {}, 'status'), h('th', {}, 'day window vs quota'))),
        h('tbody', {}, rows),
      ),
      page.keys.length === 0 ? h('p', { class: 'muted' }, 'No keys match.') : null,
    ),
    h(
      'div',
      { class: 'actions' },
      cursor ? h('button', { type: 'button', onclick: () => go() }, 'First page') : null,
      page.nextCursor ? h('button', { type: 'button', id: 'next-page', onclick: () => go(page.nextCursor) }, 'Next page') : null,
    ),
  );
}

/** A target's state as a person reads it: failing its active checks is "unhealthy", resting after failed requests "ejected". */
const TARGET_STATE = { healthy: 'healthy', ejected: 'ejected', health_check: 'unhealthy' };

/** An error kind from the snapshot, in words. */
function errorText(kind) {
  const status = /^status_(\d{3})$/.exec(kind);
  if (status) return `answered ${status[1]}`;
  return (
    {
      refused: 'connection refused',
      connect_timeout: 'connect timed out',
      reset: 'connection reset',
      timeout: 'timed out',
      health_check: 'health check failed',
    }[kind] || kind
  );
}

/** The Services page re-reads GET /services this often while it is shown (health changes within seconds). */
const SERVICES_REFRESH_MS = 5000;
let servicesTimer;

async function servicesView() {
  const r = await api('/services');
  const targetRow = (t) => {
    const state = TARGET_STATE[t.state] || t.state;
    const errors = t.recentErrors.slice().reverse();
    return h(
      'tr',
      { class: 'target' },
      h('td', { class: 'target-url' }, t.url),
      h('td', {}, String(t.weight)),
      h(
        'td',
        {},
        h('span', { class: `badge ${state}` }, state),
        t.ejectedUntil ? h('div', { class: 'muted' }, `until ${new Date(t.ejectedUntil).toLocaleTimeString()}`) : null,
      ),
      h('td', {}, fmt(t.activeRequests)),
      h('td', {}, fmt(t.consecutiveFailures)),
      h(
        'td',
        { class: 'target-errors' },
        errors.length === 0
          ? h('span', { class: 'muted' }, 'none')
          : errors.map((e) => h('div', {}, `${errorText(e.kind)} `, h('span', { class: 'muted' }, new Date(e.at).toLocaleTimeString()))),
      ),
    );
  };
  show(
    h('h1', {}, 'Services'),
    h(
      'p',
      { class: 'muted', id: 'services-as-of' },
      `As this gateway instance sees them at ${new Date(r.asOf).toLocaleTimeString()} (refreshed every ${SERVICES_REFRESH_MS / 1000} s). `,
      'Health checks and ejections are judged by each instance on its own.',
    ),
    r.services.map((s) =>
      h(
        'div',
        { class: 'panel service', 'data-service': s.name },
        h('h2', {}, s.name),
        h(
          'div',
          { class: 'service-health' },
          h('div', { class: `bar health${s.healthy === 0 ? ' none' : ''}` }, barFill(Math.round((100 * s.healthy) / s.total))),
          h('span', { class: 'service-summary' }, `${s.healthy} of ${s.total} targets healthy · ${s.balance}`),
          s.healthy === 0 ? h('span', { class: 'badge unhealthy' }, 'no healthy target: requests get 503') : null,
        ),
        h(
          'table',
          {},
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['target', 'weight', 'health', 'in flight', 'failures in a row', 'recent errors (newest first)'].map((c) => h('th', {}, c)),
            ),
          ),
          h('tbody', {}, s.targets.map(targetRow)),
        ),
      ),
    ),
  );
  servicesTimer = setTimeout(() => {
    if (location.hash.startsWith('#/services')) route();
  }, SERVICES_REFRESH_MS);
}

/**
 * The most requests a key can be admitted in one hour: its per-minute limit × 60, or its day quota when that is
 * smaller (a 5/min plan with 50 a day can never see 300 in an hour). Undefined without a usable plan.
 */
function hourlyCap(windows) {
  const minute = windows && windows.find((w) => w.name === 'minute');
  const day = windows && windows.find((w) => w.name === 'day');
  return minute && day ? Math.min(minute.limit * 60, day.limit) : undefined;
}

/**
 * The hourly cap is drawn only when the busiest hour reached this share of it: a line far above the traffic would
 * squash the traffic into a flat line at zero, and a cap that far off is not what the chart is for.
 */
const CAP_IN_SIGHT = 0.25;

/** Asks for the grace of a rotation in the rotate dialog: seconds, or undefined when cancelled. */
function askGrace() {
  const dialog = $('#rotate-key');
  const input = $('#rotate-grace');
  input.value = '24';
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener(
      'close',
      () => {
        const hours = Number(input.value);
        resolve(dialog.returnValue === 'rotate' && Number.isFinite(hours) && hours >= 0 ? Math.round(hours * 3600) : undefined);
      },
      { once: true },
    );
    dialog.showModal();
  });
}

async function keyView(id) {
  const now = Date.now();
  const [k, usage, plans] = await Promise.all([
    api(`/keys/${encodeURIComponent(id)}`),
    api(`/keys/${encodeURIComponent(id)}/usage?granularity=hour&from=${iso(now - 24 * 3600e3)}&to=${iso(now)}`),
    api('/plans'),
  ]);
  const box = h('div', { class: 'chart', id: 'key-chart' });
  const message = h('p', { id: 'key-message', role: 'status' });
  const act = (label, fn, cls) =>
    h(
      'button',
      {
        type: 'button',
        class: cls,
        onclick: async () => {
          try {
            await fn();
          } catch (err) {
            if (err instanceof Unauthorized) return showSignIn('Your session ended. Sign in again.');
            message.textContent = err.message;
          }
        },
      },
      label,
    );
  const planSel = h(
    'select',
    { id: 'plan-select', 'aria-label': 'Plan' },
    plans.plans.map((p) => h('option', { value: p.name, selected: p.name === k.plan }, `${p.name} (${fmt(p.perMinute)}/min, ${fmt(p.perDay)}/day)`)),
  );
  const active = k.status === 'active';
  show(
    h('p', {}, h('a', { href: '#/keys' }, '← Keys')),
    h('h1', {}, k.name || k.id),
    h(
      'p',
      {},
      h('span', { class: `badge ${k.status}`, id: 'key-status-badge' }, k.status),
      ' ',
      k.ban ? h('span', { class: 'badge banned' }, `banned until ${new Date(k.ban.until).toLocaleString()}`) : null,
    ),
    h(
      'div',
      { class: 'tiles' },
      (k.windows || []).map((w) => tile(`${w.name} window: used of ${fmt(w.limit)}`, fmt(w.used))),
      tile('requests, 24 h', fmt(usage.totals.admitted)),
      tile('refused, 24 h', fmt(usage.totals.rateLimited + usage.totals.banned)),
      tile('ban level', String(k.banLevel)),
    ),
    h('div', { class: 'panel' }, h('h2', {}, 'Last 24 hours, by hour'), box),
    h(
      'div',
      { class: 'panel' },
      h('h2', {}, 'Key'),
      h(
        'table',
        {},
        h(
          'tbody',
          {},
          [
            ['id', k.id],
            ['plan', k.plan],
            ['created', k.createdAt],
            ['expires', k.expiresAt || 'never'],
            ['rotated', k.rotatedAt || ''],
            ['revoked', k.revokedAt || ''],
            ['metadata', k.metadata ? JSON.stringify(k.metadata) : ''],
          ]
            .filter(([, v]) => v)
            .map(([a, b]) => h('tr', {}, h('th', {}, a), h('td', {}, b))),
        ),
      ),
    ),
    active
      ? h(
          'div',
          { class: 'actions' },
          planSel,
          act('Change plan', async () => {
            await api(`/keys/${encodeURIComponent(id)}`, { method: 'PATCH', body: { plan: planSel.value } });
            await keyView(id);
            $('#key-message').textContent = `Plan changed to ${planSel.value}.`;
          }),
          act(
            'Rotate',
            async () => {
              const graceSeconds = await askGrace();
              if (graceSeconds === undefined) return;
              const r = await api(`/keys/${encodeURIComponent(id)}/rotate`, { method: 'POST', body: { graceSeconds } });
              $('#new-key-grace').textContent =
                graceSeconds > 0
                  ? `The old key keeps working until ${new Date(Date.now() + graceSeconds * 1000).toLocaleString()}.`
                  : 'The old key has stopped working.';
              $('#new-key-value').textContent = r.key;
              $('#new-key').showModal();
            },
            'primary',
          ),
          k.ban || k.banLevel > 0
            ? act('Unban', async () => {
                await api(`/keys/${encodeURIComponent(id)}/unban`, { method: 'POST', body: {} });
                await keyView(id);
                $('#key-message').textContent = 'Unbanned. Its windows are as they were: Reset windows empties them.';
              })
            : null,
          act('Reset windows', async () => {
            if (!confirm("Empty this key's minute and day windows? Its next request starts them afresh.")) return;
            await api(`/keys/${encodeURIComponent(id)}/reset`, { method: 'POST', body: {} });
            await keyView(id);
            $('#key-message').textContent = 'Windows reset: the key is admitted again up to its quota.';
          }),
          act(
            'Revoke',
            async () => {
              if (!confirm('Revoke this key? It stops working on every gateway within a second, for good.')) return;
              await api(`/keys/${encodeURIComponent(id)}/revoke`, { method: 'POST', body: {} });
              await keyView(id);
              $('#key-message').textContent = 'Revoked.';
            },
            'danger',
          ),
        )
      : null,
    message,
  );
  const cap = hourlyCap(k.windows);
  const peak = Math.max(0, ...usage.buckets.map((b) => b.admitted));
  const capInSight = cap !== undefined && peak >= cap * CAP_IN_SIGHT;
  if (cap !== undefined && !capInSight)
    box.after(
      h(
        'p',
        { class: 'muted', id: 'cap-note' },
        `Hourly cap ${fmt(cap)} not drawn: the busiest hour used ${fmt(peak)} (under ${CAP_IN_SIGHT * 100}% of it), so the chart scales to the traffic.`,
      ),
    );
  chart(box, usage.buckets, capInSight ? { label: `hourly cap (${fmt(cap)})`, value: cap } : undefined);
}

$('#new-key').addEventListener('close', () => {
  $('#new-key-value').textContent = '';
  $('#new-key-grace').textContent = '';
  const id = decodeURIComponent((location.hash.match(/^#\/keys\/(.+)$/) || [])[1] || '');
  if (id) keyView(id).catch(() => {});
});

function countdown(sunset) {
  if (!sunset) return 'no sunset';
  const ms = Date.parse(sunset) - Date.now();
  if (ms <= 0) return 'past its sunset';
  const d = Math.floor(ms / 86400e3);
  const hrs = Math.floor((ms % 86400e3) / 3600e3);
  return `sunset in ${d} d ${hrs} h`;
}

async function deprecatedView() {
  const r = await api('/routes/deprecated');
  show(
    h('h1', {}, 'Deprecated routes'),
    h('p', {}, h('a', { href: '/routes/deprecated.csv', id: 'export-csv', download: 'deprecated-routes.csv' }, 'Export CSV')),
    r.routes.length === 0 ? h('p', { class: 'muted' }, 'No route in the config has a deprecation date.') : null,
    r.routes.map((route) =>
      h(
        'div',
        { class: 'panel deprecated-route' },
        h('h2', {}, `${route.method} ${route.path}`),
        h(
          'p',
          {},
          h('span', { class: 'badge expired' }, countdown(route.sunset)),
          ' ',
          route.sunset ? `(${route.sunset})` : '',
          route.link ? [' · ', h('a', { href: route.link, rel: 'noopener' }, 'migration guide')] : null,
        ),
        route.keys.length === 0
          ? h('p', { class: 'muted' }, 'No key has called it in the period.')
          : h(
              'table',
              {},
              h('thead', {}, h('tr', {}, h('th', {}, 'key'), h('th', {}, 'name'), h('th', {}, 'calls'), h('th', {}, 'last seen'))),
              h(
                'tbody',
                {},
                route.keys.map((k) =>
                  h(
                    'tr',
                    {},
                    h('td', {}, h('a', { href: `#/keys/${encodeURIComponent(k.id)}` }, k.id)),
                    h('td', { class: 'key-name' }, k.name || '-'),
                    h('td', {}, fmt(k.calls)),
                    h('td', {}, k.lastSeen ? new Date(k.lastSeen).toLocaleString() : '-'),
                  ),
                ),
              ),
            ),
      ),
    ),
  );
}

/**
 * Keys with shadow refusals in the period (GET /usage sorted by shadowRefused, only keys above 0: usually one page, so
 * no report is kept for pages that are never asked), by id.
 */
async function shadowRefusals(fromMs) {
  const r = await api(`/usage?sort=shadowRefused&nonzero=true&limit=1000&from=${encodeURIComponent(iso(fromMs))}`);
  return new Map(r.keys.filter((k) => k.shadowRefused > 0).map((k) => [k.id, k]));
}

/** A simulated window's cell: not simulated, kept by the key's own limit, or its lower bound in points. */
function windowCell(w) {
  if (w === null) return '-';
  if (w.override) return `own limit ${fmt(w.limit)} (unaffected)`;
  return w.pointsRefusedAtLeast > 0 ? `≥ ${fmt(w.pointsRefusedAtLeast)} pts` : '0';
}

/** Keys per page of the what-if: the most refused first, the rest a page at a time ("More keys"). */
const WHATIF_PAGE = 20;

/** One row per key of a what-if page. */
function whatIfRows(keys) {
  const hourText = (x) =>
    `${x.start.slice(0, 13).replace('T', ' ')}:00 UTC: peak ${fmt(x.peakMinute)} pts, ≥ ${fmt(x.pointsRefusedAtLeast)} pts (${fmt(x.requests)} requests)`;
  return keys.map((k) =>
    h(
      'tr',
      {},
      h('td', {}, h('a', { href: `#/keys/${encodeURIComponent(k.id)}` }, k.id)),
      h('td', { class: 'key-name' }, k.name || '-'),
      h('td', {}, windowCell(k.minute)),
      h('td', {}, windowCell(k.day)),
      h('td', {}, fmt(k.pointsRefusedAtLeast)),
      h(
        'td',
        { class: 'hours' },
        k.hours.length === 0 ? '-' : k.hours.slice(0, 3).map(hourText).join('; ') + (k.hoursAffected > 3 ? ` (+${fmt(k.hoursAffected - 3)} hours)` : ''),
      ),
    ),
  );
}

/**
 * The what-if's answer: its totals, then one row per key listed, most refused first; further keys a page at a time
 * (the answer's cursor), appended to the table. Figures are points: a request takes its route's cost from a window.
 */
function whatIfResult(r) {
  const t = r.totals;
  const body = h('tbody', {}, whatIfRows(r.keys));
  let next = r.nextCursor;
  const more = h('button', { type: 'button', id: 'whatif-more' }, 'More keys');
  more.hidden = !next;
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const page = await api('/plans/simulate', { method: 'POST', body: { cursor: next, limit: WHATIF_PAGE } });
      body.append(...whatIfRows(page.keys));
      next = page.nextCursor;
      more.hidden = !next;
    } catch (err) {
      if (err instanceof Unauthorized) return showSignIn();
      more.replaceWith(h('p', { class: 'error', role: 'alert' }, err.message));
    } finally {
      more.disabled = false;
    }
  });
  return [
    h(
      'p',
      { id: 'whatif-summary' },
      `${fmt(t.keysAffected)} of ${fmt(t.keysInPlan)} keys affected, ${fmt(t.hours)} hours, at least ${fmt(t.pointsRefusedAtLeast)} points refused`,
    ),
    h('p', { class: 'muted' }, 'Points: a request takes its route’s cost (1 by default) from each window.'),
    r.keys.length === 0
      ? null
      : h(
          'table',
          { id: 'whatif-table' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'key'),
              h('th', {}, 'name'),
              h('th', {}, 'minute'),
              h('th', {}, 'day'),
              h('th', {}, 'points refused at least'),
              h('th', {}, 'most refused hours'),
            ),
          ),
          body,
        ),
    r.keys.length === 0 ? null : h('div', { class: 'actions' }, more),
  ];
}

async function rolloutView() {
  const now = Date.now();
  const [day, week, plans] = await Promise.all([shadowRefusals(now - 86_400_000), shadowRefusals(now - 7 * 86_400_000), api('/plans')]);
  const rows = [...week.values()].sort((a, b) => b.shadowRefused - a.shadowRefused || (a.id < b.id ? -1 : 1));
  const most = rows.length ? rows[0].shadowRefused : 0;
  const result = h('div', { id: 'whatif-result' });
  const form = h(
    'form',
    { id: 'whatif-form', class: 'inline' },
    h('label', { for: 'whatif-plan' }, 'Plan'),
    h(
      'select',
      { id: 'whatif-plan', name: 'plan' },
      plans.plans.map((p) => h('option', { value: p.name }, `${p.name} (${fmt(p.perMinute)}/min, ${fmt(p.perDay)}/day)`)),
    ),
    h('label', { for: 'whatif-minute' }, 'points per minute'),
    h('input', { id: 'whatif-minute', name: 'perMinute', type: 'number', min: 1, step: 1, inputmode: 'numeric' }),
    h('label', { for: 'whatif-day' }, 'points per day'),
    h('input', { id: 'whatif-day', name: 'perDay', type: 'number', min: 1, step: 1, inputmode: 'numeric' }),
    h('label', { for: 'whatif-days' }, 'over the last'),
    h('select', { id: 'whatif-days', name: 'days' }, h('option', { value: 1 }, '24 hours'), h('option', { value: 7, selected: true }, '7 days')),
    h('button', { type: 'submit', class: 'primary' }, 'Simulate'),
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { plan: form.plan.value, from: iso(Date.now() - Number(form.days.value) * 86_400_000), limit: WHATIF_PAGE };
    if (form.perMinute.value) body.perMinute = Number(form.perMinute.value);
    if (form.perDay.value) body.perDay = Number(form.perDay.value);
    result.replaceChildren(h('p', { class: 'muted' }, 'Reading the usage ledger…'));
    try {
      result.replaceChildren(...whatIfResult(await api('/plans/simulate', { method: 'POST', body })).filter(Boolean));
    } catch (err) {
      if (err instanceof Unauthorized) return showSignIn();
      result.replaceChildren(h('p', { class: 'error', role: 'alert' }, err.message));
    }
  });
  show(
    h('h1', {}, 'Rollout'),
    h(
      'div',
      { class: 'panel' },
      h('h2', {}, 'Shadow refusals'),
      h('p', { class: 'muted' }, 'Requests a window in shadow mode would have refused (they were proxied), per key.'),
      rows.length === 0
        ? h('p', { class: 'muted', id: 'shadow-none' }, 'No request was refused in shadow mode in the last 7 days.')
        : h(
            'table',
            { id: 'shadow-table' },
            h('thead', {}, h('tr', {}, h('th', {}, 'key'), h('th', {}, 'name'), h('th', {}, 'plan'), h('th', {}, '24 h'), h('th', {}, '7 d'), h('th', {}, ''))),
            h(
              'tbody',
              {},
              rows.map((k) =>
                h(
                  'tr',
                  {},
                  h('td', {}, h('a', { href: `#/keys/${encodeURIComponent(k.id)}` }, k.id)),
                  h('td', { class: 'key-name' }, k.name || '-'),
                  h('td', {}, k.plan),
                  h('td', {}, fmt(day.get(k.id)?.shadowRefused ?? 0)),
                  h('td', {}, fmt(k.shadowRefused)),
                  h('td', {}, h('div', { class: 'bar' }, barFill(Math.round((100 * k.shadowRefused) / most)))),
                ),
              ),
            ),
          ),
    ),
    h(
      'div',
      { class: 'panel' },
      h('h2', {}, 'What if'),
      h('p', { class: 'muted' }, "A plan's keys that new limits would have refused, from the usage ledger: lower bounds (docs/keys-and-limits.md)."),
      form,
      result,
    ),
  );
}

/**
 * Import: a CSV of keys from another system, previewed first (a dry run: counts, and every refused row with its line
 * and reason), then imported for real. Rows the preview refused are only skipped when the box says so; otherwise a
 * refused row means nothing is imported, as with `tollgate keys import`.
 */
function importView() {
  const file = h('input', { type: 'file', id: 'import-file', accept: '.csv,text/csv' });
  const result = h('div', { id: 'import-result' });
  let text = '';
  const counts = (r, done) =>
    h(
      'p',
      { class: 'import-counts' },
      h('span', { class: 'tile-inline' }, `${done ? 'Imported' : 'Would import'} ${fmt(r.imported)}`),
      h('span', { class: 'tile-inline' }, `Unchanged ${fmt(r.unchanged)}`),
      h('span', { class: r.refused.length ? 'tile-inline refused' : 'tile-inline' }, `Refused ${fmt(r.refused.length)}`),
    );
  const refusals = (r) =>
    r.refused.length === 0
      ? null
      : h(
          'div',
          { class: 'panel' },
          h(
            'table',
            { id: 'import-refusals' },
            h('thead', {}, h('tr', {}, h('th', {}, 'line'), h('th', {}, 'reason'))),
            h(
              'tbody',
              {},
              r.refused.map((x) => h('tr', {}, h('td', {}, String(x.line)), h('td', {}, x.reason))),
            ),
          ),
        );
  const run = (query) => api(`/keys/import${query}`, { method: 'POST', raw: text, type: 'text/csv' });
  const preview = async () => {
    result.replaceChildren(h('p', { class: 'muted' }, 'Checking…'));
    text = await file.files[0].text();
    const r = await run('?dryRun=true&skipInvalid=true');
    const skip = h('input', { type: 'checkbox', id: 'import-skip' });
    const go = h('button', { type: 'button', id: 'import-run', disabled: r.refused.length > 0 || r.imported === 0 }, 'Import');
    skip.addEventListener('change', () => (go.disabled = !skip.checked || r.imported === 0));
    go.addEventListener('click', async () => {
      go.disabled = true;
      try {
        const done = await run(r.refused.length ? '?skipInvalid=true' : '');
        result.replaceChildren(h('h2', {}, 'Result'), counts(done, true), refusals(done));
      } catch (err) {
        result.replaceChildren(h('p', { class: 'error', role: 'alert' }, err.message));
      }
    });
    result.replaceChildren(
      h('h2', {}, 'Preview (nothing written yet)'),
      counts(r, false),
      refusals(r),
      r.refused.length ? h('p', {}, h('label', {}, skip, ' Import the valid rows and skip the refused ones')) : null,
      h('p', {}, go),
    );
  };
  file.addEventListener('change', () => preview().catch((err) => result.replaceChildren(h('p', { class: 'error', role: 'alert' }, err.message))));
  show(
    h('h1', {}, 'Import keys'),
    h(
      'p',
      { class: 'muted' },
      'A CSV with a header row: plan, and key or sha256; optionally id, name, perMinute, perDay, expiresAt and metadata.<name> columns. Up to 10 MB; bigger files go through tollgate keys import --file.',
    ),
    h('p', {}, h('label', {}, 'CSV file ', file)),
    result,
  );
}

async function route() {
  for (const c of charts) c.plot.destroy();
  charts = [];
  clearTimeout(servicesTimer);
  const [path, query] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query || '');
  const name = (path || '/overview').split('/')[1] || 'overview';
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('current', a.dataset.nav === name);
  try {
    $('#sign-in').hidden = true;
    view.hidden = false;
    const id = (path || '').match(/^\/keys\/(.+)$/);
    if (id) await keyView(decodeURIComponent(id[1]));
    else if (name === 'keys') await keysView(params);
    else if (name === 'deprecated') await deprecatedView();
    else if (name === 'import') importView();
    else if (name === 'services') await servicesView();
    else if (name === 'rollout') await rolloutView();
    else await overview();
  } catch (err) {
    if (err instanceof Unauthorized) return showSignIn();
    show(h('p', { class: 'error', role: 'alert' }, err.message));
  }
  // Only a signed-in page has the nav bar (and Sign out): not the sign-in form, nor while finding out which to show.
  $('#nav').hidden = false;
}

window.addEventListener('hashchange', route);
route();
