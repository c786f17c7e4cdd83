// A public route's own limits (routes[].limits { perMinute, perDay } with auth: none), per client address, beside the
// anonymous limit: real gateways on a private redis-server (and one Redis-less) in front of a loopback upstream, and
// what an attacker would try: X-Forwarded-For with trustProxy off and on, made-up keys, many addresses, a costly route.
import { describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { validateConfig } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import { testConfig } from './helpers/gateway.js';
import { commandCalls, startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';

const STATIC_KEY = generateKey();

function config(over: { prefix: string; trustProxy?: boolean; redis?: boolean }): Config {
  return testConfig({
    server: { trustProxy: over.trustProxy ?? true },
    upstream: { url: s.up.url },
    ...(over.redis === false
      ? { keys: [{ id: 'static-one', plan: 'free', sha256: hashKey(STATIC_KEY) }] }
      : { redis: { url: s.redis.url, prefix: over.prefix, commandTimeoutMs: 2000 } }),
    plans: { free: { perMinute: 5, perDay: 1000 } },
    anonymous: { perMinute: 8 },
    routes: [
      { method: 'GET', path: '/v1/status', auth: 'none', name: 'status', limits: { perMinute: 3, perDay: 100 } },
      { method: 'GET', path: '/v1/search', auth: 'none', name: 'search', cost: 3, limits: { perMinute: 10 } },
      { method: 'GET', path: '/v1/open', auth: 'none' },
      { method: 'GET', path: '/v1/private' },
    ],
  });
}

const s = useStack<{ trusting: LimitsGateway; direct: LimitsGateway; memory: LimitsGateway }>({
  redis: true,
  client: true,
  gateway: async () => ({
    trusting: await startLimitsGateway(config({ prefix: 'pub1:' })),
    direct: await startLimitsGateway(config({ prefix: 'pub2:', trustProxy: false })),
    memory: await startLimitsGateway(config({ prefix: 'pub3:', redis: false })),
  }),
});

interface Answer {
  status: number;
  code: string | undefined;
  message: string | undefined;
  headers: Headers;
}

async function get(gw: LimitsGateway, path: string, opts: { ip?: string; key?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.ip !== undefined) headers['x-forwarded-for'] = opts.ip;
  if (opts.key !== undefined) headers.authorization = `Bearer ${opts.key}`;
  const res = await fetch(`${gw.url}${path}`, { headers });
  const body = (await res.json().catch(() => ({}))) as { code?: string; message?: string };
  return { status: res.status, code: body.code, message: body.message, headers: res.headers };
}

async function statuses(gw: LimitsGateway, path: string, n: number, opts: (i: number) => { ip?: string; key?: string }): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await get(gw, path, opts(i))).status);
  return out;
}

let ipSeq = 0;
/** A fresh documentation address per test, so tests share no bucket. */
const freshIp = () => `203.0.113.${++ipSeq}`;

describe('a public route with limits, Redis store', () => {
  it('admits perMinute requests per address, then 429 rate_limit_exceeded with Retry-After and the RateLimit headers of both limits; another address is unaffected', async () => {
    const gw = s.gw.trusting;
    const ip = freshIp();
    const first = await get(gw, '/v1/status', { ip });
    expect(first.status).toBe(200);
    // The anonymous limit's minute and the route's two windows, the binding one in the X-RateLimit-* headers.
    expect(first.headers.get('ratelimit-policy')).toBe('"minute";q=8;w=60, "status:minute";q=3;w=60, "status:day";q=100;w=86400');
    expect(first.headers.get('ratelimit')).toMatch(/^"minute";r=7;t=\d+, "status:minute";r=2;t=\d+, "status:day";r=99;t=\d+$/);
    expect(first.headers.get('x-ratelimit-limit')).toBe('3');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('2');
    expect(await statuses(gw, '/v1/status', 2, () => ({ ip }))).toEqual([200, 200]);
    const refused = await get(gw, '/v1/status', { ip });
    expect(refused.status).toBe(429);
    expect(refused.code).toBe('rate_limit_exceeded');
    expect(refused.message).toMatch(/from this address to this route \(status:minute window\)/);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    expect((await get(gw, '/v1/status', { ip: freshIp() })).status).toBe(200);
    // A public route without limits of its own: the anonymous limit alone (4 of this address's 8 are spent).
    expect(await statuses(gw, '/v1/open', 5, () => ({ ip }))).toEqual([200, 200, 200, 200, 429]);
  });

  it('both must pass: an address the anonymous limit refuses (its 401s on a keyed route count, as before) is refused on the public route too', async () => {
    const gw = s.gw.trusting;
    const ip = freshIp();
    expect(await statuses(gw, '/v1/private', 8, () => ({ ip }))).toEqual(Array(8).fill(401));
    const r = await get(gw, '/v1/status', { ip });
    expect(r.status).toBe(429);
    expect(r.message).toMatch(/without a valid API key from this address/);
  });

  it('a cost: each request takes the route cost from the address window (10 per minute, cost 3: three requests)', async () => {
    const ip = freshIp();
    expect(await statuses(s.gw.trusting, '/v1/search', 4, () => ({ ip }))).toEqual([200, 200, 200, 429]);
  });

  it('made-up keys, one per request, grant no fresh budget: the address is refused all the same', async () => {
    const ip = freshIp();
    expect(await statuses(s.gw.trusting, '/v1/status', 5, () => ({ ip, key: generateKey() }))).toEqual([200, 200, 200, 429, 429]);
  });

  it('a valid key is metered by its key (its plan), never by the address limit, and its requests take nothing from the address budget', async () => {
    const gw = s.gw.trusting;
    const ip = freshIp();
    const { id, key } = await gw.createKey({ plan: 'free' });
    expect(await statuses(gw, '/v1/status', 3, () => ({ ip }))).toEqual([200, 200, 200]);
    expect((await get(gw, '/v1/status', { ip })).status).toBe(429);
    // The address is spent; the key is not: its plan's 5 per minute, then its own 429 with its own windows.
    const keyed = await get(gw, '/v1/status', { ip, key });
    expect(keyed.status).toBe(200);
    expect(keyed.headers.get('ratelimit-policy')).toBe('"minute";q=5;w=60, "day";q=1000;w=86400');
    expect(await statuses(gw, '/v1/status', 5, () => ({ ip, key }))).toEqual([200, 200, 200, 200, 429]);
    // The last request proxied was the key's: the upstream was told whose.
    expect(s.up.seen.at(-1)?.headers['x-consumer-id']).toBe(id);
  });

  it('many addresses: each its own budget (12 addresses, 3 each, the 4th refused)', async () => {
    const gw = s.gw.trusting;
    const ips = Array.from({ length: 12 }, () => freshIp());
    for (const ip of ips) expect(await statuses(gw, '/v1/status', 4, () => ({ ip }))).toEqual([200, 200, 200, 429]);
  });

  it("X-Forwarded-For with trustProxy on: an address that is not an IP literal is the peer's; with trustProxy off every made-up address is the peer", async () => {
    const junk = ['not-an-ip', 'x'.repeat(5000), '999.1.1.1', ''];
    // trustProxy on: junk values fall back to the peer's address, one bucket.
    expect(await statuses(s.gw.trusting, '/v1/status', 4, (i) => ({ ip: junk[i]! }))).toEqual([200, 200, 200, 429]);
    // trustProxy off: a fresh X-Forwarded-For per request buys nothing.
    expect(await statuses(s.gw.direct, '/v1/status', 4, () => ({ ip: freshIp() }))).toEqual([200, 200, 200, 429]);
  });

  it("costs one script call per request beyond the anonymous limit's (a keyed request makes one too), and the script reads no key record, ban or ledger", async () => {
    const gw = s.gw.trusting;
    const ip = freshIp();
    // The anonymous limit's own commands, measured on the route without limits, are the same on both.
    await get(gw, '/v1/open', { ip });
    const a0 = await commandCalls(s.client);
    await get(gw, '/v1/open', { ip });
    const a1 = await commandCalls(s.client);
    await get(gw, '/v1/status', { ip });
    const a2 = await commandCalls(s.client);
    const diff = (x: Map<string, number>, y: Map<string, number>) => {
      const out: Record<string, number> = {};
      for (const [k, v] of y) if (v !== (x.get(k) ?? 0)) out[k] = v - (x.get(k) ?? 0);
      return out;
    };
    const open = diff(a0, a1);
    const limited = diff(a1, a2);
    // Beyond the anonymous limit's: one EVALSHA, TIME, INCR and PEXPIRE for each of the two windows: nothing else.
    const extra: Record<string, number> = {};
    for (const [k, v] of Object.entries(limited)) if (v !== (open[k] ?? 0)) extra[k] = v - (open[k] ?? 0);
    expect(extra).toEqual({ evalsha: 1, time: 1, incr: 2, pexpire: 2 });
  });
});

describe('a public route with limits, Redis-less (memory store)', () => {
  it('the same rules: 3 per address, a static key metered by its plan', async () => {
    const gw = s.gw.memory;
    const ip = freshIp();
    expect(await statuses(gw, '/v1/status', 4, () => ({ ip }))).toEqual([200, 200, 200, 429]);
    expect(await statuses(gw, '/v1/status', 4, () => ({ ip, key: generateKey() }))).toEqual([429, 429, 429, 429]);
    expect(await statuses(gw, '/v1/status', 6, () => ({ ip, key: STATIC_KEY }))).toEqual([200, 200, 200, 200, 200, 429]);
  });
});

describe("config: a public route's limits", () => {
  const errorsOf = (routes: unknown[]): string[] => {
    const r = validateConfig({ upstream: { url: 'http://127.0.0.1:9' }, routes });
    return r.ok ? [] : r.errors;
  };

  it('refuses per-plan windows on a public route, address limits on a keyed one, a mix, and a cost above the limit', () => {
    expect(errorsOf([{ path: '/v1/a', auth: 'none', limits: { perMinute: 5 } }])).toEqual([]);
    expect(errorsOf([{ path: '/v1/a', auth: 'none', limits: { default: { perMinute: 5 } } }]).join('\n')).toMatch(
      /routes\[0\]\.limits\.default.*public route \(auth: none\) has limits per client address/,
    );
    expect(errorsOf([{ path: '/v1/a', limits: { perMinute: 5 } }]).join('\n')).toMatch(
      /routes\[0\]\.limits\.perMinute.*only a public route \(auth: none\) has; a keyed route's windows go by plan: limits: \{ default: \{ perMinute: 5 \} \}/,
    );
    expect(errorsOf([{ path: '/v1/a', auth: 'none', limits: { perMinute: 5, free: { perMinute: 1 } } }]).join('\n')).toMatch(/routes\[0\]\.limits\.free/);
    expect(errorsOf([{ path: '/v1/a', auth: 'none', cost: 6, limits: { perMinute: 5 } }]).join('\n')).toMatch(
      /perMinute 5 is below the route's cost 6: no request without a key could ever be admitted/,
    );
    expect(errorsOf([{ path: '/v1/a', auth: 'none', limits: { perMinute: 0 } }]).join('\n')).toMatch(/routes\[0\]\.limits\.perMinute/);
    expect(errorsOf([{ path: '/v1/a', auth: 'none', limits: {} }]).join('\n')).toMatch(/expected perMinute and\/or perDay/);
  });
});
