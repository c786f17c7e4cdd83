// The anonymous limit: requests without a valid key are metered per client address (anonymous.perMinute), so key
// guessing is throttled. rate-limiter-flexible does this on Redis, with its insurance limiter in memory. The
// address is anonymousClientKey's (validated, IPv6 by /64), so made-up X-Forwarded-For values cannot make buckets.
import type { NextFunction, Request, Response } from 'express';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Clock } from '../clock.js';
import { sendError } from '../errors.js';
import { formatRateLimitPolicy, formatRetryAfter, H, setRateLimitHeaders } from '../headers.js';
import type { Metrics } from '../metrics.js';
import type { Runtime } from '../runtime.js';
import type { Breaker } from '../storage/breaker.js';
import type { Keyspace } from '../storage/keyspace.js';
import { anonymousClientKey } from './client-address.js';

interface Limiters {
  perMinute: number;
  policy: string;
  memory: RateLimiterMemory;
  shared: RateLimiterAbstract | undefined;
}

export class AnonymousLimiter {
  private limiters: Limiters;

  constructor(
    private readonly deps: { runtime: Runtime; clock: Clock; metrics: Metrics; redis?: { client: Redis; keyspace: Keyspace; breaker: Breaker } },
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
          // Any store error (down, timed out) falls back to per-instance memory counting.
          insuranceLimiter: memory,
        })
      : undefined;
    return { perMinute, policy: formatRateLimitPolicy([{ name: 'minute', limit: perMinute, windowSeconds: 60 }]), memory, shared };
  }

  stage() {
    return (req: Request, res: Response, next: NextFunction): void => {
      if (res.locals.consumer) return next();
      this.handle(req, res, next).catch(next);
    };
  }

  private async handle(req: Request, res: Response, next: NextFunction): Promise<void> {
    const l = this.limiters;
    // While the breaker is open, go straight to memory rather than wait on Redis.
    const limiter = l.shared && this.deps.redis?.breaker.state === 'closed' ? l.shared : l.memory;
    const client = anonymousClientKey(req);
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
    setRateLimitHeaders(
      res,
      [{ name: 'minute', limit: l.perMinute, remaining: result.remainingPoints, resetMs: result.msBeforeNext, windowSeconds: 60 }],
      l.policy,
      this.deps.clock.now(),
    );
    this.deps.metrics.anonymousDecisions.inc({ decision: admitted ? 'admitted' : 'refused' });
    if (admitted) return next();
    res.setHeader(H.retryAfter, formatRetryAfter(result.msBeforeNext));
    sendError(res, 'rate_limit_exceeded', `Too many requests without a valid API key from this address. Retry after ${formatRetryAfter(result.msBeforeNext)} seconds.`);
  }
}
