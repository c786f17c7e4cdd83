// @ts-check
// The consumer portal: one page for a consumer's own people, one module per view (views/), drawn with Preact and htm.
// Signing in (a pasted API key, or a link from the provider that the server exchanges before this page loads) leaves
// an HttpOnly session cookie the script never sees; every call is the portal API with that cookie. Text from the API
// is only ever rendered as text. Live figures are read again on an interval, paused while the tab is hidden.
import { render } from './vendor/preact.js';
import { $, ApiError, Unauthorized, alertLine, api, errorText, html } from './lib.js';
import * as overview from './views/overview.js';
import * as keys from './views/keys.js';
import * as limits from './views/limits.js';
import * as usage from './views/usage.js';
import * as refusals from './views/refusals.js';
import * as deprecated from './views/deprecated.js';
import * as webhooks from './views/webhooks.js';

/**
 * What a view's load gets.
 * @typedef {object} ViewContext
 * @property {import('./api.d.ts').Me} me who is signed in, read afresh for each page
 * @property {URLSearchParams} params the hash's query ('#/usage?by=day')
 * @property {string} [note] a line to show after an action
 * @property {(note?: string) => void} refresh reads the current page again
 * @property {(message?: string) => void} signIn shows the sign-in form
 */
/** @typedef {(ctx: ViewContext) => Promise<import('./vendor/preact.js').ComponentChild>} Load */

/** @type {Record<string, { load: Load, refreshMs?: number }>} */
const VIEWS = { overview, keys, limits, usage, refusals, deprecated, webhooks };

const view = $('#view');

/**
 * Each navigation takes the next number, and an answer is drawn only while its number is still the newest, so a slow
 * answer never paints over the page the person has moved to. A timed refresh keeps the page's key (the same page is
 * updated in place: bars move, the chart takes new data); a navigation draws a new page.
 */
let current = 0;
let pageKey = 0;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let refreshTimer;
/** @type {number | undefined} */
let refreshEvery;
/** The page last drawn from answers: kept on screen, under a warning, when a timed refresh fails. */
/** @type {import('./vendor/preact.js').ComponentChild} */
let lastDrawn = null;

/** @param {string} [message] */
function showSignIn(message) {
  current++;
  clearTimeout(refreshTimer);
  refreshEvery = undefined;
  forgetSecrets();
  render(null, view);
  for (const id of ['#nav', '#who', '#sign-out']) $(id).hidden = true;
  view.hidden = true;
  $('#sign-in').hidden = false;
  const err = $('#sign-in-error');
  err.hidden = !message;
  err.textContent = message || '';
  $('#api-key').focus();
}

/** "Acme Ltd · signed in as jane@acme.test" or "… · read-only, key …1234", in the header. @param {import('./api.d.ts').Me} me */
function showWho(me) {
  const s = me.session;
  $('#who').textContent = `${me.consumer.name || me.consumer.id} · ${s.kind === 'link' ? `signed in as ${s.actor}` : 'read-only (signed in with a key)'}`;
  // Only the pages the session may read are offered (a link may carry fewer scopes than all).
  for (const a of document.querySelectorAll('[data-scope]')) {
    const link = /** @type {HTMLElement} */ (a);
    link.hidden = !s.scopes.includes(/** @type {import('./api.d.ts').Scope} */ (link.dataset.scope));
  }
  $('#nav-webhooks').hidden = !me.canRegisterWebhooks;
  for (const id of ['#nav', '#who', '#sign-out']) $(id).hidden = false;
}

/** @param {{ note?: string, timed?: boolean }} [opts] */
async function route(opts = {}) {
  const token = ++current;
  clearTimeout(refreshTimer);
  if (!opts.timed) {
    pageKey = token;
    lastDrawn = null;
  }
  const [path = '', query = ''] = location.hash.replace(/^#/, '').split('?');
  const name = (path || '/overview').split('/')[1] || 'overview';
  const chosen = VIEWS[name] ?? overview;
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('current', /** @type {HTMLElement} */ (a).dataset.nav === name);
  /** @type {import('./vendor/preact.js').ComponentChild} */
  let drawn;
  try {
    const me = await api('GET /api/me');
    if (token !== current) return;
    showWho(me);
    $('#sign-in').hidden = true;
    view.hidden = false;
    /** @type {ViewContext} */
    const ctx = { me, params: new URLSearchParams(query), note: opts.note, refresh: (note) => void route({ note }), signIn: showSignIn };
    drawn = await chosen.load(ctx);
    if (token === current) lastDrawn = drawn;
  } catch (err) {
    if (token !== current) return;
    if (err instanceof Unauthorized) return showSignIn();
    if (err instanceof ApiError && err.code === 'consumer_suspended') return showSignIn(errorText(err));
    // A failed timed refresh leaves the figures drawn and says why above them; the next one tries again.
    const said = alertLine(`${opts.timed ? 'The figures could not be read again' : 'The page could not be read'}: ${errorText(err)}`);
    drawn = opts.timed ? html`${said}${lastDrawn}` : said;
  }
  if (token !== current) return;
  render(html`<${Page} key=${pageKey}>${drawn}<//>`, view);
  refreshEvery = chosen.refreshMs;
  schedule(token);
}

/** The next timed refresh of the page shown, unless the tab is hidden (it comes back with the tab). @param {number} token */
function schedule(token) {
  clearTimeout(refreshTimer);
  if (refreshEvery && !document.hidden) refreshTimer = setTimeout(() => token === current && route({ timed: true }), refreshEvery);
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) clearTimeout(refreshTimer);
  else if (refreshEvery && !view.hidden) route({ timed: true });
});

/** @param {{ children?: import('./vendor/preact.js').ComponentChildren }} props */
const Page = (props) => html`${props.children}`;

$('#sign-in-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const input = /** @type {HTMLInputElement} */ ($('#api-key'));
  const key = input.value.trim();
  input.value = '';
  try {
    await api('POST /api/session', { body: { key } });
  } catch (err) {
    if (!(err instanceof ApiError)) return showSignIn(errorText(err));
    if (err.status === 401) return showSignIn('That key is not valid: it is unknown, revoked or expired. Check that you pasted all of it.');
    if (err.code === 'forbidden') return showSignIn('This key does not belong to an account with a portal: ask your provider.');
    return showSignIn(errorText(err));
  }
  if (location.hash === '#/overview' || location.hash === '') return route();
  location.hash = '#/overview';
});

$('#sign-out').addEventListener('click', async () => {
  await fetch('/api/session/end', { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: '{}' });
  history.replaceState(null, '', location.pathname);
  showSignIn('Signed out.');
});

// A key or secret shown once lives in its dialog's text only: emptied when the dialog closes, when the page moves
// elsewhere, and when the session ends. The dialog's 'close' event comes a task after it closes, so its button empties
// it at once as well.
function forgetSecrets() {
  for (const id of ['#key-shown-value', '#key-shown-note', '#key-shown-copied', '#secret-shown-value']) $(id).textContent = '';
  for (const id of ['#key-shown', '#secret-shown', '#create-key', '#rotate-key', '#confirm']) {
    const d = /** @type {HTMLDialogElement} */ ($(id));
    if (d.open) d.close();
  }
}
for (const id of ['#key-shown-close', '#secret-shown-close']) /** @type {HTMLFormElement} */ ($(id).closest('form')).addEventListener('submit', forgetSecrets);
$('#key-shown').addEventListener('close', () => {
  const note = $('#key-shown').dataset.after;
  forgetSecrets();
  if (/^#\/keys/.test(location.hash)) route({ note });
});
$('#secret-shown').addEventListener('close', forgetSecrets);

// Copy puts the key on the clipboard; where the browser refuses (plain HTTP away from this machine), the key is
// selected instead for the person's own copy.
$('#key-shown-copy').addEventListener('click', async () => {
  const value = $('#key-shown-value');
  const said = $('#key-shown-copied');
  try {
    await navigator.clipboard.writeText(value.textContent || '');
    said.textContent = 'Copied. Paste it where your application keeps its secrets.';
  } catch {
    getSelection()?.selectAllChildren(value);
    said.textContent = 'Your browser did not let the page copy: the key is selected, copy it with Ctrl+C (⌘C on a Mac).';
  }
});

window.addEventListener('hashchange', () => {
  forgetSecrets();
  route();
});
route();
