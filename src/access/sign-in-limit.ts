// How many key sign-ins one client address may try on the portal per minute (portal.signInsPerMinute, read at each
// attempt, so a reload applies at once): every attempt counts, right or wrong, so guessing keys through the portal
// costs as much as guessing them anywhere. rate-limiter-flexible counts: RateLimiterRedis on the admin Redis
// connection (every instance shares the count), RateLimiterMemory without Redis. If Redis does not answer, the
// instance counts in memory meanwhile (insuranceLimiter) rather than refusing every sign-in or admitting all.
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';

/** Whether an attempt may go on, or how long until the address's minute ends. */
export type SignInVerdict = { ok: true } | { ok: false; retryAfterMs: number };

export class SignInLimit {
  // Only counts: whether an address is past the limit is decided here, against the limit in force now.
  private readonly counter: RateLimiterAbstract;

  constructor(
    private readonly perMinute: () => number,
    redis?: { client: RedisCommands; keyspace: Keyspace },
  ) {
    const counts = { points: Number.MAX_SAFE_INTEGER, duration: 60 };
    const memory = new RateLimiterMemory({ ...counts, keyPrefix: 'portal-signin' });
    this.counter = redis
      ? new RateLimiterRedis({ ...counts, storeClient: redis.client, keyPrefix: redis.keyspace.portalSignInPrefix(), insuranceLimiter: memory })
      : memory;
  }

  /** Counts an attempt from the address: past the limit, refused until the minute ends. */
  async attempt(address: string): Promise<SignInVerdict> {
    const seen = await this.counter.consume(address, 1).catch((rej: unknown) => {
      if (rej instanceof RateLimiterRes) return rej;
      throw rej;
    });
    if (seen.consumedPoints > this.perMinute()) return { ok: false, retryAfterMs: seen.msBeforeNext };
    return { ok: true };
  }
}
