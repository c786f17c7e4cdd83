// @ts-check
// #/consumers/<id>: one consumer: its status (with Suspend or Resume), its pool's windows as they stand (used of the
// limit, a bar each), its pool's limits (the plan's, its own, and which are in force), its scopes and allowed addresses, its record, and its keys, each linking to the key's page.
import { Component } from '../vendor/preact.js';
import { api, Bar, errorText, fmt, html, keyHref, tile, Unauthorized } from '../lib.js';
import { poolLimits } from './consumers.js';

/** @typedef {import('../api.d.ts').Answers} Answers */

/** Keys the page reads at once; "More keys" reads the next as many. */
const KEYS_PAGE = 100;

/** @param {number | undefined} n */
const limitText = (n) => (n === undefined ? '-' : fmt(n));

/**
 * A list of short values (scopes, address ranges) as code, or what its absence means.
 * @param {string[] | undefined} list
 * @param {string} absent
 * @param {string} id
 */
const codeList = (list, absent, id) =>
  list && list.length > 0
    ? html`<ul class="code-list" id=${id}>
        ${list.map((s) => html`<li><code>${s}</code></li>`)}
      </ul>`
    : html`<p class="muted" id=${id}>${absent}</p>`;

/**
 * @typedef {object} ConsumerPageProps
 * @property {Answers['GET /consumers/{id}']} c
 * @property {Answers['GET /consumers/{id}/keys']} keys the first page of its keys
 * @property {Answers['GET /plans']} plans
 * @property {import('../app.js').ViewContext} ctx
 */
/** @typedef {{ message: string, keys: Answers['GET /consumers/{id}/keys']['keys'], next: string | null, busy: boolean }} ConsumerPageState */

/** @extends {Component<ConsumerPageProps, ConsumerPageState>} */
class ConsumerPage extends Component {
  /** @type {ConsumerPageState} */
  state = { message: this.props.ctx.note ?? '', keys: this.props.keys.keys, next: this.props.keys.nextCursor, busy: false };

  /** @param {unknown} err */
  fail(err) {
    if (err instanceof Unauthorized) return this.props.ctx.signIn('Your session ended. Sign in again.');
    this.setState({ message: errorText(err), busy: false });
  }

  /**
   * Suspends or resumes the consumer after the person confirms, then shows the page afresh (its status as the API
   * now has it) with what happened.
   * @param {'suspend' | 'resume'} what
   */
  change = async (what) => {
    const { c, ctx } = this.props;
    const asked =
      what === 'suspend'
        ? `Suspend ${c.name}? Every key of it is refused (403 consumer_suspended) on every gateway within a second, until it is resumed.`
        : `Resume ${c.name}? Its keys are admitted again within a second, on its pool's quota.`;
    if (!confirm(asked)) return;
    this.setState({ busy: true });
    try {
      const after = await api(`POST /consumers/{id}/${what}`, { params: { id: c.id }, body: {} });
      ctx.refresh(
        after.status === 'suspended'
          ? 'Suspended: its keys get 403 consumer_suspended on every gateway within a second.'
          : 'Resumed: its keys are admitted again within a second.',
      );
    } catch (err) {
      this.fail(err);
    }
  };

  moreKeys = async () => {
    this.setState({ busy: true });
    try {
      const page = await api('GET /consumers/{id}/keys', {
        params: { id: this.props.c.id },
        query: { limit: KEYS_PAGE, cursor: this.state.next ?? undefined },
      });
      this.setState({ keys: [...this.state.keys, ...page.keys], next: page.nextCursor, busy: false });
    } catch (err) {
      this.fail(err);
    }
  };

  render() {
    const { c, plans } = this.props;
    const { keys, next, busy, message } = this.state;
    const now = Date.now();
    const plan = plans.plans.find((p) => p.name === c.plan);
    const limits = poolLimits(c, plan, now);
    const ownExpired = c.limitsExpiresAt !== undefined && Date.parse(c.limitsExpiresAt) <= now;
    const hasOwn = limits.some((l) => l.own !== undefined);
    /** @type {Array<[string, import('../lib.js').Children]>} */
    const fields = [
      ['id', c.id],
      ['plan', plan ? c.plan : html`${c.plan} <span class="error">(not a configured plan)</span>`],
      [
        'monthly windows',
        c.billingDay === undefined
          ? 'calendar months (UTC)'
          : `from day ${c.billingDay} of each month${c.billingDay === 31 ? ' (the last day of shorter months)' : ''}`,
      ],
      ['max keys', c.maxKeys === undefined ? 'no cap' : fmt(c.maxKeys)],
      ['created', c.createdAt],
      ['changed', c.updatedAt],
      ['suspended', c.suspendedAt],
      ...Object.entries(c.metadata ?? {}).map(([k, v]) => /** @type {[string, string]} */ ([`metadata: ${k}`, v])),
    ];
    return html`
      <p><a href="#/consumers">← Consumers</a></p>
      <h1 class="long-title">${c.name}</h1>
      <p>
        <span class="badge ${c.status}" id="consumer-status-badge">${c.status}</span>
        ${c.status === 'suspended' && c.suspendedAt ? html` <span class="muted">since ${new Date(c.suspendedAt).toLocaleString()}</span>` : null}
      </p>
      <div class="actions">
        ${
          c.status === 'active'
            ? html`<button type="button" class="danger" id="consumer-suspend" disabled=${busy} onClick=${() => this.change('suspend')}>Suspend</button>`
            : html`<button type="button" class="primary" id="consumer-resume" disabled=${busy} onClick=${() => this.change('resume')}>Resume</button>`
        }
      </div>
      <p id="consumer-message" role="status">${message}</p>
      <div class="tiles">
        ${tile(
          c.maxKeys === undefined ? 'keys (not revoked)' : `keys (not revoked) of at most ${fmt(c.maxKeys)}`,
          c.maxKeys === undefined
            ? fmt(c.keyCount)
            : html`${fmt(c.keyCount)}<${Bar} class="tile-bar" share=${Math.min(100, (100 * c.keyCount) / c.maxKeys)} />`,
        )}
        ${limits.filter((l) => l.limit !== undefined).map((l) => tile(`per ${l.window}, pooled${l.fromOwn ? ' (its own)' : ''}`, limitText(l.limit)))}
      </div>
      <div class="panel">
        <h2>Pool windows</h2>
        <p class="muted">What its keys have used together, as the gateway counts it now (reading it counts nothing).</p>
        ${
          c.windows
            ? html`<table id="consumer-windows">
                <thead>
                  <tr>
                    <th>window</th>
                    <th>used of limit</th>
                    <th class="bar-cell"></th>
                    <th>resets</th>
                  </tr>
                </thead>
                <tbody>
                  ${c.windows.map(
                    (w) =>
                      html`<tr data-window=${w.name}>
                        <td>${w.name}</td>
                        <td>${fmt(w.used)} of ${fmt(w.limit)}</td>
                        <td class="bar-cell"><${Bar} share=${Math.min(100, (100 * w.used) / w.limit)} /></td>
                        <td class="muted">${new Date(w.resetAt).toLocaleString()}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
            : html`<p class="error" id="consumer-windows-none">Its plan is not configured: its keys are refused (503) until it is.</p>`
        }
      </div>
      <div class="panel">
        <h2>Pool limits</h2>
        <p class="muted">Every key of the consumer counts in these windows together; a key's own limits are its cap inside them.</p>
        <table id="consumer-limits">
          <thead>
            <tr>
              <th>window</th>
              <th>plan ${c.plan}</th>
              <th>its own</th>
              <th>in force</th>
            </tr>
          </thead>
          <tbody>
            ${limits.map(
              (l) =>
                html`<tr>
                  <td>${l.window}</td>
                  <td>${limitText(l.plan)}</td>
                  <td>${limitText(l.own)}</td>
                  <td><strong>${limitText(l.limit)}</strong></td>
                </tr>`,
            )}
          </tbody>
        </table>
        ${
          hasOwn && (c.limitsExpiresAt || c.limitsReason)
            ? html`<p class="muted wrap-text" id="consumer-limits-note">
                ${c.limitsReason ? `Its own limits: ${c.limitsReason}. ` : ''}
                ${
                  c.limitsExpiresAt
                    ? ownExpired
                      ? `They ended ${new Date(c.limitsExpiresAt).toLocaleString()}: the plan's apply again.`
                      : `Until ${new Date(c.limitsExpiresAt).toLocaleString()}; the plan's apply again after.`
                    : ''
                }
              </p>`
            : null
        }
      </div>
      <div class="panel">
        <h2>Access</h2>
        <p class="muted">A key of the consumer may narrow these with its own, never widen them.</p>
        <h3>Scopes</h3>
        ${codeList(c.scopes, 'Every route (no scopes).', 'consumer-scopes')}
        <h3>Allowed addresses</h3>
        ${codeList(c.allowedCidrs, 'Any address.', 'consumer-cidrs')}
      </div>
      <div class="panel">
        <h2>Keys</h2>
        <table id="consumer-keys">
          <thead>
            <tr>
              <th>name</th>
              <th>id</th>
              <th>status</th>
              <th>its own plan</th>
            </tr>
          </thead>
          <tbody>
            ${keys.map(
              (k) =>
                html`<tr key=${k.id}>
                  <td class="wrap-cell"><a href=${keyHref(k.id)}>${k.name || k.id}</a></td>
                  <td class="muted">${k.id}</td>
                  <td><span class="badge ${k.status}">${k.status}</span></td>
                  <td class="muted">${k.plan}</td>
                </tr>`,
            )}
          </tbody>
        </table>
        ${keys.length === 0 ? html`<p class="muted" id="consumer-keys-none">No keys yet: tollgate keys create --consumer ${c.id}, or attach one.</p>` : null}
        <p class="muted">A key's own plan applies again only if it leaves the consumer; while it belongs here, ${c.plan} is in force.</p>
        ${next ? html`<div class="actions"><button type="button" id="consumer-keys-more" disabled=${busy} onClick=${this.moreKeys}>More keys</button></div>` : null}
      </div>
      <div class="panel">
        <h2>Consumer</h2>
        <table class="fields">
          <tbody>
            ${fields
              .filter(([, v]) => v !== undefined)
              .map(
                ([a, b]) =>
                  html`<tr>
                    <th>${a}</th>
                    <td>${b}</td>
                  </tr>`,
              )}
          </tbody>
        </table>
      </div>
    `;
  }
}

/** @type {import('../app.js').Load} */
export async function load(ctx) {
  const id = decodeURIComponent(ctx.path.replace(/^\/consumers\//, ''));
  const [c, keys, plans] = await Promise.all([
    api('GET /consumers/{id}', { params: { id } }),
    api('GET /consumers/{id}/keys', { params: { id }, query: { limit: KEYS_PAGE } }),
    api('GET /plans'),
  ]);
  return html`<${ConsumerPage} c=${c} keys=${keys} plans=${plans} ctx=${ctx} />`;
}
