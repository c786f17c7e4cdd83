// Stages 2-3 of the request path: ban check and plan limits for an authenticated key, with the ban ladder.
// The decision itself is one atomic store call (see redis-store.ts); this file adds the fail mode, the local
// ban cache, headers, logs and metrics around it.
import type { NextFunction, Request, Response } from 'express';
import type { Clock } from '../util/clock.js';
import { withDeadline } from '../util/deadline.js';
import { sendError } from '../http/errors.js';
import { formatRateLimitPolicy, formatRetryAfter, H, setRateLimitHeaders, type RateWindow } from '../http/headers.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { requireConsumer, type Consumer } from '../pipeline/authenticate.js';
import type { Runtime } from '../config/runtime.js';
import type { Breaker } from '../storage/breaker.js';
import { LastCounts } from './last-counts.js';
import type { MemoryLimiterStore } from './memory-store.js';
import { DAY_MS, MINUTE_MS, type Decision, type KeyLimits, type LimiterStore } from './types.js';

export interface KeyLimiterDeps {
  runtime: Runtime;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /**
   * The shared store (Redis); absent for a Redis-less gateway, which uses `memory` alone. Its calls must fail by
   * themselves after commandTimeoutMs (the Redis client's commandTimeout does): a request with its whole Redis
   * budget left is not given a second timer.
   */
  shared?: { store: LimiterStore; breaker: Breaker; failMode: 'open' | 'closed'; commandTimeoutMs: number };
  /** Per-instance limits: the only store without Redis, the fallback with failMode: open. */
  memory: MemoryLimiterStore;
  /** The store said the key is no longer valid: forget any cached copy of it. */
  onInvalidKey?: (id: string) => void;
  /** The store found the key's record unreadable (not a JSON object): the key is refused like an invalid one. */
  onInvalidRecord?: (id: string) => void;
  /** The store compared the consumer's cached key record with the stored one (Decision.keyRecord). */
  onKeyRecordChecked?: (keyHash: string, revision: string, current: boolean) => void;
}

/** A ban this instance has seen, so later requests are refused without a store call until it ends. */
interface KnownBan {
  until: number;
  decision: Decision;
  at: number;
}

const WINDOW_LABEL = {
  limited_minute: 'minute',
  limited_day: 'day',
  limited_both: 'both',
  banned: 'ban',
  banned_now: 'ban',
  admitted: 'none',
  invalid_key: 'none',
  invalid_record: 'none',
} as const;

export class KeyLimiter {
  private readonly knownBans = new Map<string, KnownBan>();
  /** Bumped by forget(): a ban read before an unban but handled after its message must not be cached. */
  private forgets = 0;
  /**
   * One KeyLimits object per distinct pair (a plan's, or a key's own override), so what depends only on the limits
   * (the RateLimit-Policy header here, the limit script's policy argument in the Redis store) is cached by identity.
   */
  private readonly limitsByPair = new Map<string, KeyLimits>();
  private readonly policies = new WeakMap<KeyLimits, string>();
  /** Per key: the windows Redis last reported, and what memory admitted since (see handle). */
  private readonly lastCounts = new LastCounts();

  constructor(private readonly deps: KeyLimiterDeps) {}

  /** Drops what this instance remembers about a key (after `keys unban` anywhere in the fleet); undefined: every key. */
  forget(id: string | undefined): void {
    this.forgets++;
    if (id === undefined) {
      this.knownBans.clear();
      return;
    }
    this.knownBans.delete(id);
    this.deps.memory.unban(id);
  }

  limitsFor(consumer: Consumer): KeyLimits | undefined {
    const plan = this.deps.runtime.config.plans[consumer.plan];
    const perMinute = consumer.perMinute ?? plan?.perMinute;
    const perDay = consumer.perDay ?? plan?.perDay;
    if (perMinute === undefined || perDay === undefined) return undefined;
    const k = `${perMinute}/${perDay}`;
    let limits = this.limitsByPair.get(k);
    if (!limits) {
      // Per-key limits can make many pairs: bounded.
      if (this.limitsByPair.size >= 10_000) this.limitsByPair.clear();
      limits = Object.freeze({ perMinute, perDay });
      this.limitsByPair.set(k, limits);
    }
    return limits;
  }

  stage() {
    return (req: Request, res: Response, next: NextFunction): void => {
      this.handle(req, res, next).catch(next);
    };
  }

  private async handle(req: Request, res: Response, next: NextFunction): Promise<void> {
    const { clock, logger, metrics, runtime } = this.deps;
    const consumer = res.locals.consumer as Consumer;
    const limits = this.limitsFor(consumer);
    if (!limits) {
      logger.error({ reqId: req.id, consumer: consumer.id, plan: consumer.plan }, 'key refers to a plan that is not configured');
      return sendError(res, 'service_unavailable', 'This API key has no usable plan right now.');
    }
    const now = clock.now();

    const known = this.knownBans.get(consumer.id);
    if (known && known.until > now) {
      const elapsed = now - known.at;
      const aged: Decision = {
        ...known.decision,
        outcome: 'banned',
        minute: { ...known.decision.minute, resetMs: Math.max(0, known.decision.minute.resetMs - elapsed) },
        day: { ...known.decision.day, resetMs: Math.max(0, known.decision.day.resetMs - elapsed) },
        retryMs: known.until - now,
      };
      return this.answer(req, res, next, consumer, limits, aged, now);
    }
    if (known) this.knownBans.delete(consumer.id);

    let decision: Decision;
    const forgets = this.forgets;
    const shared = this.deps.shared;
    if (!shared) {
      decision = await this.deps.memory.check(consumer.id, limits, runtime.config.ban);
    } else {
      // Requests this instance admitted from memory while Redis was out of reach are credited to Redis in this same
      // check (one round trip still). Why a credit rather than deciding on the larger of Redis's count and this
      // instance's own: the credit puts them in the fleet's windows, so no instance admits them again, the decision
      // (and its strikes and bans) stays the script's alone, and a Redis that came back empty learns them too.
      let rec = this.lastCounts.get(consumer.id);
      const credit = rec && (rec.owedMinute > 0 || rec.owedDay > 0) ? this.lastCounts.takeCredit(rec, now) : undefined;
      try {
        // The request's Redis budget (commandTimeoutMs) is shared with the key lookup that may have preceded this.
        const budget = shared.commandTimeoutMs - ((res.locals.redisSpentMs as number | undefined) ?? 0);
        if (budget <= 0) throw new Error('redis budget spent on the key lookup');
        const check = () => shared.store.check(consumer.id, limits, runtime.config.ban, consumer.keyHash, consumer.keyRevision, credit);
        // With the whole budget left (a cached key: nearly every request), the client's own commandTimeout is the
        // deadline; a second timer of our own is needed only for what a key lookup left.
        decision = await shared.breaker.run(budget < shared.commandTimeoutMs ? () => withDeadline(check(), budget, 'limit check') : check, budget);
        if (decision.outcome !== 'invalid_key' && decision.outcome !== 'invalid_record') this.lastCounts.seen((rec ??= this.lastCounts.ensure(consumer.id)), decision, clock.now());
      } catch {
        metrics.redisErrors.inc({ op: 'limit_check' });
        rec ??= this.lastCounts.ensure(consumer.id);
        if (credit) this.lastCounts.restore(rec, credit);
        if (shared.failMode === 'closed') {
          return sendError(res, 'service_unavailable', 'Rate limits cannot be checked right now. Retry shortly.');
        }
        // failMode open: this instance alone meters the key until Redis answers again, continuing the windows Redis
        // last reported for it (a Redis connection that flaps would otherwise open a fresh memory window each time).
        this.deps.memory.raiseTo(consumer.id, rec, now);
        decision = await this.deps.memory.check(consumer.id, limits, runtime.config.ban);
        if (decision.outcome === 'admitted') this.lastCounts.owe(rec, decision, now);
      }
    }
    if (decision.outcome === 'invalid_key' || decision.outcome === 'invalid_record') {
      // Revoked or rotated past its grace since this instance cached it, or its record is unreadable (it cannot be
      // verified as valid, and retrying will not change that): drop it everywhere locally, answer 401.
      if (decision.outcome === 'invalid_record') this.deps.onInvalidRecord?.(consumer.id);
      this.deps.onInvalidKey?.(consumer.id);
      res.locals.consumer = undefined;
      res.locals.authFailure = 'invalid_api_key';
      return requireConsumer(req, res, next);
    }
    if (decision.keyRecord && consumer.keyHash !== undefined && consumer.keyRevision !== undefined) {
      this.deps.onKeyRecordChecked?.(consumer.keyHash, consumer.keyRevision, decision.keyRecord === 'current');
    }
    if ((decision.outcome === 'banned' || decision.outcome === 'banned_now') && forgets === this.forgets) {
      this.knownBans.set(consumer.id, { until: now + decision.retryMs, decision, at: now });
    }
    if (decision.outcome === 'banned_now') {
      metrics.bans.inc({ plan: consumer.plan, level: String(decision.banLevel) });
      logger.warn(
        { reqId: req.id, consumer: consumer.id, plan: consumer.plan, banLevel: decision.banLevel, seconds: Math.round(decision.retryMs / 1000) },
        'api key banned',
      );
    }
    this.answer(req, res, next, consumer, limits, decision, now);
  }

  private answer(_req: Request, res: Response, next: NextFunction, consumer: Consumer, limits: KeyLimits, d: Decision, now: number): void {
    const windows: RateWindow[] = [
      { name: 'minute', limit: limits.perMinute, remaining: limits.perMinute - d.minute.used, resetMs: d.minute.resetMs, windowSeconds: MINUTE_MS / 1000 },
      { name: 'day', limit: limits.perDay, remaining: limits.perDay - d.day.used, resetMs: d.day.resetMs, windowSeconds: DAY_MS / 1000 },
    ];
    setRateLimitHeaders(res, windows, this.policy(limits), now);
    const admitted = d.outcome === 'admitted';
    this.deps.metrics.limitDecisions.inc({ plan: consumer.plan, decision: admitted ? 'admitted' : 'refused', window: WINDOW_LABEL[d.outcome] });
    if (admitted) return next();
    res.setHeader(H.retryAfter, formatRetryAfter(d.retryMs));
    if (d.outcome === 'banned' || d.outcome === 'banned_now') {
      return sendError(
        res,
        'api_key_banned',
        `This API key is banned for ${formatRetryAfter(d.retryMs)} more seconds after repeated 429s (ban level ${d.banLevel}).`,
      );
    }
    sendError(
      res,
      'rate_limit_exceeded',
      `Rate limit exceeded (${d.outcome === 'limited_day' ? 'day' : d.outcome === 'limited_minute' ? 'minute' : 'minute and day'} window). Retry after ${formatRetryAfter(d.retryMs)} seconds.`,
    );
  }

  /** The policy header depends only on the limits: built once per KeyLimits (see limitsByPair). */
  private policy(limits: KeyLimits): string {
    let p = this.policies.get(limits);
    if (!p) {
      p = formatRateLimitPolicy([
        { name: 'minute', limit: limits.perMinute, windowSeconds: 60 },
        { name: 'day', limit: limits.perDay, windowSeconds: 86_400 },
      ]);
      this.policies.set(limits, p);
    }
    return p;
  }
}
