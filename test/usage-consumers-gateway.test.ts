// A key of a consumer counted in its consumer's ledger through a real gateway, with a real upstream (and a target that
// refuses connections): requests it was admitted, a deprecated route it called and a request that reached no target
// (502, given back: not billed) are all its consumer's, as GET /usage?groupBy=consumer and /routes/deprecated show,
// with no count left in the key's own ledger. On Redis (the limit script counts admitted requests; the refund script
// and the instance's batches the rest) and on a Redis-less gateway (every count the instance's own).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashAdminToken } from '../src/admin/tokens.js';
import { keySubject } from '../src/limits/subject.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { dayOf, HOUR_MS } from '../src/util/time.js';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { freePort } from './helpers/redis-server.js';
import { useStack } from './helpers/stack.js';

const s = useStack({ redis: true, client: true, upstream: true });
const TOKEN = 'tga_ledger-consumer-test';
const DEPRECATED = 'GET /v1/old';

describe.each(['redis', 'memory'] as const)("a consumer's key counted in its consumer's ledger (%s)", (backend) => {
  const prefix = `lc-${backend}:`;
  const ks = new Keyspace(prefix);
  let gw: LimitsGateway;
  const api = new CheckedApi({ target: () => gw.gateway.adminApp!, token: TOKEN });
  const keys = { pooled: { id: '', key: '' }, alone: { id: '', key: '' } };
  let period = '';

  beforeAll(async () => {
    // A target nothing listens on: every try is refused a connection, so the request reaches no target (refunded).
    const dead = `http://127.0.0.1:${await freePort()}`;
    gw = await startLimitsGateway(
      testConfig({
        server: { host: '127.0.0.1', port: 0 },
        ...(backend === 'redis' ? { redis: { url: s.redis.url, prefix, commandTimeoutMs: 2000 } } : {}),
        admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
        plans: { free: { perMinute: 100, perDay: 1000 } },
        anonymous: { perMinute: 1000 },
        usage: { retentionDays: 7, flushIntervalMs: 60_000 },
        services: { live: { targets: [s.up.url] }, dead: { targets: [dead] } },
        routes: [
          { path: '/v1/things', service: 'live' },
          { method: 'GET', path: '/v1/old', service: 'live', deprecation: '2026-01-01T00:00:00Z' },
          { path: '/v1/gone', service: 'dead' },
        ],
      }),
    );
    const created = await api.call('POST', '/consumers', { body: { id: 'acme', name: 'Acme', plan: 'free' } });
    expect(created.status, created.text).toBe(201);
    const pooled = await api.call('POST', '/keys', { body: { plan: 'free', consumer: 'acme' } });
    expect(pooled.status, pooled.text).toBe(201);
    keys.pooled = { id: pooled.body.id, key: pooled.body.key };
    const alone = await api.call('POST', '/keys', { body: { plan: 'free' } });
    keys.alone = { id: alone.body.id, key: alone.body.key };
    period = `from=${new Date(Date.now() - HOUR_MS).toISOString()}&to=${new Date(Date.now() + HOUR_MS).toISOString()}`;
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    expect(api.problems).toEqual([]);
  });

  const call = async (key: string, path: string): Promise<number> => {
    const res = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(10_000) });
    await res.arrayBuffer();
    return res.status;
  };

  it('admitted requests, deprecated-route calls and a refund are the consumer’s; the key alone keeps its own row', async () => {
    for (let i = 0; i < 3; i++) expect(await call(keys.pooled.key, '/v1/things')).toBe(200);
    for (let i = 0; i < 2; i++) expect(await call(keys.pooled.key, '/v1/old')).toBe(200);
    expect(await call(keys.pooled.key, '/v1/gone')).toBe(502);
    expect(await call(keys.alone.key, '/v1/things')).toBe(200);
    await gw.gateway.flushUsage();

    const byConsumer = await api.get(`/usage?groupBy=consumer&sort=id&order=asc&${period}`);
    expect(byConsumer.status, byConsumer.text).toBe(200);
    const rows = byConsumer.body.consumers as Array<{ consumer: string | null; keys: number; admitted: number; upstreamFailed: number }>;
    // 5 served; the one that reached no target is not billed (taken out of admitted, not counted upstreamFailed).
    expect(rows.find((r) => r.consumer === 'acme')).toMatchObject({ keys: 1, admitted: 5, upstreamFailed: 0, rateLimited: 0 });
    expect(rows.find((r) => r.consumer === null)).toMatchObject({ keys: 1, admitted: 1 });

    // By key: the pooled key's counts are all under acme, none in its own ledger.
    const split = await api.get(`/keys/${keys.pooled.id}/usage?granularity=day&groupBy=consumer&${period}`);
    expect(split.status, split.text).toBe(200);
    const parts = split.body.consumers as Array<{ consumer: string | null; buckets: Array<{ admitted: number }> }>;
    const sum = (c: string | null) => (parts.find((p) => p.consumer === c)?.buckets ?? []).reduce((n, b) => n + b.admitted, 0);
    expect([sum(null), sum('acme')]).toEqual([0, 5]);

    const deprecated = await api.get(`/routes/deprecated?groupBy=consumer&${period}`);
    expect(deprecated.status, deprecated.text).toBe(200);
    const route = (deprecated.body.routes as Array<{ method: string; path: string; consumers: Array<{ consumer: string; calls: number }> }>).find(
      (r) => `${r.method} ${r.path}` === DEPRECATED,
    )!;
    expect(route.consumers.map((c) => [c.consumer, c.calls])).toEqual([['acme', 2]]);
  });

  it.runIf(backend === 'redis')("on Redis: the consumer's ledger day holds the counts, the refund taken off it; the key's own day holds none", async () => {
    const now = Date.now();
    const day = dayOf(now);
    const h = Math.floor((now % 86_400_000) / HOUR_MS);
    const consumerDay = await s.client.hgetall(ks.consumerUsageDay('acme', keys.pooled.id, day));
    expect(Number(consumerDay[`a${h}`])).toBe(5);
    expect(Number(consumerDay[`m${h}`])).toBeGreaterThan(0);
    expect(await s.client.exists(ks.usageDay(keySubject(keys.pooled.id), day))).toBe(0);
    // The deprecated route's calls name the caller `<key>@<consumer>`.
    expect(await s.client.hgetall(ks.deprecatedCalls(DEPRECATED, day))).toEqual({ [`${keys.pooled.id}@acme`]: '2' });
    // The pool's minute window got the refunded request's point back as well.
    expect(Number(await s.client.get(ks.limitWindow(keySubject(keys.pooled.id, 'acme').pool!, 'minute')))).toBe(5);
  });
});
