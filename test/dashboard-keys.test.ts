// The dashboard's keys page in a real browser (Debian's chromium driven by playwright-core), served by the admin
// listener of a gateway composed as `tollgate serve` composes it, on real Redis: a person creates a key in the New key
// dialog (a refusal from the API said beside the form in the form's words, then the key made), sees its plaintext
// once with the words that say so, copies it, closes the dialog and the plaintext is gone from the page (and was
// never in the URL or storage); the new key is in the list and works on /v1. The search box finds keys by name,
// metadata value and id (the rows a person sees, counted), and a search that matches only past the API's
// 10,000-record page bound is still found (the page follows the cursor). At a phone's width the dialog fits.
// Screenshots go to test-results/screenshots/keys-*.png.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { generateAdminToken } from '../src/admin/tokens.js';
import { PAGE_SCAN_MAX } from '../src/keys/listing.js';
import { PHONE, openSignedIn, overflowsSideways, shot, startAdminGateway, useBrowser } from './helpers/browser.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const stack = useStack({
  redis: true,
  gateway: (s) =>
    startAdminGateway(s, TOKEN, 'dashkeys:', {
      plans: { starter: { perMinute: 5, perDay: 100 }, growth: { perMinute: 50, perDay: 5000 } },
      anonymous: { perMinute: 1000 },
    }),
});
const chromium = useBrowser();
const made: Record<string, string> = {};

async function call(key: string): Promise<number> {
  const res = await fetch(`${stack.gw.url}/v1/categories`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

async function admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${stack.gw.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** The rows of the keys table a person sees (visible ones), as their cells' text. */
async function visibleRows(page: Page): Promise<string[][]> {
  const rows = page.locator('#keys-table tbody tr:visible');
  const out: string[][] = [];
  for (let i = 0, n = await rows.count(); i < n; i++) out.push((await rows.nth(i).locator('td').allInnerTexts()).map((t) => t.trim()));
  return out;
}

/**
 * Runs `act`, then waits until the keys table is drawn afresh: the table drawn before is marked, and the answer to
 * `act` is a new page, without the mark.
 */
async function redrawn(page: Page, act: () => Promise<unknown>): Promise<string[][]> {
  const mark = (el: unknown) => void ((el as { dataset: Record<string, string> }).dataset.before = '1');
  if (await page.locator('#keys-table').count()) await page.locator('#keys-table').evaluate(mark);
  await act();
  await page.locator('#keys-table:not([data-before])').waitFor();
  return visibleRows(page);
}

/** Searches with the search box, as a person does: the rows shown for it. */
async function searchFor(page: Page, text: string): Promise<string[][]> {
  await page.locator('#key-search').fill(text);
  const rows = await redrawn(page, () => page.locator('.filters button[type=submit]').click());
  const hash = await page.evaluate(() => (globalThis as unknown as { location: { hash: string } }).location.hash);
  expect(hash.startsWith(`#/keys?q=${encodeURIComponent(text)}`)).toBe(true);
  return rows;
}

beforeAll(async () => {
  for (const [label, body] of [
    ['acme', { plan: 'starter', name: 'acme-prod', metadata: { customer: 'c_42' } }],
    ['acmeStaging', { plan: 'starter', name: 'Acme staging' }],
    ['beta', { plan: 'growth', name: 'beta-app', metadata: { customer: 'c_7' } }],
    ['gamma', { plan: 'growth', name: 'gamma-batch' }],
  ] as const) {
    const r = await admin('POST', '/keys', body);
    made[label] = String(r.body.id);
  }
});

describe('the keys page in a browser', () => {
  let context: BrowserContext;
  let page: Page;
  let violations: string[] = [];

  beforeAll(async () => {
    ({ context, page, violations } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN, { permissions: ['clipboard-read', 'clipboard-write'] }));
  });
  afterAll(async () => {
    await context?.close();
    // Nothing on this page breaks the strict Content-Security-Policy (no inline script or style).
    expect(violations).toEqual([]);
  });

  it('creates a key: a refusal is said beside the form, then the plaintext is shown once, copied, and gone on close', async () => {
    const posts: number[] = [];
    page.on('response', (r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/keys' && posts.push(r.status()));
    await page.goto(`${stack.gw.adminUrl}/#/keys`);
    await page.locator('#create-key-open').click();
    const dialog = page.locator('#create-key');
    await dialog.locator('#create-plan').waitFor({ state: 'visible' });
    // The plans are those configured, each with its limits.
    expect(await dialog.locator('#create-plan option').allInnerTexts()).toEqual(['starter (5/min, 100/day)', 'growth (50/min, 5,000/day)']);
    await dialog.locator('#create-plan').selectOption('growth');
    await dialog.locator('#create-name').fill('Zeta Corp');
    await dialog.getByLabel('Metadata name 1').fill('customer id');
    await dialog.getByLabel('Metadata value 1').fill('cus_9001');
    await dialog.locator('#create-add-metadata').click();
    await dialog.getByLabel('Metadata name 2').fill('region');
    await dialog.getByLabel('Metadata value 2').fill('eu-west');
    await dialog.locator('#create-per-minute').fill('7');
    await dialog.locator('#create-per-day').fill('99999999999999');
    await shot(page, 'keys-new-key-form');

    // The API refuses two fields (a metadata name with a space, a day limit over its bound): said in the form's words.
    await dialog.getByRole('button', { name: 'Create key' }).click();
    const error = dialog.locator('#create-key-error');
    await error.waitFor();
    expect(await error.locator('li').allInnerTexts()).toEqual([
      'Requests per day: expected a whole number from 1 to 1000000000000',
      'Metadata "customer id": metadata names are 1-64 characters of A-Z a-z 0-9 _ . -',
    ]);
    expect(posts).toEqual([400]);
    // Beside the form: inside the open dialog, above its buttons, readable.
    const [errorBox, buttonsBox] = await Promise.all([error.boundingBox(), dialog.locator('.actions').boundingBox()]);
    expect(errorBox!.height).toBeGreaterThan(20);
    expect(errorBox!.y + errorBox!.height).toBeLessThanOrEqual(buttonsBox!.y);
    expect(await dialog.isVisible()).toBe(true);
    expect(await dialog.locator('#create-name').inputValue()).toBe('Zeta Corp');
    await shot(page, 'keys-new-key-refused');
    expect((await admin('GET', '/keys?q=Zeta')).body.keys).toEqual([]);

    // Corrected, the key is made.
    await dialog.getByLabel('Metadata name 1').fill('customer');
    await dialog.locator('#create-per-day').fill('');
    await dialog.getByRole('button', { name: 'Create key' }).click();
    const shown = page.locator('#new-key');
    await page.locator('#new-key[open]').waitFor();
    expect(posts).toEqual([400, 201]);
    expect(await dialog.isVisible()).toBe(false);
    const plaintext = await shown.locator('#new-key-value').innerText();
    expect(plaintext).toMatch(/^tg_[0-9A-Za-z]{49}$/);
    expect(await shown.locator('#new-key-once').innerText()).toContain('Copy this key now: you will not see it again.');
    const valueBox = await shown.locator('#new-key-value').boundingBox();
    expect(valueBox!.width).toBeGreaterThan(200);
    expect(valueBox!.height).toBeGreaterThan(15);
    const id = /Key (key_\w+) \(Zeta Corp\), plan growth\./.exec(await shown.locator('#new-key-grace').innerText())?.[1];
    expect(id).toBeDefined();
    await shown.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => shown.locator('#new-key-copied').innerText()).toBe('Copied to the clipboard.');
    expect(
      await page.evaluate(() => (globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }).navigator.clipboard.readText()),
    ).toBe(plaintext);
    await shot(page, 'keys-new-key-shown');

    // Closed: the plaintext is nowhere in the page, and never was in the URL or the page's storage.
    await shown.getByRole('button', { name: 'I have stored it' }).click();
    expect(await shown.isVisible()).toBe(false);
    expect(await page.content()).not.toContain(plaintext);
    const kept = await page.evaluate(() => {
      const w = globalThis as unknown as { location: { href: string }; localStorage: { length: number }; sessionStorage: { length: number } };
      return { href: w.location.href, local: w.localStorage.length, session: w.sessionStorage.length };
    });
    expect(kept).toEqual({ href: `${stack.gw.adminUrl}/#/keys?q=${id}`, local: 0, session: 0 });

    // The list shows the new key; the key works through the gateway, with what the form gave it.
    await expect.poll(() => visibleRows(page).then((rows) => rows.map((r) => r.slice(0, 4)))).toEqual([['Zeta Corp', id, 'growth', 'active']]);
    expect(await call(plaintext)).toBe(200);
    expect((await admin('GET', `/keys/${id}`)).body).toMatchObject({ plan: 'growth', perMinute: 7, metadata: { customer: 'cus_9001', region: 'eu-west' } });
    expect((await admin('GET', `/keys/${id}`)).body).not.toHaveProperty('perDay');
    await shot(page, 'keys-new-key-listed');
  });

  it('cancelling the dialog creates nothing, and it opens again with an empty form', async () => {
    const before = ((await admin('GET', '/keys?limit=1000')).body.keys as unknown[]).length;
    await page.locator('#create-key-open').click();
    await page.locator('#create-name').fill('never made');
    await page.getByLabel('Metadata value 1').fill('orphan value');
    await page.locator('#create-key').getByRole('button', { name: 'Create key' }).click();
    // A value without a name is refused by the form itself, before any request.
    expect(await page.locator('#create-key-error li').allInnerTexts()).toEqual(['Metadata: the value "orphan value" has no name']);
    await page.locator('#create-key').getByRole('button', { name: 'Cancel' }).click();
    await page.locator('#create-key').waitFor({ state: 'hidden', timeout: 5_000 });
    expect(await page.locator('#create-key').isVisible()).toBe(false);
    await page.locator('#create-key-open').click();
    // Opened on the next render: Escape pressed before it is shown would close nothing.
    await page.locator('#create-key').waitFor({ state: 'visible', timeout: 5_000 });
    expect(await page.locator('#create-name').inputValue()).toBe('');
    expect(await page.getByLabel('Metadata value 1').inputValue()).toBe('');
    expect(await page.locator('#create-key-error').count()).toBe(0);
    await page.keyboard.press('Escape');
    // Escape closes the dialog through its cancel event, a task after the key press: wait for that, bounded.
    await page.locator('#create-key').waitFor({ state: 'hidden', timeout: 5_000 });
    expect(await page.locator('#create-key').isVisible()).toBe(false);
    expect(((await admin('GET', '/keys?limit=1000')).body.keys as unknown[]).length).toBe(before);
  });

  it('the search box finds keys by name, metadata value and id: only the matching rows are shown', async () => {
    expect((await redrawn(page, () => page.goto(`${stack.gw.adminUrl}/#/keys`))).length).toBe(5);
    const names = (rows: string[][]) => rows.map((r) => r[0]).sort();
    expect(names(await searchFor(page, 'ACME'))).toEqual(['Acme staging', 'acme-prod']);
    await shot(page, 'keys-search');
    expect(names(await searchFor(page, 'c_7'))).toEqual(['beta-app']);
    expect(names(await searchFor(page, 'cus_9001'))).toEqual(['Zeta Corp']);
    expect(await searchFor(page, made.gamma!)).toEqual([['gamma-batch', made.gamma!, 'growth', 'active', '0 / 5,000']]);
    // Taken as text: ".*" is no pattern, and matches nothing here.
    expect(await searchFor(page, '.*')).toEqual([]);
    expect(await page.locator('#keys-none').innerText()).toBe('No keys match.');
    // With a status too.
    await page.locator('#key-status').selectOption('active');
    expect(names(await searchFor(page, 'acme'))).toEqual(['Acme staging', 'acme-prod']);
    await admin('POST', `/keys/${made.acmeStaging}/revoke`);
    await page.locator('#key-status').selectOption('revoked');
    await page.locator('#key-search').fill('acme');
    expect(names(await redrawn(page, () => page.locator('.filters button[type=submit]').click()))).toEqual(['Acme staging']);
  });

  it('a search that matches only past the first 10,000 records is still found: the page follows the cursor', async () => {
    const filler = Array.from({ length: PAGE_SCAN_MAX + 20 }, (_, i) => ({
      id: `m-${String(i).padStart(6, '0')}`,
      plan: 'growth',
      name: `filler ${i}`,
      sha256: createHash('sha256').update(`filler-${i}`).digest('hex'),
    }));
    filler.push({ id: 'zz-needle', plan: 'growth', name: 'the needle', sha256: createHash('sha256').update('needle').digest('hex') });
    expect((await admin('POST', '/keys/import', filler)).status).toBe(200);
    await page.locator('#key-status').selectOption('');
    const lists: string[] = [];
    const onRequest = (r: { url(): string }) => new URL(r.url()).pathname === '/keys' && lists.push(new URL(r.url()).search);
    page.on('request', onRequest);
    const rows = await searchFor(page, 'needle');
    page.off('request', onRequest);
    expect(rows.map((r) => r.slice(0, 2))).toEqual([['the needle', 'zz-needle']]);
    // Two requests: the first read 10,000 records and found nothing, the second went on from its cursor.
    expect(lists).toHaveLength(2);
    expect(lists[1]).toContain('cursor=');
    expect(await page.locator('#next-page').count()).toBe(0);
  }, 60_000);
});

describe('the New key dialog at a phone width', () => {
  it('fits the screen, and so does the key it shows', async () => {
    const { context, page } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN, { options: PHONE });
    try {
      await page.goto(`${stack.gw.adminUrl}/#/keys`);
      await page.locator('#create-key-open').click();
      await page.locator('#create-plan').waitFor({ state: 'visible' });
      const box = await page.locator('#create-key').boundingBox();
      // A bound by design: anywhere inside the viewport.
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width).toBeLessThanOrEqual(375);
      expect(await overflowsSideways(page)).toBe(false);
      await page.locator('#create-name').fill('phone key');
      await shot(page, 'keys-phone-new-key');
      await page.locator('#create-key').getByRole('button', { name: 'Create key' }).click();
      await page.locator('#new-key[open]').waitFor();
      const shown = await page.locator('#new-key').boundingBox();
      expect(shown!.x + shown!.width).toBeLessThanOrEqual(375);
      expect(await overflowsSideways(page)).toBe(false);
      await shot(page, 'keys-phone-new-key-shown');
    } finally {
      await context.close();
    }
  });
});
