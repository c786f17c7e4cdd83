// @ts-check
// The keys page's New key dialog: a plan from those configured, a name, metadata as name/value rows and the key's own
// limits, sent as POST /keys. A refusal is said beside the form, field by field, and the form stays as typed. The
// plaintext of the answer goes straight to the page's one-time key dialog (showKeyOnce), never into this
// component's state, the URL or storage.
import { Component, createRef } from '../vendor/preact.js';
import { alertLine, api, ApiError, errorText, fmt, html, showKeyOnce, Unauthorized } from '../lib.js';

/** @typedef {import('../api.d.ts').Answers['GET /plans']['plans']} Plans */
/** @typedef {{ name: string, value: string }} Row */

/** The form's words for the fields the API names in a problem's path. */
const LABELS = /** @type {Record<string, string>} */ ({
  'body.plan': 'Plan',
  'body.name': 'Name',
  'body.perMinute': 'Requests per minute',
  'body.perDay': 'Requests per day',
  'body.metadata': 'Metadata',
});

/**
 * A problem in the form's words: "Requests per day: expected a whole number ...", "Metadata name "a b": ...".
 * @param {{ path: string, message: string }} p
 */
function said(p) {
  if (LABELS[p.path]) return `${LABELS[p.path]}: ${p.message}`;
  const entry = /^body\.metadata\.(.+)$/.exec(p.path);
  if (entry) return `Metadata "${entry[1]}": ${p.message}`;
  return `${p.path}: ${p.message}`;
}

/** @returns {Row[]} */
const oneEmptyRow = () => [{ name: '', value: '' }];

/**
 * @typedef {object} NewKeyState
 * @property {Plans | undefined} plans
 * @property {Row[]} rows
 * @property {string[]} problems
 * @property {boolean} busy
 * @property {string} openProblem why the dialog could not open (the plans could not be read)
 */

/** @extends {Component<{ onSignIn: (message?: string) => void }, NewKeyState>} */
export class NewKey extends Component {
  /** @type {NewKeyState} */
  state = { plans: undefined, rows: oneEmptyRow(), problems: [], busy: false, openProblem: '' };
  /** @type {import('../vendor/preact.js').RefObject<HTMLDialogElement>} */
  dialog = createRef();
  /** @type {import('../vendor/preact.js').RefObject<HTMLFormElement>} */
  form = createRef();

  /** Reads the plans in force (a reload may have changed them), then opens the dialog. */
  open = async () => {
    try {
      const { plans } = await api('GET /plans');
      this.setState({ plans, problems: [], openProblem: '' }, () => this.dialog.current?.showModal());
    } catch (err) {
      if (err instanceof Unauthorized) return this.props.onSignIn('Your session ended. Sign in again.');
      this.setState({ openProblem: `The plans could not be read: ${errorText(err)}` });
    }
  };

  /** Closed (cancelled, Escape or created): the next opening starts from an empty form. */
  closed = () => {
    this.form.current?.reset();
    this.setState({ rows: oneEmptyRow(), problems: [], busy: false });
  };

  /**
   * @param {number} i
   * @param {'name' | 'value'} field
   * @param {Event} e
   */
  edit(i, field, e) {
    const text = /** @type {HTMLInputElement} */ (e.currentTarget).value;
    this.setState({ rows: this.state.rows.map((r, j) => (j === i ? { ...r, [field]: text } : r)) });
  }

  /** The request body, or the problems the form itself can see (a metadata value without a name, a name twice). */
  body() {
    const form = /** @type {HTMLFormElement} */ (this.form.current);
    const value = (/** @type {string} */ name) => /** @type {HTMLInputElement} */ (form.elements.namedItem(name)).value.trim();
    /** @type {Record<string, unknown>} */
    const body = { plan: value('plan') };
    if (value('name')) body.name = value('name');
    for (const limit of ['perMinute', 'perDay']) if (value(limit) !== '') body[limit] = Number(value(limit));
    /** @type {string[]} */
    const problems = [];
    /** @type {Record<string, string>} */
    const metadata = {};
    for (const row of this.state.rows) {
      const name = row.name.trim();
      if (!name && !row.value) continue;
      if (!name) problems.push(`Metadata: the value "${row.value}" has no name`);
      else if (Object.hasOwn(metadata, name)) problems.push(`Metadata "${name}": given twice`);
      else metadata[name] = row.value;
    }
    if (Object.keys(metadata).length) body.metadata = metadata;
    return { body, problems };
  }

  /** @param {Event} e */
  submit = async (e) => {
    e.preventDefault();
    const { body, problems } = this.body();
    if (problems.length) return this.setState({ problems });
    this.setState({ busy: true, problems: [] });
    try {
      const created = await api('POST /keys', { body });
      this.dialog.current?.close();
      const warnings = created.warnings ?? [];
      showKeyOnce(
        created.key,
        `Key ${created.id}${created.name ? ` (${created.name})` : ''}, plan ${created.plan}.${warnings.map((w) => ` Warning: ${w}.`).join('')}`,
      );
      // The list behind the dialog shows the new key (found by its id, whatever page it would fall on).
      location.hash = `#/keys?q=${encodeURIComponent(created.id)}`;
    } catch (err) {
      if (err instanceof Unauthorized) return this.props.onSignIn('Your session ended. Sign in again.');
      const problems = err instanceof ApiError && err.problems.length ? err.problems.map(said) : [errorText(err)];
      this.setState({ busy: false, problems });
    }
  };

  render() {
    const { plans, rows, problems, busy, openProblem } = this.state;
    return html`
      <button type="button" id="create-key-open" class="primary" onClick=${this.open}>New key</button>
      ${openProblem ? alertLine(openProblem) : null}
      <dialog id="create-key" ref=${this.dialog} onClose=${this.closed} aria-labelledby="create-key-title">
        <h2 id="create-key-title">New key</h2>
        <form id="create-key-form" ref=${this.form} onSubmit=${this.submit}>
          <label for="create-plan">Plan</label>
          <select id="create-plan" name="plan" required>
            ${(plans ?? []).map((p) => html`<option value=${p.name}>${p.name} (${fmt(p.perMinute)}/min, ${fmt(p.perDay)}/day)</option>`)}
          </select>
          <label for="create-name">Name <span class="muted">(optional: who or what uses it)</span></label>
          <input id="create-name" name="name" maxlength="200" autocomplete="off" />
          <fieldset>
            <legend>Metadata <span class="muted">(optional: a customer id, a subscription...)</span></legend>
            ${rows.map(
              (r, i) =>
                html`<div class="metadata-row">
                  <input
                    aria-label=${`Metadata name ${i + 1}`}
                    class="metadata-name"
                    placeholder="name"
                    value=${r.name}
                    onInput=${(/** @type {Event} */ e) => this.edit(i, 'name', e)}
                  />
                  <input
                    aria-label=${`Metadata value ${i + 1}`}
                    class="metadata-value"
                    placeholder="value"
                    value=${r.value}
                    onInput=${(/** @type {Event} */ e) => this.edit(i, 'value', e)}
                  />
                  <button
                    type="button"
                    aria-label=${`Remove metadata ${i + 1}`}
                    onClick=${() => this.setState({ rows: rows.length > 1 ? rows.filter((_, j) => j !== i) : oneEmptyRow() })}
                  >
                    ×
                  </button>
                </div>`,
            )}
            <button type="button" id="create-add-metadata" class="link" onClick=${() => this.setState({ rows: [...rows, { name: '', value: '' }] })}>
              + Add metadata
            </button>
          </fieldset>
          <fieldset>
            <legend>Own limits <span class="muted">(optional: instead of the plan's)</span></legend>
            <div class="limit-fields">
              <label>Requests per minute <input id="create-per-minute" name="perMinute" type="number" min="1" step="1" /></label>
              <label>Requests per day <input id="create-per-day" name="perDay" type="number" min="1" step="1" /></label>
            </div>
          </fieldset>
          ${
            problems.length
              ? html`<ul id="create-key-error" class="error" role="alert">
                  ${problems.map((p) => html`<li>${p}</li>`)}
                </ul>`
              : null
          }
          <div class="actions">
            <button type="submit" class="primary" disabled=${busy}>${busy ? 'Creating…' : 'Create key'}</button>
            <button type="button" onClick=${() => this.dialog.current?.close()}>Cancel</button>
          </div>
        </form>
      </dialog>
    `;
  }
}
