// The dashboard's Services page in a real browser (Debian's chromium driven by playwright-core, as in
// test/dashboard.test.ts), served by the admin listener of a gateway composed as `tollgate serve` composes it, in
// front of real upstream servers on loopback: a healthy target, a stopped one (ejected after refused requests), a
// service whose only target fails its health checks, and a target holding a request. What a person sees is asserted:
// the visible text of each row, the health bars' rendered widths, the page refreshing itself, no sideways scrolling
// at a phone's width. Screenshots go to test-results/screenshots/services*.png.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerResponse } from 'node:http';
import type { Page } from 'playwright-core';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { composeGateway } from '../src/compose.js';
import { Metrics } from '../src/observability/metrics.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { PHONE, openSignedIn, overflowsSideways, shot, useBrowser } from './helpers/browser.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';

const TOKEN = generateAdminToken();
let healthy: TestUpstream;
let stoppedUrl: string;
let failing: TestUpstream;
let slow: TestUpstream;
let gw: RunningGateway;
const held: ServerResponse[] = [];
let pending: Promise<number>;
const chromium = useBrowser();

/** The visible text of each cell of a service's target rows. */
async function rows(page: Page, service: string): Promise<string[][]> {
  const trs = page.locator(`[data-service="${service}"] tbody tr`);
  const out: string[][] = [];
  for (let i = 0; i < (await trs.count()); i++) out.push((await trs.nth(i).locator('td').allInnerTexts()).map((t) => t.trim().replace(/\s+/g, ' ')));
  return out;
}

/** The rendered width of a service's health bar and of its fill. */
async function barWidths(page: Page, service: string): Promise<{ bar: number; fill: number }> {
  const bar = await page.locator(`[data-service="${service}"] .bar.health`).boundingBox();
  const fill = await page.locator(`[data-service="${service}"] .bar.health > span`).boundingBox();
  return { bar: bar!.width, fill: fill?.width ?? 0 };
}

beforeAll(async () => {
  let stopped: TestUpstream;
  [healthy, stopped, failing, slow] = await Promise.all([TestUpstream.start(), TestUpstream.start(), TestUpstream.start(), TestUpstream.start()]);
  stoppedUrl = stopped.url;
  failing.behaviour = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  slow.behaviour = (_req, res) => void held.push(res);
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    services: {
      catalog: { targets: [healthy.url, stoppedUrl], retries: 1, eject: { consecutiveFailures: 2, forMs: 120_000 } },
      orders: { targets: [failing.url], healthCheck: { path: '/healthz', intervalMs: 100, timeoutMs: 1000, unhealthyAfter: 1, healthyAfter: 1 } },
      search: { targets: [slow.url], balance: 'least-requests' },
    },
    routes: [
      { path: '/orders/*', service: 'orders' },
      { path: '/search/*', service: 'search' },
    ],
    defaultService: 'catalog',
  });
  const gateway = await composeGateway({ config, logger: silentLogger, metrics: new Metrics(), env: {}, keyStages: false });
  gw = await startGateway({ gateway, logger: silentLogger });
  // The stopped target: refused twice (each request retried on the healthy one), then ejected.
  await stopped.close();
  for (let i = 0; i < 4; i++) expect((await fetch(`${gw.url}/items/${i}`)).status).toBe(200);
  // One search request held by its target: in flight.
  pending = fetch(`${gw.url}/search/q`).then((r) => r.status);
  const deadline = Date.now() + 5000;
  while (held.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(held).toHaveLength(1);
  // The failing target has had its first check (the snapshot says so before the page does).
  while (gateway.services.snapshot().find((s) => s.name === 'orders')!.healthy !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}, 60_000);

afterAll(async () => {
  for (const r of held) r.end();
  await gw?.shutdown();
  await Promise.all([healthy, failing, slow].map((u) => u?.close()));
});

describe('the Services page', () => {
  it('shows each service with its targets: healthy, ejected with its errors, unhealthy by its checks, in flight', async () => {
    const { context, page } = await openSignedIn(chromium.browser, gw.adminUrl!, TOKEN);
    try {
      const nav = page.locator('#nav a[data-nav="services"]');
      expect(await nav.innerText()).toBe('Services');
      await nav.click();
      await page.locator('[data-service="search"]').waitFor();
      expect(page.url()).toMatch(/#\/services$/);
      expect(await page.locator('#view h1').innerText()).toBe('Services');
      expect(await page.locator('.service h2').allInnerTexts()).toEqual(['catalog', 'orders', 'search']);

      expect(await page.locator('[data-service="catalog"] .service-summary').innerText()).toBe('1 of 2 targets healthy · round-robin');
      const catalog = await rows(page, 'catalog');
      expect(catalog[0]).toEqual([healthy.url, '1', 'healthy', '0', '0', 'none']);
      expect(catalog[1]!.slice(0, 2)).toEqual([stoppedUrl, '1']);
      expect(catalog[1]![2]).toMatch(/^ejected until \d{1,2}:\d{2}:\d{2}( [AP]M)?$/);
      expect(catalog[1]!.slice(3, 5)).toEqual(['0', '0']);
      expect(catalog[1]![5]).toMatch(/^connection refused \S+( [AP]M)? connection refused \S+( [AP]M)?$/);

      expect(await page.locator('[data-service="orders"] .service-summary').innerText()).toBe('0 of 1 targets healthy · round-robin');
      expect(await page.locator('[data-service="orders"] .service-health .badge').innerText()).toBe('no healthy target: requests get 503');
      const [orders] = await rows(page, 'orders');
      expect(orders!.slice(0, 5)).toEqual([failing.url, '1', 'unhealthy', '0', '0']);
      expect(orders![5]).toMatch(/^health check failed /);

      const [search] = await rows(page, 'search');
      expect(search).toEqual([slow.url, '1', 'healthy', '1', '0', 'none']);
      expect(await page.locator('[data-service="search"] .service-summary').innerText()).toBe('1 of 1 targets healthy · least-requests');

      // The health bars as a person sees them: half, empty, full.
      const bars = { catalog: await barWidths(page, 'catalog'), orders: await barWidths(page, 'orders'), search: await barWidths(page, 'search') };
      expect(bars.catalog.bar).toBeGreaterThan(50);
      expect(Math.abs(bars.catalog.fill - bars.catalog.bar / 2)).toBeLessThan(2);
      expect(bars.orders.fill).toBe(0);
      expect(Math.abs(bars.search.fill - bars.search.bar)).toBeLessThan(2);
      // Each state has a look of its own: healthy, ejected and unhealthy badges differ in colour.
      const colours = await Promise.all(
        ['catalog', 'orders'].map((s) =>
          page
            .locator(`[data-service="${s}"] tbody .badge`)
            .evaluateAll((els) => els.map((e) => (globalThis as unknown as { getComputedStyle(e: unknown): { color: string } }).getComputedStyle(e).color)),
        ),
      );
      expect(new Set(colours.flat()).size).toBe(3);
      await shot(page, 'services');

      // The page refreshes itself: the held request ends and its target's in-flight count drops to 0 without a reload.
      held.shift()!.end('done');
      expect(await pending).toBe(200);
      await expect.poll(async () => (await rows(page, 'search'))[0]![3], { timeout: 8000, interval: 200 }).toBe('0');
    } finally {
      await context.close();
    }
  });

  it('fits a phone (no sideways scrolling)', async () => {
    const { context, page } = await openSignedIn(chromium.browser, gw.adminUrl!, TOKEN, { options: PHONE });
    try {
      await page.goto(`${gw.adminUrl}/#/services`);
      await page.locator('[data-service="search"]').waitFor();
      expect(await overflowsSideways(page)).toBe(false);
      expect((await page.locator('[data-service="catalog"] .service-summary').boundingBox())!.width).toBeGreaterThan(100);
      await shot(page, 'phone-services');
    } finally {
      await context.close();
    }
  });
});
