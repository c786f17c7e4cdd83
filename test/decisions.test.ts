// The request path's decisions on their own, with no Express app and no HTTP: authentication, the anonymous limit,
// key limits and route policy answer with outcomes (src/pipeline/stages/ turns them into HTTP), and the request
// context carries what one stage learns to the next and to the observers.
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { Runtime } from '../src/routing/runtime.js';
import { ApiKeyScheme } from '../src/identity/api-key-scheme.js';
import { compileKeySources, parseBearer } from '../src/http/credentials.js';
import { generateKey } from '../src/keys/format.js';
import { MemoryKeyStore } from '../src/keys/memory-store.js';
import { KeyVerifier } from '../src/keys/verifier.js';
import { AnonymousLimiter } from '../src/limits/anonymous.js';
import { KeyLimiter } from '../src/limits/key-limits.js';
import { MemoryLimiterStore } from '../src/limits/memory-store.js';
import type { LimiterStore } from '../src/limits/types.js';
import { Metrics } from '../src/observability/metrics.js';
import { RequestContext } from '../src/pipeline/context.js';
import { isRetired, matchRoute, type CompiledRoute } from '../src/routing/routes.js';
import { Breaker } from '../src/storage/breaker.js';
import { ManualClock } from '../src/util/clock.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { testKeyAdmin } from './helpers/key-stores.js';
import { checkOnlyStore, metricValue } from './helpers/limits.js';

const UPSTREAM = { url: 'http://127.0.0.1:9' };

function context(remoteAddress = '192.0.2.7'): RequestContext {
  const req = { socket: { remoteAddress }, headers: {} } as unknown as IncomingMessage;
  return new RequestContext('req-1', 0, req);
}

describe('ApiKeyScheme', () => {
  async function setup(refused?: { refusedUntil(client: string): number }) {
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const store = new MemoryKeyStore(() => clock.now());
    const keys = testKeyAdmin(store, clock);
    const verifier = new KeyVerifier(store, clock);
    // Listening to the change feed, the key filter built: as composeGateway starts it.
    await verifier.start();
    await verifier.knownHashes.settled();
    const auth = new ApiKeyScheme(verifier, { refused });
    return { clock, store, keys, auth };
  }

  it('no header or another scheme: missing_api_key; a malformed or unknown bearer token: invalid_api_key', async () => {
    const { auth } = await setup();
    expect(await auth.verify(parseBearer(undefined), context())).toBe('missing_api_key');
    expect(await auth.verify(parseBearer('Basic dXNlcjpwYXNz'), context())).toBe('missing_api_key');
    expect(await auth.verify(parseBearer('Bearer a,b'), context())).toBe('invalid_api_key');
    expect(await auth.verify(parseBearer(`Bearer ${generateKey()}`), context())).toBe('invalid_api_key');
  });

  it('a valid key: the caller with its plan, overrides and the hash the limit check re-validates', async () => {
    const { auth, keys } = await setup();
    const { key, record } = await keys.issuer.create({ plan: 'pro', perMinute: 7 });
    const caller = await auth.verify(parseBearer(`Bearer ${key}`), context());
    expect(caller).toMatchObject({ id: record.id, plan: 'pro', perMinute: 7 });
    expect(typeof caller === 'object' && caller.keyHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("read: the key from the route's own sources when it has them, else the configured ones; two different keys: a conflict and its message", async () => {
    const { clock, store } = await setup();
    const scheme = new ApiKeyScheme(new KeyVerifier(store, clock), { sources: () => compileKeySources(['header:X-API-Key']) });
    const req = {
      socket: { remoteAddress: '192.0.2.7' },
      headers: { 'x-api-key': 'key-one', authorization: 'Bearer key-two' },
      url: '/v1/x',
    } as unknown as IncomingMessage;
    const ctx = new RequestContext('req-1', 0, req);
    expect(scheme.read(req, ctx)).toEqual({ kind: 'token', token: 'key-one' });
    expect(ctx.keySources?.headers).toEqual(['x-api-key']);
    expect(ctx.authFailureMessage).toBeUndefined();
    ctx.matchedRoute = { keySources: compileKeySources(['bearer', 'header:X-API-Key']) } as unknown as CompiledRoute;
    expect(scheme.read(req, ctx)).toEqual({ kind: 'conflict' });
    expect(ctx.keySources?.bearer).toBe(true);
    expect(ctx.authFailureMessage).toMatch(/two different API keys/);
    expect(await scheme.verify({ kind: 'conflict' }, ctx)).toBe('invalid_api_key');
  });

  it('a store that fails with nothing cached: unavailable (the key may be fine), never invalid_api_key', async () => {
    const { auth, store } = await setup();
    store.findByHash = () => Promise.reject(new Error('store down'));
    expect(await auth.verify(parseBearer(`Bearer ${generateKey()}`), context())).toBe('unavailable');
  });

  it('a client the anonymous limit refuses gets no store read for a made-up key (the refusal is left in the context), and its valid key is admitted', async () => {
    let reads = 0;
    const { auth, store, keys } = await setup({ refusedUntil: (client) => (client === '192.0.2.7' ? 12_345 : 0) });
    const find = store.findByHash.bind(store);
    store.findByHash = (hash) => {
      reads++;
      return find(hash);
    };
    const ctx = context();
    expect(await auth.verify(parseBearer(`Bearer ${generateKey()}`), ctx)).toBe('invalid_api_key');
    expect(reads).toBe(0);
    expect(ctx.anonymousRefusedUntil).toBe(12_345);
    const other = context('198.51.100.1');
    await auth.verify(parseBearer(`Bearer ${generateKey()}`), other);
    expect(reads).toBe(1);
    expect(other.anonymousRefusedUntil).toBe(0);
    // A valid key from the refused address, never seen by this verifier: read, and a caller.
    const { key, record } = await keys.issuer.create({ plan: 'free' });
    expect(await auth.verify(parseBearer(`Bearer ${key}`), context())).toMatchObject({ id: record.id, plan: 'free' });
    expect(reads).toBe(2);
  });
});

describe('AnonymousLimiter', () => {
  it('admits perMinute per client, then refuses; a known refusal is answered from memory; counted in the metrics', async () => {
    const clock = new ManualClock();
    const metrics = new Metrics();
    const anon = new AnonymousLimiter({ runtime: new Runtime(testConfig({ upstream: UPSTREAM, anonymous: { perMinute: 2 } })), clock, metrics });
    const a = await anon.consume('192.0.2.1');
    expect(a).toMatchObject({ admitted: true, limit: 2, remaining: 1 });
    expect((await anon.consume('192.0.2.1')).admitted).toBe(true);
    const refused = await anon.consume('192.0.2.1');
    expect(refused).toMatchObject({ admitted: false, remaining: 0 });
    expect(refused.resetMs).toBeGreaterThan(0);
    expect(anon.refusedUntil('192.0.2.1')).toBe(clock.now() + refused.resetMs);
    expect(anon.knownRefusal('192.0.2.1', 0)).toMatchObject({ admitted: false, remaining: 0 });
    // Another client has its own bucket and no known refusal.
    expect(anon.knownRefusal('192.0.2.2', 0)).toBeUndefined();
    expect((await anon.consume('192.0.2.2')).admitted).toBe(true);
    // A refusal found by authentication stands even once the window is over.
    clock.advance(120_000);
    expect(anon.refusedUntil('192.0.2.1')).toBe(0);
    expect(anon.knownRefusal('192.0.2.1', clock.now() + 5_000)).toMatchObject({ admitted: false, resetMs: 5_000 });
    const text = await metrics.registry.metrics();
    expect(metricValue(text, 'tollgate_anonymous_decisions_total', { decision: 'refused' })).toBe(3);
    expect(metricValue(text, 'tollgate_anonymous_decisions_total', { decision: 'admitted' })).toBe(3);
  });
});

describe('KeyLimiter', () => {
  const config = testConfig({
    upstream: UPSTREAM,
    plans: { free: { perMinute: 2, perDay: 100 } },
    ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [300], resetAfterSeconds: 600 },
  });

  function limiter(shared?: { store: LimiterStore; failMode: 'open' | 'closed' }) {
    const clock = new ManualClock();
    const invalid: string[] = [];
    const l = new KeyLimiter({
      runtime: new Runtime(config),
      clock,
      logger: silentLogger,
      metrics: new Metrics(),
      memory: new MemoryLimiterStore(clock),
      onInvalidKey: (id) => invalid.push(id),
      ...(shared ? { shared: { ...shared, breaker: new Breaker(clock, 1000), commandTimeoutMs: 100 } } : {}),
    });
    return { l, clock, invalid };
  }

  it('decides from the plan: admitted, then limited by the minute window, then a ban the instance remembers', async () => {
    const { l } = limiter();
    const consumer = { id: 'key_1', plan: 'free' };
    const ctx = context();
    const first = await l.check(consumer, ctx);
    expect(first).toMatchObject({ kind: 'decided', decision: { outcome: 'admitted' }, request: { cost: 1 } });
    expect(first.kind === 'decided' && first.request.policy).toBe('"minute";q=2;w=60, "day";q=100;w=86400');
    expect(ctx.decision?.outcome).toBe('admitted');
    await l.check(consumer, context());
    expect(await l.check(consumer, context())).toMatchObject({ decision: { outcome: 'limited' } });
    expect(await l.check(consumer, context())).toMatchObject({ decision: { outcome: 'banned_now', banLevel: 1 } });
    const later = await l.check(consumer, context());
    expect(later).toMatchObject({ decision: { outcome: 'banned' } });
    // forget() (an unban anywhere) drops the remembered ban: the store decides again (the minute is still full).
    l.forget('key_1');
    expect(await l.check(consumer, context())).toMatchObject({ decision: { outcome: 'limited' } });
  });

  it('a key whose plan is not configured: no_plan; a per-key override needs no plan', async () => {
    const { l } = limiter();
    expect(await l.check({ id: 'k', plan: 'gold' }, context())).toEqual({ kind: 'no_plan' });
    expect(await l.check({ id: 'k', plan: 'gold', perMinute: 1, perDay: 1 }, context())).toMatchObject({ kind: 'decided' });
  });

  it('Redis failing: failMode closed answers unavailable; failMode open decides in memory', async () => {
    const failing = checkOnlyStore(() => Promise.reject(new Error('down')));
    expect(await limiter({ store: failing, failMode: 'closed' }).l.check({ id: 'k', plan: 'free' }, context())).toEqual({ kind: 'unavailable' });
    expect(await limiter({ store: failing, failMode: 'open' }).l.check({ id: 'k', plan: 'free' }, context())).toMatchObject({
      kind: 'decided',
      decision: { outcome: 'admitted' },
    });
  });

  it('the store no longer accepts the key: invalid_key, and the key is forgotten locally', async () => {
    const revoked = checkOnlyStore(() =>
      Promise.resolve({
        outcome: 'invalid_key',
        windows: [
          { used: 0, resetMs: 0 },
          { used: 0, resetMs: 0 },
        ],
        short: 0,
        retryMs: 0,
        banLevel: 0,
      }),
    );
    const { l, invalid } = limiter({ store: revoked, failMode: 'open' });
    expect(await l.check({ id: 'key_gone', plan: 'free' }, context())).toEqual({ kind: 'invalid_key' });
    expect(invalid).toEqual(['key_gone']);
  });

  it('the Redis budget is what the key lookup left: none left fails over without calling the store', async () => {
    let calls = 0;
    const store = checkOnlyStore(() => {
      calls++;
      return Promise.reject(new Error('not reached'));
    });
    const ctx = context();
    ctx.redisMs = 100;
    expect(await limiter({ store, failMode: 'closed' }).l.check({ id: 'k', plan: 'free' }, ctx)).toEqual({ kind: 'unavailable' });
    expect(calls).toBe(0);
  });

  it('memory limits (no Redis) with a route in shadow mode: let through, counted shadow_refused in the metrics and the ledger, no strike', async () => {
    const shadowConfig = testConfig({
      upstream: UPSTREAM,
      plans: { free: { perMinute: 100, perDay: 1000 } },
      ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [300], resetAfterSeconds: 600 },
      routes: [{ path: '/v1/store/*rest', name: 'store', cost: 2, limits: { default: { perMinute: 4 } }, mode: 'shadow' }],
    });
    const runtime = new Runtime(shadowConfig);
    const clock = new ManualClock();
    const metrics = new Metrics();
    const counted: string[] = [];
    const l = new KeyLimiter({
      runtime,
      clock,
      logger: silentLogger,
      metrics,
      memory: new MemoryLimiterStore(clock),
      usage: { count: (_id, kind) => counted.push(kind), notReached: () => undefined, upstreamFailed: () => undefined, minuteCount: () => undefined },
    });
    const route = matchRoute(runtime.current.routes, 'GET', '/v1/store/items')!;
    const outcomes = [];
    for (let i = 0; i < 5; i++) outcomes.push(await l.check({ id: 'k', plan: 'free' }, context(), route));
    expect(outcomes.map((o) => o.kind === 'decided' && [o.decision.outcome, o.decision.short])).toEqual([
      ['admitted', 0],
      ['admitted', 0],
      ['admitted', 4],
      ['admitted', 4],
      ['admitted', 4],
    ]);
    // Cost 2 from the plan's windows every time; the shadow window stopped at its limit.
    const last = outcomes[4]!;
    expect(last.kind === 'decided' && last.decision.windows.map((w) => w.used)).toEqual([10, 10, 4]);
    expect(counted).toEqual(['a', 'a', 'a', 's', 'a', 's', 'a', 's']);
    const text = await metrics.registry.metrics();
    expect(metricValue(text, 'tollgate_ratelimit_decisions_total', { plan: 'free', decision: 'shadow_refused', window: 'route' })).toBe(3);
    expect(metricValue(text, 'tollgate_ratelimit_decisions_total', { plan: 'free', decision: 'admitted', window: 'none' })).toBe(2);
  });
});

describe('KeyLimiter: costs a key can never pay, candidate limits', () => {
  const config = testConfig({
    upstream: UPSTREAM,
    plans: { free: { perMinute: 10, perDay: 1000, shadow: { perMinute: 2 } }, trial: { perMinute: 3, perDay: 1000, mode: 'shadow' } },
    ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [300], resetAfterSeconds: 600 },
    routes: [{ method: 'POST', path: '/v1/reports', cost: 5 }],
  });

  function setup() {
    const runtime = new Runtime(config);
    const clock = new ManualClock();
    const metrics = new Metrics();
    let calls = 0;
    const memory = new MemoryLimiterStore(clock);
    const store = checkOnlyStore((id, request, ban) => {
      calls++;
      return memory.check(id, request, ban);
    });
    const l = new KeyLimiter({
      runtime,
      clock,
      logger: silentLogger,
      metrics,
      memory: new MemoryLimiterStore(clock),
      shared: { store, breaker: new Breaker(clock, 1000), failMode: 'closed', commandTimeoutMs: 1000 },
    });
    const route = matchRoute(runtime.current.routes, 'POST', '/v1/reports')!;
    return { l, metrics, route, calls: () => calls };
  }

  it('a cost above an enforced window of the key (its own override): cost_exceeds_limit naming it, with no store call; a shadow-mode plan is not refused', async () => {
    const { l, metrics, route, calls } = setup();
    for (let i = 0; i < 5; i++) {
      expect(await l.check({ id: 'k', plan: 'free', perMinute: 4 }, context(), route)).toMatchObject({
        kind: 'cost_exceeds_limit',
        cost: 5,
        window: { name: 'minute', limit: 4 },
      });
    }
    expect(calls()).toBe(0);
    expect(
      metricValue(await metrics.registry.metrics(), 'tollgate_ratelimit_decisions_total', { plan: 'free', decision: 'cost_exceeds_limit', window: 'minute' }),
    ).toBe(5);
    // The same key on a route it can pay for is decided by the store as usual.
    expect(await l.check({ id: 'k', plan: 'free', perMinute: 4 }, context())).toMatchObject({ kind: 'decided', decision: { outcome: 'admitted' } });
    // A plan in shadow mode enforces nothing: its small window reports, it does not refuse.
    expect(await l.check({ id: 't', plan: 'trial' }, context(), route)).toMatchObject({ kind: 'decided', decision: { outcome: 'admitted', short: 1 } });
  });

  it("a plan's candidate limit is counted per window as a shadow refusal; a key's own override of that window has none", async () => {
    const { l, metrics } = setup();
    const shorts = [];
    for (let i = 0; i < 4; i++) {
      const o = await l.check({ id: 'a', plan: 'free' }, context());
      shorts.push(o.kind === 'decided' && [o.decision.outcome, o.decision.short, o.request.policy]);
    }
    const policy = '"minute";q=10;w=60, "day";q=1000;w=86400';
    expect(shorts).toEqual([
      ['admitted', 0, policy],
      ['admitted', 0, policy],
      ['admitted', 4, policy],
      ['admitted', 4, policy],
    ]);
    const own = await l.check({ id: 'b', plan: 'free', perMinute: 10 }, context());
    expect(own.kind === 'decided' && own.request.candidates).toEqual([]);
    const text = await metrics.registry.metrics();
    expect(metricValue(text, 'tollgate_ratelimit_shadow_refusals_total', { plan: 'free', window: 'minute:shadow' })).toBe(2);
    expect(metricValue(text, 'tollgate_ratelimit_decisions_total', { plan: 'free', decision: 'shadow_refused', window: 'minute' })).toBe(2);
  });
});

describe('route policy', () => {
  const runtime = new Runtime(
    testConfig({
      upstream: UPSTREAM,
      routes: [
        { method: 'GET', path: '/v1/pets/:id', deprecation: '2026-01-01T00:00:00Z', sunset: '2026-06-01T00:00:00Z', afterSunset: 'gone' },
        { method: '*', path: '/v1/orders', deprecation: '2026-01-01T00:00:00Z' },
      ],
    }),
  );
  const routes = runtime.current.routes;

  it('matches by method (GET also for HEAD, * for any) and by the path an upstream would read', () => {
    expect(matchRoute(routes, 'GET', '/v1/pets/1?x=1')?.pattern).toBe('/v1/pets/:id');
    expect(matchRoute(routes, 'HEAD', '/v1//p%65ts/1')?.pattern).toBe('/v1/pets/:id');
    expect(matchRoute(routes, 'DELETE', '/v1/pets/1')).toBeUndefined();
    expect(matchRoute(routes, 'PATCH', '/v1/orders')?.pattern).toBe('/v1/orders');
  });

  it('a gone route is retired from its sunset on; a merely deprecated one never', () => {
    const pets = matchRoute(routes, 'GET', '/v1/pets/1')!;
    expect(isRetired(pets, Date.parse('2026-05-31T23:59:59Z'))).toBe(false);
    expect(isRetired(pets, Date.parse('2026-06-01T00:00:00Z'))).toBe(true);
    expect(isRetired(matchRoute(routes, 'GET', '/v1/orders')!, Date.parse('2030-01-01T00:00:00Z'))).toBe(false);
  });
});

describe('RequestContext', () => {
  it('computes the client key once, from a validated address', () => {
    let reads = 0;
    const req = {
      headers: {},
      get ip() {
        reads++;
        return 'not an ip';
      },
      socket: { remoteAddress: '2001:db8:1:2:3:4:5:6' },
    } as unknown as IncomingMessage;
    const ctx = new RequestContext('r', 0, req);
    expect(ctx.clientKey()).toBe('2001:db8:1:2::/64');
    expect(ctx.clientKey()).toBe('2001:db8:1:2::/64');
    expect(reads).toBe(1);
  });
});
