// The dashboard's Events page in a real browser (Debian's chromium driven by playwright-core), served by the admin
// listener of a gateway composed as `tollgate serve` composes it, on real Redis: webhook endpoints whose deliveries
// failed (a consumer's with three events given up after their last attempt, a configured one its receiver disabled
// with 410) listed as a person reads them, a healthy one only counted; the undelivered events under their endpoint;
// Replay queues them again and the count on screen goes to 0; Enable lifts the disabled one. The events are put in the
// queues with the delivery's own scripts (src/events/endpoint-queue.ts). Screenshots go to
// test-results/screenshots/events*.png and /tmp/events-dashboard.png.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { generateAdminToken } from '../src/admin/tokens.js';
import { EndpointQueue } from '../src/events/endpoint-queue.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { PHONE, openSignedIn, overflowsSideways, shot, startAdminGateway, useBrowser } from './helpers/browser.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const PREFIX = 'dashevents:';
const ks = new Keyspace(PREFIX);
const secret = () => `whsec_${randomBytes(32).toString('base64')}`;
const stack = useStack({
  redis: true,
  client: true,
  gateway: (s) =>
    startAdminGateway(
      s,
      TOKEN,
      PREFIX,
      {
        portal: { webhooks: true },
        events: {
          allowTargets: ['127.0.0.0/8'],
          webhooks: [{ id: 'billing', url: 'https://billing.example.com/tollgate', secret: secret(), types: ['quota.threshold'] }],
        },
      },
      // No events thread: it would pick the registrations up at once and claim the events put in their queues here.
      { delivery: false },
    ),
});
const chromium = useBrowser();

let failing = '';
let healthy = '';

async function admin(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${stack.gw.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const answer = (await res.json()) as Record<string, unknown>;
  expect(res.status, JSON.stringify(answer)).toBeLessThan(300);
  return answer;
}

/** The visible text of each cell of the failing endpoints' table, row by row. */
async function rows(page: Page): Promise<string[][]> {
  const trs = page.locator('#events-failing tbody tr');
  const out: string[][] = [];
  for (let i = 0, n = await trs.count(); i < n; i++) out.push((await trs.nth(i).locator('td').allInnerTexts()).map((t) => t.trim().replace(/\s+/g, ' ')));
  return out;
}

beforeAll(async () => {
  await admin('POST', '/consumers', { id: 'acme', name: 'Acme Corp', plan: 'free' });
  failing = String((await admin('POST', '/consumers/acme/webhooks', { url: 'http://127.0.0.1:9/acme-hooks', types: ['key.banned', 'quota.threshold'] })).id);
  healthy = String((await admin('POST', '/consumers/acme/webhooks', { url: 'http://127.0.0.1:9/acme-audit' })).id);
  // Acme's endpoint: three events given up after their last attempt (HTTP 503), none still queued.
  const queue = new EndpointQueue(stack.client, ks, failing);
  const t0 = Date.now() - 3_600_000;
  for (let i = 1; i <= 3; i++) {
    const ce = {
      specversion: '1.0',
      id: `quota-threshold:consumer:acme:day:2026-11-29:${i * 30}`,
      type: 'quota.threshold',
      subject: 'consumer:acme',
      time: new Date(t0).toISOString(),
      data: { percent: i * 30 },
    };
    await queue.enqueue(ce.id, JSON.stringify(ce), t0 + i);
  }
  for (const e of (await queue.claim(t0 + 10, 3)).events) await queue.dead(e, { now: t0 + 20, error: 'HTTP 503', status: 503 });
  // The healthy one delivered one event.
  const ok = new EndpointQueue(stack.client, ks, healthy);
  await ok.enqueue('key-banned:key_1:1:1', JSON.stringify({ id: 'key-banned:key_1:1:1', type: 'key.banned' }), t0);
  for (const e of (await ok.claim(t0 + 10, 1)).events) await ok.delivered(e, t0 + 20, 204);
  // The configured endpoint's receiver said 410: disabled.
  await new EndpointQueue(stack.client, ks, 'billing').disable('the receiver answered 410 Gone', t0 + 30);
});

describe('the Events page', () => {
  let context: BrowserContext;
  let page: Page;
  let violations: string[] = [];

  beforeAll(async () => {
    ({ context, page, violations } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN));
  });
  afterAll(async () => {
    await context?.close();
    // Nothing on the page breaks the strict Content-Security-Policy (no inline script or style).
    expect(violations).toEqual([]);
  });

  it('lists the failing endpoints as a person reads them, with the undelivered events under theirs', async () => {
    const nav = page.locator('#nav a[data-nav="events"]');
    expect(await nav.innerText()).toBe('Events');
    await nav.click();
    await page.locator('#events-failing').waitFor();
    expect(page.url()).toMatch(/#\/events$/);
    expect(await page.locator('#view h1').innerText()).toBe('Events');
    expect(await page.locator('[data-nav].current').allInnerTexts()).toEqual(['Events']);

    expect(await rows(page)).toEqual([
      ['billing https://billing.example.com/tollgate', 'config', 'disabled the receiver answered 410 Gone', '0', '0', '0', '-', 'Replay Enable'],
      [`${failing} http://127.0.0.1:9/acme-hooks`, 'acme', 'failing', '0', '3', '3', 'HTTP 503', 'Replay'],
    ]);
    // Nothing to replay on the configured one: its button is off; the failing one's is on.
    expect(await page.locator('[data-endpoint="billing"] button.replay').isDisabled()).toBe(true);
    expect(await page.locator(`#events-failing [data-endpoint="${failing}"] button.replay`).isEnabled()).toBe(true);
    // The healthy endpoint is not listed, only counted.
    expect(await page.locator(`[data-endpoint="${healthy}"]`).count()).toBe(0);
    expect(await page.locator('#view').innerText()).toContain('1 more endpoint delivers without failures.');

    const panel = page.locator(`.undelivered-events[data-endpoint="${failing}"]`);
    expect(await panel.locator('h2').innerText()).toBe(`Undelivered to ${failing}`);
    const events = await panel
      .locator('tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) =>
          [...(tr as unknown as { querySelectorAll(s: string): Iterable<{ textContent: string | null }> }).querySelectorAll('td')].map((td) =>
            td.textContent?.trim(),
          ),
        ),
      );
    expect(events.map((e) => [e[0], e[1], e[2], e[3], e[5]])).toEqual([
      ['quota-threshold:consumer:acme:day:2026-11-29:30', 'quota.threshold', 'consumer:acme', '1', 'HTTP 503'],
      ['quota-threshold:consumer:acme:day:2026-11-29:60', 'quota.threshold', 'consumer:acme', '1', 'HTTP 503'],
      ['quota-threshold:consumer:acme:day:2026-11-29:90', 'quota.threshold', 'consumer:acme', '1', 'HTTP 503'],
    ]);
    await shot(page, 'events');
    await page.screenshot({ path: '/tmp/events-dashboard-before.png', fullPage: true });
  });

  it('Replay queues the undelivered events again: the count on screen goes to 0', async () => {
    const row = page.locator(`#events-failing [data-endpoint="${failing}"]`);
    expect(await row.locator('td.undelivered').innerText()).toBe('3');
    // Every button is in view: the table needs no sideways scrolling inside its panel at a desktop's width.
    const panel = (await page.locator('#events-failing').locator('xpath=..').boundingBox())!;
    for (const b of await page.locator('#events-failing button').all()) {
      const box = (await b.boundingBox())!;
      expect(box.x + box.width).toBeLessThanOrEqual(panel.x + panel.width);
    }
    await row.locator('button.replay').click();
    await expect.poll(async () => (await row.locator('td.undelivered').innerText()).trim(), { timeout: 5000, interval: 100 }).toBe('0');
    expect(await page.locator('#events-message').innerText()).toBe(`Replayed 3 events of ${failing}: queued again, due now.`);
    expect((await rows(page))[1]).toEqual([`${failing} http://127.0.0.1:9/acme-hooks`, 'acme', 'failing', '3', '0', '3', 'HTTP 503', 'Replay']);
    expect(await row.locator('button.replay').isDisabled()).toBe(true);
    expect(await page.locator(`.undelivered-events[data-endpoint="${failing}"]`).count()).toBe(0);
    // As the queue has it: nothing dead, three queued again, due now.
    expect(await stack.client.zcard(ks.endpointDead(failing))).toBe(0);
    expect(await stack.client.zcard(ks.endpointDue(failing))).toBe(3);
    await shot(page, 'events-replayed');
    await page.screenshot({ path: '/tmp/events-dashboard.png', fullPage: true });
  });

  it('Enable lifts a disabled endpoint', async () => {
    const row = page.locator('#events-failing [data-endpoint="billing"]');
    await row.locator('button.enable').click();
    await expect
      .poll(async () => page.locator('#events-message').innerText(), { timeout: 5000, interval: 100 })
      .toBe('Enabled billing: its queue is delivered again.');
    expect(await page.locator('#events-failing [data-endpoint="billing"]').count()).toBe(0);
    expect(await stack.client.hget(ks.endpointState('billing'), 'disabled')).toBeNull();
  });

  it('fits a phone (no sideways scrolling)', async () => {
    const phone = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN, { options: PHONE });
    try {
      await phone.page.goto(`${stack.gw.adminUrl}/#/events`);
      await phone.page.locator('#events-failing').waitFor();
      expect(await overflowsSideways(phone.page)).toBe(false);
      await shot(phone.page, 'phone-events');
    } finally {
      await phone.context.close();
    }
  });
});
