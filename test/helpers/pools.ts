// Consumers' pools for the limits tests: key records written as the key store writes them (one JSON string per key)
// with their copy, byte for byte, in the consumer's hash of keys (what the limit check validates a key of a consumer
// against, in the consumer's slot); and key limiters composed as an instance composes one, on a connection of their own.
import { createHash, randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { Config } from '../../src/config/schema.js';
import { recordRevision } from '../../src/keys/redis-store.js';
import { KeyLimiter, type LimitedRequest } from '../../src/limits/key-limits.js';
import { MemoryLimiterStore } from '../../src/limits/memory-store.js';
import type { LimitedCaller } from '../../src/limits/quota.js';
import { RedisLimiterStore } from '../../src/limits/redis-store.js';
import { Metrics } from '../../src/observability/metrics.js';
import { Runtime } from '../../src/routing/runtime.js';
import { Breaker } from '../../src/storage/breaker.js';
import type { Keyspace } from '../../src/storage/keyspace.js';
import type { RedisConnection } from '../../src/storage/redis.js';
import type { Clock } from '../../src/util/clock.js';
import { silentLogger } from './gateway.js';

export interface StoredTestKey {
  id: string;
  hash: string;
  /** The record's revision (SHA-1 of its bytes), as the key cache holds it. */
  revision: string;
  /** The record's bytes, as stored. */
  bytes: string;
}

/**
 * Writes an active key record (its own string) and, for a key of `consumer`, the same bytes as its field of the
 * consumer's hash of keys; `status` other than active writes a key the check must refuse.
 */
export async function storeKey(
  redis: Redis | Cluster,
  ks: Keyspace,
  k: { id: string; consumer?: string; plan?: string; status?: 'active' | 'revoked' },
): Promise<StoredTestKey> {
  const hash = createHash('sha256').update(randomBytes(16)).digest('hex');
  const bytes = JSON.stringify({
    id: k.id,
    plan: k.plan ?? 'free',
    hash,
    status: k.status ?? 'active',
    createdAt: '2026-11-01T00:00:00.000Z',
    ...(k.consumer ? { consumer: k.consumer } : {}),
  });
  await redis.set(ks.keyRecord(k.id), bytes);
  if (k.consumer) await redis.hset(ks.consumerKeys(k.consumer), k.id, bytes);
  return { id: k.id, hash, revision: recordRevision(Buffer.from(bytes)), bytes };
}

/** A caller with the key's hash and revision, so the check re-validates the record as the gateway's does. */
export function callerOf(key: StoredTestKey, fields: Omit<LimitedCaller, 'id' | 'keyHash' | 'keyRevision'>): LimitedCaller {
  return { id: key.id, keyHash: key.hash, keyRevision: key.revision, ...fields };
}

/** A request's part the key limiter reads and writes. */
export function limitedRequest(id = 'req'): LimitedRequest {
  return { id, redisMs: 0, decision: undefined, charge: undefined };
}

/** A key limiter on `connection`, composed as composeGateway composes an instance's (failMode closed: no fallback). */
export function keyLimiterOn(connection: RedisConnection, ks: Keyspace, config: Config, clock: Clock, ledgerTtlMs = 0): KeyLimiter {
  return new KeyLimiter({
    runtime: new Runtime(config),
    clock,
    logger: silentLogger,
    metrics: new Metrics(),
    memory: new MemoryLimiterStore(clock),
    shared: {
      store: new RedisLimiterStore(connection.client, ks, () => ledgerTtlMs, connection.clientForSlotOf),
      breaker: new Breaker(clock, 1000),
      failMode: 'closed',
      commandTimeoutMs: 5000,
    },
  });
}
