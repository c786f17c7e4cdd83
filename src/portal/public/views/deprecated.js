// @ts-check
// #/deprecated, and the first panel of the overview: the deprecated operations this account still calls, with when
// they go away, what replaces them and when they are switched off on purpose beforehand (brownouts). The most
// important thing the portal says: a call that will stop working.
import { api, day, fmt, fromNow, html, when } from '../lib.js';

/** @typedef {import('../api.d.ts').DeprecatedOperation} Operation */

/** An absolute http(s) address (never javascript: or data:), else undefined. @param {string | undefined} url */
function safeLink(url) {
  if (!url || !/^https?:\/\//i.test(url)) return undefined;
  try {
    return new URL(url).href;
  } catch {
    return undefined;
  }
}

/**
 * What replaces the operation: a link when it is an address; a path of the API (served on the API's host, not this
 * portal's) as text; and its migration guide when there is one.
 * @param {Operation} op
 */
function successorCell(op) {
  const successor = safeLink(op.successor);
  const guide = safeLink(op.link);
  const what = successor
    ? html`<a href=${successor} target="_blank" rel="noopener noreferrer">${successor}</a>`
    : op.successor
      ? html`<code>${op.successor}</code>`
      : html`<span class="muted">not given</span>`;
  return html`${what}${guide ? html`<br /><a href=${guide} target="_blank" rel="noopener noreferrer" class="guide">migration guide</a>` : null}`;
}

/** @param {Operation} op */
function sunsetCell(op) {
  if (!op.sunset) return html`<span class="muted">no date yet</span>`;
  const past = new Date(op.sunset).getTime() <= Date.now();
  return html`<strong>${day(op.sunset)}</strong><br /><span class=${past ? 'error' : 'muted'}
      >${past ? 'passed: calls are refused' : fromNow(op.sunset)}</span
    >`;
}

/** @param {import('../lib.js').Time} t */
const clock = (t) => new Date(t).toLocaleTimeString('en-GB', { timeStyle: 'short' });
/** @param {import('../lib.js').Time} a @param {import('../lib.js').Time} b */
const sameDay = (a, b) => new Date(a).toDateString() === new Date(b).toDateString();

/** @param {Operation} op */
function brownoutCell(op) {
  if (op.brownouts.length === 0) return html`<span class="muted">none scheduled</span>`;
  return html`<ul class="plain">
    ${op.brownouts.map((b) => html`<li>${when(b.start)} to ${sameDay(b.start, b.end) ? clock(b.end) : when(b.end)}</li>`)}
  </ul>`;
}

/**
 * The panel: a table of the operations, or a plain sentence saying there is none.
 * @param {{ operations: Operation[], heading?: 'h1' | 'h2' }} props
 */
export function DeprecatedPanel(props) {
  const ops = props.operations;
  const title = 'Deprecated operations you still call';
  return html`<section id="deprecated-panel" class=${`panel ${ops.length ? 'warn' : 'calm'}`}>
    ${props.heading === 'h1' ? html`<h1>${title}</h1>` : html`<h2>${title}</h2>`}
    ${
      ops.length === 0
        ? html`<p id="deprecated-none" class="ok-text">None. In the last 30 days you called no operation that is going away: nothing to change.</p>`
        : html`<p id="deprecated-summary">
              ${ops.length === 1 ? 'One operation you call is going away.' : `${ops.length} operations you call are going away.`} Move your calls to the
              successor before the sunset date: after it, these calls are refused. During a brownout they are refused on purpose for a short while, so you can
              see what would break.
            </p>
            <div class="scroll">
              <table id="deprecated-table">
                <thead>
                  <tr>
                    <th>operation</th>
                    <th class="num">calls, 7 days</th>
                    <th class="num">calls, 30 days</th>
                    <th>last call</th>
                    <th>sunset</th>
                    <th>use instead</th>
                    <th>brownouts</th>
                  </tr>
                </thead>
                <tbody>
                  ${ops.map((op) => {
                    return html`<tr>
                      <td class="op">
                        <code>${op.method} ${op.path}</code>${op.operationId ? html`<br /><span class="muted">${op.operationId}</span>` : null}
                      </td>
                      <td class="num">${fmt(op.calls7d)}</td>
                      <td class="num">${fmt(op.calls30d)}</td>
                      <td>${op.lastCall ? when(op.lastCall) : '-'}</td>
                      <td>${sunsetCell(op)}</td>
                      <td class="wrap successor">${successorCell(op)}</td>
                      <td class="wrap">${brownoutCell(op)}</td>
                    </tr>`;
                  })}
                </tbody>
              </table>
            </div>`
    }
  </section>`;
}

/** @type {import('../app.js').Load} */
export async function load() {
  const r = await api('GET /api/deprecated');
  return html`<${DeprecatedPanel} operations=${r.operations} heading="h1" />`;
}

export const refreshMs = 60_000;
