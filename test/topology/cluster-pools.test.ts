// Consumers' pools on a Redis Cluster of 3 primaries (real redis-server processes in cluster mode, on loopback): a key
// of a consumer is checked in its consumer's slot (pool windows, caps, record, ban and ledger share the hash tag
// {c:<consumer>}), exact across two instances under concurrency, keys of one consumer on any node's keys' slots.
import calculateSlot from 'cluster-key-slot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeyLimitOutcome } from '../../src/limits/key-limits.js';
import type { LimitedCaller } from '../../src/limits/quota.js';
import { Keyspace } from '../../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../../src/storage/redis.js';
import { ManualClock } from '../../src/util/clock.js';
import { testConfig } from '../helpers/gateway.js';
import { callerOf, keyLimiterOn, limitedRequest, storeKey } from '../helpers/pools.js';
import { TestRedisCluster } from '../helpers/redis-cluster.js';

let cluster: TestRedisCluster;
const connections: RedisConnection[] = [];

beforeAll(async () => {
  cluster = await TestRedisCluster.start({ primaries: 3, replicas: 0 });
}, 90_000);

afterAll(async () => {
  for (const c of connections) await c.close();
  await cluster?.stop();
});

const config = testConfig({
  upstream: { url: 'http://127.0.0.1:9' },
  plans: { free: { perMinute: 1000, perDay: 100_000 }, team: { perMinute: 50, perDay: 100_000, perMonth: 1_000_000 } },
  ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 600 },
});

/** An instance's connection to the cluster (the gateway's purpose), every primary's connection open. */
async function connection(): Promise<RedisConnection> {
  const c = connectRedis({ redis: { cluster: { nodes: cluster.urls } }, commandTimeoutMs: 5000, purpose: 'gateway' });
  connections.push(c);
  await c.waitForReady(10_000);
  return c;
}

const outcome = (o: KeyLimitOutcome): string => (o.kind === 'decided' ? o.decision.outcome : o.kind);

describe("a consumer's pool on the cluster", () => {
  it('is exact across two instances: two keys of one consumer (their own ids in other slots), 300 concurrent checks, a pool of 50 a minute admits exactly 50', async () => {
    const ks = new Keyspace('cpool:');
    const admin = cluster.client();
    try {
      const clock = new ManualClock(Date.now());
      const [a, b] = [keyLimiterOn(await connection(), ks, config, clock, 86_400_000), keyLimiterOn(await connection(), ks, config, clock, 86_400_000)];
      // Two keys whose own slots differ from each other and from the consumer's: their checks go to the consumer's.
      const ids = ['k_pool_1', 'k_pool_2'];
      expect(new Set([...ids.map((id) => calculateSlot(`{${id}}`)), calculateSlot('{c:acme}')]).size).toBe(3);
      const consumer = { id: 'acme', plan: 'team' };
      const callers: LimitedCaller[] = [];
      for (const id of ids) callers.push(callerOf(await storeKey(admin, ks, { id, consumer: 'acme' }), { plan: 'free', consumer }));
      const outcomes = await Promise.all(
        Array.from({ length: 300 }, (_, i) => (i % 2 ? a : b).check(callers[Math.floor(i / 2) % 2]!, limitedRequest(`r${i}`)).then(outcome)),
      );
      const admitted = outcomes.filter((o) => o === 'admitted').length;
      const refused = outcomes.filter((o) => o === 'limited' || o === 'banned' || o === 'banned_now').length;
      const owner = await cluster.primaryOf('{c:acme}');
      console.log(
        `pooled exactness on a 3-primary cluster: 300 concurrent checks of 2 keys of one consumer on 2 instances, pool 50 a minute: admitted ${admitted}, refused ${refused}, other ${300 - admitted - refused} (the consumer's slot ${calculateSlot('{c:acme}')} on the primary at port ${owner.port})`,
      );
      expect(admitted).toBe(50);
      expect(refused).toBe(250);
      expect(await admin.get('cpool:rl:{c:acme}:minute')).toBe('50');
      // The ledger of each key, in the consumer's slot: admitted counted per key, 50 in all.
      const day = Math.floor(Date.now() / 86_400_000);
      const ledger = await Promise.all(ids.map((id) => admin.hgetall(`cpool:usage:{c:acme}:${id}:${day}`)));
      const admittedIn = (h: Record<string, string>) => Object.entries(h).reduce((n, [f, v]) => (f.startsWith('a') ? n + Number(v) : n), 0);
      expect(ledger.map(admittedIn).reduce((x, y) => x + y, 0)).toBe(50);
    } finally {
      admin.disconnect();
    }
  });

  it("a key's cap inside the pool, and a monthly window, in the same one-slot call", async () => {
    const ks = new Keyspace('ccap:');
    const admin = cluster.client();
    try {
      const l = keyLimiterOn(await connection(), ks, config, new ManualClock(Date.now()));
      const consumer = { id: 'capco', plan: 'team' };
      const capped = callerOf(await storeKey(admin, ks, { id: 'k_cap', consumer: 'capco' }), { plan: 'free', perMinute: 3, perMonth: 10, consumer });
      const other = callerOf(await storeKey(admin, ks, { id: 'k_other', consumer: 'capco' }), { plan: 'free', consumer });
      const seen: string[] = [];
      for (let i = 0; i < 5; i++) seen.push(outcome(await l.check(capped, limitedRequest())));
      expect(seen).toEqual(['admitted', 'admitted', 'admitted', 'limited', 'limited']);
      expect(outcome(await l.check(other, limitedRequest()))).toBe('admitted');
      const q = await l.quota(capped, limitedRequest());
      expect(q.kind === 'read' && q.request.windows.map((w, i) => `${w.name} ${q.snapshot.windows[i]!.used}`)).toEqual([
        'minute 4',
        'day 4',
        'month 4',
        'key:minute 3',
        'key:month 3',
      ]);
    } finally {
      admin.disconnect();
    }
  });
});
