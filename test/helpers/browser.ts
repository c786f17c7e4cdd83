// The dashboard's browser tests share one way to reach a page: a gateway with its admin listener (composed as
// `tollgate serve` composes it), real Chromium launched once per file, a context per test signed in with the admin
// token, and screenshots in one folder to look at afterwards. Each test file keeps its own assertions.
import { afterAll, beforeAll } from 'vitest';
import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';
import { hashAdminToken } from '../../src/admin/tokens.js';
import { composeGateway, type ComposedGateway } from '../../src/compose.js';
import { Metrics } from '../../src/observability/metrics.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway-server.js';
import { silentLogger, testConfig } from './gateway.js';
import type { TestRedis } from './redis-server.js';
import type { TestUpstream } from './upstream.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = new URL('../../test-results/screenshots/', import.meta.url);

/** A desktop window, and a phone (touch, mobile viewport). */
export const DESKTOP: BrowserContextOptions = { viewport: { width: 1280, height: 900 } };
export const PHONE: BrowserContextOptions = { viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true };

/** Launches Chromium in beforeAll (and makes the screenshot folder) and closes it in afterAll. */
export function useBrowser(): { readonly browser: Browser } {
  let browser: Browser | undefined;
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });
  return {
    get browser(): Browser {
      if (!browser) throw new Error('useBrowser: read before beforeAll ran');
      return browser;
    },
  };
}

/** A screenshot of the page as test-results/screenshots/<name>.png (the whole page unless told otherwise). */
export async function shot(page: Page, name: string, opts: { fullPage?: boolean } = {}): Promise<void> {
  await page.screenshot({ path: new URL(`${name}.png`, SHOTS).pathname, fullPage: opts.fullPage ?? true });
}

/** Whether the page scrolls sideways (it must not, at a phone's width). The function runs in the browser. */
export async function overflowsSideways(page: Page): Promise<boolean> {
  return page.evaluate(() => {
    // The browser's globals, typed here: the tests compile without the DOM library (it would retype fetch for Node).
    const browser = globalThis as unknown as { document: { documentElement: { scrollWidth: number } }; innerWidth: number };
    return browser.document.documentElement.scrollWidth > browser.innerWidth + 1;
  });
}

/** Fills the sign-in form with `token` and submits it; then waits for `waitFor` (a selector), unless null. */
export async function signIn(page: Page, adminUrl: string, token: string, waitFor: string | null = '#nav'): Promise<void> {
  await page.goto(`${adminUrl}/`);
  await page.locator('#token').fill(token);
  await page.locator('#sign-in-form button').click();
  if (waitFor !== null) await page.locator(waitFor).waitFor();
}

export interface OpenPage {
  context: BrowserContext;
  page: Page;
  /** Console messages saying the page broke its Content-Security-Policy. */
  violations: string[];
}

/** A new context (a desktop window unless told) and page, collecting Content-Security-Policy violations. */
export async function openPage(
  browser: Browser,
  options: BrowserContextOptions = DESKTOP,
  permissions?: { origin: string; grant: string[] },
): Promise<OpenPage> {
  const context = await browser.newContext(options);
  try {
    if (permissions) await context.grantPermissions(permissions.grant, { origin: permissions.origin });
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('console', (m) => void (/Content Security Policy|Refused to/.test(m.text()) && violations.push(m.text())));
    return { context, page, violations };
  } catch (err) {
    await context.close();
    throw err;
  }
}

/** openPage, signed in with the admin token (the context is closed if signing in fails). */
export async function openSignedIn(
  browser: Browser,
  adminUrl: string,
  token: string,
  opts: { options?: BrowserContextOptions; waitFor?: string | null; permissions?: string[] } = {},
): Promise<OpenPage> {
  const open = await openPage(browser, opts.options, opts.permissions && { origin: adminUrl, grant: opts.permissions });
  try {
    await signIn(open.page, adminUrl, token, opts.waitFor);
    return open;
  } catch (err) {
    await open.context.close();
    throw err;
  }
}

/** The gateway with its admin listener, and what it was composed from (for tests that read the gateway's parts). */
export type AdminGateway = RunningGateway & { adminUrl: string; composed: ComposedGateway };

/**
 * A gateway composed as `tollgate serve` composes it, in front of `up`, on `redis` under `prefix`, with its admin
 * listener taking `token`; `config` adds to (or replaces) those sections. For useStack's `gateway`.
 */
export async function startAdminGateway(
  { redis, up }: { redis: TestRedis; up: TestUpstream },
  token: string,
  prefix: string,
  config: Record<string, unknown> = {},
  /** delivery false: no events thread (tests that put events in endpoint queues by hand and read them back). */
  options: { delivery?: boolean } = {},
): Promise<AdminGateway> {
  const composed = await composeGateway({
    config: testConfig({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url },
      redis: { url: redis.url, prefix, commandTimeoutMs: 2000 },
      admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(token) }] },
      ...config,
    }),
    logger: silentLogger,
    metrics: new Metrics(),
    upstreamCheckTimeoutMs: 500,
    ...(options.delivery === false ? { delivery: false } : {}),
  });
  const running = await startGateway({ gateway: composed, logger: silentLogger });
  if (running.adminUrl === undefined) throw new Error('startAdminGateway: no admin listener');
  return Object.assign(running, { adminUrl: running.adminUrl, composed });
}
