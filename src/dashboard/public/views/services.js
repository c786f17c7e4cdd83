// @ts-check
// #/services: each upstream service's targets as this gateway instance sees them (health, ejections, recent errors),
// read again every few seconds while the page is shown.
import { api, Bar, fmt, html } from '../lib.js';

/** The Services page re-reads GET /services this often while it is shown (health changes within seconds). */
export const refreshMs = 5000;

/** A target's state as a person reads it: failing its active checks is "unhealthy", resting after failed requests "ejected". */
const TARGET_STATE = { healthy: 'healthy', ejected: 'ejected', health_check: 'unhealthy' };

/** An error kind from the snapshot, in words. @param {string} kind */
function errorText(kind) {
  const status = /^status_(\d{3})$/.exec(kind);
  if (status) return `answered ${status[1]}`;
  /** @type {Record<string, string>} */
  const words = {
    refused: 'connection refused',
    connect_timeout: 'connect timed out',
    reset: 'connection reset',
    timeout: 'timed out',
    health_check: 'health check failed',
  };
  return words[kind] || kind;
}

/** @param {import('../api.d.ts').Target} t */
function targetRow(t) {
  const state = TARGET_STATE[t.state] || t.state;
  const errors = t.recentErrors.slice().reverse();
  return html`<tr class="target">
    <td class="target-url">${t.url}</td>
    <td>${String(t.weight)}</td>
    <td>
      <span class="badge ${state}">${state}</span>
      ${t.ejectedUntil ? html`<div class="muted">until ${new Date(t.ejectedUntil).toLocaleTimeString()}</div>` : null}
    </td>
    <td>${fmt(t.activeRequests)}</td>
    <td>${fmt(t.consecutiveFailures)}</td>
    <td class="target-errors">
      ${
        errors.length === 0
          ? html`<span class="muted">none</span>`
          : errors.map((e) => html`<div>${errorText(e.kind)}${' '}<span class="muted">${new Date(e.at).toLocaleTimeString()}</span></div>`)
      }
    </td>
  </tr>`;
}

/** @type {import('../app.js').Load} */
export async function load() {
  const r = await api('GET /services');
  const heads = ['target', 'weight', 'health', 'in flight', 'failures in a row', 'recent errors (newest first)'];
  return html`
    <h1>Services</h1>
    <p class="muted" id="services-as-of">
      As this gateway instance sees them at ${new Date(r.asOf).toLocaleTimeString()} (refreshed every ${refreshMs / 1000} s).${' '}Health checks and ejections
      are judged by each instance on its own.
    </p>
    ${r.services.map(
      (s) =>
        html`<div class="panel service" data-service=${s.name}>
          <h2>${s.name}</h2>
          <div class="service-health">
            <${Bar} class=${s.healthy === 0 ? 'health none' : 'health'} share=${Math.round((100 * s.healthy) / s.total)} />
            <span class="service-summary">${s.healthy} of ${s.total} targets healthy · ${s.balance}</span>
            ${s.healthy === 0 ? html`<span class="badge unhealthy">no healthy target: requests get 503</span>` : null}
          </div>
          <table>
            <thead>
              <tr>
                ${heads.map((c) => html`<th>${c}</th>`)}
              </tr>
            </thead>
            <tbody>
              ${s.targets.map(targetRow)}
            </tbody>
          </table>
        </div>`,
    )}
  `;
}
