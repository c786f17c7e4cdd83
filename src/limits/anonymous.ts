// The anonymous limit decision: requests without a valid key are metered per client address (anonymous.perMinute), so key
// guessing is throttled. rate-limiter-flexible does this on Redis, through the breaker, and in memory while Redis
// fails (no insurance limiter: it would absorb the failures, which then went uncounted and unseen by the breaker). The
// address is anonymousClientKey's (validated, IPv6 by /64). Each instance also remembers, bounded, which clients
// it has refused and until when: it answers them again without Redis, and the authentication decision asks it
// before looking up a key the key filter says no stored key has, so a refused client's made-up keys cost no Redis
// read either (a valid key from the same address is still looked up: src/keys/known-hashes.ts). No Express here: the
// anonymousLimit stage (src/pipeline/stages/limits.ts) turns decisions into headers and 429s.
import type { RedisCommands } from '../storage/redis.js';
import { LRUCache } from 'lru-cache';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Clock } from '../util/clock.js';
import { formatRateLimitPolicy } from '../http/headers.js';
import type { Metrics } from '../observability/metrics.js';
import type { Runtime } from '../routing/runtime.js';
import { BreakerOpenError, type Breaker } from '../storage/breaker.js';
import type { Keyspace } from '../storage/keyspace.js';

/**
 * Most refused clients one instance remembers. Past it the least recently refused is forgotten, which costs only
 * what remembering saves: its next request asks Redis again, and is refused there.
 */
const MAX_REFUSED_CLIENTS = 10_000;

/** The anonymous limit's answer for one request; the anonymousLimit stage turns it into headers and maybe a 429. */
export interface AnonymousDecision {
  admitted: boolean;
  limit: number;
  remaining: number;
  /** Milliseconds until the client's window resets. */
  resetMs: number;
  /** The RateLimit-Policy header value. */
  policy: string;
  /** The clock time the decision was made at (the RateLimit headers are relative to it). */
  now: number;
}

interface Limiters {
  perMinute: number;
  policy: string;
  memory: RateLimiterMemory;
  shared: RateLimiterAbstract | undefined;
  /** Client key -> when (clock ms) the window that refused it ends. Rebuilt with the limit, which may have risen. */
  refused: LRUCache<string, number>;
}

export class AnonymousLimiter {
  private limiters: Limiters;

  constructor(
    private readonly deps: { runtime: Runtime; clock: Clock; metrics: Metrics; redis?: { client: RedisCommands; keyspace: Keyspace; breaker: Breaker } },
  ) {
    this.limiters = this.build(deps.runtime.config.anonymous.perMinute);
    // SIGHUP may change anonymous.perMinute: with Redis the counts live there and survive the rebuild; the memory
    // limiter (Redis-less, or the fallback) starts its per-IP counts afresh.
    deps.runtime.onChange((next) => {
      if (next.config.anonymous.perMinute !== this.limiters.perMinute) this.limiters = this.build(next.config.anonymous.perMinute);
    });
  }

  private build(perMinute: number): Limiters {
    const memory = new RateLimiterMemory({ points: perMinute, duration: 60, keyPrefix: 'anon' });
    const r = this.deps.redis;
    const shared = r
      ? new RateLimiterRedis({
          storeClient: r.client,
          keyPrefix: r.keyspace.anonymousPrefix(),
          points: perMinute,
          duration: 60,
          rejectIfRedisNotReady: true,
        })
      : undefined;
    return {
      perMinute,
      policy: formatRateLimitPolicy([{ name: 'minute', limit: perMinute, windowSeconds: 60 }]),
      memory,
      shared,
      refused: new LRUCache<string, number>({ max: MAX_REFUSED_CLIENTS }),
    };
  }

  /**
   * When (clock ms) the anonymous limit stops refusing this client, or 0 when this instance has not refused it in the
   * current window. Memory only: no store call. A refusal ends with the window that made it (windows are fixed, so
   * later requests in it cannot move that end), and other instances' counts only add.
   */
  refusedUntil(clientKey: string): number {
    return this.refusedUntilOf(this.limiters, clientKey, this.deps.clock.now());
  }

  private refusedUntilOf(l: Limiters, client: string, now: number): number {
    const until = l.refused.get(client);
    if (until === undefined) return 0;
    if (until > now) return until;
    l.refused.delete(client);
    return 0;
  }

  /**
   * The refusal this instance already knows for the client, answered from memory with no store call; undefined when
   * it knows none (then `consume`). `knownUntil`: a refusal the authentication stage already found (and skipped the
   * key lookup on): it stands even if the window ended in between, so the key is never called invalid.
   */
  knownRefusal(clientKey: string, knownUntil: number): AnonymousDecision | undefined {
    const l = this.limiters;
    const now = this.deps.clock.now();
    const until = knownUntil > 0 ? knownUntil : this.refusedUntilOf(l, clientKey, now);
    if (until === 0) return undefined;
    this.deps.metrics.anonymousDecisions.inc({ decision: 'refused' });
    return { admitted: false, limit: l.perMinute, remaining: 0, resetMs: Math.max(0, until - now), policy: l.policy, now };
  }

  /** Counts one request of the client (in Redis when there is one, else or while it fails in memory) and decides. */
  async consume(client: string): Promise<AnonymousDecision> {
    const l = this.limiters;
    const shared = l.shared;
    const breaker = this.deps.redis?.breaker;
    let result: RateLimiterRes;
    let admitted: boolean;
    try {
      // Through the breaker, so a Redis failure seen only by anonymous traffic still switches the instance to
      // degraded mode, and while it is open this fails at once (or is the one probe) instead of waiting on Redis.
      // A refusal is an answer, not a failure: it must not reach the breaker as a rejection.
      result = shared && breaker ? await breaker.run(() => shared.consume(client).catch(refusalAsAnswer)) : await l.memory.consume(client);
      admitted = result.consumedPoints <= l.perMinute;
    } catch (rej) {
      if (rej instanceof RateLimiterRes) {
        // The memory limiter's refusal (Redis-less).
        result = rej;
        admitted = false;
      } else {
        // A store failure (down, timed out, refusing writes): counted, and this request metered in memory.
        if (!(rej instanceof BreakerOpenError)) this.deps.metrics.redisErrors.inc({ op: 'anonymous_limit' });
        result = await l.memory.consume(client).catch((r: unknown) => r as RateLimiterRes);
        admitted = result.remainingPoints >= 0 && result.consumedPoints <= l.perMinute;
      }
    }
    const now = this.deps.clock.now();
    this.deps.metrics.anonymousDecisions.inc({ decision: admitted ? 'admitted' : 'refused' });
    if (!admitted) l.refused.set(client, now + result.msBeforeNext);
    return {
      admitted,
      limit: l.perMinute,
      remaining: admitted ? result.remainingPoints : 0,
      resetMs: result.msBeforeNext,
      policy: l.policy,
      now,
    };
  }
}

/** rate-limiter-flexible rejects with a RateLimiterRes when over the limit: resolve with it instead. */
function refusalAsAnswer(rej: unknown): RateLimiterRes {
  if (rej instanceof RateLimiterRes) return rej;
  throw rej;
}
