// Faults that must stay local: a key record that is not JSON is that key's problem (refused, logged, counted),
// never a Redis outage for every key on the instance; and a Redis outage seen only by anonymous traffic is counted
// and switches the instance to degraded mode. A real gateway on a private redis-server in front of a loopback upstream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import request from 'supertest';
import { Metrics } from '../src/observability/metrics.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger, metricValue, startLimitsGateway, waitFor, type LimitsGateway } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';

const PREFIX = 'corrupt:';
const keyspace = new Keyspace(PREFIX);
/** What a request may take while Redis is hung, with commandTimeoutMs 100 (HUNG_REDIS_TIMEOUT_MS). */
const BOUND_MS = 500;

const s = useStack({ redis: true, client: true });

/**
 * The hung-Redis test needs the 100 ms command timeout for its bound. The corrupt-record test must not have it: a
 * valid key's first request reads its record from Redis, and on a loaded machine that read can exceed 100 ms (a busy
 * event loop runs the timeout's timer before it reads the reply), which answers the valid key 503
 * `service_unavailable` (the key store did not answer) instead of 200. That test is about a corrupt record, not
 * timing, so it gets a timeout a loaded machine meets.
 */
const HUNG_REDIS_TIMEOUT_MS = 100;
const LOADED_MACHINE_TIMEOUT_MS = 2000;

function config(prefix: string, anonymousPerMinute = 1000, commandTimeoutMs = LOADED_MACHINE_TIMEOUT_MS) {
  return testConfig({
    upstream: { url: s.up.url, timeoutMs: 2000 },
    redis: { url: s.redis.url, prefix, failMode: 'open', commandTimeoutMs },
    plans: { free: { perMinute: 1000, perDay: 100_000 } },
    anonymous: { perMinute: anonymousPerMinute },
  });
}

async function get(gw: LimitsGateway, key?: string): Promise<{ status: number; code: string | undefined; ms: number }> {
  const started = Date.now();
  const r = request(gw.url).get('/v1/categories').timeout(5000);
  const res = await (key ? r.set('authorization', `Bearer ${key}`) : r);
  const ms = Date.now() - started;
  return { status: res.status, code: res.status === 200 ? undefined : (JSON.parse(res.text) as { code?: string }).code, ms };
}

async function metric(gw: LimitsGateway, name: string, labels: Record<string, string> = {}): Promise<number> {
  return metricValue((await request(gw.url).get('/metrics')).text, name, labels) ?? 0;
}

describe('a key record that is not JSON', () => {
  let gw: LimitsGateway;
  const cap = captureLogger('info');

  beforeAll(async () => {
    gw = await startLimitsGateway(config(PREFIX), { logger: cap.logger, metrics: new Metrics() });
  });

  afterAll(async () => {
    await gw?.close();
  });

  it('refuses only that key (401, cached and uncached), logs it once by id, counts it, and never enters degraded mode', async () => {
    const good = await gw.createKey({});
    const bad = await gw.createKey({});
    // Both cached as valid first.
    expect((await get(gw, good.key)).status).toBe(200);
    expect((await get(gw, bad.key)).status).toBe(200);

    await s.client.set(keyspace.keyRecord(bad.id), 'not json');

    // The first: cached, refused by the limit script; the later ones read the record again (uncached).
    for (let i = 0; i < 4; i++) {
      const r = await get(gw, bad.key);
      expect(r.status).toBe(401);
      expect(r.code).toBe('invalid_api_key');
      expect((await get(gw, good.key)).status).toBe(200);
    }
    // A key never cached before it was corrupted: refused by the lookup.
    const fresh = await gw.createKey({});
    await s.client.set(keyspace.keyRecord(fresh.id), '{"truncated');
    expect((await get(gw, fresh.key)).code).toBe('invalid_api_key');
    expect((await get(gw, good.key)).status).toBe(200);

    expect(await metric(gw, 'tollgate_redis_degraded')).toBe(0);
    expect(await metric(gw, 'tollgate_redis_degraded_transitions_total', { to: 'degraded' })).toBe(0);
    // Found by the limit script (the cached key), then by lookups: the bad key's one re-read after it was dropped
    // (its last two requests meet that read's negative cache entry, kept 2 s), and the fresh key.
    expect(await metric(gw, 'tollgate_key_records_invalid_total', { seen_by: 'limit_check' })).toBe(1);
    expect(await metric(gw, 'tollgate_key_records_invalid_total', { seen_by: 'lookup' })).toBe(2);
    const logged = cap.lines.filter((l) => String(l.msg).includes('key record is not valid'));
    expect(logged.map((l) => l.consumer).sort()).toEqual([bad.id, fresh.id].sort());
    // Never the plaintext (nor anything of the hash).
    expect(JSON.stringify(logged)).not.toContain(bad.key);
  });
});

describe('the anonymous limit on a Redis that hangs', () => {
  let gw: LimitsGateway;

  beforeAll(async () => {
    gw = await startLimitsGateway(config('anon-outage:', 3, HUNG_REDIS_TIMEOUT_MS), { metrics: new Metrics() });
  });

  afterAll(async () => {
    s.redis.resume();
    await gw?.close();
  });

  it('counts the store errors, still answers 401/429 within the bound from memory, and enters degraded mode', async () => {
    expect((await get(gw)).status).toBe(401);
    expect(await metric(gw, 'tollgate_redis_degraded')).toBe(0);
    s.redis.pause();
    try {
      const answers = [];
      for (let i = 0; i < 6; i++) answers.push(await get(gw));
      for (const a of answers) {
        expect([401, 429]).toContain(a.status);
        expect(a.ms).toBeLessThan(BOUND_MS);
      }
      // Memory meters the rest of the minute (3 per minute: at least the last ones are refused).
      expect(answers.at(-1)!.status).toBe(429);
      // A bound: the first timeout opens the breaker, but a request later than its 1 s cool-down (a loaded machine)
      // probes Redis again and adds an error.
      expect(await metric(gw, 'tollgate_redis_errors_total', { op: 'anonymous_limit' })).toBeGreaterThanOrEqual(1);
      expect(await metric(gw, 'tollgate_redis_degraded')).toBe(1);
    } finally {
      s.redis.resume();
    }
    await waitFor(async () => (await metric(gw, 'tollgate_redis_degraded_transitions_total', { to: 'degraded' })) === 1, 'one degraded transition');
  });
});
