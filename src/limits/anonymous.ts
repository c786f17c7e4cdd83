// The anonymous limit: requests without a valid key are metered per client address (anonymous.perMinute), so key
// guessing is throttled. rate-limiter-flexible does this on Redis, with its insurance limiter in memory. The
// address is anonymousClientKey's (validated, IPv6 by /64). Each instance also remembers, bounded, which clients
// it has refused and until when: it answers them again without Redis, and the authentication stage asks it
// before looking up a key, so a refused client's made-up keys cost no Redis read either.
import type { NextFunction, Request, Response } from 'express';
import type { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Clock } from '../util/clock.js';
import { sendError } from '../http/errors.js';
import { formatRateLimitPolicy, formatRetryAfter, H, setRateLimitHeaders } from '../http/headers.js';
import type { Metrics } from '../observability/metrics.js';
import type { Runtime } from '../config/runtime.js';
import type { Breaker } from '../storage/breaker.js';
import type { Keyspace } from '../storage/keyspace.js';
import { anonymousClientKey } from './client-address.js';

/**
 * Most refused clients one instance remembers. Past it the least recently refused is forgotten, which costs only
 * what remembering saves: its next request asks Redis again, and is refused there.
 */
const MAX_REFUSED_CLIENTS = 10_000;

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

  constructor(private readonly deps: { runtime: Runtime; clock: Clock; metrics: Metrics; redis?: { client: Redis; keyspace: Keyspace; breaker: Breaker } }) {
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
          // Any store error (down, timed out) falls back to per-instance memory counting.
          insuranceLimiter: memory,
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
   * When (clock ms) the anonymous limit stops refusing this request's client, or 0 when this instance has not
   * refused it in the current window. Memory only: no store call. A refusal ends with the window that made it
   * (windows are fixed, so later requests in it cannot move that end), and other instances' counts only add.
   */
  refusedUntil(req: Request): number {
    return this.refusedUntilOf(this.limiters, anonymousClientKey(req), this.deps.clock.now());
  }

  private refusedUntilOf(l: Limiters, client: string, now: number): number {
    const until = l.refused.get(client);
    if (until === undefined) return 0;
    if (until > now) return until;
    l.refused.delete(client);
    return 0;
  }

  stage() {
    return (req: Request, res: Response, next: NextFunction): void => {
      if (res.locals.consumer) return next();
      const l = this.limiters;
      const client = anonymousClientKey(req);
      const now = this.deps.clock.now();
      // The authentication stage may already have found this client refused (and skipped its key lookup on that
      // ground): that answer stands, even if the window ended in between, so the key is never called invalid.
      const until = (res.locals.anonymousRefusedUntil as number | undefined) ?? this.refusedUntilOf(l, client, now);
      if (until > 0) {
        // Still refused: answered from memory, no Redis call.
        this.deps.metrics.anonymousDecisions.inc({ decision: 'refused' });
        return this.refuse(res, l, Math.max(0, until - now), now);
      }
      this.handle(client, res, next).catch(next);
    };
  }

  private async handle(client: string, res: Response, next: NextFunction): Promise<void> {
    const l = this.limiters;
    // While the breaker is open, go straight to memory rather than wait on Redis.
    const limiter = l.shared && this.deps.redis?.breaker.state === 'closed' ? l.shared : l.memory;
    let result: RateLimiterRes;
    let admitted: boolean;
    try {
      result = await limiter.consume(client);
      admitted = true;
    } catch (rej) {
      // Over the limit is a RateLimiterRes; anything else is a store failure the insurance could not absorb.
      if (!(rej instanceof RateLimiterRes)) {
        this.deps.metrics.redisErrors.inc({ op: 'anonymous_limit' });
        result = await l.memory.consume(client).catch((r: unknown) => r as RateLimiterRes);
        admitted = result.remainingPoints >= 0 && result.consumedPoints <= l.perMinute;
      } else {
        result = rej;
        admitted = false;
      }
    }
    const now = this.deps.clock.now();
    this.deps.metrics.anonymousDecisions.inc({ decision: admitted ? 'admitted' : 'refused' });
    if (admitted) {
      setRateLimitHeaders(
        res,
        [{ name: 'minute', limit: l.perMinute, remaining: result.remainingPoints, resetMs: result.msBeforeNext, windowSeconds: 60 }],
        l.policy,
        now,
      );
      return next();
    }
    l.refused.set(client, now + result.msBeforeNext);
    this.refuse(res, l, result.msBeforeNext, now);
  }

  /** 429 with the anonymous window's headers: nothing left, free again in resetMs. */
  private refuse(res: Response, l: Limiters, resetMs: number, now: number): void {
    setRateLimitHeaders(res, [{ name: 'minute', limit: l.perMinute, remaining: 0, resetMs, windowSeconds: 60 }], l.policy, now);
    res.setHeader(H.retryAfter, formatRetryAfter(resetMs));
    sendError(res, 'rate_limit_exceeded', `Too many requests without a valid API key from this address. Retry after ${formatRetryAfter(resetMs)} seconds.`);
  }
}
