// What routing costs Redis (docs/routing.md): nothing. On a real redis-server, a keyed request routed to a service
// of several targets costs the one limit script, as before services existed; a request answered 503
// no_healthy_upstream costs no Redis command at all (nothing counted, nothing billed). Counted from INFO commandstats.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { clientAddresses, commandCalls, monitorRedis } from './helpers/limits.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

let redis: TestRedis;
let admin: Redis;
let a: TestUpstream;
let b: TestUpstream;
let g: TestGateway;
let dead: string;
const key = generateKey();

beforeAll(async () => {
  redis = await TestRedis.start();
  admin = new Redis(redis.url, { lazyConnect: true });
  await admin.connect();
  [a, b] = await Promise.all([TestUpstream.start(), TestUpstream.start()]);
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  dead = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  await new Promise<void>((r) => s.close(() => r()));
  g = await startTestGateway(
    testConfig({
      redis: { url: redis.url },
      services: {
        web: { targets: [a.url, b.url] },
        down: { targets: [dead], healthCheck: { path: '/healthz', intervalMs: 100, timeoutMs: 500, unhealthyAfter: 1, healthyAfter: 1 } },
      },
      routes: [
        { path: '/web/*', service: 'web', stripPrefix: '/web' },
        { path: '/down/*', service: 'down' },
      ],
      keys: [{ id: 'key_redis', plan: 'pro', sha256: hashKey(key) }],
    }),
    { keyStages: true },
  );
}, 120_000);

afterAll(async () => {
  await g?.close();
  await admin?.quit();
  await Promise.all([a?.close(), b?.close()]);
  await redis?.kill();
});

function total(calls: Map<string, number>): number {
  let n = 0;
  for (const [cmd, c] of calls) if (cmd !== 'info') n += c;
  return n;
}

describe('Redis commands per routed request', () => {
  it('a keyed request to a service of two targets: one EVALSHA (the limit script), nothing else', async () => {
    const auth = { authorization: `Bearer ${key}` };
    // A first request warms the script cache (EVALSHA falls back to EVAL once).
    expect((await fetch(`${g.url}/web/warm`, { headers: auth })).status).toBe(200);
    const gatewayAddrs = await clientAddresses(admin, 'tollgate-gateway');
    expect(gatewayAddrs.size).toBeGreaterThan(0);
    const before = await commandCalls(admin);
    const mon = await monitorRedis(admin);
    const N = 20;
    for (let i = 0; i < N; i++) expect((await fetch(`${g.url}/web/${i}`, { headers: auth })).status).toBe(200);
    const commands = await mon.stop();
    const after = await commandCalls(admin);
    // What the gateway sent (not what the script ran inside): one EVALSHA per request.
    // INFO is the gateway's own timer (the eviction-policy and persistence checks), not a request's: left out.
    const fromGateway = commands
      .filter((c) => gatewayAddrs.has(c.source))
      .map((c) => c.args[0]!.toLowerCase())
      .filter((c) => c !== 'info');
    expect(fromGateway).toEqual(Array.from({ length: N }, () => 'evalsha'));
    expect((after.get('evalsha') ?? 0) - (before.get('evalsha') ?? 0)).toBe(N);
    // Both targets served (round-robin), the routing itself asked Redis nothing.
    expect(a.seen.length).toBeGreaterThan(5);
    expect(b.seen.length).toBeGreaterThan(5);
  });

  it('503 no_healthy_upstream: no Redis command at all', async () => {
    const deadline = Date.now() + 5000;
    while (g.gateway.services.snapshot().find((s) => s.name === 'down')!.healthy > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    const before = await commandCalls(admin);
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`${g.url}/down/${i}`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { code: string }).code).toBe('no_healthy_upstream');
    }
    const after = await commandCalls(admin);
    expect(total(after) - total(before)).toBe(0);
  });
});
