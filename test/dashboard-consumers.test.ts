// The dashboard's Consumers page in a real browser (Debian's chromium driven by playwright-core), served by the admin
// listener of a gateway composed as `tollgate serve` composes it, on real Redis: the rows a person sees (name, id,
// plan, status, keys against maxKeys, the pool's limits in force) from one request per page, each keys bar as wide as
// its share (measured), the search box asking the API (GET /consumers?q=: id, name, metadata value), "Load more", a
// consumer's page with its pool windows after real traffic (used of limit, bars measured), its keys (linking to each key's page), limits, scopes and allowed addresses, Suspend and
// Resume with their confirmation (a dismissed one changes nothing; the list reads "suspended" after a reload), and
// hostile names (markup, 200 characters without a space) drawn as text that wraps inside its cell, at a desktop's
// width and a phone's. Screenshots go to test-results/screenshots/consumers-*.png.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { generateAdminToken } from '../src/admin/tokens.js';
import { PHONE, openSignedIn, overflowsSideways, shot, startAdminGateway, useBrowser } from './helpers/browser.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const stack = useStack({
  redis: true,
  gateway: (s) =>
    startAdminGateway(s, TOKEN, 'dashcons:', {
      plans: { starter: { perMinute: 5, perDay: 100 }, growth: { perMinute: 50, perDay: 5000 } },
      anonymous: { perMinute: 1000 },
    }),
});
const chromium = useBrowser();

const HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">';
const LONG = `Umbrella${'x'.repeat(192)}`;
/** Acme's own limits end in a week: in force now. */
const ACME_UNTIL = new Date(Date.now() + 7 * 86_400_000).toISOString();
const keyIds: Record<string, string> = {};
/** Each key's plaintext, by the same label. */
const keyTexts: Record<string, string> = {};

async function admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${stack.gw.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function made(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const r = await admin(method, path, body);
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  return r.body;
}

/** The rows of a table a person sees (visible ones), as their cells' text. */
async function visibleRows(page: Page, table = '#consumers-table'): Promise<string[][]> {
  const rows = page.locator(`${table} tbody tr:visible`);
  const out: string[][] = [];
  for (let i = 0, n = await rows.count(); i < n; i++) out.push((await rows.nth(i).locator('td').allInnerTexts()).map((t) => t.trim()));
  return out;
}

/** The consumers table's visible rows, as their first cell (the name). */
const names = async (page: Page) => (await visibleRows(page)).map((r) => r[0]);

/** Opens the list (a fresh read) and waits for its table. */
async function openList(page: Page, hash = '#/consumers'): Promise<void> {
  await page.goto(`${stack.gw.adminUrl}/${hash}`);
  await page.locator('#consumers-table').waitFor();
}

/** The rendered width of each matching element, in document order (the function runs in the browser). */
async function widths(page: Page, selector: string): Promise<number[]> {
  return page.evaluate(
    (sel) =>
      [
        ...(
          globalThis as unknown as { document: { querySelectorAll(s: string): Iterable<{ getBoundingClientRect(): { width: number } }> } }
        ).document.querySelectorAll(sel),
      ].map((el) => el.getBoundingClientRect().width),
    selector,
  );
}

beforeAll(async () => {
  await made('POST', '/consumers', {
    id: 'acme',
    name: 'Acme Corp',
    plan: 'growth',
    metadata: { crm: 'sf-0042', region: 'eu-west' },
    maxKeys: 4,
    perDay: 20_000,
    limitsExpiresAt: ACME_UNTIL,
    limitsReason: 'launch week',
    scopes: ['categories', 'service:petstore'],
    allowedCidrs: ['203.0.113.0/24', '2001:db8::/32'],
  });
  await made('POST', '/consumers', { id: 'globex', name: 'Globex', plan: 'starter', maxKeys: 1 });
  await made('POST', '/consumers', { id: 'initech', name: 'Initech', plan: 'starter', maxKeys: 4, perMonth: 90_000 });
  await made('POST', '/consumers', { id: 'zhostile', name: HOSTILE, plan: 'starter' });
  await made('POST', '/consumers', { id: 'zlong', name: LONG, plan: 'growth', metadata: { note: `n${'y'.repeat(255)}` } });
  for (const [label, body] of [
    ['acmeProd', { plan: 'starter', name: 'acme-prod', consumer: 'acme' }],
    ['acmeStaging', { plan: 'starter', name: 'acme-staging', consumer: 'acme' }],
    ['acmeOld', { plan: 'starter', name: 'acme-old', consumer: 'acme' }],
    ['globexProd', { plan: 'growth', name: 'globex-prod', consumer: 'globex' }],
    ['loose', { plan: 'growth', name: 'no-consumer' }],
  ] as const) {
    const k = await made('POST', '/keys', body);
    keyIds[label] = String(k.id);
    keyTexts[label] = String(k.key);
  }
  // A revoked key stays listed on the consumer's page but no longer counts against maxKeys.
  await made('POST', `/keys/${keyIds.acmeOld}/revoke`, {});
});

describe('the consumers page in a browser', () => {
  let context: BrowserContext;
  let page: Page;
  let violations: string[] = [];

  beforeAll(async () => {
    ({ context, page, violations } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN));
  });
  afterAll(async () => {
    await context?.close();
    // Nothing on these pages breaks the strict Content-Security-Policy (no inline script or style).
    expect(violations).toEqual([]);
  });

  it('lists each consumer as a person reads it: name, id, plan, status, keys of maxKeys, the pool limits in force', async () => {
    await page.goto(`${stack.gw.adminUrl}/#/overview`);
    await page.locator('[data-nav=consumers]').click();
    await page.locator('#consumers-table').waitFor();
    expect(await page.locator('[data-nav].current').allInnerTexts()).toEqual(['Consumers']);
    expect(await visibleRows(page)).toEqual([
      // Acme's own day limit is in force (until next week): 20,000 a day over its plan's 5,000.
      ['Acme Corp', 'acme', 'growth', 'active', '2 of 4', '50/min · 20,000/day'],
      ['Globex', 'globex', 'starter', 'active', '1 of 1', '5/min · 100/day'],
      ['Initech', 'initech', 'starter', 'active', '0 of 4', '5/min · 100/day · 90,000/month'],
      [HOSTILE, 'zhostile', 'starter', 'active', '0', '5/min · 100/day'],
      [LONG, 'zlong', 'growth', 'active', '0', '50/min · 5,000/day'],
    ]);
    expect(await page.locator('#consumers-loaded').innerText()).toBe('5 consumers loaded.');
    expect(await page.locator('#consumers-more').count()).toBe(0);
    await shot(page, 'consumers-list');
  });

  it("draws each consumer's keys as a bar as wide as its share of maxKeys, from one request for the page", async () => {
    const asked: string[] = [];
    const onRequest = (r: { url(): string }) => void asked.push(new URL(r.url()).pathname);
    page.on('request', onRequest);
    await openList(page);
    await page.reload();
    await page.locator('#consumers-table').waitFor();
    page.off('request', onRequest);
    // The list's answer carries each key count: no request per row.
    expect(asked.filter((p) => p.startsWith('/consumers'))).toEqual(['/consumers']);
    // Acme 2 of 4, Globex 1 of 1, Initech 0 of 4; the others have no maxKeys, so no bar.
    const bars = await widths(page, '#consumers-table .keys-of-max .bar');
    const fills = await widths(page, '#consumers-table .keys-of-max .bar > span');
    expect(bars).toHaveLength(3);
    for (const w of bars) expect(w).toBeGreaterThan(50);
    expect(Math.abs(fills[0]! / bars[0]! - 0.5)).toBeLessThan(0.03);
    expect(Math.abs(fills[1]! / bars[1]! - 1)).toBeLessThan(0.03);
    expect(fills[2]!).toBeLessThan(1);
    // Each bar sits in its own row's keys cell, above the words it draws.
    const acmeCell = page.locator('#consumers-table tbody tr').nth(0).locator('.keys-of-max');
    const [barBox, cellBox] = await Promise.all([acmeCell.locator('.bar').boundingBox(), acmeCell.boundingBox()]);
    expect(barBox!.height).toBeGreaterThan(4);
    expect(barBox!.y).toBeGreaterThanOrEqual(cellBox!.y);
    expect(barBox!.y + barBox!.height).toBeLessThan(cellBox!.y + cellBox!.height);
  });

  it('the search box asks the API (GET /consumers?q=) by name, id or metadata value as it is typed, and a reload keeps it', async () => {
    await openList(page);
    const search = page.locator('#consumer-search');
    await search.fill('ACME');
    await expect.poll(() => names(page)).toEqual(['Acme Corp']);
    await shot(page, 'consumers-search');
    // A metadata value, an id's start (ids are exact: case counts), a piece of a name.
    await search.fill('sf-0042');
    await expect.poll(() => names(page)).toEqual(['Acme Corp']);
    await search.fill('glob');
    await expect.poll(() => names(page)).toEqual(['Globex']);
    await search.fill('GLOB');
    await expect.poll(() => names(page)).toEqual(['Globex']);
    await search.fill('init');
    await expect.poll(() => names(page)).toEqual(['Initech']);
    expect(await page.locator('#consumers-loaded').innerText()).toBe('1 consumer matches.');
    // Text, never a pattern: ".*" matches nothing; markup in a name is found as the text it is.
    await search.fill('.*');
    await expect.poll(() => names(page)).toEqual([]);
    expect(await page.locator('#consumers-none').innerText()).toBe('No consumers match.');
    await search.fill('<img');
    await expect.poll(() => names(page)).toEqual([HOSTILE]);
    // The search is in the address: a reload shows the same rows.
    await search.fill('globex');
    await expect.poll(() => page.evaluate(() => (globalThis as unknown as { location: { hash: string } }).location.hash)).toBe('#/consumers?q=globex');
    await page.reload();
    await page.locator('#consumers-table').waitFor();
    expect(await names(page)).toEqual(['Globex']);
    expect(await page.locator('#consumer-search').inputValue()).toBe('globex');
    await search.fill('');
    await expect.poll(() => names(page)).toHaveLength(5);
  });

  it("a consumer's page: its keys (each linking to the key's page), its limits, scopes and allowed addresses", async () => {
    await openList(page);
    await page.locator('#consumers-table a', { hasText: 'Acme Corp' }).click();
    await page.locator('#consumer-keys').waitFor();
    expect(await page.locator('#view h1').innerText()).toBe('Acme Corp');
    expect(await page.locator('#consumer-status-badge').innerText()).toBe('active');
    expect(await visibleRows(page, '#consumer-keys')).toEqual(
      [
        ['acme-old', keyIds.acmeOld, 'revoked', 'starter'],
        ['acme-prod', keyIds.acmeProd, 'active', 'starter'],
        ['acme-staging', keyIds.acmeStaging, 'active', 'starter'],
      ].sort((a, b) => (a[1]! < b[1]! ? -1 : 1)),
    );
    expect(await visibleRows(page, '#consumer-limits')).toEqual([
      ['minute', '50', '-', '50'],
      ['day', '5,000', '20,000', '20,000'],
      ['month', '-', '-', '-'],
    ]);
    expect(await page.locator('#consumer-limits-note').innerText()).toContain('Its own limits: launch week.');
    expect(await page.locator('#consumer-scopes li').allInnerTexts()).toEqual(['categories', 'service:petstore']);
    expect(await page.locator('#consumer-cidrs li').allInnerTexts()).toEqual(['203.0.113.0/24', '2001:db8::/32']);
    const tiles = await page.locator('.tiles .tile').allInnerTexts();
    expect(tiles.map((t) => t.replace(/\s+/g, ' ').trim())).toEqual([
      '2 keys (not revoked) of at most 4',
      '50 per minute, pooled',
      '20,000 per day, pooled (its own)',
    ]);
    const [tileBar, tileFill] = await Promise.all([widths(page, '.tiles .bar'), widths(page, '.tiles .bar > span')]);
    expect(Math.abs(tileFill[0]! / tileBar[0]! - 0.5)).toBeLessThan(0.03);
    await shot(page, 'consumers-detail');

    // A key's link opens the existing key page, which links back to its consumer.
    await page.locator('#consumer-keys a', { hasText: 'acme-prod' }).click();
    await expect.poll(() => page.locator('#view h1').textContent()).toBe('acme-prod');
    expect(page.url()).toBe(`${stack.gw.adminUrl}/#/keys/${keyIds.acmeProd}`);
    // Its Key table names the consumer, a link; its plan is said to be its own, the consumer's in force.
    const fieldRow = (name: string) => page.locator('#view tr', { has: page.locator('th', { hasText: new RegExp(`^${name}$`) }) }).locator('td');
    expect(await fieldRow('consumer').innerText()).toBe('acme');
    expect(await fieldRow('plan').innerText()).toBe("starter (its own; while it belongs to a consumer, the consumer's plan is in force)");
    await shot(page, 'consumers-key-page');
    await page.locator(`#view a[href="#/consumers/acme"]`).click();
    await page.locator('#consumer-keys').waitFor();
    expect(await page.locator('#view h1').innerText()).toBe('Acme Corp');
  });

  it("a consumer's page draws its pool windows (used of limit) as bars after real traffic through the gateway", async () => {
    // Globex (starter: 5 a minute, 100 a day): 3 requests of its key through the gateway's own listener.
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`http://127.0.0.1:${stack.gw.port}/v1/things`, { headers: { authorization: `Bearer ${keyTexts.globexProd}` } });
      await res.arrayBuffer();
      expect(res.status).toBe(200);
    }
    await page.goto(`${stack.gw.adminUrl}/#/consumers/globex`);
    await expect.poll(() => page.locator('#view h1').textContent()).toBe('Globex');
    await page.locator('#consumer-windows').waitFor();
    expect((await visibleRows(page, '#consumer-windows')).map((r) => r.slice(0, 2))).toEqual([
      ['minute', '3 of 5'],
      ['day', '3 of 100'],
    ]);
    const [bars, fills] = await Promise.all([widths(page, '#consumer-windows .bar'), widths(page, '#consumer-windows .bar > span')]);
    expect(bars).toHaveLength(2);
    for (const w of bars) expect(w).toBeGreaterThan(50);
    expect(Math.abs(fills[0]! / bars[0]! - 0.6)).toBeLessThan(0.02);
    expect(Math.abs(fills[1]! / bars[1]! - 0.03)).toBeLessThan(0.02);
    await shot(page, 'consumers-pool-windows');
  });

  it('Suspend asks first (a dismissed one changes nothing), then shows the new status; the list reads suspended after a reload', async () => {
    await page.goto(`${stack.gw.adminUrl}/#/consumers/acme`);
    await page.locator('#consumer-suspend').waitFor();
    const posts: string[] = [];
    page.on('request', (r) => void (r.method() === 'POST' && posts.push(new URL(r.url()).pathname)));
    const asked: string[] = [];
    page.once('dialog', (d) => {
      asked.push(d.message());
      void d.dismiss();
    });
    await page.locator('#consumer-suspend').click();
    await expect.poll(() => asked.length).toBe(1);
    expect(asked[0]).toContain('Suspend Acme Corp?');
    expect(asked[0]).toContain('403 consumer_suspended');
    expect(await page.locator('#consumer-status-badge').innerText()).toBe('active');
    expect(posts).toEqual([]);
    expect((await admin('GET', '/consumers/acme')).body.status).toBe('active');

    page.once('dialog', (d) => void d.accept());
    await page.locator('#consumer-suspend').click();
    await expect.poll(() => page.locator('#consumer-status-badge').textContent()).toBe('suspended');
    expect(posts).toEqual(['/consumers/acme/suspend']);
    expect(await page.locator('#consumer-message').innerText()).toBe('Suspended: its keys get 403 consumer_suspended on every gateway within a second.');
    expect(await page.locator('#consumer-resume').innerText()).toBe('Resume');
    expect(await page.locator('#consumer-suspend').count()).toBe(0);
    const stored = (await admin('GET', '/consumers/acme')).body;
    expect(stored.status).toBe('suspended');
    expect(typeof stored.suspendedAt).toBe('string');
    await shot(page, 'consumers-suspended');

    // The list, read afresh after a reload, says so; the status filter finds it.
    await openList(page);
    await page.reload();
    await page.locator('#consumers-table').waitFor();
    const acme = (await visibleRows(page)).find((r) => r[1] === 'acme');
    expect(acme?.[3]).toBe('suspended');
    const badgeColour = await page
      .locator('#consumers-table tbody tr')
      .nth(0)
      .locator('.badge')
      .evaluate((el) => (globalThis as unknown as { getComputedStyle(e: unknown): { color: string } }).getComputedStyle(el).color);
    expect(badgeColour).toBe('rgb(179, 38, 30)');
    await page.locator('#consumer-status').selectOption('suspended');
    await expect.poll(() => names(page)).toEqual(['Acme Corp']);
    await shot(page, 'consumers-list-suspended');

    // Resume, likewise confirmed.
    await page.goto(`${stack.gw.adminUrl}/#/consumers/acme`);
    page.once('dialog', (d) => void d.accept());
    await page.locator('#consumer-resume').click();
    await expect.poll(() => page.locator('#consumer-status-badge').textContent()).toBe('active');
    expect(await page.locator('#consumer-message').innerText()).toBe('Resumed: its keys are admitted again within a second.');
    expect((await admin('GET', '/consumers/acme')).body.status).toBe('active');
  });

  it('a name with markup is drawn as text, and a 200-character name wraps inside its cell: the page keeps its width', async () => {
    await openList(page);
    // The markup is text: no element of it made, nothing of it run.
    const hostileRow = page.locator('#consumers-table tbody tr', { hasText: 'zhostile' });
    expect(await hostileRow.locator('td').first().innerText()).toBe(HOSTILE);
    expect(await page.locator('#view script, #view img').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    // The long name wraps: its cell stays within its bound (24rem and padding), several lines tall, inside the panel.
    const longCell = page.locator('#consumers-table tbody tr', { hasText: 'zlong' }).locator('td').first();
    const box = await longCell.boundingBox();
    expect(box!.width).toBeLessThanOrEqual(24 * 16 + 20);
    expect(box!.height).toBeGreaterThan(60);
    const [table, panel] = await Promise.all([page.locator('#consumers-table').boundingBox(), page.locator('#consumers-table').locator('..').boundingBox()]);
    expect(table!.x + table!.width).toBeLessThanOrEqual(panel!.x + panel!.width);
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'consumers-hostile');

    // Their own pages too: the title wraps, the markup stays text, the long metadata value wraps in its row.
    await page.goto(`${stack.gw.adminUrl}/#/consumers/zhostile`);
    await page.locator('#consumer-keys-none').waitFor();
    expect(await page.locator('#view h1').innerText()).toBe(HOSTILE);
    expect(await page.locator('#view script, #view img').count()).toBe(0);
    // (Both pages have the same parts: the title tells this one has been drawn.)
    await page.goto(`${stack.gw.adminUrl}/#/consumers/zlong`);
    await expect.poll(() => page.locator('#view h1').innerText()).toBe(LONG);
    const [title, main] = await Promise.all([page.locator('#view h1').boundingBox(), page.locator('main').boundingBox()]);
    expect(title!.x + title!.width).toBeLessThanOrEqual(main!.x + main!.width);
    expect(title!.height).toBeGreaterThan(40);
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'consumers-long-detail');
  });

  it('"Load more" reads the next cursor page; the search finds past it', async () => {
    // 60 more consumers, after the others in id order: the first page (50) ends before the last 15 of them.
    for (let i = 0; i < 60; i++) await made('POST', '/consumers', { id: `zz-filler-${String(i).padStart(2, '0')}`, name: `Filler ${i}`, plan: 'starter' });
    await openList(page);
    expect(await visibleRows(page)).toHaveLength(50);
    expect(await page.locator('#consumers-loaded').innerText()).toBe('50 consumers loaded. More are left to read.');
    await page.locator('#consumers-more').click();
    await expect.poll(() => visibleRows(page).then((r) => r.length)).toBe(65);
    expect(await page.locator('#consumers-loaded').innerText()).toBe('65 consumers loaded.');
    expect(await page.locator('#consumers-more').count()).toBe(0);
    // The search is the API's: it finds a consumer past the first page without loading it.
    await openList(page);
    await page.locator('#consumer-search').fill('Filler 55');
    await expect.poll(() => names(page)).toEqual(['Filler 55']);
    await page.locator('#consumer-search').fill('Filler 5');
    await expect.poll(() => names(page)).toHaveLength(11);
    expect(await page.locator('#consumers-loaded').innerText()).toBe('11 consumers match.');
  });
});

describe('the consumers pages at a phone width', () => {
  it('fit the screen: the list scrolls inside its box, the consumer page wraps', async () => {
    const { context, page } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN, { options: PHONE });
    try {
      await openList(page);
      expect(await overflowsSideways(page)).toBe(false);
      await shot(page, 'consumers-phone-list');
      for (const [id, name] of [
        ['zlong', LONG],
        ['acme', 'Acme Corp'],
      ]) {
        await page.goto(`${stack.gw.adminUrl}/#/consumers/${id}`);
        await expect.poll(() => page.locator('#view h1').innerText()).toBe(name);
        expect(await overflowsSideways(page), id).toBe(false);
      }
      await shot(page, 'consumers-phone-detail');
    } finally {
      await context.close();
    }
  });
});
