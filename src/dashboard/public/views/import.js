// @ts-check
// #/import: a CSV of keys from another system, previewed first (a dry run: counts, and every refused row with its line
// and reason), then imported for real. Rows the preview refused are only skipped when the box says so; otherwise a
// refused row means nothing is imported, as with `tollgate keys import`.
import { Component } from '../vendor/preact.js';
import { alertLine, api, errorText, fmt, html } from '../lib.js';

/** @typedef {import('../api.d.ts').ImportReport} ImportReport */

/** @param {ImportReport} r @param {boolean} done */
const counts = (r, done) =>
  html`<p class="import-counts">
    <span class="tile-inline">${done ? 'Imported' : 'Would import'} ${fmt(r.imported)}</span>
    <span class="tile-inline">Unchanged ${fmt(r.unchanged)}</span>
    <span class=${r.refused.length ? 'tile-inline refused' : 'tile-inline'}>Refused ${fmt(r.refused.length)}</span>
  </p>`;

/** @param {ImportReport} r */
const refusals = (r) =>
  r.refused.length === 0
    ? null
    : html`<div class="panel">
        <table id="import-refusals">
          <thead>
            <tr>
              <th>line</th>
              <th>reason</th>
            </tr>
          </thead>
          <tbody>
            ${r.refused.map(
              (x) =>
                html`<tr>
                  <td>${String(x.line)}</td>
                  <td>${x.reason}</td>
                </tr>`,
            )}
          </tbody>
        </table>
      </div>`;

/** @typedef {{ checking?: boolean, error?: string, preview?: ImportReport, skip?: boolean, running?: boolean, done?: ImportReport }} ImportState */

/** @extends {Component<{}, ImportState>} */
class ImportPage extends Component {
  text = '';
  /** @type {ImportState} */
  state = {};

  /** @param {string} query */
  run(query) {
    return api('POST /keys/import', { query: Object.fromEntries(new URLSearchParams(query)), raw: { text: this.text, type: 'text/csv' } });
  }

  /** @param {Event} e */
  choose = async (e) => {
    const file = /** @type {HTMLInputElement} */ (e.currentTarget).files?.[0];
    if (!file) return;
    this.setState({ checking: true, error: undefined, preview: undefined, done: undefined, skip: false });
    try {
      this.text = await file.text();
      this.setState({ checking: false, preview: await this.run('dryRun=true&skipInvalid=true') });
    } catch (err) {
      this.setState({ checking: false, error: errorText(err) });
    }
  };

  go = async () => {
    const r = /** @type {ImportReport} */ (this.state.preview);
    this.setState({ running: true });
    try {
      this.setState({ running: false, done: await this.run(r.refused.length ? 'skipInvalid=true' : '') });
    } catch (err) {
      this.setState({ running: false, error: errorText(err) });
    }
  };

  result() {
    const { checking, error, preview: r, skip, running, done } = this.state;
    if (checking) return html`<p class="muted">Checking…</p>`;
    if (error) return alertLine(error);
    if (done)
      return html`<h2>Result</h2>
        ${counts(done, true)}${refusals(done)}`;
    if (!r) return null;
    const off = running || r.imported === 0 || (r.refused.length > 0 && !skip);
    /** @param {Event} e */
    const tick = (e) => this.setState({ skip: /** @type {HTMLInputElement} */ (e.currentTarget).checked });
    return html`
      <h2>Preview (nothing written yet)</h2>
      ${counts(r, false)} ${refusals(r)}
      ${
        r.refused.length
          ? html`<p>
              <label><input type="checkbox" id="import-skip" checked=${skip} onChange=${tick} /> Import the valid rows and skip the refused ones</label>
            </p>`
          : null
      }
      <p><button type="button" id="import-run" disabled=${off} onClick=${this.go}>Import</button></p>
    `;
  }

  render() {
    return html`
      <h1>Import keys</h1>
      <p class="muted">
        A CSV with a header row: plan, and key or sha256; optionally id, name, perMinute, perDay, expiresAt and ${'metadata.<name>'} columns. Up to 10 MB;
        bigger files go through tollgate keys import --file.
      </p>
      <p>
        <label>CSV file <input type="file" id="import-file" accept=".csv,text/csv" onChange=${this.choose} /></label>
      </p>
      <div id="import-result">${this.result()}</div>
    `;
  }
}

/** @type {import('../app.js').Load} */
export async function load() {
  return html`<${ImportPage} />`;
}
