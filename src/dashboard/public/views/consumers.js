// @ts-check
// #/consumers?q=&status=: the consumers (the customers behind several keys), a page at a time in id order, each with
// its plan, status, keys (against its maxKeys) and the pool's limits in force; found by id, name or metadata value
// (GET /consumers?q=: the API searches, a page at a time; "Load more" reads the next page of the same search).
import { Component } from '../vendor/preact.js';
import { alertLine, api, Bar, consumerHref, errorText, fmt, html, Unauthorized } from '../lib.js';

/** @typedef {import('../api.d.ts').Answers} Answers */
/** @typedef {import('../api.d.ts').ConsumerFields} Consumer */
/** @typedef {Answers['GET /plans']['plans'][number]} Plan */

/** Consumers a page reads: one request per page, each consumer with its key count. */
const PAGE = 50;

/** How long typing pauses before the search is asked (a request per pause, not per keystroke). */
const SEARCH_DELAY_MS = 200;

/**
 * @typedef {object} PoolLimit
 * @property {'minute' | 'day' | 'month'} window
 * @property {number | undefined} plan the plan's limit (none for a month: plans have no monthly window yet)
 * @property {number | undefined} own the consumer's own limit, whether in force or not
 * @property {number | undefined} limit the one in force: its own until limitsExpiresAt, else the plan's
 * @property {boolean} fromOwn whether the one in force is its own
 */

/**
 * The pool's limits: each window's plan value, the consumer's own and the one in force. An own limit past
 * limitsExpiresAt no longer applies (the plan's does again), though the record still holds it.
 * @param {Consumer} c
 * @param {Plan | undefined} plan
 * @param {number} now
 * @returns {PoolLimit[]}
 */
export function poolLimits(c, plan, now) {
  const ownInForce = c.limitsExpiresAt === undefined || Date.parse(c.limitsExpiresAt) > now;
  /** @type {Array<[PoolLimit['window'], number | undefined, number | undefined]>} */
  const rows = [
    ['minute', plan?.perMinute, c.perMinute],
    ['day', plan?.perDay, c.perDay],
    ['month', undefined, c.perMonth],
  ];
  return rows.map(([window, planValue, own]) => {
    const fromOwn = own !== undefined && ownInForce;
    return { window, plan: planValue, own, limit: fromOwn ? own : planValue, fromOwn };
  });
}

/** @type {Record<PoolLimit['window'], string>} */
const PER = { minute: '/min', day: '/day', month: '/month' };

/** The limits in force as one line ("60/min · 1,000/day"); an own one marked with "own". @param {PoolLimit[]} limits */
export function limitsLine(limits) {
  const shown = limits.filter((l) => l.limit !== undefined);
  if (shown.length === 0) return html`<span class="muted">-</span>`;
  return shown.map(
    (l, i) =>
      html`${i > 0 ? ' · ' : ''}<span class=${l.fromOwn ? 'own-limit' : undefined} title=${l.fromOwn ? 'its own limit, over the plan’s' : 'the plan’s'}
          >${fmt(/** @type {number} */ (l.limit))}${PER[l.window]}</span
        >`,
  );
}

/**
 * What the list holds: "12 consumers loaded.", "1 consumer matches.", and whether pages are left.
 * @param {number} loaded @param {boolean} searching @param {boolean} more
 */
function loadedLine(loaded, searching, more) {
  const consumers = (/** @type {number} */ n) => `${fmt(n)} ${n === 1 ? 'consumer' : 'consumers'}`;
  const said = searching ? `${consumers(loaded)} ${loaded === 1 ? 'matches' : 'match'}.` : `${consumers(loaded)} loaded.`;
  return more ? `${said} More are left to read.` : said;
}

/** @typedef {{ c: Consumer, keyCount: number | undefined }} Row */

/**
 * One page of consumers after `cursor` with the status asked and matching the search text, each with its key count
 * (the list's answer carries it: one request for the page).
 * @param {string} status
 * @param {string} q
 * @param {string | undefined} cursor
 * @returns {Promise<{ rows: Row[], next: string | null }>}
 */
async function readPage(status, q, cursor) {
  const page = await api('GET /consumers', { query: { limit: PAGE, status: status || undefined, q: q || undefined, cursor } });
  return { rows: page.consumers.map((c) => ({ c, keyCount: c.keyCount })), next: page.nextCursor };
}

/** @param {Row} row */
function keysCell({ c, keyCount }) {
  if (keyCount === undefined) return html`<span class="muted">?</span>`;
  if (c.maxKeys === undefined) return html`${fmt(keyCount)}`;
  const share = Math.min(100, (100 * keyCount) / c.maxKeys);
  return html`<div class="keys-of-max" title="${keyCount} of at most ${c.maxKeys} keys"><${Bar} share=${share} />${fmt(keyCount)} of ${fmt(c.maxKeys)}</div>`;
}

/**
 * @typedef {object} ListProps
 * @property {Row[]} rows the first page
 * @property {string | null} next
 * @property {string} q
 * @property {string} status
 * @property {Map<string, Plan>} plans
 * @property {(message?: string) => void} signIn
 */
/**
 * @typedef {{ rows: Row[], next: string | null, q: string, searched: string, loading: boolean, error: string }} ListState
 * `searched`: the search text the rows answer (`q` is the box's, asked once typing pauses).
 */

/** @extends {Component<ListProps, ListState>} */
class ConsumerList extends Component {
  /** @type {ListState} */
  state = { rows: this.props.rows, next: this.props.next, q: this.props.q, searched: this.props.q.trim(), loading: false, error: '' };

  /** The search is kept in the address (a reload, or a link, shows the same rows) without reading the page again. */
  remember() {
    const p = new URLSearchParams();
    if (this.state.q) p.set('q', this.state.q);
    if (this.props.status) p.set('status', this.props.status);
    history.replaceState(null, '', `#/consumers${[...p].length ? `?${p}` : ''}`);
  }

  /** The search asked last: an answer to an earlier one that arrives after it is dropped. */
  asked = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  timer = undefined;

  componentWillUnmount() {
    clearTimeout(this.timer);
  }

  /** @param {Event} e */
  onSearch = (e) => {
    this.setState({ q: /** @type {HTMLInputElement} */ (e.currentTarget).value }, () => this.remember());
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.search(), SEARCH_DELAY_MS);
  };

  /** Reads the first page of the search in the box (all consumers when it is empty). */
  search = async () => {
    const asked = ++this.asked;
    const q = this.state.q.trim();
    this.setState({ loading: true, error: '' });
    try {
      const page = await readPage(this.props.status, q, undefined);
      if (asked === this.asked) this.setState({ rows: page.rows, next: page.next, loading: false, searched: q });
    } catch (err) {
      if (err instanceof Unauthorized) return this.props.signIn('Your session ended. Sign in again.');
      if (asked === this.asked) this.setState({ loading: false, error: errorText(err) });
    }
  };

  /** @param {Event} e */
  onStatus = (e) => {
    const p = new URLSearchParams();
    if (this.state.q) p.set('q', this.state.q);
    const status = /** @type {HTMLSelectElement} */ (e.currentTarget).value;
    if (status) p.set('status', status);
    location.hash = `#/consumers${[...p].length ? `?${p}` : ''}`;
  };

  more = async () => {
    this.setState({ loading: true, error: '' });
    try {
      const page = await readPage(this.props.status, this.state.searched, this.state.next ?? undefined);
      this.setState({ rows: [...this.state.rows, ...page.rows], next: page.next, loading: false });
    } catch (err) {
      if (err instanceof Unauthorized) return this.props.signIn('Your session ended. Sign in again.');
      this.setState({ loading: false, error: errorText(err) });
    }
  };

  render() {
    const { status, plans } = this.props;
    const { rows: shown, next, q, searched, loading, error } = this.state;
    const now = Date.now();
    const none = () => {
      if (next) return 'None in the records read so far: Load more reads on.';
      if (searched) return 'No consumers match.';
      return status ? `No ${status} consumers.` : 'No consumers yet: tollgate consumers create, or POST /consumers.';
    };
    return html`
      <h1>Consumers</h1>
      <p class="muted">The customers behind the keys: each has one plan and one pooled quota that all of its keys share.</p>
      <form class="filters" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
        <input
          type="search"
          id="consumer-search"
          placeholder="id, name or metadata value"
          maxlength="256"
          value=${q}
          onInput=${this.onSearch}
          aria-label="Search consumers by id, name or metadata value"
        />
        <select id="consumer-status" aria-label="Status" onChange=${this.onStatus}>
          ${['', 'active', 'suspended'].map((s) => html`<option value=${s} selected=${s === status}>${s || 'any status'}</option>`)}
        </select>
      </form>
      <div class="panel">
        <table id="consumers-table">
          <thead>
            <tr>
              <th>name</th>
              <th>id</th>
              <th>plan</th>
              <th>status</th>
              <th>keys</th>
              <th>pool limits</th>
            </tr>
          </thead>
          <tbody>
            ${shown.map(
              (r) =>
                html`<tr key=${r.c.id}>
                  <td class="wrap-cell"><a href=${consumerHref(r.c.id)}>${r.c.name}</a></td>
                  <td class="muted wrap-cell">${r.c.id}</td>
                  <td>${r.c.plan}</td>
                  <td><span class="badge ${r.c.status}">${r.c.status}</span></td>
                  <td>${keysCell(r)}</td>
                  <td>${limitsLine(poolLimits(r.c, plans.get(r.c.plan), now))}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        ${shown.length === 0 ? html`<p class="muted" id="consumers-none">${none()}</p>` : null}
        ${
          shown.some((r) => poolLimits(r.c, plans.get(r.c.plan), now).some((l) => l.fromOwn))
            ? html`<p class="muted">In bold: the consumer's own limit, in force over its plan's until it ends.</p>`
            : null
        }
      </div>
      <p class="muted" id="consumers-loaded">${loadedLine(shown.length, searched !== '', next !== null)}</p>
      <div class="actions">
        ${next ? html`<button type="button" id="consumers-more" disabled=${loading} onClick=${this.more}>${loading ? 'Loading…' : 'Load more'}</button>` : null}
        ${error ? alertLine(error) : null}
      </div>
    `;
  }
}

/** @type {import('../app.js').Load} */
export async function load({ params, signIn }) {
  const status = params.get('status') || '';
  const q = params.get('q') || '';
  const [first, plans] = await Promise.all([readPage(status, q.trim(), undefined), api('GET /plans')]);
  return html`<${ConsumerList}
    rows=${first.rows}
    next=${first.next}
    q=${q}
    status=${status}
    plans=${new Map(plans.plans.map((p) => [p.name, p]))}
    signIn=${signIn}
  />`;
}
