// Whether the Redis that holds the keys keeps them across its own restart. Key records are the only copy of every
// customer's key (Tollgate stores hashes; the plaintexts are gone): a Redis with neither AOF nor RDB snapshots loses
// them all when it restarts. Read at start-up and on every reconnect (a failover may reach another server), and read
// again with backoff until Redis answers (a read that timed out teaches nothing): a warning and
// tollgate_redis_persistence_disabled 1 when it does not persist. It changes nothing else: a cache-only Redis in a
// test setup is allowed.
import { ReplyError } from 'ioredis';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { TRANSIENT_REPLY } from './memory-policy.js';
import type { RedisCommands } from './redis.js';

export type Persistence = 'aof' | 'rdb' | 'aof+rdb' | 'none' | 'unknown';

type PersistenceClient = Pick<RedisCommands, 'info' | 'config'>;

/**
 * AOF from INFO persistence; RDB from CONFIG GET save. `unknown` only when Redis refused CONFIG (a managed Redis that
 * renames or forbids it) and AOF is off. Rejects when Redis did not answer (a timeout, a dropped connection, a
 * transient reply such as LOADING): that is no answer, to be asked again, never `unknown`.
 */
export async function readPersistence(client: PersistenceClient): Promise<Persistence> {
  const aof = /^aof_enabled:1\s*$/m.test(await client.info('persistence'));
  let rdb: boolean | undefined;
  try {
    const reply = (await client.config('GET', 'save')) as unknown;
    rdb = Array.isArray(reply) && typeof reply[1] === 'string' ? reply[1].trim() !== '' : undefined;
  } catch (err) {
    if (!(err instanceof ReplyError) || TRANSIENT_REPLY.test((err as Error).message)) throw err;
    rdb = undefined;
  }
  if (aof) return rdb ? 'aof+rdb' : 'aof';
  if (rdb === undefined) return 'unknown';
  return rdb ? 'rdb' : 'none';
}

/** The wait before the first read again after one that got no answer; it doubles up to PERSISTENCE_RETRY_MAX_MS. */
export const PERSISTENCE_RETRY_FIRST_MS = 250;
export const PERSISTENCE_RETRY_MAX_MS = 30_000;

export interface PersistenceWatcherOptions {
  /** Every primary to ask (INFO and CONFIG carry no key: on a cluster each primary is asked). */
  primaries: () => ReadonlyArray<PersistenceClient>;
  logger: Logger;
  metrics: Metrics;
  /** The Redis URL without its password, for log lines. */
  where: string;
  /** Backoff bounds (tests shorten them). */
  retryFirstMs?: number;
  retryMaxMs?: number;
}

/**
 * Reads the persistence settings on every primary and reports the worst (the gauge each time; a warning when one does
 * not persist). A read that gets no answer is tried again with backoff until one does; each (re)connection starts a
 * fresh read, cancelling a pending retry. Never rejects.
 */
export class PersistenceWatcher {
  private timer: NodeJS.Timeout | undefined;
  /** Ends the backoff wait in progress early (a new read started, or stop()). */
  private cancelWait: (() => void) | undefined;
  /** Bumped by every new read and by stop(): an answer to an older one is dropped. */
  private generation = 0;
  private stopped = false;

  constructor(private readonly opts: PersistenceWatcherOptions) {}

  /** Reads now (start-up, a reconnect), then again until Redis answers. Resolves with the reading, or undefined if superseded. */
  check(): Promise<Persistence | undefined> {
    this.cancel();
    if (this.stopped) return Promise.resolve(undefined);
    return this.read(++this.generation);
  }

  stop(): void {
    this.stopped = true;
    this.generation++;
    this.cancel();
  }

  private cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.cancelWait?.();
    this.cancelWait = undefined;
  }

  private wait(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      this.cancelWait = () => resolve(false);
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.cancelWait = undefined;
        resolve(true);
      }, ms);
      this.timer.unref();
    });
  }

  private async read(generation: number): Promise<Persistence | undefined> {
    const { logger, metrics, where } = this.opts;
    let delayMs = this.opts.retryFirstMs ?? PERSISTENCE_RETRY_FIRST_MS;
    for (let tries = 1; ; tries++) {
      let p: Persistence;
      try {
        const each = await Promise.all(this.opts.primaries().map(readPersistence));
        p = each.find((x) => x === 'none') ?? each.find((x) => x === 'unknown') ?? each[0] ?? 'unknown';
      } catch (err) {
        if (generation !== this.generation) return undefined;
        // Said once per reading (its first failure), so a Redis slow to answer does not flood the log.
        if (tries === 1)
          logger.warn(
            { redis: where, error: (err as Error).message },
            'redis persistence settings not read (no answer): reading them again until redis answers',
          );
        if (!(await this.wait(delayMs)) || generation !== this.generation) return undefined;
        delayMs = Math.min(delayMs * 2, this.opts.retryMaxMs ?? PERSISTENCE_RETRY_MAX_MS);
        continue;
      }
      if (generation !== this.generation) return undefined;
      metrics.persistenceDisabled.set(p === 'none' ? 1 : 0);
      if (p !== 'none') logger.info({ redis: where, persistence: p, tries }, `redis persistence: ${p}`);
      else
        logger.warn(
          { redis: where, persistence: p, tries },
          'redis has neither AOF nor RDB persistence: a restart of it deletes every API key (set appendonly yes, or back keys up with tollgate keys export)',
        );
      return p;
    }
  }
}
