// The dashboard's Rollout page in a real browser (Debian's chromium driven by playwright-core), served by the admin
// listener of a gateway on real Redis, over a usage ledger written with known values through the UsageStore: the
// shadow refusals per key over 24 h and 7 d (the busiest key's bar full, the other's as wide as its share), and the
// what-if form filled and submitted, its visible result rows and numbers as worked out by hand; at a phone's width,
// no sideways scrolling. Screenshots go to test-results/screenshots/rollout*.png.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { generateAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { RedisUsageStore } from '../src/usage/store.js';
import { DAY_MS, HOUR_MS } from '../src/util/time.js';
import { openSignedIn, overflowsSideways, shot, startAdminGateway, useBrowser } from './helpers/browser.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const PREFIX = 'roll:';
const stack = useStack({
  redis: true,
  gateway: (s) =>
    startAdminGateway(s, TOKEN, PREFIX, {
      plans: { starter: { perMinute: 60, perDay: 1000 }, growth: { perMinute: 600, perDay: 50_000 } },
    }),
});
const chromium = useBrowser();
const ids: Record<string, string> = {};

/** The visible text of each cell of each row of the table `selector` (the function runs in the browser). */
async function rowsOf(page: Page, selector: string): Promise<string[][]> {
  return page.evaluate((sel) => {
    const doc = (
      globalThis as unknown as { document: { querySelectorAll(s: string): Iterable<{ querySelectorAll(s: string): Iterable<{ innerText: string }> }> } }
    ).document;
    return [...doc.querySelectorAll(`${sel} tbody tr`)].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.innerText.trim()));
  }, selector);
}

/** Rendered widths of the shadow table's bars and their fills. */
async function barWidths(page: Page): Promise<Array<{ bar: number; fill: number }>> {
  return page.evaluate(() => {
    type El = { getBoundingClientRect(): { width: number }; querySelector(s: string): El };
    const doc = (globalThis as unknown as { document: { querySelectorAll(s: string): Iterable<El> } }).document;
    return [...doc.querySelectorAll('#shadow-table .bar')].map((b) => ({
      bar: b.getBoundingClientRect().width,
      fill: b.querySelector('span').getBoundingClientRect().width,
    }));
  });
}

beforeAll(async () => {
  for (const [name, plan, extra] of [
    ['acme-prod', 'starter', {}],
    ['beta-app', 'starter', {}],
    ['gamma-batch', 'starter', { perMinute: 20 }],
    ['delta-big', 'growth', {}],
  ] as const)
    ids[name] = (await stack.gw.composed.admin.issuer.create({ plan, name, ...extra })).record.id;

  // The ledger: hour-aligned instants well inside the last 24 hours and the last 7 days.
  const hourAgo = (n: number) => (Math.floor(Date.now() / HOUR_MS) - n) * HOUR_MS;
  const store = new RedisUsageStore(stack.redis.client(), new Keyspace(PREFIX));
  await store.add(
    [
      // Shadow refusals: acme 12 in the last day and 30 more three days ago (42 in 7 d); beta 8, five days ago.
      { id: ids['acme-prod']!, kind: 's', atMs: hourAgo(2), n: 12 },
      { id: ids['acme-prod']!, kind: 's', atMs: hourAgo(72), n: 30 },
      { id: ids['beta-app']!, kind: 's', atMs: hourAgo(120), n: 8 },
      { id: ids['acme-prod']!, kind: 'a', atMs: hourAgo(3), n: 200 },
      { id: ids['beta-app']!, kind: 'a', atMs: hourAgo(26), n: 90 },
      { id: ids['gamma-batch']!, kind: 'a', atMs: hourAgo(5), n: 70 },
    ],
    8 * DAY_MS,
  );
  // Busiest minutes: acme 50 (three hours ago), beta 45 (26 hours ago), gamma 70 (its own limit), delta 100 (growth).
  await store.raisePeaks(
    [
      { id: ids['acme-prod']!, atMs: hourAgo(3), peak: 50 },
      { id: ids['beta-app']!, atMs: hourAgo(26), peak: 45 },
      { id: ids['gamma-batch']!, atMs: hourAgo(5), peak: 70 },
      { id: ids['delta-big']!, atMs: hourAgo(3), peak: 100 },
    ],
    8 * DAY_MS,
  );
}, 60_000);

describe('the Rollout page', () => {
  it('shows shadow refusals per key over 24 h and 7 d, and answers the what-if form with its result rows', async () => {
    const { context, page } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN, { waitFor: '#chart-24h' });
    try {
      await page.locator('[data-nav="rollout"]').click();
      await page.locator('#shadow-table').waitFor();

      // Each key's consumer ('-': none) beside its name.
      expect(await rowsOf(page, '#shadow-table')).toEqual([
        [ids['acme-prod'], 'acme-prod', '-', 'starter', '12', '42', ''],
        [ids['beta-app'], 'beta-app', '-', 'starter', '0', '8', ''],
      ]);
      // The busiest key's bar full, the other's 8/42 of it (19%, rounded), as drawn.
      const [full, part] = await barWidths(page);
      expect(full!.bar).toBeGreaterThan(50);
      expect(full!.fill).toBeCloseTo(full!.bar, 0);
      expect(part!.fill / part!.bar).toBeCloseTo(0.19, 2);

      // The what-if: the starter plan at 30 a minute over the last 7 days.
      await page.locator('#whatif-plan').selectOption('starter');
      await page.locator('#whatif-minute').fill('30');
      await page.locator('#whatif-form button[type="submit"]').click();
      await page.locator('#whatif-table').waitFor();
      // acme: busiest minute 50, so at least 20; beta: 45, at least 15; gamma: its own 20 a minute keeps it out.
      // delta is on another plan. 35 in all, in two hours.
      // Points, not requests: a request takes its route's cost from a window.
      expect(await page.locator('#whatif-summary').innerText()).toBe('2 of 3 keys affected, 2 hours, at least 35 points refused');
      const rows = await rowsOf(page, '#whatif-table');
      expect(rows.map((r) => r.slice(0, 6))).toEqual([
        [ids['acme-prod'], 'acme-prod', '-', '≥ 20 pts', '-', '20'],
        [ids['beta-app'], 'beta-app', '-', '≥ 15 pts', '-', '15'],
        [ids['gamma-batch'], 'gamma-batch', '-', 'own limit 20 (unaffected)', '-', '0'],
      ]);
      expect(rows[0]![6]).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:00 UTC: peak 50 pts, ≥ 20 pts \(200 requests\)$/);
      expect(await page.locator('#whatif-table thead').innerText()).toContain('points refused at least');
      expect((await page.locator('#whatif-table thead th').allInnerTexts()).slice(0, 3)).toEqual(['key', 'name', 'consumer']);
      expect((await page.locator('#shadow-table thead th').allInnerTexts()).slice(0, 3)).toEqual(['key', 'name', 'consumer']);
      // Every key fits one page: no button for more.
      expect(await page.locator('#whatif-more').isVisible()).toBe(false);
      expect(await page.locator('#whatif-table').isVisible()).toBe(true);
      await shot(page, 'rollout');

      // A bad value is said in words on the page, not a blank result.
      await page.locator('#whatif-minute').fill('');
      await page.locator('#whatif-form button[type="submit"]').click();
      await expect.poll(() => page.locator('#whatif-result .error').innerText()).toContain('nothing to simulate');

      // At a phone's width: the page does not scroll sideways (tables scroll inside their panel).
      await page.setViewportSize({ width: 390, height: 844 });
      await page.locator('#whatif-minute').fill('30');
      await page.locator('#whatif-form button[type="submit"]').click();
      await page.locator('#whatif-table').waitFor();
      expect(await overflowsSideways(page)).toBe(false);
      await shot(page, 'rollout-phone');
    } finally {
      await context.close();
    }
  }, 60_000);

  it('shows the what-if a page of keys at a time: "More keys" adds the next page to the table', async () => {
    const hourAgo = (n: number) => (Math.floor(Date.now() / HOUR_MS) - n) * HOUR_MS;
    const store = new RedisUsageStore(stack.redis.client(), new Keyspace(PREFIX));
    const more: string[] = [];
    for (let i = 0; i < 25; i++) more.push((await stack.gw.composed.admin.issuer.create({ plan: 'growth', name: `growth-${i}` })).record.id);
    // Busiest minutes 700 + i: over a new limit of 650, 50 + i points at least; the page holds 20 keys.
    await store.raisePeaks(
      more.map((id, i) => ({ id, atMs: hourAgo(4), peak: 700 + i })),
      8 * DAY_MS,
    );
    const { context, page } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN, { waitFor: '#chart-24h' });
    try {
      await page.locator('[data-nav="rollout"]').click();
      await page.locator('#whatif-plan').selectOption('growth');
      await page.locator('#whatif-minute').fill('650');
      await page.locator('#whatif-form button[type="submit"]').click();
      await page.locator('#whatif-table').waitFor();
      expect(await page.locator('#whatif-summary').innerText()).toBe('25 of 26 keys affected, 25 hours, at least 1,550 points refused');
      let rows = await rowsOf(page, '#whatif-table');
      expect(rows).toHaveLength(20);
      expect(rows[0]!.slice(1, 6)).toEqual(['growth-24', '-', '≥ 74 pts', '-', '74']);
      const button = page.locator('#whatif-more');
      expect(await button.isVisible()).toBe(true);
      const box = (await button.boundingBox())!;
      const table = (await page.locator('#whatif-table').boundingBox())!;
      // Below the table (a bound: whatever the gap), where a person reaches the end of the list.
      expect(box.y).toBeGreaterThanOrEqual(table.y + table.height);
      await shot(page, 'rollout-more');
      await button.click();
      await expect.poll(async () => (await rowsOf(page, '#whatif-table')).length).toBe(25);
      rows = await rowsOf(page, '#whatif-table');
      expect(rows.map((r) => r[1])).toEqual(Array.from({ length: 25 }, (_, i) => `growth-${24 - i}`));
      expect(await button.isVisible()).toBe(false);
    } finally {
      await context.close();
    }
  }, 60_000);
});
