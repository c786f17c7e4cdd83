// The dashboard in a real browser (Debian's chromium driven by playwright-core), served by the admin listener of a
// gateway composed as `tollgate serve` composes it, on real Redis, with real traffic: sign in (a wrong token is
// refused, and the sign-in page has no nav bar), the overview's charts render with data, the keys' quota bars as wide
// as their share, find a key, its usage chart drawn to the traffic's height, reset its spent windows, rotate it with
// the offered grace and see the new key once while the old one still works, revoke it and see /v1 refuse it, the
// deprecated routes with their callers and the CSV export, sign out; every page at a phone's width without sideways
// scrolling; a slow answer never drawn over the page the user has moved to. What a person sees is measured (rendered boxes, the chart's pixels); screenshots of each page go to
// test-results/screenshots/.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { generateAdminToken } from '../src/admin/tokens.js';
import { PHONE, openPage, openSignedIn, overflowsSideways, shot, signIn, startAdminGateway, useBrowser } from './helpers/browser.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const stack = useStack({
  redis: true,
  gateway: (s) =>
    startAdminGateway(s, TOKEN, 'dash:', {
      plans: { starter: { perMinute: 5, perDay: 100 }, growth: { perMinute: 50, perDay: 5000 } },
      anonymous: { perMinute: 1000 },
      usage: { flushIntervalMs: 200 },
      routes: [
        { method: 'GET', path: '/v1/pets/:petId', deprecation: '2026-01-01T00:00:00Z', sunset: '2099-06-01T00:00:00Z', link: 'https://example.com/migrate' },
      ],
    }),
});
const chromium = useBrowser();
let acme: { id: string; key: string };
let halfKey: { id: string; key: string };

async function call(key: string, path = '/v1/categories'): Promise<number> {
  const res = await fetch(`${stack.gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

async function adminPost(path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${stack.gw.adminUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return (await res.json()) as Record<string, unknown>;
}

async function adminGet(path: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${stack.gw.adminUrl}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await res.json()) as Record<string, unknown>;
}

/** The rendered box of every element matching `selector` (the function runs in the browser). */
async function boxes(page: Page, selector: string): Promise<Array<{ width: number; height: number }>> {
  return page.evaluate((sel) => {
    const browser = globalThis as unknown as {
      document: { querySelectorAll(s: string): Iterable<{ getBoundingClientRect(): { width: number; height: number } }> };
    };
    return [...browser.document.querySelectorAll(sel)].map((el) => {
      const r = el.getBoundingClientRect();
      return { width: r.width, height: r.height };
    });
  }, selector);
}

/**
 * Where the key chart's lines are drawn, read from its canvas's pixels: for each colour, the topmost pixel of it
 * inside the plot area, as a share of the plot area's height above its bottom (0 at the x-axis, 1 at the top); null
 * when no pixel of that colour is there.
 */
async function drawnHeights(page: Page, colours: Record<string, Colour>): Promise<Record<string, number | null>> {
  return page.evaluate((want) => {
    interface Rect {
      left: number;
      top: number;
      width: number;
      height: number;
      bottom: number;
    }
    const browser = globalThis as unknown as {
      document: {
        querySelector(s: string): {
          getBoundingClientRect(): Rect;
          width: number;
          height: number;
          getContext(k: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } };
        };
      };
    };
    const canvas = browser.document.querySelector('#key-chart canvas');
    const over = browser.document.querySelector('#key-chart .u-over').getBoundingClientRect();
    const c = canvas.getBoundingClientRect();
    const sx = canvas.width / c.width;
    const sy = canvas.height / c.height;
    const x0 = Math.round((over.left - c.left) * sx);
    const y0 = Math.round((over.top - c.top) * sy);
    const w = Math.round(over.width * sx);
    const hgt = Math.round(over.height * sy);
    const px = canvas.getContext('2d').getImageData(x0, y0, w, hgt).data;
    const out: Record<string, number | null> = {};
    for (const [name, [r, g, b, run]] of Object.entries(want)) {
      out[name] = null;
      // A row holds the line when `run` of its pixels have its colour (a horizontal line: many, not a stray blend
      // where lines cross).
      for (let y = 0; y < hgt && out[name] === null; y++) {
        let n = 0;
        for (let x = 0; x < w; x++) {
          const i = 4 * (y * w + x);
          if (px[i + 3]! > 200 && Math.abs(px[i]! - r) + Math.abs(px[i + 1]! - g) + Math.abs(px[i + 2]! - b) < 40) n++;
        }
        if (n >= run) out[name] = (hgt - y) / hgt;
      }
    }
    return out;
  }, colours);
}

/** A line's colour (app.js) and how many pixels of a row must have it for the row to hold the line. */
type Colour = [number, number, number, number];
/** The admitted series (sloped: a pixel or two per row) and the hourly cap line (horizontal, dashed). */
const ADMITTED: Colour = [0x24, 0x57, 0xc5, 1];
const CAP_LINE: Colour = [0x5d, 0x6b, 0x7a, 20];

beforeAll(async () => {
  // Traffic: acme uses its quota and gets refused; beta calls the deprecated route.
  const a = await adminPost('/keys', { plan: 'starter', name: 'acme-prod', metadata: { customer: 'c_42' } });
  acme = { id: String(a.id), key: String(a.key) };
  for (let i = 0; i < 8; i++) await call(acme.key);
  const b = await adminPost('/keys', { plan: 'growth', name: 'beta-app' });
  for (let i = 0; i < 3; i++) expect(await call(String(b.key), `/v1/pets/${i}`)).toBe(200);
  await adminPost('/keys', { plan: 'growth', name: 'gamma-batch' });
  // Quota bars: one key at 0% of its day quota, one at 50% (2 of 4), whose busiest hour is half its hourly cap (4).
  await adminPost('/keys', { plan: 'growth', name: 'bar-zero', perDay: 4 });
  const half = await adminPost('/keys', { plan: 'growth', name: 'bar-half', perDay: 4 });
  halfKey = { id: String(half.id), key: String(half.key) };
  for (let i = 0; i < 2; i++) expect(await call(halfKey.key)).toBe(200);
}, 60_000);

describe('the dashboard in a browser', () => {
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    ({ context, page } = await openPage(chromium.browser));
  });
  afterAll(async () => context?.close());

  it('refuses a wrong token, then signs in with an HttpOnly, SameSite=Strict session cookie', async () => {
    await signIn(page, stack.gw.adminUrl, generateAdminToken(), null);
    await expect.poll(() => page.locator('#sign-in-error').textContent()).toBe('That token is not valid.');
    // The sign-in page shows no nav bar (no Sign out before signing in): nothing of it is drawn.
    expect(await page.locator('#nav').isVisible()).toBe(false);
    expect(await page.locator('#sign-out').boundingBox()).toBeNull();
    expect(await boxes(page, '#nav')).toEqual([{ width: 0, height: 0 }]);
    await shot(page, 'sign-in');
    await signIn(page, stack.gw.adminUrl, TOKEN, null);
    await page.locator('#chart-24h canvas').first().waitFor();
    // Signed in, it is there.
    expect((await page.locator('#sign-out').boundingBox())!.height).toBeGreaterThan(10);
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: 'tollgate_session', httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(cookie!.expires).toBeGreaterThan(Date.now() / 1000 + 3600);
    expect(cookie!.value).not.toContain(TOKEN);
  });

  it('the overview shows the traffic in its tiles and charts, Redis and the plans', async () => {
    await page.goto(`${stack.gw.adminUrl}/#/overview`);
    await page.locator('#chart-7d canvas').first().waitFor();
    const tiles = await page.locator('.tile').allTextContents();
    // acme: 5 admitted and 3 refused; beta: 3 admitted; bar-half: 2 admitted.
    expect(tiles).toContain('10requests, 24 h');
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

  it("the keys page draws each key's day window as a bar as wide as its share of the quota", async () => {
    // The page's Content-Security-Policy stays strict (no inline styles), and nothing on the page trips it.
    const violations: string[] = [];
    const onConsole = (m: { text(): string }) => void (/Content Security Policy/i.test(m.text()) && violations.push(m.text()));
    page.on('console', onConsole);
    const csp = (await page.context().request.get(`${stack.gw.adminUrl}/`)).headers()['content-security-policy'];
    expect(csp).toContain("style-src 'self';");
    // The page is one API request: the list answers each key's windows (no request per row).
    const apiCalls: string[] = [];
    const onRequest = (r: { url(): string }) => {
      const path = new URL(r.url()).pathname;
      if (path.startsWith('/keys')) apiCalls.push(path);
    };
    page.on('request', onRequest);
    await page.goto(`${stack.gw.adminUrl}/#/keys?q=bar-`);
    await expect.poll(() => page.locator('#keys-table tbody tr').count()).toBe(2);
    page.off('request', onRequest);
    expect(apiCalls).toEqual(['/keys']);
    const rows = await page.locator('#keys-table tbody tr').allTextContents();
    // Rows are in id order: find each key's.
    const half = rows.findIndex((r) => r.startsWith('bar-half'));
    const zero = rows.findIndex((r) => r.startsWith('bar-zero'));
    expect(rows[half]).toMatch(/2 \/ 4$/);
    expect(rows[zero]).toMatch(/0 \/ 4$/);
    const bars = await boxes(page, '#keys-table .bar');
    const fills = await boxes(page, '#keys-table .bar > span');
    expect(bars).toHaveLength(2);
    expect(bars[half]!.width).toBeGreaterThan(50);
    // bar-half: half the bar; bar-zero: nothing drawn.
    expect(Math.abs(fills[half]!.width / bars[half]!.width - 0.5)).toBeLessThan(0.03);
    expect(fills[zero]!.width).toBeLessThan(1);
    await shot(page, 'keys-bars');
    page.off('console', onConsole);
    expect(violations).toEqual([]);
  });

  it("a key's usage chart scales to its traffic, with the hourly cap drawn only when the traffic comes near it", async () => {
    // acme: 5 admitted this hour; its hourly cap is 100 (its day quota; 5/min × 60 would be 300): far off, not drawn.
    await page.goto(`${stack.gw.adminUrl}/#/keys/${acme.id}`);
    await page.locator('#key-chart canvas').first().waitFor();
    expect(await page.locator('#cap-note').textContent()).toContain('Hourly cap 100 not drawn');
    expect(await page.locator('#key-chart .u-legend').textContent()).not.toContain('hourly cap');
    await shot(page, 'key-chart');
    const acmeDrawn = await drawnHeights(page, { admitted: ADMITTED, cap: CAP_LINE });
    // The busiest hour reaches the upper part of the plot (scaled to 300 it was 2% of it: a flat line at zero).
    expect(acmeDrawn.admitted).toBeGreaterThan(0.6);
    expect(acmeDrawn.cap).toBeNull();

    // bar-half: 2 admitted this hour, cap 4 (its day quota): half of it, so the cap is drawn, above the traffic.
    await page.goto(`${stack.gw.adminUrl}/#/keys/${halfKey.id}`);
    await expect.poll(() => page.locator('#view h1').textContent()).toBe('bar-half');
    await page.locator('#key-chart canvas').first().waitFor();
    expect(await page.locator('#key-chart .u-legend').textContent()).toContain('hourly cap (4)');
    expect(await page.locator('#cap-note').count()).toBe(0);
    await shot(page, 'key-chart-cap');
    const halfDrawn = await drawnHeights(page, { admitted: ADMITTED, cap: CAP_LINE });
    expect(halfDrawn.cap).toBeGreaterThan(0.6);
    expect(Math.abs(halfDrawn.admitted! / halfDrawn.cap! - 0.5)).toBeLessThan(0.1);
  });

  it('reset windows admits a key whose quota is spent again', async () => {
    // acme spent its 5 a minute in beforeAll.
    expect(await call(acme.key)).toBe(429);
    await page.goto(`${stack.gw.adminUrl}/#/keys/${acme.id}`);
    await page.locator('#key-chart canvas').first().waitFor();
    page.once('dialog', (d) => void d.accept());
    await page.locator('button', { hasText: 'Reset windows' }).click();
    await expect.poll(() => page.locator('#key-message').textContent()).toContain('Windows reset');
    // The tiles are drawn again from the key's windows once the reset's answer is in: wait for that drawing.
    await expect.poll(() => page.locator('.tiles').textContent()).toContain('0minute window: used of 5');
    expect(await call(acme.key)).toBe(200);
    await shot(page, 'reset');
  });

  it('the overview says how old its usage figures are, and the figures stay those of one computation for a minute', async () => {
    await page.goto(`${stack.gw.adminUrl}/#/overview`);
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
    // A bound: timing (the reload itself takes a while under load).
    expect(Number(again![2])).toBeGreaterThanOrEqual(Number(first![2]) + 2);
    await shot(page, 'overview-figures-as-of');
  });

  it('finds a key, shows its usage chart, rotates it (the new key once) and revokes it', async () => {
    await page.goto(`${stack.gw.adminUrl}/#/keys`);
    await page.locator('#key-search').fill('acme');
    await page.locator('.filters button').click();
    await expect.poll(() => page.locator('#keys-table tbody tr').count()).toBe(1);
    // 5 in beforeAll, 1 after the reset: the day window was emptied too.
    expect(await page.locator('#keys-table tbody').textContent()).toContain('1 / 100');
    await shot(page, 'keys');
    await page.locator('#keys-table tbody a').click();
    await page.locator('#key-chart canvas').first().waitFor();
    expect(await page.locator('#view h1').textContent()).toBe('acme-prod');
    expect(await page.locator('.tiles').textContent()).toContain('requests, 24 h');
    await shot(page, 'key');

    // Rotate asks for the old key's grace, 24 hours unless changed.
    await page.locator('#view button', { hasText: 'Rotate' }).click();
    await page.locator('#rotate-key[open]').waitFor();
    expect(await page.locator('#rotate-grace').isVisible()).toBe(true);
    expect(await page.locator('#rotate-grace').inputValue()).toBe('24');
    expect(await page.locator('label[for=rotate-grace]').textContent()).toContain('Old key keeps working for (hours');
    await shot(page, 'rotate-dialog');
    // A negative grace is refused by the form itself: the dialog stays, nothing is rotated.
    await page.locator('#rotate-grace').fill('-5');
    await page.locator('#rotate-form button', { hasText: 'Rotate' }).click();
    expect(await page.locator('#rotate-key').isVisible()).toBe(true);
    expect(await page.locator('#new-key').isVisible()).toBe(false);
    await page.locator('#rotate-grace').fill('24');
    await page.locator('#rotate-form button', { hasText: 'Rotate' }).click();
    await page.locator('#new-key[open]').waitFor();
    const fresh = (await page.locator('#new-key-value').textContent())!;
    expect(fresh).toMatch(/^tg_[0-9A-Za-z]+$/);
    expect(await page.locator('#new-key-grace').textContent()).toMatch(/^The old key keeps working until /);
    await shot(page, 'rotated');
    await page.locator('#new-key-close').click();
    await expect.poll(() => page.locator('#new-key-value').textContent()).toBe('');
    expect(await page.content()).not.toContain(fresh);
    // Both keys work: the customer's old one for its grace, the new one at once.
    expect(await call(acme.key)).toBe(200);
    expect(await call(fresh)).toBe(200);

    page.once('dialog', (d) => void d.accept());
    await page.locator('button', { hasText: 'Revoke' }).click();
    await expect.poll(() => page.locator('#key-status-badge').textContent()).toBe('revoked');
    await expect.poll(() => call(fresh), { timeout: 2000 }).toBe(401);
    expect(await call(acme.key)).toBe(401);
  });

  it('lists deprecated routes with their callers and exports them as CSV', async () => {
    await page.goto(`${stack.gw.adminUrl}/#/deprecated`);
    await page.locator('.deprecated-route').first().waitFor();
    const text = await page.locator('.deprecated-route').textContent();
    expect(text).toContain('GET /v1/pets/:petId');
    expect(text).toMatch(/sunset in \d+ d \d+ h/);
    await expect.poll(async () => (await page.locator('.deprecated-route tbody tr').count()) >= 1, { timeout: 5000 }).toBe(true);
    // The caller is named, not only its id: the name is on screen in its own column, on the caller's row, then the
    // consumer it belongs to ('-': none).
    const row = page.locator('.deprecated-route tbody tr').first();
    expect((await row.innerText()).split('\t').map((c) => c.trim())).toEqual([expect.stringMatching(/^key_\w+$/), 'beta-app', '-', '3', expect.any(String)]);
    const nameBox = await row.locator('td').nth(1).boundingBox();
    expect(nameBox!.width).toBeGreaterThan(30);
    expect(nameBox!.height).toBeGreaterThan(5);
    await shot(page, 'deprecated');
    const csv = await context.request.get(`${stack.gw.adminUrl}/routes/deprecated.csv`);
    expect(csv.status()).toBe(200);
    expect((await csv.text()).split('\r\n')[1]).toMatch(/^GET,\/v1\/pets\/:petId,2026-01-01T00:00:00Z,2099-06-01T00:00:00Z,key_\w+,3,[^,]+,beta-app,,$/);
  });

  it('imports a CSV: a dry-run preview with its counts and every refused row, then Import, and the keys are there', async () => {
    await page.goto(`${stack.gw.adminUrl}/#/import`);
    const fileInput = page.locator('#import-file');
    await fileInput.waitFor();
    const sha = (s: string) => createHash('sha256').update(s).digest('hex');
    const csv =
      'name,plan,sha256,metadata.customer\r\n' +
      `"Imported, Inc",starter,${sha('dash-import-1')},c_7\r\n` +
      `=SUM(A1:A9),growth,${sha('dash-import-2')},\r\n` +
      `Nope,platinum,${sha('dash-import-3')},\r\n`;
    await fileInput.setInputFiles({ name: 'customers.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await page.getByText('Preview (nothing written yet)').waitFor();
    const counts = async () => (await page.locator('.import-counts span').allInnerTexts()).map((t) => t.trim());
    expect(await counts()).toEqual(['Would import 2', 'Unchanged 0', 'Refused 1']);
    const rows = await page.locator('#import-refusals tbody tr').allInnerTexts();
    expect(rows.map((r) => r.split('\t').map((c) => c.trim()))).toEqual([['4', 'unknown plan "platinum"; plans: starter, growth']]);
    const reasonBox = await page.locator('#import-refusals tbody td').nth(1).boundingBox();
    expect(reasonBox!.width).toBeGreaterThan(100);
    // Nothing is written by the preview; Import stays off until the refused row is to be skipped.
    const run = page.locator('#import-run');
    expect(await run.isDisabled()).toBe(true);
    expect((await adminGet(`/keys?name=Imported`)).keys).toEqual([]);
    await shot(page, 'import-preview');
    await page.locator('#import-skip').check();
    await run.click();
    await page.getByRole('heading', { name: 'Result' }).waitFor();
    expect(await counts()).toEqual(['Imported 2', 'Unchanged 0', 'Refused 1']);
    await shot(page, 'import-result');
    const listed = (await adminGet('/keys?limit=1000')).keys as Array<{ name?: string; plan: string; metadata?: Record<string, string> }>;
    expect(listed.find((k) => k.name === 'Imported, Inc')).toMatchObject({ plan: 'starter', metadata: { customer: 'c_7' } });
    expect(listed.find((k) => k.name === '=SUM(A1:A9)')).toMatchObject({ plan: 'growth' });
  });

  it('a slow answer never paints over the page the user moved to (the render token)', async () => {
    // The deprecated routes' answer is held back 1.5 s; meanwhile the user moves on to the keys.
    let released = false;
    await page.route('**/routes/deprecated', async (r) => {
      await new Promise((done) => setTimeout(done, 1500));
      released = true;
      await r.continue();
    });
    try {
      await page.goto(`${stack.gw.adminUrl}/#/deprecated`);
      await page.goto(`${stack.gw.adminUrl}/#/keys?q=bar-`);
      await expect.poll(() => page.locator('#keys-table tbody tr').count()).toBe(2);
      // The held answer has arrived, and the page had time to draw it: still the keys, nothing of the other page.
      await expect.poll(() => released, { timeout: 5000 }).toBe(true);
      await page.waitForLoadState('networkidle');
      await new Promise((done) => setTimeout(done, 300));
      expect(await page.locator('#view h1').allInnerTexts()).toEqual(['Keys']);
      expect(await page.locator('.deprecated-route').count()).toBe(0);
      expect(await page.locator('#keys-table tbody tr').count()).toBe(2);
      expect(await page.locator('[data-nav].current').allInnerTexts()).toEqual(['Keys']);
      await shot(page, 'render-token');
    } finally {
      await page.unroute('**/routes/deprecated');
    }
  });

  it('a change with the session cookie from another origin is refused; sign out ends the session', async () => {
    const cookie = (await context.cookies())[0]!;
    const foreign = await fetch(`${stack.gw.adminUrl}/keys`, {
      method: 'POST',
      headers: { cookie: `${cookie.name}=${cookie.value}`, origin: 'http://evil.example', 'content-type': 'application/json' },
      body: JSON.stringify({ plan: 'starter' }),
    });
    expect(foreign.status).toBe(403);
    await page.locator('#sign-out').click();
    await page.locator('#sign-in').waitFor();
    expect(await page.locator('#sign-in-error').textContent()).toBe('Signed out.');
    expect(await page.locator('#nav').isVisible()).toBe(false);
    const after = await fetch(`${stack.gw.adminUrl}/keys`, { headers: { cookie: `${cookie.name}=${cookie.value}` } });
    expect(after.status).toBe(401);
  });
});

describe('the dashboard at a phone width', () => {
  it('every page fits the screen (no sideways scrolling)', async () => {
    const { context, page } = await openSignedIn(chromium.browser, stack.gw.adminUrl, TOKEN, { options: PHONE, waitFor: null });
    try {
      await page.locator('#chart-24h canvas').first().waitFor();
      expect(await overflowsSideways(page)).toBe(false);
      await shot(page, 'phone-overview');
      for (const [hash, ready] of [
        ['#/keys', '#keys-table'],
        ['#/deprecated', '.deprecated-route'],
        ['#/import', '#import-file'],
      ] as const) {
        await page.goto(`${stack.gw.adminUrl}/${hash}`);
        await page.locator(ready).first().waitFor();
        expect(await overflowsSideways(page), hash).toBe(false);
      }
      await page.goto(`${stack.gw.adminUrl}/#/keys/${acme.id}`);
      await page.locator('#key-chart canvas').first().waitFor();
      expect(await overflowsSideways(page)).toBe(false);
      await shot(page, 'phone-key');
    } finally {
      await context.close();
    }
  });
});
