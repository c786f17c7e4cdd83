// The dashboard in a real browser (Debian's chromium driven by playwright-core), served by the admin listener of a
// gateway composed as `tollgate serve` composes it, on real Redis, with real traffic: sign in (a wrong token is
// refused), the overview's charts render with data, find a key, watch its usage chart, rotate it and see the new key
// once, revoke it and see /v1 refuse it, the deprecated routes with their callers and the CSV export, sign out; every
// page at a phone's width without sideways scrolling. Screenshots of each page go to test-results/screenshots/.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { composeGateway } from '../src/compose.js';
import { Metrics } from '../src/observability/metrics.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = new URL('../test-results/screenshots/', import.meta.url);
const TOKEN = generateAdminToken();
let redis: TestRedis;
let up: TestUpstream;
let gw: RunningGateway;
let browser: Browser;
let acme: { id: string; key: string };

async function call(key: string, path = '/v1/categories'): Promise<number> {
  const res = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

async function adminPost(path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${gw.adminUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return (await res.json()) as Record<string, unknown>;
}

async function signIn(page: Page, token = TOKEN): Promise<void> {
  await page.goto(`${gw.adminUrl}/`);
  await page.locator('#token').fill(token);
  await page.locator('#sign-in-form button').click();
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: new URL(`${name}.png`, SHOTS).pathname, fullPage: true });
}

/** Whether the page scrolls sideways (it must not, at a phone's width). The function runs in the browser. */
async function overflowsSideways(page: Page): Promise<boolean> {
  return page.evaluate(() => {
    // The browser's globals, typed here: the tests compile without the DOM library (it would retype fetch for Node).
    const browser = globalThis as unknown as { document: { documentElement: { scrollWidth: number } }; innerWidth: number };
    return browser.document.documentElement.scrollWidth > browser.innerWidth + 1;
  });
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  redis = await TestRedis.start();
  up = await TestUpstream.start();
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: 'dash:', commandTimeoutMs: 2000 },
    admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    plans: { starter: { perMinute: 5, perDay: 100 }, growth: { perMinute: 50, perDay: 5000 } },
    anonymous: { perMinute: 1000 },
    usage: { flushIntervalMs: 200 },
    routes: [
      { method: 'GET', path: '/v1/pets/:petId', deprecation: '2026-01-01T00:00:00Z', sunset: '2099-06-01T00:00:00Z', link: 'https://example.com/migrate' },
    ],
  });
  const gateway = await composeGateway({ config, logger: silentLogger, metrics: new Metrics(), upstreamCheckTimeoutMs: 500 });
  gw = await startGateway({ gateway, logger: silentLogger });
  // Traffic: acme uses its quota and gets refused; beta calls the deprecated route.
  const a = await adminPost('/keys', { plan: 'starter', name: 'acme-prod', metadata: { customer: 'c_42' } });
  acme = { id: String(a.id), key: String(a.key) };
  for (let i = 0; i < 8; i++) await call(acme.key);
  const b = await adminPost('/keys', { plan: 'growth', name: 'beta-app' });
  for (let i = 0; i < 3; i++) expect(await call(String(b.key), `/v1/pets/${i}`)).toBe(200);
  await adminPost('/keys', { plan: 'growth', name: 'gamma-batch' });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await gw?.shutdown();
  await up?.close();
  await redis?.stop();
});

describe('the dashboard in a browser', () => {
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
  });
  afterAll(async () => context?.close());

  it('refuses a wrong token, then signs in with an HttpOnly, SameSite=Strict session cookie', async () => {
    await signIn(page, generateAdminToken());
    await expect.poll(() => page.locator('#sign-in-error').textContent()).toBe('That token is not valid.');
    await shot(page, 'sign-in');
    await signIn(page);
    await page.locator('#chart-24h canvas').first().waitFor();
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: 'tollgate_session', httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(cookie!.expires).toBeGreaterThan(Date.now() / 1000 + 3600);
    expect(cookie!.value).not.toContain(TOKEN);
  });

  it('the overview shows the traffic in its tiles and charts, Redis and the plans', async () => {
    await page.goto(`${gw.adminUrl}/#/overview`);
    await page.locator('#chart-7d canvas').first().waitFor();
    const tiles = await page.locator('.tile').allTextContents();
    // acme: 5 admitted and 3 refused; beta: 3 admitted.
    expect(tiles).toContain('8requests, 24 h');
    expect(tiles.some((t) => /^[1-9]\d*rate limited, 24 h$/.test(t) || /^[1-9]\d*banned, 24 h$/.test(t))).toBe(true);
    expect(await page.locator('#redis-state').textContent()).toBe('ok');
    for (const id of ['#chart-24h', '#chart-7d']) {
      const box = await page.locator(`${id} canvas`).first().boundingBox();
      expect(box!.width).toBeGreaterThan(200);
      expect(box!.height).toBeGreaterThan(100);
    }
    expect(await page.locator('table').last().textContent()).toContain('starter');
    await shot(page, 'overview');
  });

  it('the overview says how old its usage figures are, and the figures stay those of one computation for a minute', async () => {
    await page.goto(`${gw.adminUrl}/#/overview`);
    const line = page.locator('#figures-as-of');
    await line.waitFor();
    const asOf = /^Usage figures as of (\d{1,2}:\d{2}:\d{2}(?: [AP]M)?) \((\d+) s ago\)$/;
    const first = asOf.exec(await line.innerText());
    expect(first, await line.innerText()).not.toBeNull();
    // Seen: a line of text between the Redis state and the tiles, not hidden or zero-sized.
    const [box, redisBox, tilesBox] = await Promise.all([line.boundingBox(), page.locator('#redis-state').boundingBox(), page.locator('.tiles').boundingBox()]);
    expect(box!.width).toBeGreaterThan(200);
    expect(box!.height).toBeGreaterThan(8);
    expect(box!.y).toBeGreaterThan(redisBox!.y);
    expect(box!.y + box!.height).toBeLessThanOrEqual(tilesBox!.y);
    // Opened again 2 s later: the same figures (computed once, shared), now older.
    await new Promise((r) => setTimeout(r, 2100));
    await page.reload();
    await line.waitFor();
    const again = asOf.exec(await line.innerText());
    expect(again![1]).toBe(first![1]);
    expect(Number(again![2])).toBeGreaterThanOrEqual(Number(first![2]) + 2);
    await shot(page, 'overview-figures-as-of');
  });

  it('finds a key, shows its usage chart, rotates it (the new key once) and revokes it', async () => {
    await page.goto(`${gw.adminUrl}/#/keys`);
    await page.locator('#key-search').fill('acme');
    await page.locator('.filters button').click();
    await expect.poll(() => page.locator('#keys-table tbody tr').count()).toBe(1);
    expect(await page.locator('#keys-table tbody').textContent()).toContain('5 / 100');
    await shot(page, 'keys');
    await page.locator('#keys-table tbody a').click();
    await page.locator('#key-chart canvas').first().waitFor();
    expect(await page.locator('#view h1').textContent()).toBe('acme-prod');
    expect(await page.locator('.tiles').textContent()).toContain('requests, 24 h');
    await shot(page, 'key');

    page.once('dialog', (d) => void d.accept());
    await page.locator('button', { hasText: 'Rotate' }).click();
    await page.locator('#new-key[open]').waitFor();
    const fresh = (await page.locator('#new-key-value').textContent())!;
    expect(fresh).toMatch(/^tg_[0-9A-Za-z]+$/);
    await shot(page, 'rotated');
    await page.locator('#new-key-close').click();
    await expect.poll(() => page.locator('#new-key-value').textContent()).toBe('');
    expect(await page.content()).not.toContain(fresh);
    expect(await call(acme.key)).toBe(401);
    // The new key authenticates (its id's windows are as the old key left them: spent, so 429 rather than 200).
    expect(await call(fresh)).not.toBe(401);

    page.once('dialog', (d) => void d.accept());
    await page.locator('button', { hasText: 'Revoke' }).click();
    await expect.poll(() => page.locator('#key-status-badge').textContent()).toBe('revoked');
    await expect.poll(() => call(fresh), { timeout: 2000 }).toBe(401);
  });

  it('lists deprecated routes with their callers and exports them as CSV', async () => {
    await page.goto(`${gw.adminUrl}/#/deprecated`);
    await page.locator('.deprecated-route').first().waitFor();
    const text = await page.locator('.deprecated-route').textContent();
    expect(text).toContain('GET /v1/pets/:petId');
    expect(text).toMatch(/sunset in \d+ d \d+ h/);
    await expect.poll(async () => (await page.locator('.deprecated-route tbody tr').count()) >= 1, { timeout: 5000 }).toBe(true);
    await shot(page, 'deprecated');
    const csv = await context.request.get(`${gw.adminUrl}/routes/deprecated.csv`);
    expect(csv.status()).toBe(200);
    expect((await csv.text()).split('\r\n')[1]).toMatch(/^GET,\/v1\/pets\/:petId,2026-01-01T00:00:00Z,2099-06-01T00:00:00Z,key_\w+,3,/);
  });

  it('a change with the session cookie from another origin is refused; sign out ends the session', async () => {
    const cookie = (await context.cookies())[0]!;
    const foreign = await fetch(`${gw.adminUrl}/keys`, {
      method: 'POST',
      headers: { cookie: `${cookie.name}=${cookie.value}`, origin: 'http://evil.example', 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'starter' }),
    });
    expect(foreign.status).toBe(403);
    await page.locator('#sign-out').click();
    await page.locator('#sign-in').waitFor();
    expect(await page.locator('#sign-in-error').textContent()).toBe('Signed out.');
    const after = await fetch(`${gw.adminUrl}/keys`, { headers: { cookie: `${cookie.name}=${cookie.value}` } });
    expect(after.status).toBe(401);
  });
});

describe('the dashboard at a phone width', () => {
  it('every page fits the screen (no sideways scrolling)', async () => {
    const context = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    try {
      const page = await context.newPage();
      await signIn(page);
      await page.locator('#chart-24h canvas').first().waitFor();
      expect(await overflowsSideways(page)).toBe(false);
      await shot(page, 'phone-overview');
      for (const [hash, ready] of [
        ['#/keys', '#keys-table'],
        ['#/deprecated', '.deprecated-route'],
      ] as const) {
        await page.goto(`${gw.adminUrl}/${hash}`);
        await page.locator(ready).first().waitFor();
        expect(await overflowsSideways(page), hash).toBe(false);
      }
      await page.goto(`${gw.adminUrl}/#/keys/${acme.id}`);
      await page.locator('#key-chart canvas').first().waitFor();
      expect(await overflowsSideways(page)).toBe(false);
      await shot(page, 'phone-key');
    } finally {
      await context.close();
    }
  });
});
