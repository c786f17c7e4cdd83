// @ts-check
// The Tollgate dashboard: a small single page on the admin API, one module per view (views/), drawn with Preact and
// htm. Sign in exchanges an admin token for an HttpOnly session cookie (the script never sees it again); every other
// call is the admin API itself, sent with that cookie. Text from the API is only ever rendered as text, never as HTML.
import { render } from './vendor/preact.js';
import { Unauthorized, alertLine, errorText, html } from './lib.js';
import * as overview from './views/overview.js';
import * as keys from './views/keys.js';
import * as key from './views/key.js';
import * as consumers from './views/consumers.js';
import * as consumer from './views/consumer.js';
import * as deprecated from './views/deprecated.js';
import * as invalid from './views/invalid.js';
import * as rollout from './views/rollout.js';
import * as services from './views/services.js';
import * as events from './views/events.js';
import * as importKeys from './views/import.js';

/**
 * What a view's load gets: the hash's path and query, and ways back to the router.
 * @typedef {object} ViewContext
 * @property {string} path the hash without '#' and query ('/keys/key_1')
 * @property {URLSearchParams} params the hash's query
 * @property {string} [note] a line to show after an action (key and consumer views)
 * @property {(note?: string) => void} refresh loads the current page again
 * @property {(message?: string) => void} signIn shows the sign-in form
 */
/** @typedef {(ctx: ViewContext) => Promise<import('./vendor/preact.js').ComponentChild>} Load */

/** @type {Record<string, { load: Load, refreshMs?: number }>} */
const VIEWS = { overview, keys, consumers, deprecated, invalid, rollout, services, events, import: importKeys };

/** @param {string} sel */
const $ = (sel) => /** @type {HTMLElement} */ (document.querySelector(sel));
const view = $('#view');

/**
 * The render token: each navigation (or reload of the page shown) takes the next number, and a view's answer is drawn
 * only while its number is still the newest, so a slow answer never paints over the page the user has moved to.
 */
let current = 0;
/** @type {ReturnType<typeof setTimeout> | undefined} */
let refreshTimer;

/** @param {string} [message] */
function showSignIn(message) {
  current++;
  clearTimeout(refreshTimer);
  render(null, view);
  $('#nav').hidden = true;
  view.hidden = true;
  $('#sign-in').hidden = false;
  const err = $('#sign-in-error');
  err.hidden = !message;
  err.textContent = message || '';
  $('#token').focus();
}

/** @param {string} [note] */
async function route(note) {
  const token = ++current;
  clearTimeout(refreshTimer);
  const [path = '', query = ''] = location.hash.replace(/^#/, '').split('?');
  const name = (path || '/overview').split('/')[1] || 'overview';
  for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('current', /** @type {HTMLElement} */ (a).dataset.nav === name);
  $('#sign-in').hidden = true;
  view.hidden = false;
  // One key's or one consumer's page: its list's path and an id.
  const one = /^\/(keys|consumers)\/.+$/.exec(path)?.[1];
  const chosen = one === 'keys' ? key : one === 'consumers' ? consumer : VIEWS[name] || overview;
  /** @type {ViewContext} */
  const ctx = { path, params: new URLSearchParams(query), note, refresh: (n) => void route(n), signIn: showSignIn };
  /** @type {import('./vendor/preact.js').ComponentChild} */
  let drawn;
  try {
    drawn = await chosen.load(ctx);
  } catch (err) {
    if (token !== current) return;
    if (err instanceof Unauthorized) return showSignIn();
    drawn = alertLine(errorText(err));
  }
  if (token !== current) return;
  // Keyed by the token: a new page (or a reload of this one) is drawn afresh, its charts made anew.
  render(html`<${Page} key=${token}>${drawn}<//>`, view);
  // Only a signed-in page has the nav bar (and Sign out): not the sign-in form, nor while finding out which to show.
  $('#nav').hidden = false;
  const every = /** @type {{ refreshMs?: number }} */ (chosen).refreshMs;
  if (every) refreshTimer = setTimeout(() => token === current && route(), every);
}

/** @param {{ children?: import('./vendor/preact.js').ComponentChildren }} props */
const Page = (props) => html`${props.children}`;

$('#sign-in-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const input = /** @type {HTMLInputElement} */ ($('#token'));
  const token = input.value;
  const res = await fetch('/session', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
  });
  input.value = '';
  if (res.status === 204) {
    if (location.hash === '#/overview') return route();
    location.hash = '#/overview';
    return;
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

// Closing the new-key dialog empties it (the plaintext is gone from the page) and shows the keys page or the key's
// page again, read afresh (the new key, or its rotation, is in it now). The dialog's 'close' event comes a task after
// it closes, so its button empties it at once as well: no moment where the dialog is gone and the key still in the page.
function forgetShownKey() {
  $('#new-key-value').textContent = '';
  $('#new-key-grace').textContent = '';
  $('#new-key-copied').textContent = '';
}
/** @type {HTMLFormElement} */ ($('#new-key-close').closest('form')).addEventListener('submit', forgetShownKey);
$('#new-key').addEventListener('close', () => {
  forgetShownKey();
  if (/^#\/keys([/?].*)?$/.test(location.hash)) route();
});

// Copy puts the key on the clipboard; where the browser refuses (a page over plain HTTP that is not on this
// machine), the key is selected instead, for the operator's own copy.
$('#new-key-copy').addEventListener('click', async () => {
  const value = $('#new-key-value');
  const said = $('#new-key-copied');
  try {
    await navigator.clipboard.writeText(value.textContent || '');
    said.textContent = 'Copied to the clipboard.';
  } catch {
    getSelection()?.selectAllChildren(value);
    said.textContent = 'The browser refused to copy: the key is selected, copy it with Ctrl+C (⌘C on a Mac).';
  }
});

window.addEventListener('hashchange', () => route());
route();
