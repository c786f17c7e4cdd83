// Whether the Redis that holds the keys keeps them across its own restart. Key records are the only copy of every
// customer's key (Tollgate stores hashes; the plaintexts are gone): a Redis with neither AOF nor RDB snapshots loses
// them all when it restarts. Read at start-up and on every reconnect (a failover may reach another server): a warning
// and tollgate_redis_persistence_disabled 1 when it does not persist. It changes nothing else: a cache-only Redis in
// a test setup is allowed.
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RedisCommands } from './redis.js';

export type Persistence = 'aof' | 'rdb' | 'aof+rdb' | 'none' | 'unknown';

/** AOF from INFO persistence; RDB from CONFIG GET save (a managed Redis that refuses CONFIG: unknown unless AOF is on). */
export async function readPersistence(client: Pick<RedisCommands, 'info' | 'config'>): Promise<Persistence> {
  const aof = /^aof_enabled:1\s*$/m.test(await client.info('persistence'));
  let rdb: boolean | undefined;
  try {
    const reply = (await client.config('GET', 'save')) as unknown;
    rdb = Array.isArray(reply) && typeof reply[1] === 'string' ? reply[1].trim() !== '' : undefined;
  } catch {
    rdb = undefined;
  }
  if (aof) return rdb ? 'aof+rdb' : 'aof';
  if (rdb === undefined) return 'unknown';
  return rdb ? 'rdb' : 'none';
}

/**
 * Reads it on every primary (INFO and CONFIG carry no key: on a cluster each primary is asked) and reports the worst
 * (the gauge each time; a warning when one does not persist). Never rejects.
 */
export async function reportPersistence(
  primaries: ReadonlyArray<Pick<RedisCommands, 'info' | 'config'>>,
  logger: Logger,
  metrics: Metrics,
  where: string,
): Promise<Persistence> {
  let p: Persistence;
  try {
    const each = await Promise.all(primaries.map(readPersistence));
    p = each.find((x) => x === 'none') ?? each.find((x) => x === 'unknown') ?? each[0] ?? 'unknown';
  } catch {
    return 'unknown';
  }
  metrics.persistenceDisabled.set(p === 'none' ? 1 : 0);
  if (p !== 'none') logger.info({ redis: where, persistence: p }, `redis persistence: ${p}`);
  else
    logger.warn(
      { redis: where, persistence: p },
      'redis has neither AOF nor RDB persistence: a restart of it deletes every API key (set appendonly yes, or back keys up with tollgate keys export)',
    );
  return p;
}
