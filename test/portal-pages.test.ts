// The consumer portal in a real browser (Debian's chromium driven by playwright-core), served by a `tollgate serve`
// process on real Redis in front of a real upstream, as a consumer's people reach it: a key pasted into the sign-in
// page (a read-only session: no key controls, and the API refuses them), or a link from the admin API opened in the
// browser (a full session: the page lands on `/` with no code in its address, and the session cookie is out of the
// script's reach; the link then refused when used again). What is asserted is what a person sees: the text shown, bars
// as long as the share used (measured), the deprecated operations panel against the admin API's report, a new key's
// plaintext shown once and gone from the page once dismissed, no Create key button on a plan whose keys the provider
// issues, nothing wider than the window. Screenshots of every
// page go to docs/screenshots/portal-*.png.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';
import { hashAdminToken } from '../src/admin/tokens.js';
import { DESKTOP, PHONE, openPage, overflowsSideways, useBrowser, type OpenPage } from './helpers/browser.js';
import { assertBuilt, startServe, tempDir, type CliProcess } from './helpers/cli.js';
import { useStack } from './helpers/stack.js';
import { waitFor } from './helpers/wait.js';

const TOKEN = 'tga_portal-pages-test-token';
const SHOTS = new URL('../docs/screenshots/', import.meta.url);
const HOUR = 3600e3;
const DAY = 86400e3;
// The deprecated route's dates, relative to now so the test keeps its meaning: a sunset in 60 days, a brownout in 10.
const SUNSET = new Date(Math.floor((Date.now() + 60 * DAY) / HOUR) * HOUR);
const BROWNOUT = new Date(Math.floor((Date.now() + 10 * DAY) / HOUR) * HOUR);

interface Served {
  proc: CliProcess;
  url: string;
  adminUrl: string;
  portalUrl: string;
}

const dir = tempDir();
const stack = useStack<{ proc: CliProcess }>({
  redis: true,
  gateway: async (s) => {
    assertBuilt();
    const file = dir.write('gateway.yaml', {
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: s.up.url },
      redis: { url: s.redis.url, prefix: 'portalpages:', commandTimeoutMs: 2000 },
      admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
      portal: { port: 0, webhooks: true },
      usage: { flushIntervalMs: 200 },
      // Webhook endpoints may point at this machine (the test's upstream stands in for a receiver).
      events: { allowTargets: ['127.0.0.0/8'] },
      plans: {
        growth: { perMinute: 40, perDay: 1000, perMonth: 3000, shadow: { perMinute: 6, enforceFrom: '2099-01-15' } },
        starter: { perMinute: 5, perDay: 100 },
        // Its consumers' keys are issued by the provider: no key is created in the portal.
        managed: { perMinute: 20, perDay: 500, selfServiceKeys: false },
      },
      anonymous: { perMinute: 1000 },
      ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [900], resetAfterSeconds: 3600 },
      routes: [
        {
          method: 'GET',
          path: '/v1/orders',
          deprecation: new Date(Date.now() - 30 * DAY).toISOString(),
          sunset: SUNSET.toISOString(),
          link: 'https://docs.example.com/migrate/orders',
          successor: 'https://api.example.com/v2/orders',
          brownouts: [`${BROWNOUT.toISOString()}/PT1H`],
        },
        { method: 'GET', path: '/v1/legacy', deprecation: new Date(Date.now() - 30 * DAY).toISOString() },
        { path: '/v1/*' },
      ],
    });
    const served = await startServe(file);
    const admin = served.proc.logs.find((l) => l.msg === 'admin API listening');
    const portal = await served.proc.waitForLog('portal listening', { timeoutMs: 10_000 });
    started = { proc: served.proc, url: served.url, adminUrl: String(admin?.url), portalUrl: String(portal.url) };
    return served;
  },
});
let started: Served | undefined;
const gw = (): Served => {
  if (!started) throw new Error('the gateway has not started');
  return started;
};
const chromium = useBrowser();

afterAll(() => dir.remove());

async function admin<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${gw().adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as T };
}

/** A request through the gateway with `key`: its status. */
async function call(key: string, path = '/v1/widgets'): Promise<number> {
  const res = await fetch(`${gw().url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

async function shot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: new URL(`portal-${name}.png`, SHOTS).pathname, fullPage: true });
}

/** The browser's globals, typed here: the tests compile without the DOM library. */
type BrowserWindow = { location: { href: string }; document: { cookie: string }; localStorage: { length: number }; sessionStorage: { length: number } };

/** openPage, with waits that give up after 10 s (a page answers in well under a second). */
async function open(options = DESKTOP, permissions?: { origin: string; grant: string[] }): Promise<OpenPage> {
  const o = await openPage(chromium.browser, options, permissions);
  o.context.setDefaultTimeout(10_000);
  return o;
}

/**
 * Goes to `hash` and waits for that page to be drawn: what the view shows is marked first, and a navigation draws new
 * elements, so the selector is waited for among the unmarked ones (never a match left from the page before).
 */
async function view(page: Page, hash: string, selector: string): Promise<void> {
  await page.evaluate((h) => {
    const w = globalThis as unknown as {
      document: { querySelectorAll(s: string): Iterable<{ setAttribute(n: string, v: string): void }> };
      location: { hash: string };
    };
    for (const el of w.document.querySelectorAll('#view > *')) el.setAttribute('data-old', '');
    w.location.hash = h;
  }, hash);
  await page.locator(`#view > :not([data-old]) ${selector}, #view > ${selector}:not([data-old])`).first().waitFor();
}

/** Each used-of-limit bar on the page: its filled width over its whole width, and the figures it says. */
async function bars(page: Page, scope = '#view'): Promise<Array<{ window: string | null; share: number; now: number; max: number; text: string }>> {
  const out: Array<{ window: string | null; share: number; now: number; max: number; text: string }> = [];
  const all = page.locator(`${scope} .used`);
  for (let i = 0, n = await all.count(); i < n; i++) {
    const used = all.nth(i);
    const [outer, inner] = await Promise.all([used.locator('.bar').boundingBox(), used.locator('.bar > span').boundingBox()]);
    const now = Number(await used.locator('.bar').getAttribute('aria-valuenow'));
    const max = Number(await used.locator('.bar').getAttribute('aria-valuemax'));
    const window = (await used.locator('xpath=ancestor::tr[1]').count()) ? await used.locator('xpath=ancestor::tr[1]').getAttribute('data-window') : null;
    out.push({ window, share: (inner?.width ?? 0) / outer!.width, now, max, text: (await used.locator('.figures').innerText()).trim() });
  }
  return out;
}

const fmt = (n: number) => n.toLocaleString('en');

let acmeKey = '';
let acmeKeyId = '';
let globexKey = '';
let quietKey = '';

beforeAll(async () => {
  expect((await admin('POST', '/consumers', { id: 'acme', name: 'Acme Ltd', plan: 'growth', maxKeys: 2 })).status).toBe(201);
  expect((await admin('POST', '/consumers', { id: 'globex', name: 'Globex Corporation', plan: 'starter' })).status).toBe(201);
  expect((await admin('POST', '/consumers', { id: 'quiet', name: 'Quiet Co', plan: 'starter' })).status).toBe(201);
  const made = await admin<{ id: string; key: string }>('POST', '/keys', { plan: 'growth', consumer: 'acme', name: 'production server' });
  acmeKey = made.body.key;
  acmeKeyId = made.body.id;
  globexKey = (await admin<{ key: string }>('POST', '/keys', { plan: 'starter', consumer: 'globex', name: 'batch job' })).body.key;
  quietKey = (await admin<{ key: string }>('POST', '/keys', { plan: 'starter', consumer: 'quiet' })).body.key;
  // Acme's traffic: the deprecated operation 9 times, the other deprecated one twice, 4 ordinary calls (15 in the minute:
  // 9 over the coming limit of 6 a minute).
  for (let i = 0; i < 9; i++) expect(await call(acmeKey, '/v1/orders')).toBe(200);
  for (let i = 0; i < 2; i++) expect(await call(acmeKey, '/v1/legacy')).toBe(200);
  for (let i = 0; i < 4; i++) expect(await call(acmeKey)).toBe(200);
}, 120_000);

describe('signing in with a key: a read-only session', () => {
  let context: BrowserContext;
  let page: Page;
  let violations: string[] = [];

  beforeAll(async () => {
    ({ context, page, violations } = await open());
  });
  afterAll(async () => {
    await context?.close();
    expect(violations).toEqual([]);
  });

  it('the sign-in page says what a key session is and where a full one comes from', async () => {
    await page.goto(`${gw().portalUrl}/`);
    await page.locator('#sign-in-form').waitFor();
    const text = await page.locator('#sign-in').innerText();
    expect(text).toContain('Paste one of your API keys');
    expect(text).toContain('Signed in with a key, you can look but not change anything.');
    expect(text).toContain('open the sign-in link your provider gives you');
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'sign-in');

    // A wrong key is said in words, and the form stays.
    await page.locator('#api-key').fill('tg_not_a_real_key_0000000000000000000000000000000000');
    await page.locator('#sign-in-form button').click();
    await expect.poll(() => page.locator('#sign-in-error').innerText()).toContain('That key is not valid');
  });

  it('a pasted key signs in read-only: its own key, no create, rotate or revoke, and the API refuses them', async () => {
    await page.locator('#api-key').fill(globexKey);
    await page.locator('#sign-in-form button').click();
    await page.locator('#account-name').waitFor();
    expect(await page.locator('#account-name').innerText()).toBe('Globex Corporation');
    expect(await page.locator('#signed-in').innerText()).toMatch(/^with the key \S+…[0-9A-Za-z]{4}: read-only$/);
    expect(await page.locator('#signed-in').innerText()).toContain(globexKey.slice(-4));
    // Globex called no deprecated operation: said plainly.
    expect(await page.locator('#deprecated-none').innerText()).toContain('None.');
    // The pasted key is nowhere in the page or its address.
    expect(await page.content()).not.toContain(globexKey);

    await view(page, '#/keys', '#keys-table');
    const rows = page.locator('#keys-table tbody tr');
    expect(await rows.count()).toBe(1);
    expect(await rows.first().locator('code.masked').innerText()).toMatch(new RegExp(`…${globexKey.slice(-4)}$`));
    expect(await page.locator('#create-key-open').count()).toBe(0);
    expect(await page.locator('#keys-table button').count()).toBe(0);
    expect(await page.locator('#read-only').innerText()).toContain('ask your provider for a sign-in link with keys:write');
    await shot(page, 'keys-read-only');

    // The API itself refuses what the page does not offer, with the session's own cookie.
    const refused = await page.evaluate(async () => {
      const post = (path: string) =>
        fetch(path, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: '{}' }).then(async (r) => [
          r.status,
          ((await r.json()) as { code: string }).code,
        ]);
      return [await post('/api/keys'), await post('/api/keys/whatever/rotate'), await post('/api/keys/whatever/revoke')];
    });
    expect(refused).toEqual([
      [403, 'portal_scope_denied'],
      [403, 'portal_scope_denied'],
      [403, 'portal_scope_denied'],
    ]);
  });

  it('refusals: rate-limited and banned counts with their reasons, the ban in force', async () => {
    // Globex's starter plan: 5 a minute. 5 admitted, then refusals until the ban ladder bans the key.
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push(await call(globexKey));
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
    expect(statuses.slice(5).every((s) => s === 429)).toBe(true);
    const answer = async () =>
      (await page.evaluate(() => fetch('/api/refusals').then((r) => r.json()))) as {
        refusals: { rateLimited: number; banned: number };
        bans: unknown[];
      };
    await waitFor(async () => (await answer()).refusals.rateLimited + (await answer()).refusals.banned === 5, 'the refusals counted', 20_000, 200);
    const api = await answer();
    await view(page, '#/refusals', '#refused-limited');
    expect(await page.locator('#refused-limited .value').innerText()).toBe(fmt(api.refusals.rateLimited));
    expect(await page.locator('#refused-banned .value').innerText()).toBe(fmt(api.refusals.banned));
    expect(await page.locator('#refused-limited .reason').innerText()).toContain('A window of your limits was full');
    expect(api.bans.length).toBe(1);
    expect(await page.locator('#bans tbody tr').count()).toBe(1);
    expect(await page.locator('#bans tbody tr td').first().innerText()).toContain(globexKey.slice(-4));
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'refusals-key-session');
  });
});

describe('signing in with a link: a full session', () => {
  let context: BrowserContext;
  let page: Page;
  let violations: string[] = [];
  let linkUrl = '';

  beforeAll(async () => {
    ({ context, page, violations } = await open(DESKTOP, { origin: gw().portalUrl, grant: ['clipboard-read', 'clipboard-write'] }));
  });
  afterAll(async () => {
    await context?.close();
    expect(violations).toEqual([]);
  });

  it('the link opened in the browser lands on / with no code in the address, and the cookie is out of the script’s reach', async () => {
    const link = await admin<{ url: string; code: string }>('POST', '/consumers/acme/portal-links', {
      actor: 'jane@acme.test',
      scopes: ['keys:read', 'keys:write', 'usage:read', 'webhooks:write'],
    });
    expect(link.status).toBe(201);
    linkUrl = link.body.url;
    expect(linkUrl.startsWith(`${gw().portalUrl}/link?code=`)).toBe(true);
    await page.goto(linkUrl);
    await page.locator('#account-name').waitFor();
    const seen = await page.evaluate(() => {
      const w = globalThis as unknown as BrowserWindow;
      return { href: w.location.href, cookie: w.document.cookie, local: w.localStorage.length, session: w.sessionStorage.length };
    });
    expect(seen).toEqual({ href: `${gw().portalUrl}/`, cookie: '', local: 0, session: 0 });
    expect(seen.href).not.toContain(link.body.code);
    const cookies = await context.cookies(gw().portalUrl);
    expect(cookies.map((c) => [c.name, c.httpOnly, c.sameSite])).toEqual([['tollgate_portal', true, 'Strict']]);
    expect(await page.locator('#account-name').innerText()).toBe('Acme Ltd');
    expect(await page.locator('#signed-in').innerText()).toBe('as jane@acme.test, with a link from your provider');
    expect(await page.locator('#who').innerText()).toBe('Acme Ltd · signed in as jane@acme.test');
  });

  it('the link used again shows the refusal page, and no session', async () => {
    const other = await open();
    try {
      const res = await other.page.goto(linkUrl);
      expect(res?.status()).toBe(410);
      expect(await other.page.locator('body').innerText()).toContain(
        'This sign-in link has been used, has expired or was withdrawn. Ask for a new one where you got it.',
      );
      expect(await other.context.cookies()).toEqual([]);
      expect(await overflowsSideways(other.page)).toBe(false);
      // In the portal's own look: its stylesheet drew the message as a panel (a white box with a border), not the
      // browser's bare default.
      const panel = await other.page.locator('main .panel').evaluate((el) => {
        const s = (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string; borderTopWidth: string } }).getComputedStyle(el);
        return { background: s.backgroundColor, border: s.borderTopWidth, height: el.getBoundingClientRect().height };
      });
      expect(panel).toMatchObject({ background: 'rgb(255, 255, 255)', border: '1px' });
      expect(panel.height).toBeGreaterThan(40);
      await shot(other.page, 'link-refused');
      // Its way on: the key sign-in page.
      await other.page.getByRole('link', { name: 'sign in with one of your API keys' }).click();
      await other.page.waitForURL(`${gw().portalUrl}/`);
      expect(await other.page.locator('body').innerText()).toContain('Paste one of your API keys');
    } finally {
      await other.context.close();
    }
  });

  it('the overview: the deprecated operations first, their rows equal to the admin API’s report for the consumer', async () => {
    const now = Date.now();
    type Report = {
      routes: Array<{ method: string; path: string; sunset?: string; consumers: Array<{ consumer: string | null; calls: number; lastSeen: string | null }> }>;
    };
    const report = async (days: number) =>
      (
        await admin<Report>(
          'GET',
          `/routes/deprecated?groupBy=consumer&from=${new Date(now - days * DAY).toISOString()}&to=${new Date(now + 60e3).toISOString()}`,
        )
      ).body;
    // Flushed by the gateway every 200 ms: waited for until the report has Acme's 11 calls.
    const acmeCalls = (r: Report) =>
      r.routes.flatMap((route) => route.consumers.filter((c) => c.consumer === 'acme').map((c) => c.calls)).reduce((a, b) => a + b, 0);
    await waitFor(async () => acmeCalls(await report(30)) === 11, "the report has Acme's deprecated calls", 20_000, 200);
    const [r30, r7] = [await report(30), await report(7)];
    const expected = r30.routes
      .map((route) => ({ route, c30: route.consumers.find((c) => c.consumer === 'acme') }))
      .filter(({ c30 }) => c30 !== undefined)
      .map(({ route, c30 }) => {
        const c7 = r7.routes.find((r) => r.method === route.method && r.path === route.path)?.consumers.find((c) => c.consumer === 'acme');
        return [`${route.method} ${route.path}`, fmt(c7?.calls ?? 0), fmt(c30!.calls)];
      });
    expect(expected).toEqual([
      ['GET /v1/orders', '9', '9'],
      ['GET /v1/legacy', '2', '2'],
    ]);

    await page.reload();
    await page.locator('#deprecated-table').waitFor();
    const rows = page.locator('#deprecated-table tbody tr');
    const shown: string[][] = [];
    for (let i = 0, n = await rows.count(); i < n; i++) {
      const cells = (await rows.nth(i).locator('td').allInnerTexts()).map((t) => t.trim());
      shown.push([cells[0]!.split('\n')[0]!, cells[1]!, cells[2]!]);
    }
    expect(shown.sort()).toEqual([...expected].sort());
    const orders = rows.filter({ hasText: 'GET /v1/orders' });
    const cells = (await orders.locator('td').allInnerTexts()).map((t) => t.trim());
    expect(cells[4]).toContain(SUNSET.toLocaleDateString('en-GB', { dateStyle: 'medium' }));
    expect(cells[5]).toBe('https://api.example.com/v2/orders\nmigration guide');
    expect(await orders.locator('a.guide').getAttribute('href')).toBe('https://docs.example.com/migrate/orders');
    expect(cells[6]).toMatch(/ to /);
    expect(await page.locator('#deprecated-summary').innerText()).toContain('2 operations you call are going away.');
    // Where it is seen: the first panel, its top inside the first screenful.
    const panel = await page.locator('#deprecated-panel').boundingBox();
    expect(panel!.y).toBeLessThan(200);
    expect(await page.locator('#view .panel').first().getAttribute('id')).toBe('deprecated-panel');
    // This month so far: the words, and a bar as long as the share used.
    const month = (await page.evaluate(() => fetch('/api/usage?granularity=day').then((r) => r.json()))) as { month: { used: number; perMonth: number } };
    expect(await page.locator('#month-text').innerText()).toBe(`${fmt(month.month.used)} of ${fmt(month.month.perMonth)} requests`);
    const [bar] = await bars(page, '#month');
    expect(bar!.now).toBe(month.month.used);
    expect(bar!.share).toBeCloseTo(month.month.used / month.month.perMonth, 2);
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'overview');
  });

  it('creates a key: the plaintext shown once with a copy hint, gone from the page once dismissed', async () => {
    await view(page, '#/keys', '#keys-table');
    expect(await page.locator('#keys-table tbody tr').count()).toBe(1);
    await page.locator('#create-key-open').click();
    await page.locator('#create-key-name').fill('mobile app');
    await page.locator('#create-key').getByRole('button', { name: 'Create key' }).click();
    const shown = page.locator('#key-shown');
    await page.locator('#key-shown[open]').waitFor();
    const plaintext = (await shown.locator('#key-shown-value').innerText()).trim();
    expect(plaintext.length).toBeGreaterThan(20);
    expect(await shown.locator('#key-shown-once').innerText()).toContain('Copy it now: it is shown only this once.');
    const box = await shown.locator('#key-shown-value').boundingBox();
    expect(box!.width).toBeGreaterThan(250);
    await shown.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => shown.locator('#key-shown-copied').innerText()).toContain('Copied.');
    await shot(page, 'key-created');
    expect(await call(plaintext)).toBe(200);

    await shown.getByRole('button', { name: 'I have stored it' }).click();
    expect(await shown.isVisible()).toBe(false);
    expect(await page.content()).not.toContain(plaintext);
    const href = await page.evaluate(() => (globalThis as unknown as BrowserWindow).location.href);
    expect(href).toBe(`${gw().portalUrl}/#/keys`);
    await expect.poll(() => page.locator('#keys-table tbody tr').count()).toBe(2);
    const row = page.locator('#keys-table tbody tr', { hasText: 'mobile app' });
    expect(await row.locator('code.masked').innerText()).toMatch(new RegExp(`…${plaintext.slice(-4)}$`));
    expect(await page.locator('#keys-message').innerText()).toMatch(/^Key \S+ created\.$/);
  });

  it('rotates a key with an overlap: the old key keeps working until the time said', async () => {
    const row = page.locator('#keys-table tbody tr', { hasText: 'production server' });
    await row.getByRole('button', { name: 'Rotate' }).click();
    await page.locator('#rotate-key[open]').waitFor();
    expect(await page.locator('#rotate-overlap option').allInnerTexts()).toEqual(['no time: it stops now', '1 hour', '1 day', '7 days']);
    await page.locator('#rotate-overlap').selectOption('3600');
    expect(await page.locator('#rotate-until').innerText()).toMatch(/^The old key keeps working until about \d/);
    await shot(page, 'key-rotate');
    const before = Date.now();
    await page.locator('#rotate-key').getByRole('button', { name: 'Rotate' }).click();
    await page.locator('#key-shown[open]').waitFor();
    const plaintext = (await page.locator('#key-shown-value').innerText()).trim();
    expect(plaintext).not.toBe(acmeKey);
    const note = await page.locator('#key-shown-note').innerText();
    expect(note).toMatch(/The old key keeps working until .+ \(1 hour\)\./);
    // Both work: the new key, and the old one for the overlap.
    expect(await call(plaintext)).toBe(200);
    expect(await call(acmeKey)).toBe(200);
    // The overlap the API keeps is the hour chosen.
    const keys = (await page.evaluate(() => fetch('/api/keys').then((r) => r.json()))) as { keys: Array<{ id: string; status: string; graceUntil?: string }> };
    const rotated = keys.keys.find((k) => k.id === acmeKeyId)!;
    expect(rotated.status).toBe('grace');
    const graceUntil = Date.parse(String(rotated.graceUntil));
    expect(graceUntil).toBeGreaterThanOrEqual(before + HOUR - 5000);
    expect(graceUntil).toBeLessThanOrEqual(Date.now() + HOUR + 5000);
    await page.locator('#key-shown').getByRole('button', { name: 'I have stored it' }).click();
    expect(await page.content()).not.toContain(plaintext);
    await expect.poll(() => page.locator('#keys-message').innerText()).toContain('Key rotated. The old key keeps working until');
    // The list says so beside the key: rotated, the old one working until the same time.
    const listed = page.locator('#keys-table tbody tr', { hasText: 'production server' });
    expect(await listed.locator('.badge').innerText()).toBe('rotating');
    expect(await listed.locator('td.status').innerText()).toMatch(/old key works until \d/);
    acmeKey = plaintext;
  });

  it('revokes a key after asking: it stops working', async () => {
    const row = page.locator('#keys-table tbody tr', { hasText: 'mobile app' });
    const masked = await row.locator('code.masked').innerText();
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.locator('#confirm[open]').waitFor();
    expect(await page.locator('#confirm-title').innerText()).toBe(`Revoke ${masked}?`);
    expect(await page.locator('#confirm-text').innerText()).toContain('cannot be undone');
    await shot(page, 'key-revoke');
    await page.locator('#confirm-yes').click();
    await expect.poll(() => page.locator('#keys-message').innerText()).toBe(`Key ${masked} revoked.`);
    const after = page.locator('#keys-table tbody tr', { hasText: 'mobile app' });
    expect(await after.locator('.badge').innerText()).toBe('revoked');
    expect(await after.locator('button').count()).toBe(0);
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'keys');
  });

  it('a key past the plan’s number of keys is refused, said in words beside the list', async () => {
    // Acme may hold 2 keys that are not revoked: the rotated one, and now this one.
    await page.locator('#create-key-open').click();
    await page.locator('#create-key-name').fill('ci runner');
    await page.locator('#create-key').getByRole('button', { name: 'Create key' }).click();
    await page.locator('#key-shown[open]').waitFor();
    await page.locator('#key-shown').getByRole('button', { name: 'I have stored it' }).click();
    await expect.poll(() => page.locator('#keys-table tbody tr').count()).toBe(3);
    await page.locator('#create-key-open').click();
    await page.locator('#create-key-name').fill('one too many');
    await page.locator('#create-key').getByRole('button', { name: 'Create key' }).click();
    const error = page.locator('#keys-error');
    await error.waitFor();
    expect(await error.innerText()).toBe('You have as many keys as your plan allows: revoke one you no longer use, then create the new one.');
    expect(await page.locator('#key-shown').isVisible()).toBe(false);
    expect(await page.locator('#keys-table tbody tr').count()).toBe(3);
    expect(await page.locator('#keys-table').innerText()).not.toContain('one too many');
    await shot(page, 'keys-full');
  });

  it('limits: each window live, its bar as long as the share used', async () => {
    await view(page, '#/limits', '#pool-windows');
    const api = (await page.evaluate(() => fetch('/api/windows').then((r) => r.json()))) as {
      pool: Array<{ name: string; used: number; limit: number; mode: string }>;
    };
    const shown = await bars(page, '#pool-windows');
    expect(shown.length).toBe(api.pool.length);
    for (const [i, w] of api.pool.entries()) {
      // The page read its figures a moment before this test did: the same, or a request later.
      expect(shown[i]!.max).toBe(w.limit);
      expect(shown[i]!.text).toBe(`${fmt(shown[i]!.now)} of ${fmt(w.limit)}`);
      expect(shown[i]!.share).toBeCloseTo(Math.min(1, shown[i]!.now / w.limit), 2);
    }
    // Acme's day and month so far: every request it made (15, the new key's and the rotation's checks 3 more).
    expect(api.pool.map((w) => w.name).sort()).toEqual(['day', 'minute', 'minute:shadow', 'month']);
    expect(shown.find((b) => b.window === 'day')!.now).toBe(18);
    expect(shown.find((b) => b.window === 'month')!.now).toBe(18);
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'limits');
  });

  it('limits refresh themselves every 10 s while the tab is seen, and not while it is hidden', async () => {
    const reads: number[] = [];
    const onResponse = (r: { url(): string }) => void (new URL(r.url()).pathname === '/api/windows' && reads.push(Date.now()));
    page.on('response', onResponse);
    try {
      const dayUsed = async () => (await bars(page, '#pool-windows')).find((b) => b.window === 'day')!.now;
      const before = await dayUsed();
      expect(await call(acmeKey)).toBe(200);
      // The next read (within 10 s and a little) draws the request just made, in place: the same page, its bar longer.
      await expect.poll(dayUsed, { timeout: 13_000, interval: 500 }).toBe(before + 1);
      expect(reads.length).toBeGreaterThanOrEqual(1);
      // Hidden (the browser says so to the page, as when the tab is in the background): no read for 12 s.
      await page.evaluate(() => {
        const d = (globalThis as unknown as { document: { dispatchEvent(e: unknown): void } }).document;
        Object.defineProperty(d, 'hidden', { configurable: true, get: () => true });
        d.dispatchEvent(new (globalThis as unknown as { Event: new (t: string) => unknown }).Event('visibilitychange'));
      });
      const hiddenAt = reads.length;
      await new Promise((r) => setTimeout(r, 12_000));
      expect(reads.length).toBe(hiddenAt);
      // Seen again: read at once.
      await page.evaluate(() => {
        const d = (globalThis as unknown as { document: { dispatchEvent(e: unknown): void } }).document;
        Object.defineProperty(d, 'hidden', { configurable: true, get: () => false });
        d.dispatchEvent(new (globalThis as unknown as { Event: new (t: string) => unknown }).Event('visibilitychange'));
      });
      await expect.poll(() => reads.length, { timeout: 3000 }).toBeGreaterThan(hiddenAt);
    } finally {
      page.off('response', onResponse);
    }
  }, 40_000);

  it('usage: a chart of the last 30 days and this month so far', async () => {
    await view(page, '#/usage?by=hour', '#usage-chart canvas');
    const box = await page.locator('#usage-chart canvas').boundingBox();
    expect(box!.width).toBeGreaterThan(600);
    expect(await page.locator('#view h2', { hasText: 'Last 30 days' }).innerText()).toBe('Last 30 days, by hour');
    const u = (await page.evaluate(() => fetch('/api/usage?granularity=hour').then((r) => r.json()))) as {
      buckets: unknown[];
      totals: { admitted: number };
      month: { used: number; perMonth: number };
    };
    expect(u.buckets.length).toBe(720);
    expect(await page.locator('#total-admitted .value').innerText()).toBe(fmt(u.totals.admitted));
    const [bar] = await bars(page, '#month');
    expect(bar!.share).toBeCloseTo(u.month.used / u.month.perMonth, 2);
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'usage');
  });

  it('refusals: the coming limit worded with the day it comes and what it would have refused', async () => {
    const r = (await page.evaluate(() => fetch('/api/refusals').then((res) => res.json()))) as {
      shadow: Array<{ window: string; limit: number; wouldHaveRefused: number; since: string; enforceFrom?: string }>;
    };
    const minute = r.shadow.find((s) => s.window === 'minute');
    expect(minute?.limit).toBe(6);
    expect(minute?.enforceFrom).toBe('2099-01-15');
    expect(minute?.wouldHaveRefused).toBeGreaterThanOrEqual(9);
    await view(page, '#/refusals', '#shadow');
    const lines = await page.locator('#shadow li').allInnerTexts();
    // The date the config announces (plans.growth.shadow.enforceFrom), that very day wherever the reader is.
    const since = new Date(minute!.since).toLocaleDateString('en-GB', { dateStyle: 'medium' });
    expect(lines).toEqual([
      `A limit coming on 15 Jan 2099 (6 per minute) would have refused ${fmt(minute!.wouldHaveRefused)} of your requests since ${since}.`,
    ]);
    expect(await page.locator('#bans-none').innerText()).toBe('None: no key of yours is banned.');
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'refusals');

    // Without a date in the config the page says none: the same answer, enforceFrom left out.
    await page.route('**/api/refusals', async (route) => {
      const answer = await route.fetch();
      const body = (await answer.json()) as { shadow: Array<Record<string, unknown>> };
      for (const s of body.shadow) delete s.enforceFrom;
      await route.fulfill({ response: answer, json: body });
    });
    try {
      await view(page, '#/keys', '#keys-table');
      await view(page, '#/refusals', '#shadow');
      expect(await page.locator('#shadow li').allInnerTexts()).toEqual([
        `A coming limit (6 per minute) would have refused ${fmt(minute!.wouldHaveRefused)} of your requests since ${since}.`,
      ]);
    } finally {
      await page.unroute('**/api/refusals');
    }
  });

  it('webhooks: registered with its secret shown once, listed with its delivery state, deleted', async () => {
    await view(page, '#/webhooks', '#webhook-form');
    expect(await page.locator('#webhooks-empty').innerText()).toContain('You have no endpoint yet');
    const target = `${stack.up.url}/hooks/tollgate`;
    await page.locator('#webhook-url').fill(target);
    await page.getByLabel('a key is banned key.banned').check();
    await page.locator('#webhook-form button[type=submit]').click();
    await page.locator('#secret-shown[open]').waitFor();
    const secret = (await page.locator('#secret-shown-value').innerText()).trim();
    expect(secret.length).toBeGreaterThan(10);
    await page.locator('#secret-shown-close').click();
    expect(await page.content()).not.toContain(secret);
    await page.locator('#webhooks-table').waitFor();
    const cells = await page.locator('#webhooks-table tbody tr').first().locator('td').allInnerTexts();
    expect(cells[0]).toBe(target);
    expect(cells[1]).toBe('key.banned');
    expect(cells[2]).toMatch(/^(nothing sent yet|0 delivered, 0 waiting)$/);
    expect(await overflowsSideways(page)).toBe(false);
    await shot(page, 'webhooks');
    await page.locator('#webhooks-table').getByRole('button', { name: 'Delete' }).click();
    await page.locator('#confirm-yes').click();
    await page.locator('#webhooks-empty').waitFor();
  });

  it('signing out ends the session: the sign-in page again, the API answers 401', async () => {
    await page.locator('#sign-out').click();
    await page.locator('#sign-in-form').waitFor();
    expect(await page.locator('#sign-in-error').innerText()).toBe('Signed out.');
    const status = await page.evaluate(() => fetch('/api/me').then((r) => r.status));
    expect(status).toBe(401);
  });
});

describe('a consumer that calls no deprecated operation', () => {
  it('is told so plainly on the overview and the deprecated page', async () => {
    const o = await open();
    try {
      const link = await admin<{ url: string }>('POST', '/consumers/quiet/portal-links', { actor: 'ops@quiet.test', scopes: ['keys:read', 'usage:read'] });
      expect(await call(quietKey)).toBe(200);
      await o.page.goto(link.body.url);
      await o.page.locator('#deprecated-none').waitFor();
      expect(await o.page.locator('#deprecated-none').innerText()).toBe(
        'None. In the last 30 days you called no operation that is going away: nothing to change.',
      );
      await view(o.page, '#/deprecated', '#deprecated-none');
      expect(await o.page.locator('#view h1').innerText()).toBe('Deprecated operations you still call');
      expect(await o.page.locator('#deprecated-none').innerText()).toContain('nothing to change');
      await shot(o.page, 'deprecated-none');
      // Its keys page, with keys:read only: no controls, said why.
      await view(o.page, '#/keys', '#keys-table');
      expect(await o.page.locator('#create-key-open').count()).toBe(0);
      expect(await o.page.locator('#read-only').innerText()).toContain('keys:write');
    } finally {
      await o.context.close();
    }
  });
});

describe('a link with fewer scopes', () => {
  it('offers only the pages it may read, and says what it cannot see', async () => {
    const o = await open();
    try {
      const link = await admin<{ url: string }>('POST', '/consumers/quiet/portal-links', { actor: 'dev@quiet.test', scopes: ['keys:read'] });
      await o.page.goto(link.body.url);
      await o.page.locator('#no-usage').waitFor();
      expect(await o.page.locator('#nav a:visible').allInnerTexts()).toEqual(['Overview', 'Keys', 'Limits']);
      expect(await o.page.locator('#no-usage').innerText()).toBe(
        'Your session cannot see usage, refusals or deprecated operations: ask your provider for a sign-in link with usage:read.',
      );
      expect(o.violations).toEqual([]);
    } finally {
      await o.context.close();
    }
  });
});

describe('a plan whose keys the provider issues (selfServiceKeys: false)', () => {
  /** Elements the person sees whose text is exactly `text` (a closed dialog's button is there but not seen). */
  async function seen(page: Page, text: string): Promise<{ present: number; visible: number }> {
    const all = page.getByText(text, { exact: true });
    let visible = 0;
    const present = await all.count();
    for (let i = 0; i < present; i++) {
      const box = await all.nth(i).boundingBox();
      if ((await all.nth(i).isVisible()) && box && box.width > 0 && box.height > 0) visible++;
    }
    return { present, visible };
  }

  it('a full session: no Create key button, a sentence saying the provider issues keys, rotate and revoke still there', async () => {
    expect((await admin('POST', '/consumers', { id: 'initech', name: 'Initech', plan: 'managed' })).status).toBe(201);
    const made = await admin<{ id: string; key: string }>('POST', '/keys', { plan: 'managed', consumer: 'initech', name: 'billing service' });
    expect(made.status).toBe(201);
    const o = await open();
    try {
      const link = await admin<{ url: string }>('POST', '/consumers/initech/portal-links', {
        actor: 'ops@initech.test',
        scopes: ['keys:read', 'keys:write', 'usage:read'],
      });
      await o.page.goto(link.body.url);
      await o.page.locator('#account-name').waitFor();
      const me = (await o.page.evaluate(() => fetch('/api/me').then((r) => r.json()))) as { canCreateKeys: boolean };
      expect(me.canCreateKeys).toBe(false);
      await view(o.page, '#/keys', '#keys-table');
      // The page is drawn (its key listed) before anything is measured.
      expect(await o.page.locator('#keys-table tbody tr').count()).toBe(1);
      expect(await o.page.locator('#create-key-open').count()).toBe(0);
      // Measured on every element with that text: the closed dialog's own button is there, and none is seen.
      const create = await seen(o.page, 'Create key');
      expect(create).toEqual({ present: 1, visible: 0 });
      expect(await o.page.locator('#provider-issued').isVisible()).toBe(true);
      expect(await o.page.locator('#provider-issued').innerText()).toBe(
        'Keys on your plan are issued by your provider: ask them for a new key. You can still rotate or revoke your keys here.',
      );
      expect(await o.page.locator('#read-only').count()).toBe(0);
      expect(await o.page.locator('#keys-empty').count()).toBe(0);
      // A leaked key stays replaceable from here.
      const row = o.page.locator('#keys-table tbody tr', { hasText: 'billing service' });
      expect(await row.getByRole('button', { name: 'Rotate' }).isVisible()).toBe(true);
      expect(await row.getByRole('button', { name: 'Revoke' }).isVisible()).toBe(true);
      expect(await overflowsSideways(o.page)).toBe(false);
      await shot(o.page, 'keys-provider-issued');
      // The API refuses what the page does not offer, in words.
      const refused = (await o.page.evaluate(() =>
        fetch('/api/keys', { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: '{}' }).then(async (r) => {
          const body = (await r.json()) as { code: string; message: string };
          return [r.status, body.code, body.message];
        }),
      )) as [number, string, string];
      expect(refused).toEqual([403, 'forbidden', 'Your plan does not let you create keys here: ask your provider for one.']);
      expect(o.violations).toEqual([]);
    } finally {
      await o.context.close();
    }
  });

  it('a read-only session on that plan keeps the read-only note, without the provider sentence', async () => {
    const o = await open();
    try {
      const link = await admin<{ url: string }>('POST', '/consumers/initech/portal-links', { actor: 'viewer@initech.test', scopes: ['keys:read'] });
      await o.page.goto(link.body.url);
      await o.page.locator('#account-name').waitFor();
      await view(o.page, '#/keys', '#keys-table');
      expect((await seen(o.page, 'Create key')).visible).toBe(0);
      expect(await o.page.locator('#read-only').innerText()).toContain('ask your provider for a sign-in link with keys:write');
      expect(await o.page.locator('#provider-issued').count()).toBe(0);
      expect(o.violations).toEqual([]);
    } finally {
      await o.context.close();
    }
  });
});

describe('at a phone’s width', () => {
  it('no page is wider than the screen: tables scroll inside their panels', async () => {
    const o = await open(PHONE);
    try {
      const link = await admin<{ url: string }>('POST', '/consumers/acme/portal-links', {
        actor: 'jane@acme.test',
        scopes: ['keys:read', 'keys:write', 'usage:read', 'webhooks:write'],
      });
      await o.page.goto(link.body.url);
      await o.page.locator('#deprecated-table').waitFor();
      // On a phone the browser widens its layout to the widest content (innerWidth follows): the page's width is
      // measured against the phone's own, 375 pixels.
      const width = () =>
        o.page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth);
      const wide: Array<[string, number]> = [];
      if ((await width()) > PHONE.viewport!.width) wide.push(['overview', await width()]);
      for (const [hash, selector] of [
        ['#/keys', '#keys-table'],
        ['#/limits', '#pool-windows'],
        ['#/usage', '#usage-chart canvas'],
        ['#/refusals', '#shadow'],
        ['#/deprecated', '#deprecated-table'],
        ['#/webhooks', '#webhook-form'],
      ] as const) {
        await view(o.page, hash, selector);
        if ((await width()) > PHONE.viewport!.width) wide.push([hash, await width()]);
      }
      expect(wide).toEqual([]);
      expect(o.violations).toEqual([]);
    } finally {
      await o.context.close();
    }
  });
});
