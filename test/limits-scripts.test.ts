// The limit store's script commands on a busy auto-pipelined connection: a refund (or a quota read) issued in the same
// turn as limit checks that are still waiting in ioredis's batch, on a Redis that has not cached the scripts yet (a
// restart, SCRIPT FLUSH). Every script command must be defined on the connection before its first batch: one defined
// later joins a batch that does not know its script, and ioredis then throws "results[i] is not iterable" outside any
// promise, an uncaught exception that takes the gateway down (seen under load with the upstream refusing: the first
// 502s' refunds).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLimiterStore, RedisBanStore } from '../src/limits/redis-store.js';
import type { BanPolicy } from '../src/limits/types.js';
import { planRequest, planWindows } from '../src/limits/windows.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { TestRedis } from './helpers/redis-server.js';
import { keySubject } from '../src/limits/subject.js';

const keyspace = new Keyspace('scripts:');
const NO_BANS: BanPolicy = { threshold: 1_000_000, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 86_400 };
let redis: TestRedis;

beforeAll(async () => {
  redis = await TestRedis.start();
});
afterAll(async () => {
  await redis?.stop();
});

/** Runs fn on a fresh auto-pipelined connection (the gateway's kind) and collects what escapes every promise. */
async function onFreshConnection(fn: (connection: RedisConnection) => Promise<void>): Promise<unknown[]> {
  const escaped: unknown[] = [];
  const onUncaught = (err: unknown): void => void escaped.push(err);
  process.on('uncaughtException', onUncaught);
  const connection = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'gateway' });
  try {
    // Commands fail at once until the connection is ready (no offline queue): wait for it, bounded.
    for (let i = 0; i < 200; i++) {
      if (
        await connection.client.ping().then(
          () => true,
          () => false,
        )
      )
        break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const admin = redis.client();
    await admin.script('FLUSH');
    admin.disconnect();
    await fn(connection);
    // ioredis hands batch replies to their callbacks in process.nextTick: let them all run.
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    process.off('uncaughtException', onUncaught);
    await connection.close();
  }
  return escaped;
}

describe('script commands on a busy auto-pipelined connection, scripts not cached', () => {
  it('a refund issued beside pending limit checks answers, and nothing escapes', async () => {
    const escaped = await onFreshConnection(async ({ client }) => {
      const store = new RedisLimiterStore(client, keyspace);
      const request = planRequest({ perMinute: 100, perDay: 1000 });
      const checks = Array.from({ length: 20 }, (_, i) => store.check(keySubject(`key_r${i}`), request, NO_BANS));
      // Same turn: the checks are still in ioredis's batch.
      const refund = store.refund(keySubject('key_r0'), {
        windows: planWindows({ perMinute: 100, perDay: 1000 }).map((w) => ({ suffix: w.suffix, remainingMs: w.lengthMs, lengthMs: w.lengthMs })),
        cost: 1,
      });
      const decisions = await Promise.all(checks);
      await refund;
      expect(decisions.map((d) => d.outcome)).toEqual(Array(20).fill('admitted'));
    });
    expect(escaped.map(String)).toEqual([]);
  });

  it('a quota read (the snapshot script) issued beside pending limit checks answers, and nothing escapes', async () => {
    const escaped = await onFreshConnection(async ({ client }) => {
      const store = new RedisLimiterStore(client, keyspace);
      const bans = new RedisBanStore(client, keyspace);
      const request = planRequest({ perMinute: 100, perDay: 1000 });
      const checks = Array.from({ length: 20 }, (_, i) => store.check(keySubject(`key_s${i}`), request, NO_BANS));
      const snapshot = bans.snapshot(keySubject('key_s0'), request.windows, NO_BANS);
      await Promise.all(checks);
      expect((await snapshot).windows).toHaveLength(2);
    });
    expect(escaped.map(String)).toEqual([]);
  });
});
