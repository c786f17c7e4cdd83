// Plans, limits and bans through the whole gateway, in process (composeGateway, as
// `tollgate serve` wires them) in front of a real loopback upstream, on the memory store and on a private Redis
// (docs: "The request path", "Headers on every /v1 response", "Error codes"): rate-limit headers on every kind of /v1 answer, 429s and bans, the anonymous
// per-IP limit, per-key overrides, reloads, metrics, and how many Redis calls a request costs.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import request from 'supertest';
import express from 'express';
import type { Redis } from 'ioredis';
import { ManualClock, systemClock } from '../src/util/clock.js';
import { KeyLimiter } from '../src/limits/key-limits.js';
import { RequestContext } from '../src/pipeline/context.js';
import { keyLimits } from '../src/pipeline/stages/limits.js';
import { MemoryLimiterStore } from '../src/limits/memory-store.js';
import type { Decision, LimiterStore, LimitSnapshot } from '../src/limits/types.js';
import { Metrics } from '../src/observability/metrics.js';
import { Runtime } from '../src/routing/runtime.js';
import { Breaker } from '../src/storage/breaker.js';
import { generateKey } from '../src/keys/format.js';
import type { Config } from '../src/config/schema.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream, echo } from './helpers/upstream.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import {
  clientAddresses,
  commandCalls,
  metricValue,
  monitorRedis,
  startLimitsGateway,
  totalCommands,
  waitFor,
  type LimitsGateway,
  type MonitoredCommand,
} from './helpers/limits.js';

const FREE_POLICY = '"minute";q=60;w=60, "day";q=1000;w=86400';
const ANON_PER_MINUTE = 5;

let up: TestUpstream;
let redis: TestRedis;

beforeAll(async () => {
  up = await TestUpstream.start();
  redis = await TestRedis.start();
  up.behaviour = (req, res, body) => {
    if (req.url?.startsWith('/v1/missing')) {
      res.statusCode = 404;
      res.setHeader('content-type', 'application/json');
      res.setHeader('x-upstream-own', 'yes');
      res.end(JSON.stringify({ code: 'not_found', message: 'no such pet (upstream)', status: 404 }));
      return;
    }
    if (req.url?.startsWith('/v1/reset')) {
      req.socket.destroy();
      return;
    }
    echo(req, res, body);
  };
});

afterAll(async () => {
  await up?.close();
  await redis?.stop();
});

type Res = request.Response;
const nowS = () => Date.now() / 1000;

function rawConfig(mode: 'memory' | 'redis', extra: Record<string, unknown> = {}, redisUrl?: string): Record<string, unknown> {
  return {
    server: { trustProxy: true },
    upstream: { url: up.url, timeoutMs: 2000 },
    ...(mode === 'redis' ? { redis: { url: redisUrl ?? redis.url, prefix: 'gwtest:', commandTimeoutMs: 500 } } : {}),
    anonymous: { perMinute: ANON_PER_MINUTE },
    ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [60, 600], resetAfterSeconds: 3600 },
    routes: [{ method: 'GET', path: '/v1/retired', deprecation: '2020-01-01T00:00:00Z', sunset: '2021-01-01T00:00:00Z', afterSunset: 'gone' }],
    ...extra,
  };
}

function body(res: Res): { code: string; message: string; status: number } {
  return JSON.parse(res.text) as { code: string; message: string; status: number };
}

function expectErrorBody(res: Res, status: number, code: string): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(body(res)).toEqual({ code, message: expect.any(String), status });
}

/** X-RateLimit-* of the binding window: its limit, what is left, and a reset about `inSeconds` from now. */
function expectXRateLimit(res: Res, limit: number, remaining: number, inSeconds: number): void {
  expect(res.headers['x-ratelimit-limit']).toBe(String(limit));
  expect(res.headers['x-ratelimit-remaining']).toBe(String(remaining));
  const reset = Number(res.headers['x-ratelimit-reset']);
  expect(Number.isInteger(reset)).toBe(true);
  expect(Math.abs(reset - (nowS() + inSeconds))).toBeLessThanOrEqual(2);
}

/** `RateLimit: "minute";r=..;t=.., "day";r=..;t=..` with r exact and t within [tMin, tMax]. */
function parseRateLimit(header: string | undefined): Array<{ name: string; r: number; t: number }> {
  expect(header).toBeDefined();
  return header!.split(', ').map((item) => {
    const m = /^"(minute|day)";r=(\d+);t=(\d+)$/.exec(item);
    expect(m, `RateLimit item ${item}`).not.toBeNull();
    return { name: m![1]!, r: Number(m![2]), t: Number(m![3]) };
  });
}

function retryAfter(res: Res): number {
  const v = res.headers['retry-after'];
  expect(v).toMatch(/^\d+$/);
  const n = Number(v);
  // A bound: the seconds left in a window depend on when in it the request came.
  expect(n).toBeGreaterThanOrEqual(1);
  return n;
}

function seenFor(id: string): number {
  return up.seen.filter((s) => s.headers['x-consumer-id'] === id).length;
}

describe.each(['memory', 'redis'] as const)('%s store', (mode) => {
  let gw: LimitsGateway;
  let config: Config;
  let ipSeq = 0;
  const freshIp = () => `203.0.113.${++ipSeq}`;
  const get = (path: string, key?: string, ip = '198.51.100.1') => {
    const r = request(gw.url).get(path).set('x-forwarded-for', ip);
    return key ? r.set('authorization', `Bearer ${key}`) : r;
  };

  beforeAll(async () => {
    if (mode === 'redis') await redis.flush();
    config = testConfig(rawConfig(mode));
    gw = await startLimitsGateway(config);
  });

  afterAll(async () => {
    await gw?.close();
  });

  beforeEach(() => {
    gw.runtime.apply(config);
  });

  it('200: headers of the minute window, both windows in RateLimit-Policy and RateLimit (free plan)', async () => {
    const { id, key } = await gw.createKey({ plan: 'free' });
    const first = await get('/v1/categories', key);
    expect(first.status).toBe(200);
    expectXRateLimit(first, 60, 59, 60);
    expect(first.headers['ratelimit-policy']).toBe(FREE_POLICY);
    expect(first.headers.ratelimit).toBe('"minute";r=59;t=60, "day";r=999;t=86400');
    expect(first.headers['retry-after']).toBeUndefined();

    const second = await get('/v1/categories', key);
    expect(second.status).toBe(200);
    expectXRateLimit(second, 60, 58, 60);
    const [minute, day] = parseRateLimit(second.headers.ratelimit);
    expect(minute).toMatchObject({ name: 'minute', r: 58 });
    // A bound: a second may have passed since the first request opened the windows.
    expect(minute!.t).toBeGreaterThanOrEqual(59);
    expect(minute!.t).toBeLessThanOrEqual(60);
    expect(day).toMatchObject({ name: 'day', r: 998 });
    // A bound: as for the minute.
    expect(day!.t).toBeGreaterThanOrEqual(86_399);
    expect(day!.t).toBeLessThanOrEqual(86_400);
    expect(seenFor(id)).toBe(2);
  });

  it('X-RateLimit-* follow the day window when it has fewer points left, the minute window on a tie', async () => {
    const dayKey = await gw.createKey({ plan: 'free', perDay: 3 });
    const r1 = await get('/v1/categories', dayKey.key);
    expect(r1.status).toBe(200);
    expectXRateLimit(r1, 3, 2, 86_400);
    expect(r1.headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=3;w=86400');
    expect(r1.headers.ratelimit).toBe('"minute";r=59;t=60, "day";r=2;t=86400');

    const tie = await gw.createKey({ plan: 'free', perMinute: 5, perDay: 5 });
    const r2 = await get('/v1/categories', tie.key);
    expect(r2.status).toBe(200);
    expectXRateLimit(r2, 5, 4, 60);
  });

  it('401s carry the anonymous limit (one "minute" window); past it the IP gets 429 rate_limit_exceeded', async () => {
    const upstreamCalls = up.seen.length;
    const ip = freshIp();
    const missing = await get('/v1/categories', undefined, ip);
    expectErrorBody(missing, 401, 'missing_api_key');
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="tollgate"');
    expectXRateLimit(missing, ANON_PER_MINUTE, ANON_PER_MINUTE - 1, 60);
    expect(missing.headers['ratelimit-policy']).toBe(`"minute";q=${ANON_PER_MINUTE};w=60`);
    expect(missing.headers.ratelimit).toBe(`"minute";r=${ANON_PER_MINUTE - 1};t=60`);

    const unknown = await get('/v1/categories', generateKey(), ip);
    expectErrorBody(unknown, 401, 'invalid_api_key');
    expect(unknown.headers['www-authenticate']).toBe('Bearer realm="tollgate", error="invalid_token"');
    expectXRateLimit(unknown, ANON_PER_MINUTE, ANON_PER_MINUTE - 2, 60);

    const malformed = await get('/v1/categories', 'not-a-tollgate-key', ip);
    expectErrorBody(malformed, 401, 'invalid_api_key');
    expect(malformed.headers['x-ratelimit-remaining']).toBe(String(ANON_PER_MINUTE - 3));

    for (let i = 4; i <= ANON_PER_MINUTE; i++) expect((await get('/v1/categories', undefined, ip)).status).toBe(401);
    const over = await get('/v1/categories', undefined, ip);
    expectErrorBody(over, 429, 'rate_limit_exceeded');
    expect(retryAfter(over)).toBeLessThanOrEqual(60);
    expectXRateLimit(over, ANON_PER_MINUTE, 0, retryAfter(over));
    expect(over.headers.ratelimit).toMatch(/^"minute";r=0;t=\d+$/);
    // A key that is not valid is no way around it.
    expectErrorBody(await get('/v1/categories', generateKey(), ip), 429, 'rate_limit_exceeded');

    // With trustProxy the client IP is the X-Forwarded-For address: another address has its own count.
    const other = await get('/v1/categories', undefined, freshIp());
    expectErrorBody(other, 401, 'missing_api_key');
    expect(other.headers['x-ratelimit-remaining']).toBe(String(ANON_PER_MINUTE - 1));
    expect(up.seen.length).toBe(upstreamCalls);
  });

  it('a valid key is not metered by the anonymous limit of its IP', async () => {
    const ip = freshIp();
    // Known to this instance (verified once): a refused address does not stop it. A key the instance has not
    // seen yet is not looked up for a refused address (hardening-anonymous.test.ts).
    const { key } = await gw.createKey({ plan: 'free' });
    expect((await get('/v1/categories', key, ip)).status).toBe(200);
    for (let i = 0; i <= ANON_PER_MINUTE; i++) await get('/v1/categories', undefined, ip);
    expect((await get('/v1/categories', undefined, ip)).status).toBe(429);
    const keyed = await get('/v1/categories', key, ip);
    expect(keyed.status).toBe(200);
    expect(keyed.headers['ratelimit-policy']).toBe(FREE_POLICY);
    expect((await get('/v1/categories', undefined, ip)).status).toBe(429);
  });

  it('an upstream 404 passes through unchanged, with our rate-limit headers', async () => {
    const { id, key } = await gw.createKey({ plan: 'free' });
    const res = await get('/v1/missing/7', key);
    expect(res.status).toBe(404);
    expect(body(res)).toEqual({ code: 'not_found', message: 'no such pet (upstream)', status: 404 });
    expect(res.headers['x-upstream-own']).toBe('yes');
    expectXRateLimit(res, 60, 59, 60);
    expect(res.headers['ratelimit-policy']).toBe(FREE_POLICY);
    expect(res.headers.ratelimit).toBe('"minute";r=59;t=60, "day";r=999;t=86400');
    expect(seenFor(id)).toBe(1);
  });

  it('410 for a route past its sunset carries the headers, counts, and calls no upstream', async () => {
    const { id, key } = await gw.createKey({ plan: 'free' });
    const res = await get('/v1/retired', key);
    expectErrorBody(res, 410, 'gone');
    expectXRateLimit(res, 60, 59, 60);
    expect(res.headers['ratelimit-policy']).toBe(FREE_POLICY);
    expect(res.headers.ratelimit).toMatch(/^"minute";r=59;t=60, "day";r=999;t=86400$/);
    expect(seenFor(id)).toBe(0);
  });

  it('502 when the upstream resets carries the headers', async () => {
    const { key } = await gw.createKey({ plan: 'free' });
    const res = await get('/v1/reset', key);
    expectErrorBody(res, 502, 'bad_gateway');
    expectXRateLimit(res, 60, 59, 60);
    expect(res.headers['ratelimit-policy']).toBe(FREE_POLICY);
    expect(res.headers.ratelimit).toBe('"minute";r=59;t=60, "day";r=999;t=86400');
  });

  it('429 rate_limit_exceeded past the minute limit: Retry-After points at the minute reset, no upstream call', async () => {
    const { id, key } = await gw.createKey({ plan: 'free', perMinute: 3 });
    for (let i = 0; i < 3; i++) expect((await get('/v1/categories', key)).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const res = await get('/v1/categories', key);
      expectErrorBody(res, 429, 'rate_limit_exceeded');
      const wait = retryAfter(res);
      expect(wait).toBeLessThanOrEqual(60);
      // A bound: up to two seconds may have passed since the first request opened the minute.
      expect(wait).toBeGreaterThanOrEqual(58);
      expectXRateLimit(res, 3, 0, wait);
      expect(parseRateLimit(res.headers.ratelimit)).toMatchObject([
        { name: 'minute', r: 0 },
        { name: 'day', r: 997 },
      ]);
      expect(res.headers['ratelimit-policy']).toBe('"minute";q=3;w=60, "day";q=1000;w=86400');
    }
    expect(seenFor(id)).toBe(3);
  });

  it('429 rate_limit_exceeded past the day limit: Retry-After points at the day reset', async () => {
    const { id, key } = await gw.createKey({ plan: 'free', perDay: 2 });
    for (let i = 0; i < 2; i++) expect((await get('/v1/categories', key)).status).toBe(200);
    const res = await get('/v1/categories', key);
    expectErrorBody(res, 429, 'rate_limit_exceeded');
    const wait = retryAfter(res);
    expect(wait).toBeGreaterThan(86_000);
    expect(wait).toBeLessThanOrEqual(86_400);
    expectXRateLimit(res, 2, 0, wait);
    expect(res.headers.ratelimit).toMatch(/^"minute";r=58;t=(59|60), "day";r=0;t=864\d\d$/);
    expect(seenFor(id)).toBe(2);
  });

  it('bans on the threshold-th 429: api_key_banned with Retry-After = ban length, no upstream call; metrics count it', async () => {
    // The gateway serves the whole describe: the counters are compared with what they were before this test.
    const countersBefore = (await request(gw.url).get('/metrics')).text;
    const { id, key } = await gw.createKey({ plan: 'free', perMinute: 1 });
    expect((await get('/v1/categories', key)).status).toBe(200);
    expect(body(await get('/v1/categories', key)).code).toBe('rate_limit_exceeded');
    expect(body(await get('/v1/categories', key)).code).toBe('rate_limit_exceeded');
    const banned = await get('/v1/categories', key);
    expectErrorBody(banned, 429, 'api_key_banned');
    expect(retryAfter(banned)).toBe(60);
    expect(banned.headers['ratelimit-policy']).toBe('"minute";q=1;w=60, "day";q=1000;w=86400');
    for (let i = 0; i < 5; i++) {
      const again = await get('/v1/categories', key);
      expectErrorBody(again, 429, 'api_key_banned');
      const wait = retryAfter(again);
      // A bound: up to two seconds may have passed since the ban began.
      expect(wait).toBeGreaterThanOrEqual(58);
      expect(wait).toBeLessThanOrEqual(60);
      expect(again.headers['x-ratelimit-limit']).toBe('1');
      // The windows as they stand: the one admitted request used the minute's only point; the ban spent nothing.
      expect(again.headers['x-ratelimit-remaining']).toBe('0');
      expect(again.headers.ratelimit).toMatch(/^"minute";r=0;t=\d+, "day";r=999;t=\d+$/);
    }
    expect(seenFor(id)).toBe(1);

    const metrics = (await request(gw.url).get('/metrics')).text;
    const added = (name: string, labels: Record<string, string>) =>
      (metricValue(metrics, name, labels) ?? 0) - (metricValue(countersBefore, name, labels) ?? 0);
    // One ban; the banning request and the five after it refused by the ban; two by the minute; one admitted.
    expect(added('tollgate_bans_total', { plan: 'free', level: '1' })).toBe(1);
    expect(added('tollgate_ratelimit_decisions_total', { plan: 'free', decision: 'refused', window: 'ban' })).toBe(6);
    expect(added('tollgate_ratelimit_decisions_total', { plan: 'free', decision: 'refused', window: 'minute' })).toBe(2);
    expect(added('tollgate_ratelimit_decisions_total', { plan: 'free', decision: 'admitted', window: 'none' })).toBe(1);
  });

  it('per-key overrides win over the plan', async () => {
    const { key } = await gw.createKey({ plan: 'pro', perMinute: 2, perDay: 7 });
    const r1 = await get('/v1/categories', key);
    expect(r1.status).toBe(200);
    expect(r1.headers['ratelimit-policy']).toBe('"minute";q=2;w=60, "day";q=7;w=86400');
    expectXRateLimit(r1, 2, 1, 60);
    expect((await get('/v1/categories', key)).status).toBe(200);
    expectErrorBody(await get('/v1/categories', key), 429, 'rate_limit_exceeded');

    // Only one field overridden: the other comes from the plan.
    const half = await gw.createKey({ plan: 'pro', perMinute: 9 });
    expect((await get('/v1/categories', half.key)).headers['ratelimit-policy']).toBe('"minute";q=9;w=60, "day";q=10000;w=86400');
  });

  it('a reload (Runtime.apply, what SIGHUP does) with a new plan limit applies to the next request', async () => {
    const { key } = await gw.createKey({ plan: 'free' });
    expectXRateLimit(await get('/v1/categories', key), 60, 59, 60);
    expectXRateLimit(await get('/v1/categories', key), 60, 58, 60);
    gw.runtime.apply(testConfig(rawConfig(mode, { plans: { free: { perMinute: 4, perDay: 1000 }, pro: { perMinute: 300, perDay: 10_000 } } })));
    const after = await get('/v1/categories', key);
    expect(after.status).toBe(200);
    expectXRateLimit(after, 4, 1, 60);
    expect(after.headers['ratelimit-policy']).toBe('"minute";q=4;w=60, "day";q=1000;w=86400');
    expect((await get('/v1/categories', key)).status).toBe(200);
    expectErrorBody(await get('/v1/categories', key), 429, 'rate_limit_exceeded');

    // The anonymous limit reloads too.
    gw.runtime.apply(testConfig(rawConfig(mode, { anonymous: { perMinute: 11 } })));
    const anon = await get('/v1/categories', undefined, freshIp());
    expect(anon.status).toBe(401);
    expect(anon.headers['ratelimit-policy']).toBe('"minute";q=11;w=60');
    expect(anon.headers['x-ratelimit-limit']).toBe('11');
  });

  it('exposes tollgate_ratelimit_decisions_total and tollgate_bans_total on /metrics', async () => {
    const res = await request(gw.url).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/^# TYPE tollgate_ratelimit_decisions_total counter$/m);
    expect(res.text).toMatch(/^# TYPE tollgate_bans_total counter$/m);
    expect(res.text).toMatch(/^tollgate_ratelimit_decisions_total\{plan="free",decision="admitted",window="none"\} \d+$/m);
    expect(res.text).toMatch(/^tollgate_bans_total\{plan="free",level="1"\} \d+$/m);
  });
});

describe('trustProxy false', () => {
  let gw: LimitsGateway;
  beforeAll(async () => {
    gw = await startLimitsGateway(testConfig({ ...rawConfig('memory'), server: { trustProxy: false }, anonymous: { perMinute: 2 } }));
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('ignores X-Forwarded-For: the connection address is the client', async () => {
    const send = (ip: string) => request(gw.url).get('/v1/categories').set('x-forwarded-for', ip);
    expect((await send('192.0.2.1')).status).toBe(401);
    expect((await send('192.0.2.2')).status).toBe(401);
    const third = await send('192.0.2.3');
    expectErrorBody(third, 429, 'rate_limit_exceeded');
  });
});

describe('Redis round trips (a private Redis used by this gateway alone)', () => {
  let own: TestRedis;
  let admin: Redis;
  let gw: LimitsGateway;

  beforeAll(async () => {
    own = await TestRedis.start();
    admin = own.client();
    gw = await startLimitsGateway(testConfig(rawConfig('redis', {}, own.url)));
  });
  afterAll(async () => {
    await gw?.close();
    admin?.disconnect();
    await own?.stop();
  });

  const get = (key: string) => request(gw.url).get('/v1/categories').set('authorization', `Bearer ${key}`);

  it('steady state: one EVALSHA per admitted request once the key is cached, and nothing else', async () => {
    const { key } = await gw.createKey({ plan: 'free' });
    // Warm up: the first request reads the key and loads the script.
    expect((await get(key)).status).toBe(200);
    expect((await get(key)).status).toBe(200);
    const gatewayAddrs = await clientAddresses(admin, 'tollgate-gateway');
    expect(gatewayAddrs.size).toBeGreaterThan(0);

    const N = 20;
    const before = await commandCalls(admin);
    const mon = await monitorRedis(admin);
    for (let i = 0; i < N; i++) expect((await get(key)).status).toBe(200);
    const commands = await mon.stop();
    const after = await commandCalls(admin);

    const fromGateway = commands.filter((c) => gatewayAddrs.has(c.source));
    expect(fromGateway.map((c) => c.args[0]!.toLowerCase())).toEqual(Array.from({ length: N }, () => 'evalsha'));
    expect((after.get('evalsha') ?? 0) - (before.get('evalsha') ?? 0)).toBe(N);
    expect((after.get('eval') ?? 0) - (before.get('eval') ?? 0)).toBe(0);
    // The anonymous limiter is not involved for keyed requests.
    expect(commands.some((c) => c.args.some((a) => a.includes('anon')))).toBe(false);
  });

  it('a revoke takes effect on the next request even when no invalidation message arrives (the limit check re-validates)', async () => {
    const { id, key } = await gw.createKey({ plan: 'free' });
    expect((await get(key)).status).toBe(200);
    // Revoke behind the gateway's back: the record changes, no pub/sub message is sent, the key stays cached.
    const recordKey = await findRecordKey(admin, id);
    const record = JSON.parse((await admin.get(recordKey)) ?? '{}') as { status: string };
    record.status = 'revoked';
    await admin.set(recordKey, JSON.stringify(record));
    const res = await get(key);
    expectErrorBody(res, 401, 'invalid_api_key');
    expect(res.headers['www-authenticate']).toBe('Bearer realm="tollgate", error="invalid_token"');
    // ...and it is gone from the cache: the next request asks the key store again and is refused there.
    expectErrorBody(await get(key), 401, 'invalid_api_key');
  });

  /** A gateway on this describe's Redis with a clock the test moves (Redis keeps its own time for the windows). */
  async function manualClockGateway(): Promise<{ clock: ManualClock; gw: LimitsGateway }> {
    const clock = new ManualClock(Date.now());
    return { clock, gw: await startLimitsGateway(testConfig(rawConfig('redis', {}, own.url)), { clock }) };
  }

  it('a key in steady use is never re-read: every check from its cached copy confirms it, still one EVALSHA per request', async () => {
    const { clock, gw: g } = await manualClockGateway();
    try {
      const { key } = await g.createKey({ plan: 'free' });
      const send = () => request(g.url).get('/v1/categories').set('authorization', `Bearer ${key}`);
      expect((await send()).status).toBe(200);
      const { ttlMs } = g.gateway.keys.opts;
      const gatewayAddrs = await clientAddresses(admin, 'tollgate-gateway');
      const fromGateway = (cs: MonitoredCommand[]) => cs.filter((c) => gatewayAddrs.has(c.source));

      let mon = await monitorRedis(admin);
      // From the cached copy, each check carries its revision (the script's ARGV[4]), and each one
      // that finds the record unchanged restarts the copy's ttl: five requests 0.6 ttl apart, 3 ttls after the key
      // was read, and no read since.
      for (let i = 0; i < 5; i++) {
        clock.advance(ttlMs * 0.6);
        expect((await send()).status).toBe(200);
      }
      let commands = fromGateway(await mon.stop());
      expect(commands.map((c) => c.args[0]!.toLowerCase())).toEqual(['evalsha', 'evalsha', 'evalsha', 'evalsha', 'evalsha']);
      // EVALSHA sha numkeys KEYS... ARGV...
      const argv = (c: MonitoredCommand) => c.args.slice(3 + Number(c.args[2]));
      expect(commands.map((c) => argv(c)[3]!.length)).toEqual([40, 40, 40, 40, 40]);
      // (ARGV[5], the credit of requests admitted from memory, is empty: Redis never failed here.)
      expect(commands.map((c) => argv(c)[4])).toEqual(['', '', '', '', '']);

      // A whole ttl with no request to confirm it: the key is read again (hash -> id, then the record).
      clock.advance(ttlMs + 1);
      mon = await monitorRedis(admin);
      expect((await send()).status).toBe(200);
      commands = fromGateway(await mon.stop());
      expect(commands.map((c) => c.args[0]!.toLowerCase())).toEqual(['get', 'get', 'evalsha']);
    } finally {
      await g.close();
    }
  });

  it('a key record edited in place, still valid, is read again after the next check, which finds it changed', async () => {
    const { gw: g } = await manualClockGateway();
    try {
      const { id, key } = await g.createKey({ plan: 'free' });
      const send = () => request(g.url).get('/v1/categories').set('authorization', `Bearer ${key}`);
      expect((await send()).headers['x-ratelimit-limit']).toBe('60');
      const recordKey = await findRecordKey(admin, id);
      const record = JSON.parse((await admin.get(recordKey)) ?? '{}') as { plan: string };
      record.plan = 'pro';
      await admin.set(recordKey, JSON.stringify(record));
      // The next check finds the record changed and drops the copy (this request is still decided on it)...
      expect((await send()).headers['x-ratelimit-limit']).toBe('60');
      // ...so the next request reads the record again and meters the key on its new plan.
      const next = await send();
      expect(next.status).toBe(200);
      expect(next.headers['x-ratelimit-limit']).toBe('300');
    } finally {
      await g.close();
    }
  });

  it('local ban cache: once banned, further requests make no Redis call (total_commands_processed stays flat)', async () => {
    const { key } = await gw.createKey({ plan: 'free', perMinute: 1 });
    expect((await get(key)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect(body(await get(key)).code).toBe('rate_limit_exceeded');
    expect(body(await get(key)).code).toBe('api_key_banned');

    const before = await totalCommands(admin);
    for (let i = 0; i < 50; i++) {
      const res = await get(key);
      expectErrorBody(res, 429, 'api_key_banned');
      retryAfter(res);
    }
    const after = await totalCommands(admin);
    // The only command in between is the first INFO itself.
    expect(after - before).toBe(1);
  });
});

describe('KeyLimiter ban cache and `keys unban`', () => {
  /** A store whose answers the test hands out one by one. */
  class ScriptedStore implements LimiterStore {
    calls = 0;
    private readonly pending: Array<(d: Decision) => void> = [];
    check(): Promise<Decision> {
      this.calls++;
      return new Promise((resolve) => this.pending.push(resolve));
    }
    snapshot(): Promise<LimitSnapshot> {
      return Promise.reject(new Error('snapshot: not used by this test'));
    }
    refund(): Promise<void> {
      return Promise.reject(new Error('refund: not used by this test'));
    }
    answer(d: Decision): void {
      const next = this.pending.shift();
      if (!next) throw new Error('no check is waiting');
      next(d);
    }
    get waiting(): number {
      return this.pending.length;
    }
  }
  const decision = (outcome: Decision['outcome'], retryMs = 0): Decision => ({
    outcome,
    windows: [
      { used: 1, resetMs: 60_000 },
      { used: 1, resetMs: 86_400_000 },
    ],
    short: 0,
    retryMs,
    banLevel: outcome === 'admitted' ? 0 : 1,
  });

  function limiterApp(store: LimiterStore, spentMs = 0) {
    const config = testConfig({ upstream: { url: up.url } });
    const limiter = new KeyLimiter({
      runtime: new Runtime(config),
      clock: systemClock,
      logger: silentLogger,
      metrics: new Metrics(),
      memory: new MemoryLimiterStore(systemClock),
      shared: { store, breaker: new Breaker(systemClock, 1000), failMode: 'open', commandTimeoutMs: 1000 },
    });
    const app = express();
    app.use((req, _res, next) => {
      req.ctx = new RequestContext('test', 0, req);
      req.ctx.caller = { id: 'key_cached', plan: 'free' };
      req.ctx.redisMs = spentMs;
      next();
    });
    app.use(keyLimits(limiter));
    app.use((_req, res) => void res.status(200).json({ ok: true }));
    return { app, limiter };
  }

  it('answers a known ban locally until it ends; forget() (the unban message) makes the next request ask the store', async () => {
    const store = new ScriptedStore();
    const { app, limiter } = limiterApp(store);
    const first = request(app)
      .get('/')
      .then((r) => r);
    await waitFor(() => store.waiting === 1, 'first check reaches the store');
    store.answer(decision('banned_now', 60_000));
    expect(body(await first).code).toBe('api_key_banned');
    for (let i = 0; i < 3; i++) expect(body(await request(app).get('/')).code).toBe('api_key_banned');
    expect(store.calls).toBe(1);

    limiter.forget('key_cached');
    const next = request(app)
      .get('/')
      .then((r) => r);
    await waitFor(() => store.waiting === 1, 'the check after forget() reaches the store');
    store.answer(decision('admitted'));
    expect((await next).status).toBe(200);
    expect(store.calls).toBe(2);
  });

  it('a ban read before an unban and answered after it is not cached (no stale ban outlives `keys unban`)', async () => {
    const store = new ScriptedStore();
    const { app, limiter } = limiterApp(store);
    // The check runs in Redis before the unban; the unban message arrives before its reply is handled.
    const inFlight = request(app)
      .get('/')
      .then((r) => r);
    await waitFor(() => store.waiting === 1, 'check in flight');
    limiter.forget('key_cached');
    store.answer(decision('banned', 60_000));
    expect(body(await inFlight).code).toBe('api_key_banned');

    const after = request(app)
      .get('/')
      .then((r) => r);
    const asked = await waitFor(() => store.waiting === 1, 'next check reaches the store', 30_000).then(
      () => true,
      () => false,
    );
    expect(asked, 'the next request must ask the store, not a ban cached from before the unban').toBe(true);
    expect(store.calls).toBe(2);
    store.answer(decision('admitted'));
    expect((await after).status).toBe(200);
  });

  it('forget(undefined) (the subscriber reconnected, messages may be lost) drops every known ban', async () => {
    const store = new ScriptedStore();
    const { app, limiter } = limiterApp(store);
    const first = request(app)
      .get('/')
      .then((r) => r);
    await waitFor(() => store.waiting === 1, 'first check reaches the store');
    store.answer(decision('banned_now', 60_000));
    expect(body(await first).code).toBe('api_key_banned');
    limiter.forget(undefined);
    const next = request(app)
      .get('/')
      .then((r) => r);
    await waitFor(() => store.waiting === 1, 'the check after the reset reaches the store');
    store.answer(decision('admitted'));
    expect((await next).status).toBe(200);
  });

  it("shares the request's Redis budget with the key lookup: a lookup that used it all leaves no Redis call (memory decides)", async () => {
    const store = new ScriptedStore();
    const { app } = limiterApp(store, 1000);
    const res = await request(app).get('/');
    expect(res.status).toBe(200);
    expect(store.calls).toBe(0);
  });
});

/** The Redis key holding a key record, whatever the test config's prefix. */
async function findRecordKey(admin: Redis, id: string): Promise<string> {
  const [, found] = await admin.scan('0', 'MATCH', `*key:{${id}}`, 'COUNT', 10_000);
  if (!found[0]) throw new Error(`no record for ${id}`);
  return found[0];
}

describe('access log', () => {
  it('names the consumer on keyed requests (2xx and 4xx) and on none of the anonymous ones', async () => {
    const { captureLogger } = await import('./helpers/limits.js');
    const cap = captureLogger('info');
    const gw = await startLimitsGateway(testConfig(rawConfig('memory')), { logger: cap.logger });
    try {
      const { id, key } = await gw.createKey({ plan: 'free', perMinute: 1 });
      const send = (rid: string, auth?: string) => {
        const r = request(gw.url).get('/v1/categories').set('x-request-id', rid);
        return auth ? r.set('authorization', auth) : r;
      };
      expect((await send('log-ok', `Bearer ${key}`)).status).toBe(200);
      expect((await send('log-429', `Bearer ${key}`)).status).toBe(429);
      expect((await send('log-anon')).status).toBe(401);
      const byId = (rid: string) => cap.lines.find((l) => (l.req as { id?: string } | undefined)?.id === rid);
      await waitFor(() => byId('log-anon') !== undefined, 'access-log lines');
      expect(byId('log-ok')).toMatchObject({ consumer: id, res: { statusCode: 200 } });
      expect(byId('log-429')).toMatchObject({ consumer: id, res: { statusCode: 429 } });
      expect(byId('log-anon')!.consumer).toBeUndefined();
    } finally {
      await gw.close();
    }
  });
});
