// The dashboard's Invalid requests page in a real browser, served by the admin listener of a gateway on real Redis
// whose order service validates requests against test/fixtures/openapi/orders-3.0.yaml (shadow under /shadow,
// enforce under /shop): real requests that do not match it, from two keys, then the page's visible rows (operation,
// mode, key, name, count, where the last one failed), no key's secret anywhere on it, and at a phone's width no
// sideways scrolling. Screenshots go to test-results/screenshots/invalid*.png.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { generateAdminToken } from '../src/admin/tokens.js';
import { openSignedIn, overflowsSideways, PHONE, shot, useBrowser } from './helpers/browser.js';
import { startDocumentGateway } from './helpers/openapi-operations.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const stack = useStack({
  redis: true,
  gateway: (s) =>
    startDocumentGateway(
      s,
      TOKEN,
      'inv:',
      [
        { file: 'orders-3.0.yaml', service: 'orders', basePath: '/shadow', validate: 'shadow' },
        { file: 'orders-3.0.yaml', service: 'strict', basePath: '/shop', validate: 'enforce' },
      ],
      { plans: { free: { perMinute: 100, perDay: 1000 } }, services: { orders: { targets: [s.up.url] }, strict: { targets: [s.up.url] } } },
    ),
});
const chromium = useBrowser();
const keys: Record<string, { id: string; key: string }> = {};

/** The visible text of each cell of each row of the tables under `selector` (the function runs in the browser). */
async function rowsOf(page: Page, selector: string): Promise<string[][]> {
  return page.evaluate((sel) => {
    const doc = (
      globalThis as unknown as { document: { querySelectorAll(s: string): Iterable<{ querySelectorAll(s: string): Iterable<{ innerText: string }> }> } }
    ).document;
    return [...doc.querySelectorAll(`${sel} tbody tr`)].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.innerText.trim()));
  }, selector);
}

beforeAll(async () => {
  for (const name of ['acme-mobile', 'beta-web']) {
    const made = await stack.gw.composed.admin.issuer.create({ plan: 'free', name });
    keys[name] = { id: made.record.id, key: made.key };
  }
  const send = (name: string, path: string, init: RequestInit = {}) =>
    fetch(`${stack.gw.url}${path}`, { ...init, headers: { authorization: `Bearer ${keys[name]!.key}`, 'content-type': 'application/json', ...init.headers } });
  // acme: three orders with an unknown field (shadow: proxied), one with no lines; beta: one lookup by a bad id.
  for (let i = 0; i < 3; i++)
    expect(
      (
        await send('acme-mobile', '/shadow/orders', {
          method: 'POST',
          body: '{"customer":{"email":"a@b.co"},"lines":[{"sku":"AB-1","quantity":1}],"total":1,"coupon":"X"}',
        })
      ).status,
    ).toBe(200);
  expect((await send('acme-mobile', '/shadow/orders', { method: 'POST', body: '{"customer":{"email":"a@b.co"},"total":1}' })).status).toBe(200);
  expect((await send('beta-web', '/shop/orders/abc', { headers: { 'x-client-version': '1.0' } })).status).toBe(400);
  // A valid request is not listed.
  expect((await send('beta-web', '/shadow/orders/5', { headers: { 'x-client-version': '1.0' } })).status).toBe(200);
  await stack.gw.composed.flushUsage();
}, 60_000);

describe('the Invalid requests page', () => {
  it('lists who sends invalid requests to which operation, with counts and where the last one failed', async () => {
    const { context, page, violations } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN);
    try {
      await page.locator('[data-nav="invalid"]').click();
      await page.locator('.invalid-operation').first().waitFor();
      const headings = await page.locator('.invalid-operation h2').allInnerTexts();
      expect(headings).toEqual(['createOrder', 'getOrder']);
      const panels = page.locator('.invalid-operation');
      expect(await panels.nth(0).locator('p').first().innerText()).toBe('shadow POST /shadow/orders · service orders');
      expect(await panels.nth(1).locator('p').first().innerText()).toBe('enforce GET /shop/orders/:orderId · service strict');
      const rows = await rowsOf(page, '.invalid-operation');
      // Each key's consumer in its own column ('-': none).
      expect(rows.map((r) => [r[0], r[1], r[2], r[3], r[5]])).toEqual([
        [keys['acme-mobile']!.id, 'acme-mobile', '-', '4', '/body/lines'],
        [keys['beta-web']!.id, 'beta-web', '-', '1', '/path/orderId'],
      ]);
      expect(rows[0]![4]).not.toBe('-');
      expect(await page.locator('main').innerText()).toContain('more validated operations had no invalid request.');
      const text = await page.locator('body').innerText();
      for (const k of Object.values(keys)) expect(text).not.toContain(k.key);
      expect(violations).toEqual([]);
      await shot(page, 'invalid');
    } finally {
      await context.close();
    }
  }, 60_000);

  it('fits a phone without sideways scrolling', async () => {
    const { context, page } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN, { options: PHONE });
    try {
      await page.goto(`${stack.gw.adminUrl}/#/invalid`);
      await page.locator('.invalid-operation').first().waitFor();
      expect(await overflowsSideways(page)).toBe(false);
      await shot(page, 'invalid-phone');
    } finally {
      await context.close();
    }
  }, 60_000);
});
