// What an operator watches before turning bans or request validation to enforce, where they look: would-be bans (bans
// in shadow mode) and requests that failed validation (shadow validation) in the CSV export (GET /usage.csv: the
// would_ban and validation_failed columns) and in the dashboard's overview and key pages, in a real browser, with
// the figures GET /usage gives. A gateway on real Redis whose order service validates against
// test/fixtures/openapi/orders-3.0.yaml in shadow mode, bans in shadow mode; real requests from two keys. Screenshots
// go to test-results/screenshots/watch-*.png.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { generateAdminToken } from '../src/admin/tokens.js';
import { openSignedIn, shot, useBrowser } from './helpers/browser.js';
import { startDocumentGateway } from './helpers/openapi-operations.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const stack = useStack({
  redis: true,
  gateway: (s) =>
    startDocumentGateway(s, TOKEN, 'watch:', [{ file: 'orders-3.0.yaml', service: 'orders', basePath: '/shadow', validate: 'shadow' }], {
      plans: { tiny: { perMinute: 1, perDay: 1000 }, free: { perMinute: 100, perDay: 1000 } },
      ban: { mode: 'shadow', threshold: 2, windowSeconds: 60, durationsSeconds: [600] },
      services: { orders: { targets: [s.up.url] } },
    }),
});
const chromium = useBrowser();
const keys: Record<string, { id: string; key: string }> = {};
/** GET /usage's figures for each key: what the export and the pages must show. */
const usage: Record<string, { wouldBan: number; validationFailed: number }> = {};

async function admin(path: string): Promise<Response> {
  return fetch(`${stack.gw.adminUrl}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
}

/** The value of the tile labelled `label` on the page. */
async function tileValue(page: Page, label: string): Promise<string> {
  const tile = page.locator('.tile', { has: page.locator('.label', { hasText: label }) });
  await tile.waitFor();
  expect(await tile.isVisible()).toBe(true);
  return (await tile.locator('.value').innerText()).trim();
}

beforeAll(async () => {
  keys.shady = await stack.gw.composed.admin.issuer.create({ plan: 'tiny', name: 'shady-batch' }).then((m) => ({ id: m.record.id, key: m.key }));
  keys.sloppy = await stack.gw.composed.admin.issuer.create({ plan: 'free', name: 'sloppy-app' }).then((m) => ({ id: m.record.id, key: m.key }));
  const send = (name: string, path: string, init: RequestInit = {}) =>
    fetch(`${stack.gw.url}${path}`, { ...init, headers: { authorization: `Bearer ${keys[name]!.key}`, 'content-type': 'application/json', ...init.headers } });
  // shady: valid requests past its one-a-minute limit: the 429s strike, and the ban ladder (in shadow) would ban it.
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await send('shady', '/shadow/orders/5', { headers: { 'x-client-version': '1.0' } })).status);
  expect(statuses[0]).toBe(200);
  // Shadow bans refuse nothing: what is refused is refused by the window.
  expect(statuses.slice(1).every((s) => s === 429)).toBe(true);
  // sloppy: three orders that do not match the document (shadow validation: proxied all the same).
  for (let i = 0; i < 3; i++)
    expect((await send('sloppy', '/shadow/orders', { method: 'POST', body: '{"customer":{"email":"a@b.co"},"total":1}' })).status).toBe(200);
  await stack.gw.composed.flushUsage();
  const body = (await (await admin('/usage?sort=id')).json()) as { keys: Array<{ id: string; wouldBan: number; validationFailed: number }> };
  for (const [name, k] of Object.entries(keys)) usage[name] = body.keys.find((x) => x.id === k.id)!;
}, 60_000);

describe('would-be bans and failed validation, where an operator looks', () => {
  it('GET /usage has them (the figures the rest must show)', () => {
    expect(usage.shady!.wouldBan).toBeGreaterThan(0);
    expect(usage.shady!.validationFailed).toBe(0);
    expect(usage.sloppy).toMatchObject({ wouldBan: 0, validationFailed: 3 });
  });

  it('usage.csv has a would_ban and a validation_failed column, before the metadata, for every key and for one key', async () => {
    const text = await (await admin('/usage.csv?sort=id')).text();
    const rows = text
      .trimEnd()
      .split('\r\n')
      .map((l) => l.split(','));
    const header = rows[0]!;
    expect(header.slice(-4)).toEqual(['would_ban', 'validation_failed', 'consumer', 'metadata']);
    const col = (row: string[] | undefined, name: string) => Number(row?.[header.indexOf(name)]);
    for (const [name, k] of Object.entries(keys)) {
      const row = rows.find((r) => r[0] === k.id);
      expect(col(row, 'would_ban'), name).toBe(usage[name]!.wouldBan);
      expect(col(row, 'validation_failed'), name).toBe(usage[name]!.validationFailed);
    }
    const one = (await (await admin(`/usage.csv?key=${keys.sloppy!.id}&granularity=day`)).text()).trimEnd().split('\r\n');
    expect(one[0]).toBe('start,admitted,rate_limited,banned,upstream_failed,shadow_refused,would_ban,validation_failed');
    expect(one.slice(1).reduce((n, l) => n + Number(l.split(',')[7]), 0)).toBe(3);
  });

  it("the overview's tiles show the last 24 hours' would-be bans and failed validations", async () => {
    const { context, page, violations } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN);
    try {
      expect(await tileValue(page, 'would-be bans, 24 h')).toBe(String(usage.shady!.wouldBan));
      expect(await tileValue(page, 'failed validation, 24 h')).toBe('3');
      await shot(page, 'watch-overview');
      expect(violations).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it("each key's page shows its own would-be bans and failed validations", async () => {
    const { context, page, violations } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN);
    try {
      for (const name of ['shady', 'sloppy']) {
        await page.goto(`${stack.gw.adminUrl}/#/keys/${encodeURIComponent(keys[name]!.id)}`);
        // The page of this key (moving between keys changes only the location's hash: wait for its heading).
        const heading = page.getByRole('heading', { name: name === 'shady' ? 'shady-batch' : 'sloppy-app', exact: true });
        await heading.waitFor();
        expect(await heading.isVisible()).toBe(true);
        expect(await tileValue(page, 'would-be bans, 24 h'), name).toBe(String(usage[name]!.wouldBan));
        expect(await tileValue(page, 'failed validation, 24 h'), name).toBe(String(usage[name]!.validationFailed));
        await shot(page, `watch-key-${name}`);
      }
      expect(violations).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
