// @ts-check
// What every view of the portal shares: htm templates over Preact (no build step, no eval), the portal API call typed
// by api.d.ts, dates and numbers written for people, errors said in words a consumer understands, the used-of-limit
// bar, the usage chart, and the dialogs that show a secret once and ask before a change.
import { h, Component } from './vendor/preact.js';
import htm from './vendor/htm.js';
import uPlot from './vendor/uplot.js';

/** @typedef {import('./api.d.ts').Answers} Answers */
/** @typedef {string | number} Time a time: the API's ISO 8601 string, or milliseconds */
/** @typedef {import('./vendor/preact.js').ComponentChildren} Children */

export const html = htm.bind(h);

/** The session ended (or never began): the page shows the sign-in form. */
export class Unauthorized extends Error {}

/** The API's error answer: its code, status and message. */
export class ApiError extends Error {
  /**
   * @param {string} message
   * @param {number} status
   * @param {string} code
   * @param {string | null} retryAfter
   */
  constructor(message, status, code, retryAfter = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

/**
 * @typedef {object} CallOptions
 * @property {Record<string, string>} [params] the path's {placeholders}
 * @property {Record<string, string | number | undefined>} [query] left out when undefined
 * @property {unknown} [body] sent as JSON
 */

/** The operations that answer 204 with no body (not in Answers, which lists JSON answers). */
/** @typedef {'DELETE /api/webhooks/{id}' | 'POST /api/session/end'} NoContent */

/**
 * Calls the portal API with the session cookie. `op` is an operation as docs/portal.openapi.yaml writes it ('GET
 * /api/keys'), so the answer has that operation's schema (api.d.ts is generated from it): a view reading a field the
 * API does not answer fails tsc. A 401 throws Unauthorized; another error throws ApiError with the API's code.
 * @template {keyof Answers | NoContent} Op
 * @param {Op} op
 * @param {CallOptions} [opts]
 * @returns {Promise<Op extends keyof Answers ? Answers[Op] : void>}
 */
export async function api(op, opts = {}) {
  const [method, template] = /** @type {[string, string]} */ (op.split(' '));
  let path = template.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent((opts.params ?? {})[name] ?? ''));
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) query.set(k, String(v));
  if ([...query].length) path += `?${query}`;
  // Every change is JSON (the portal refuses a state-changing request of another type), even with an empty body.
  const changes = method !== 'GET';
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: changes ? { 'content-type': 'application/json' } : {},
    body: changes ? JSON.stringify(opts.body ?? {}) : undefined,
  });
  if (res.status === 401 && op !== 'POST /api/session') throw new Unauthorized();
  const text = await res.text();
  /** @type {any} */
  let answer = {};
  try {
    answer = text ? JSON.parse(text) : {};
  } catch {
    // Not JSON (a proxy's error page): the status says enough.
  }
  if (!res.ok) throw new ApiError(answer.message || `HTTP ${res.status}`, res.status, answer.code || '', res.headers.get('retry-after'));
  return answer;
}

/** @param {number} n */
export const fmt = (n) => Number(n).toLocaleString('en');

/** "29 Nov 2026, 14:05" in the reader's own time zone. @param {Time} t */
export const when = (t) => new Date(t).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' });

/** "29 Nov 2026". @param {Time} t */
export const day = (t) => new Date(t).toLocaleDateString('en-GB', { dateStyle: 'medium' });

/** "in 3 h 20 min", "in 40 s", "in 2 days": how far `t` is from now, roughly. @param {Time} t */
export function fromNow(t) {
  const ms = new Date(t).getTime() - Date.now();
  const s = Math.round(Math.abs(ms) / 1000);
  const min = Math.round(s / 60);
  const days = Math.round(s / 86400);
  const text =
    s < 90 ? `${s} s` : min < 90 ? `${min} min` : min < 24 * 60 ? `${Math.floor(min / 60)} h ${min % 60} min` : days === 1 ? '1 day' : `${days} days`;
  return ms >= 0 ? `in ${text}` : `${text} ago`;
}

/**
 * A window's name in words: 'minute' → "per minute", 'key:day' → "per day", '/v1/search:minute' → "per minute on
 * /v1/search"; a candidate limit's ':shadow' is left to the badge beside it.
 * @param {string} name
 */
export function windowName(name) {
  const base = name.replace(/:shadow$/, '').replace(/^key:/, '');
  const cut = base.lastIndexOf(':');
  const period = cut === -1 ? base : base.slice(cut + 1);
  const per = ['minute', 'hour', 'day', 'month'].includes(period) ? `per ${period}` : period;
  return cut === -1 ? per : `${per} on ${base.slice(0, cut)}`;
}

/** What a scope lets the session do, in words. */
export const SCOPE_WORDS = /** @type {const} */ ({
  'keys:read': 'see keys',
  'keys:write': 'create, rotate and revoke keys',
  'usage:read': 'see limits and usage',
  'webhooks:write': 'manage webhooks',
});

/**
 * An error as a consumer's person reads it: what happened and what to do, rather than the API's code. `scope` is the
 * scope the action needs, named when the session lacks it.
 * @param {unknown} err
 * @param {string} [scope]
 */
export function errorText(err, scope) {
  if (!(err instanceof ApiError)) return err instanceof Error ? `Something went wrong: ${err.message}` : String(err);
  switch (err.code) {
    case 'portal_scope_denied':
      return `Your session cannot do this: ask your provider for a sign-in link with ${scope ?? 'the right scope'}.`;
    case 'consumer_full':
      return 'You have as many keys as your plan allows: revoke one you no longer use, then create the new one.';
    case 'consumer_suspended':
      return 'Your account is suspended: contact your provider.';
    case 'not_found':
      return 'That is no longer there (it may have been removed meanwhile): the page shows what is there now.';
    case 'key_revoked':
      return 'That key is revoked: it cannot be rotated. Create a new key instead.';
    case 'rate_limit_exceeded':
      return `Too many attempts: try again${err.retryAfter ? ` in ${err.retryAfter} s` : ' in a minute'}.`;
    case 'webhooks_full':
      return 'You have as many webhook endpoints as you may: delete one first.';
    case 'webhook_url_refused':
    case 'invalid_request':
      return err.message;
    case 'service_unavailable':
      return 'The portal cannot reach its data right now: try again in a moment.';
    default:
      return err.message;
  }
}

/** @param {string} message */
export const alertLine = (message) => html`<p class="error" role="alert">${message}</p>`;

/**
 * A bar filled to `used / limit` (at most full), with its figures beside it. Preact sets the width through the CSSOM
 * (element.style), which the page's Content-Security-Policy (style-src 'self') allows, unlike a style attribute.
 * @param {{ used: number, limit: number, label?: string }} props
 */
export function UsedBar(props) {
  const share = props.limit > 0 ? Math.min(1, props.used / props.limit) : 0;
  const level = share >= 1 ? 'full' : share >= 0.8 ? 'near' : '';
  return html`<div class="used">
    <div class=${`bar ${level}`} role="meter" aria-valuemin="0" aria-valuemax=${props.limit} aria-valuenow=${props.used} aria-label=${props.label ?? 'used'}>
      <span style=${{ width: `${share * 100}%` }}></span>
    </div>
    <span class="figures">${fmt(props.used)} of ${fmt(props.limit)}</span>
  </div>`;
}

/** @typedef {{ start: string, admitted: number, rateLimited: number, banned: number }} Bucket */

/**
 * A uPlot chart of usage buckets: admitted, rate limited, banned. The y-axis scales to the data drawn. Drawn once
 * mounted, its data replaced when the page refreshes, resized with the window.
 * @extends {Component<{ id: string, buckets: Bucket[], granularity: 'hour' | 'day' }>}
 */
export class UsageChart extends Component {
  /** @type {uPlot | undefined} */
  plot;
  onResize = () => this.plot?.setSize({ width: this.width(), height: 260 });

  width() {
    return Math.max(260, /** @type {HTMLElement} */ (this.base).clientWidth - 4);
  }

  /** @param {Bucket[]} buckets */
  data(buckets) {
    return /** @type {uPlot.AlignedData} */ ([
      buckets.map((b) => new Date(b.start).getTime() / 1000),
      buckets.map((b) => b.admitted),
      buckets.map((b) => b.rateLimited),
      buckets.map((b) => b.banned),
    ]);
  }

  componentDidMount() {
    /** @type {uPlot.Series[]} */
    const series = [
      {},
      { label: 'admitted', stroke: '#2457c5', width: 2, fill: 'rgba(36,87,197,0.08)' },
      { label: 'rate limited', stroke: '#b35c00', width: 2 },
      { label: 'banned', stroke: '#b3261e', width: 2 },
    ];
    const opts = {
      width: this.width(),
      height: 260,
      series,
      axes: [{}, { size: 60 }],
      legend: { live: false },
      scales: { x: { time: true }, y: { range: /** @type {uPlot.Range.Function} */ ((_u, _min, max) => [0, Math.max(1, max) * 1.1]) } },
    };
    this.plot = new uPlot(opts, this.data(this.props.buckets), /** @type {HTMLElement} */ (this.base));
    window.addEventListener('resize', this.onResize);
  }

  shouldComponentUpdate(/** @type {{ buckets: Bucket[] }} */ next) {
    // The chart draws itself: Preact re-renders only to hand it new data.
    if (next.buckets !== this.props.buckets) this.plot?.setData(this.data(next.buckets));
    return false;
  }

  componentWillUnmount() {
    window.removeEventListener('resize', this.onResize);
    this.plot?.destroy();
  }

  render() {
    return html`<div class="chart" id=${this.props.id}></div>`;
  }
}

/** @param {string} sel */
export const $ = (sel) => /** @type {HTMLElement} */ (document.querySelector(sel));

/**
 * Shows a new key's plaintext once, in the page's key dialog (index.html #key-shown), with `note` under it. The
 * plaintext is put in the dialog's text and nowhere else (no state, URL or storage); app.js empties the dialog when
 * it closes and when the page moves elsewhere.
 * @param {string} plaintext
 * @param {string} title
 * @param {string} note
 * @param {string} [after] the line the page shows once the dialog is closed
 */
export function showKeyOnce(plaintext, title, note, after = '') {
  $('#key-shown').dataset.after = after;
  $('#key-shown-title').textContent = title;
  $('#key-shown-value').textContent = plaintext;
  $('#key-shown-note').textContent = note;
  $('#key-shown-copied').textContent = '';
  /** @type {HTMLDialogElement} */ ($('#key-shown')).showModal();
}

/** Shows a webhook endpoint's signing secret once (index.html #secret-shown), emptied when it closes. @param {string} secret */
export function showSecretOnce(secret) {
  $('#secret-shown-value').textContent = secret;
  /** @type {HTMLDialogElement} */ ($('#secret-shown')).showModal();
}

/**
 * Asks before a change that cannot be undone, in the page's confirm dialog: resolves true for yes.
 * @param {{ title: string, text: string, yes: string }} q
 * @returns {Promise<boolean>}
 */
export function confirmIt(q) {
  const dialog = /** @type {HTMLDialogElement} */ ($('#confirm'));
  $('#confirm-title').textContent = q.title;
  $('#confirm-text').textContent = q.text;
  $('#confirm-yes').textContent = q.yes;
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'yes'), { once: true });
    dialog.showModal();
  });
}

/**
 * Shows a dialog holding a form (index.html) and resolves with its submit button's value ('cancel' or '' when
 * closed another way).
 * @param {string} sel
 * @returns {Promise<string>}
 */
export function ask(sel) {
  const dialog = /** @type {HTMLDialogElement} */ ($(sel));
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue), { once: true });
    dialog.showModal();
  });
}

/** Whether the session has `scope`. @param {import('./api.d.ts').Me} me @param {import('./api.d.ts').Scope} scope */
export const can = (me, scope) => me.session.scopes.includes(scope);
