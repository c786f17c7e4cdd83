// @ts-check
// What every view of the dashboard shares: htm templates over Preact (no build step, no eval: htm parses the tagged
// template itself), the admin API call typed by the OpenAPI document (api.d.ts), number and date formats, and the
// small pieces several views draw (tiles, quota bars, uPlot charts).
import { h, Component } from './vendor/preact.js';
import htm from './vendor/htm.js';
import uPlot from './vendor/uplot.js';

/** @typedef {import('./api.d.ts').Answers} Answers */
/** @typedef {import('./vendor/preact.js').ComponentChildren} Children */

export const html = htm.bind(h);

export class Unauthorized extends Error {}

/** The admin API's error answer: its message, and for a 400 every problem with where it is ('body.perDay'). */
export class ApiError extends Error {
  /**
   * @param {string} message
   * @param {number} status
   * @param {Array<{ path: string, message: string }>} problems
   */
  constructor(message, status, problems) {
    super(message);
    this.status = status;
    this.problems = problems;
  }
}

/**
 * @typedef {object} CallOptions
 * @property {Record<string, string>} [params] the path's {placeholders}
 * @property {Record<string, string | number | boolean | undefined>} [query] left out when undefined
 * @property {unknown} [body] sent as JSON
 * @property {{ text: string, type: string }} [raw] sent as it is
 */

/**
 * Calls the admin API with the session cookie. `op` is an operation as docs/admin.openapi.yaml writes it ('GET
 * /keys/{id}'), so the answer's type is that operation's schema: a view reading a field the API does not answer fails
 * tsc. A 401 throws Unauthorized (the session ended); another error throws with the API's message.
 * @template {keyof Answers} Op
 * @param {Op} op
 * @param {CallOptions} [opts]
 * @returns {Promise<Answers[Op]>}
 */
export async function api(op, opts = {}) {
  const [method, template] = /** @type {[string, string]} */ (op.split(' '));
  let path = template.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent((opts.params ?? {})[name] ?? ''));
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) query.set(k, String(v));
  if ([...query].length) path += `?${query}`;
  /** @type {Record<string, string>} */
  const headers = {};
  let body;
  if (opts.raw) {
    headers['content-type'] = opts.raw.type;
    body = opts.raw.text;
  } else if (opts.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  const res = await fetch(path, { method, credentials: 'same-origin', headers, body });
  if (res.status === 401) throw new Unauthorized();
  const text = await res.text();
  const answer = text ? JSON.parse(text) : {};
  if (!res.ok) throw new ApiError(answer.message || `HTTP ${res.status}`, res.status, Array.isArray(answer.problems) ? answer.problems : []);
  return answer;
}

/** @param {number} n */
export const fmt = (n) => Number(n).toLocaleString('en');
/** @param {number} ms */
export const iso = (ms) => new Date(ms).toISOString();
/** @param {string} id */
export const keyHref = (id) => `#/keys/${encodeURIComponent(id)}`;
/** @param {string} id */
export const consumerHref = (id) => `#/consumers/${encodeURIComponent(id)}`;

/**
 * @param {string} label
 * @param {Children} value
 */
export const tile = (label, value) =>
  html`<div class="tile">
    <div class="value">${value}</div>
    <div class="label">${label}</div>
  </div>`;

/**
 * A bar filled `share` percent. Preact sets a style object through the CSSOM (element.style), which the page's
 * Content-Security-Policy (style-src 'self') allows, unlike a style attribute in markup.
 * @param {{ share: number, class?: string }} props
 */
export const Bar = (props) => html`<div class=${props.class ? `bar ${props.class}` : 'bar'}><span style=${{ width: `${props.share}%` }}></span></div>`;

/** @typedef {{ start: string, admitted: number, rateLimited: number, banned: number }} Bucket */

/**
 * A uPlot line chart of usage buckets (admitted, rate limited, banned), optionally with a limit line. The y-axis
 * scales to what is drawn: the data, and the limit line when there is one. Drawn once mounted, resized with the window.
 * @extends {Component<{ id: string, buckets: Bucket[], limit?: { label: string, value: number } }>}
 */
export class Chart extends Component {
  /** @type {uPlot | undefined} */
  plot;
  onResize = () => this.plot?.setSize({ width: this.width(), height: 220 });

  width() {
    return Math.max(260, /** @type {HTMLElement} */ (this.base).clientWidth - 4);
  }

  componentDidMount() {
    const { buckets, limit } = this.props;
    const xs = buckets.map((b) => Date.parse(b.start) / 1000);
    /** @type {uPlot.Series[]} */
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
    const opts = { width: this.width(), height: 220, series, axes: [{}, { size: 60 }], scales: { x: { time: true } } };
    this.plot = new uPlot(opts, /** @type {uPlot.AlignedData} */ (data), /** @type {HTMLElement} */ (this.base));
    window.addEventListener('resize', this.onResize);
  }

  componentWillUnmount() {
    window.removeEventListener('resize', this.onResize);
    this.plot?.destroy();
  }

  render() {
    return html`<div class="chart" id=${this.props.id}></div>`;
  }
}

/** @param {unknown} err */
export const errorText = (err) => (err instanceof Error ? err.message : String(err));

/** @param {string} message */
export const alertLine = (message) => html`<p class="error" role="alert">${message}</p>`;

/** @param {string} sel */
const $ = (sel) => /** @type {HTMLElement} */ (document.querySelector(sel));

/**
 * Shows a plaintext key once, in the page's key dialog (index.html #new-key), with `note` under it. The key is put
 * in the dialog's text and nowhere else (no state, URL or storage); app.js empties the dialog when it closes.
 * @param {string} plaintext
 * @param {string} note
 */
export function showKeyOnce(plaintext, note) {
  $('#new-key-value').textContent = plaintext;
  $('#new-key-grace').textContent = note;
  $('#new-key-copied').textContent = '';
  /** @type {HTMLDialogElement} */ ($('#new-key')).showModal();
}
