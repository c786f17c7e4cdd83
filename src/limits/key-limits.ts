// The key limits decision: ban check and plan limits for an authenticated key, with the ban ladder; a key of a
// consumer is counted in its consumer's pool with its own limits as caps inside it (quota.ts). The decision itself is
// one atomic store call (see redis-store.ts); this file adds the fail mode, the local ban cache, the memory fallback,
// logs and metrics around it. No Express here: the keyLimits stage (src/pipeline/stages/limits.ts) turns
// outcomes into RateLimit headers, 429s, 401s and 503s.
import type { Clock } from '../util/clock.js';
import { withDeadline } from '../util/deadline.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Runtime } from '../routing/runtime.js';
import type { Breaker } from '../storage/breaker.js';
import type { CompiledRoute } from '../routing/routes.js';
import { LastCounts } from './last-counts.js';
import { MonthPeriods } from './months.js';
import { quotaOf, type LimitedCaller, type Quota } from './quota.js';
import { keySubject, poolOf } from './subject.js';
import type { MemoryLimiterStore } from './memory-store.js';
import { LEDGER_KIND, type UsageKind, type Charge, type Decision, type LimiterStore, type LimitRequest, type LimitSnapshot, type WindowSpec } from './types.js';
import { atInstant, RequestWindows } from './windows.js';
import { catalogueChannel, CHANNELS, type DecidedMessage } from '../observability/catalogue.js';

/** The catalogue's channel of every decision (observability/catalogue.ts): published only while someone listens. */
const decidedChannel = catalogueChannel(CHANNELS.decided);

/**
 * A decision as the catalogue's plain message: each window with its state, a monthly window's period (the first day its
 * counter is named by: "month:<YYYY-MM-DD>"). Built only for a subscriber.
 */
export function decidedMessage(
  plan: string,
  request: LimitRequest,
  decision: Decision,
  at: number,
  keyId: string,
  consumer: string | undefined,
  shared: boolean,
): DecidedMessage {
  return {
    keyId,
    ...(consumer !== undefined ? { consumer } : {}),
    plan,
    outcome: decision.outcome,
    cost: request.cost,
    windows: request.windows.map((w, i) => {
      const state = decision.windows[i] ?? { used: 0, resetMs: w.lengthMs };
      return {
        name: w.name,
        limit: w.limit,
        used: state.used,
        resetMs: state.resetMs,
        mode: w.mode,
        lengthMs: w.lengthMs,
        ...(w.endsAt !== undefined ? { endsAt: w.endsAt } : {}),
        ...(w.suffix.startsWith('month:') ? { period: w.suffix.slice('month:'.length) } : {}),
        ...(w.cap ? { cap: true as const } : {}),
      };
    }),
    candidates: request.candidates.map((c) => ({ name: c.name, limit: c.limit, of: c.of })),
    short: decision.short,
    banLevel: decision.banLevel,
    retryMs: decision.retryMs,
    at,
    shared,
  };
}

export interface KeyLimiterDeps {
  runtime: Runtime;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /**
   * The shared store (Redis); absent for a Redis-less gateway, which uses `memory` alone. Its calls must fail by
   * themselves after commandTimeoutMs (each Redis command's deadline does, storage/command-deadline.ts, and keeps an
   * answer that came while the process ran late): a request with its whole Redis budget left is not given a second
   * timer.
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
  /**
   * The usage ledger's count of decisions made outside the limit script (which counts its own): 'a' admitted, 'r'
   * refused by a window, 'b' refused by a ban. Absent: no ledger.
   */
  usage?: {
    /** `consumer`, in every call: the consumer the request was counted under (absent for a key without one). */
    count(id: string, kind: UsageKind, consumer?: string): void;
    /** An admitted request (counted at `atMs`) that reached no target: taken out of admitted (not billed). */
    notReached(id: string, atMs: number, consumer?: string): void;
    /** An admitted request (counted at `atMs`) a target failed: counted upstreamFailed, admitted kept. */
    upstreamFailed(id: string, atMs: number, consumer?: string): void;
    /** The minute window's count a check reported, for the ledger's peakMinute (UTC hour: hours since 1970). */
    minuteCount(id: string, count: number, hour: number, consumer?: string): void;
  };
}

/** A ban this instance has seen, so later requests are refused without a store call until it ends. */
interface KnownBan {
  until: number;
  decision: Decision;
  at: number;
}

/**
 * What the key limit check reads and writes of a request: declared here so limits/ need not import the request path;
 * pipeline/context.ts's RequestContext has all of it.
 */
export interface LimitedRequest {
  readonly id: string;
  /** Milliseconds the request has waited on Redis so far (its budget is what is left of commandTimeoutMs). */
  redisMs: number;
  decision: Decision | undefined;
  charge: Charge | undefined;
}

/**
 * A decision with what its headers need; or no usable plan for the key (503), or Redis unavailable with failMode
 * closed (503), or the store no longer accepts the key (revoked, rotated past its grace, unreadable: 401), or the
 * request costs more than an enforced window's whole limit (403: it could never be admitted; nothing was asked).
 */
export type KeyLimitOutcome =
  | { kind: 'decided'; decision: Decision; request: LimitRequest; now: number }
  | { kind: 'no_plan' }
  | { kind: 'unavailable' }
  | { kind: 'invalid_key' }
  | { kind: 'cost_exceeds_limit'; window: WindowSpec; cost: number };

/**
 * What the quota endpoint answers from: the key's windows (for a key of a consumer, the pool's and its caps) and ban as
 * they stand, with the plan in force; or why they cannot be read.
 */
export type QuotaOutcome =
  | { kind: 'read'; snapshot: LimitSnapshot; request: LimitRequest; now: number; plan: string }
  | { kind: 'no_plan' }
  | { kind: 'unavailable' }
  | { kind: 'invalid_key' };

const NO_PLAN = Object.freeze({ kind: 'no_plan' as const });
const UNAVAILABLE = Object.freeze({ kind: 'unavailable' as const });
const INVALID_KEY = Object.freeze({ kind: 'invalid_key' as const });

/**
 * The decisions metric's window label of the windows a decision found short: "minute", "day" or "both" for the plan's
 * (a candidate limit counts as its window), "month" for the plan's monthly window, "key" for a key's cap inside its
 * consumer's pool, "route" for a route's (the first of those met, in that order of the windows; that metric keeps few
 * label values; the shadow refusals metric names each window).
 */
function windowLabel(request: LimitRequest, short: number): string {
  if (short === 0) return 'none';
  let plan = 0;
  const n = request.windows.length;
  for (let i = 0; i < n + request.candidates.length; i++) {
    if (!(short & (1 << i))) continue;
    const w = i < n ? i : request.candidates[i - n]!.of;
    if (w === request.plan.minute) plan |= 1;
    else if (w === request.plan.day) plan |= 2;
    else return otherLabel(request.windows[w]!);
  }
  return plan === 1 ? 'minute' : plan === 2 ? 'day' : 'both';
}

/** The metric's label of a window other than the plan's minute and day. */
function otherLabel(w: WindowSpec): string {
  return w.cap ? 'key' : w.endsAt !== undefined ? 'month' : 'route';
}

/** The enforced windows a refusal found short (the offence that struck toward a ban), for the log. */
function shortWindowNames(request: LimitRequest, short: number): string[] {
  return request.windows.filter((w, i) => w.mode === 'enforce' && short & (1 << i)).map((w) => w.name);
}

export class KeyLimiter {
  /**
   * By whose ban it is: the key's id, or for a ban shared by a consumer's keys (ban.scope consumer) the consumer's tag
   * `c:<id>` (no key id holds a colon), so every key of the consumer meets it.
   */
  private readonly knownBans = new Map<string, KnownBan>();
  /** Bumped by forget(): a ban read before an unban but handled after its message must not be cached. */
  private forgets = 0;
  /** The windows and cost of each request (plan, route, config), cached. */
  readonly windows: RequestWindows;
  /**
   * Per pool (a key's own windows, or its consumer's): the plan windows Redis last reported, and what memory admitted
   * since (see check).
   */
  private readonly lastCounts = new LastCounts();
  /** The monthly period in force per billing day. */
  private readonly periods = new MonthPeriods();

  constructor(private readonly deps: KeyLimiterDeps) {
    this.windows = new RequestWindows(deps.runtime);
  }

  /** The config in force (the key limits stage matches the request's route against its routes). */
  get runtime(): Runtime {
    return this.deps.runtime;
  }

  /**
   * Drops what this instance remembers about a key after a change anywhere in the fleet; undefined: every key.
   * 'record' (`keys unban`, and every other change to the record): its known ban, and its ban and strikes in memory.
   * 'windows' (`keys reset`): its memory windows and strikes, what Redis last reported of them and what memory
   * admitted since (owed to windows that are gone), so a fall-back to memory does not refuse the key on counts the
   * fleet has dropped.
   */
  forget(id: string | undefined, change: 'record' | 'windows' = 'record'): void {
    if (id !== undefined && change === 'windows') {
      // The key's own windows, or its caps in whichever consumer's pool (a reset of a key leaves the pool alone).
      this.deps.memory.resetWindows(keySubject(id));
      this.lastCounts.drop(id);
      return;
    }
    this.forgets++;
    if (id === undefined) {
      this.knownBans.clear();
      return;
    }
    this.knownBans.delete(id);
    // A consumer's shared ban is lifted through any of its keys, and which consumer the key belongs to is not known
    // here: every shared ban this instance remembers is dropped (a few at most; the next request of each asks Redis).
    for (const holder of this.knownBans.keys()) if (holder.includes(':')) this.knownBans.delete(holder);
    this.deps.memory.unban(keySubject(id));
  }

  /**
   * The caller's quota at `now` (quota.ts): its subject, the plan in force, the pool's limits, its caps and the monthly
   * period; undefined without a usable plan.
   */
  quotaOf(caller: LimitedCaller, now: number): Quota | undefined {
    return quotaOf(caller, this.deps.runtime.config.plans, now, this.periods);
  }

  /**
   * Decides one request of an authenticated key to `route` (the configured route it matched, if any: its cost and
   * windows apply): the ban this instance knows, else one store call (Redis, through
   * the breaker and within what is left of the request's Redis budget, ctx.redisMs; memory without Redis, or while
   * Redis fails with failMode open). Counts the decision in the metrics and logs a new ban; writes nothing to any
   * response (the keyLimits stage does).
   */
  async check(consumer: LimitedCaller, ctx: LimitedRequest, route?: CompiledRoute): Promise<KeyLimitOutcome> {
    const { clock, logger, metrics, runtime } = this.deps;
    const now = clock.now();
    const quota = this.quotaOf(consumer, now);
    if (!quota) {
      const plan = consumer.consumer?.plan ?? consumer.plan;
      logger.error({ reqId: ctx.id, consumer: consumer.id, plan }, 'key refers to a plan that is not configured');
      return NO_PLAN;
    }
    const { plan, subject } = quota;
    // The ledger this request is counted in: its consumer's (as the limit script counts it), or the key's own.
    const under = subject.pool?.id;
    const cached = this.windows.forRequest(plan, quota.limits, route, quota.own, quota);
    if (cached.unpayable) {
      // Known from the limits alone: no store call, no points, no strike (waiting would never help, so no ban either).
      const at = cached.windows.indexOf(cached.unpayable);
      const window = at === cached.plan.minute ? 'minute' : at === cached.plan.day ? 'day' : otherLabel(cached.unpayable);
      metrics.limitDecisions.inc({ plan, decision: 'cost_exceeds_limit', window });
      return { kind: 'cost_exceeds_limit', window: cached.unpayable, cost: cached.cost };
    }
    const request = atInstant(cached, now);
    // Per pool, by its hash tag (a key's id, or `c:<consumer>`: no key id holds a colon): what Redis last reported of
    // the plan windows the key counts in.
    const poolName = poolOf(subject).tag;

    // A ban this instance remembers is enforced only while bans are (a reload to shadow or off stops it at once).
    const ban = runtime.config.ban;
    const enforcing = ban.enabled && ban.mode === 'enforce';
    const holder = ban.scope === 'consumer' && subject.pool ? subject.pool.tag : consumer.id;
    const known = enforcing ? this.knownBans.get(holder) : undefined;
    if (known && known.until > now) {
      const elapsed = now - known.at;
      // The windows as the ban's decision saw them: this request's own may differ (another route); the plan's lead both.
      const seen = known.decision.windows;
      const aged: Decision = {
        ...known.decision,
        outcome: 'banned',
        windows: request.windows.map((w, i) => {
          const at = i < 2 ? seen[i] : undefined;
          return at ? { used: at.used, resetMs: Math.max(0, at.resetMs - elapsed) } : { used: 0, resetMs: w.lengthMs };
        }),
        short: 0,
        retryMs: known.until - now,
      };
      this.deps.usage?.count(consumer.id, 'b', under);
      return this.decided(plan, request, aged, now, ctx, consumer.id, under, false);
    }
    if (known) this.knownBans.delete(holder);

    let decision: Decision;
    let by: Charge['by'] = 'shared';
    const forgets = this.forgets;
    const shared = this.deps.shared;
    // Decided here rather than by the limit script: the ledger hears of it from this instance.
    let local = false;
    if (!shared) {
      decision = await this.deps.memory.check(subject, request, runtime.config.ban);
      local = true;
      by = 'memory';
    } else {
      // Requests this instance admitted from memory while Redis was out of reach are credited to Redis in this same
      // check (one round trip still). Why a credit rather than deciding on the larger of Redis's count and this
      // instance's own: the credit puts them in the fleet's windows, so no instance admits them again, the decision
      // (and its strikes and bans) stays the script's alone, and a Redis that came back empty learns them too.
      let rec = this.lastCounts.get(poolName);
      const credit = rec?.owed ? this.lastCounts.takeCredit(rec, now) : undefined;
      try {
        // The request's Redis budget (commandTimeoutMs) is shared with the key lookup that may have preceded this.
        const budget = shared.commandTimeoutMs - ctx.redisMs;
        if (budget <= 0) throw new Error('redis budget spent on the key lookup');
        const check = () => shared.store.check(subject, request, runtime.config.ban, consumer.keyHash, consumer.keyRevision, credit);
        // With the whole budget left (a cached key: nearly every request), the command's own deadline is the
        // check's; a second timer is needed only for what a key lookup left. A deadline that came due while the event
        // loop was behind reads an answer that has arrived before giving up: memory decides when Redis did not
        // answer, not because this process was late to read it.
        decision = await shared.breaker.run(budget < shared.commandTimeoutMs ? () => withDeadline(check(), budget, 'limit check') : check, budget);
        const answeredAt = clock.now();
        ctx.redisMs += answeredAt - now;
        if (decision.outcome !== 'invalid_key' && decision.outcome !== 'invalid_record')
          this.lastCounts.seen((rec ??= this.lastCounts.ensure(poolName)), request, decision, answeredAt);
      } catch {
        metrics.redisErrors.inc({ op: 'limit_check' });
        rec ??= this.lastCounts.ensure(poolName);
        if (credit) this.lastCounts.restore(rec, credit);
        if (shared.failMode === 'closed') return UNAVAILABLE;
        // failMode open: this instance alone meters the key until Redis answers again, continuing the windows Redis
        // last reported for it (a Redis connection that flaps would otherwise open a fresh memory window each time).
        this.deps.memory.raiseTo(subject, rec, now);
        decision = await this.deps.memory.check(subject, request, runtime.config.ban);
        by = 'fallback';
        if (decision.outcome === 'admitted') this.lastCounts.owe(rec, request, decision, now);
        // Admitted ones reach the ledger with the credit the next Redis check carries; refusals only from here.
        if (decision.outcome !== 'admitted') local = true;
      }
    }
    if (decision.outcome === 'invalid_key' || decision.outcome === 'invalid_record') {
      // Revoked or rotated past its grace since this instance cached it, or its record is unreadable (it cannot be
      // verified as valid, and retrying will not change that): drop it everywhere locally, answer 401.
      if (decision.outcome === 'invalid_record') this.deps.onInvalidRecord?.(consumer.id);
      this.deps.onInvalidKey?.(consumer.id);
      return INVALID_KEY;
    }
    if (local && this.deps.usage) {
      this.deps.usage.count(consumer.id, LEDGER_KIND[decision.outcome], under);
      if (decision.outcome === 'admitted' && decision.short !== 0) this.deps.usage.count(consumer.id, 's', under);
      if (decision.wouldBan !== undefined) this.deps.usage.count(consumer.id, 'w', under);
    }
    // peakMinute: the plan minute window's count this check reported (Redis's is the fleet's; points, with costs), in
    // the hour the ledger counted it in.
    this.deps.usage?.minuteCount(consumer.id, decision.windows[request.plan.minute]!.used, decision.ledgerHour ?? Math.floor(now / 3_600_000), under);
    if (decision.keyRecord && consumer.keyHash !== undefined && consumer.keyRevision !== undefined) {
      this.deps.onKeyRecordChecked?.(consumer.keyHash, consumer.keyRevision, decision.keyRecord === 'current');
    }
    if ((decision.outcome === 'banned' || decision.outcome === 'banned_now') && forgets === this.forgets) {
      this.knownBans.set(holder, { until: now + decision.retryMs, decision, at: now });
    }
    if (decision.outcome === 'admitted') ctx.charge = { id: consumer.id, subject, by, decision, request, at: clock.now() };
    if (decision.wouldBan !== undefined && decision.wouldBan > 0) {
      metrics.wouldBans.inc({ plan, level: String(decision.banLevel) });
      logger.warn(
        {
          reqId: ctx.id,
          consumer: consumer.id,
          plan,
          banLevel: decision.banLevel,
          seconds: Math.round(decision.wouldBan / 1000),
          windows: shortWindowNames(request, decision.short),
        },
        'api key would have been banned (bans in shadow mode: not refused)',
      );
    }
    if (decision.outcome === 'banned_now') {
      metrics.bans.inc({ plan, level: String(decision.banLevel) });
      logger.warn({ reqId: ctx.id, consumer: consumer.id, plan, banLevel: decision.banLevel, seconds: Math.round(decision.retryMs / 1000) }, 'api key banned');
    }
    return this.decided(plan, request, decision, now, ctx, consumer.id, under, by === 'shared');
  }

  /**
   * Gives back what an admitted request was charged, once, when it never reached a target (no try could connect, or
   * no target was healthy): its windows get the request back and the ledger no longer counts it admitted (it is not
   * billed; nothing reached the backend). On Redis, one call (through the breaker, within commandTimeoutMs); in memory,
   * by the same rules. A refund Redis cannot take is logged and dropped (the request stays charged). Strikes and bans
   * are never touched. A request that reached a target is never refunded: see upstreamFailed().
   */
  async refund(ctx: LimitedRequest): Promise<void> {
    const charge = ctx.charge;
    if (!charge) return;
    ctx.charge = undefined;
    const { clock, logger, metrics } = this.deps;
    const now = clock.now();
    const elapsed = now - charge.at;
    const d = charge.decision;
    // The windows the request took its cost from: not a shadow window that had no room (its bit in d.short).
    const windows = [];
    for (let i = 0; i < charge.request.windows.length; i++) {
      if (d.short & (1 << i)) continue;
      const w = charge.request.windows[i]!;
      windows.push({ suffix: w.suffix, remainingMs: d.windows[i]!.resetMs - elapsed, lengthMs: w.lengthMs, ...(w.cap ? { cap: w.cap } : {}) });
    }
    const refund = { windows, cost: charge.request.cost, ...(d.ledgerHour !== undefined ? { ledgerHour: d.ledgerHour } : {}) };
    const shared = this.deps.shared;
    if (charge.by === 'shared' && shared) {
      try {
        await shared.breaker.run(() => shared.store.refund(charge.subject, refund), shared.commandTimeoutMs);
      } catch (err) {
        metrics.redisErrors.inc({ op: 'refund' });
        logger.warn(
          { reqId: ctx.id, consumer: charge.id, err: { message: String((err as Error)?.message ?? err) } },
          'upstream failure not refunded: Redis unavailable',
        );
      }
      return;
    }
    await this.deps.memory.refund(charge.subject, refund);
    // The ledger it was counted in (its subject's consumer then), even if the key has moved since.
    if (charge.by === 'memory') this.deps.usage?.notReached(charge.id, charge.at, charge.subject.pool?.id);
    else {
      // Admitted from memory while Redis was away: still owed to Redis (nearly always), so Redis is owed it no more
      // (and its ledger never counts it). Already credited to Redis by a later check: it stays charged there.
      const rec = this.lastCounts.get(poolOf(charge.subject).tag);
      if (rec) this.lastCounts.unowe(rec, now, charge.request.cost);
    }
  }

  /**
   * An admitted request that reached a target and got no complete answer from it (timeout, reset, a response cut
   * off): it keeps its points (the backend did the work, or some of it: giving them back would sell unmetered backend
   * work) and the ledger counts it upstreamFailed beside admitted, so billing can choose. Written with the ledger's
   * batches (UsageRecorder), in the hour the check counted it in; no Redis call on the request path.
   */
  upstreamFailed(ctx: LimitedRequest): void {
    const charge = ctx.charge;
    if (!charge) return;
    ctx.charge = undefined;
    const hour = charge.decision.ledgerHour;
    this.deps.usage?.upstreamFailed(charge.id, hour !== undefined ? hour * 3_600_000 : charge.at, charge.subject.pool?.id);
  }

  /**
   * The consumer's windows (its plan's, then every route window that applies to its plan) and ban, counting
   * nothing: one read-only store call (through the breaker, within the
   * request's Redis budget), checking the key's record as the limit check does. When Redis fails: failMode open
   * reads this instance's memory windows (what it would meter by), closed answers unavailable.
   */
  async quota(consumer: LimitedCaller, ctx: LimitedRequest): Promise<QuotaOutcome> {
    const { clock, metrics, runtime } = this.deps;
    const now = clock.now();
    const quota = this.quotaOf(consumer, now);
    if (!quota) return NO_PLAN;
    const { plan, subject } = quota;
    const request = atInstant(this.windows.forQuota(plan, quota.limits, quota.own, quota), now);
    const ban = runtime.config.ban;
    const shared = this.deps.shared;
    let snapshot: LimitSnapshot;
    if (!shared) snapshot = await this.deps.memory.snapshot(subject, request.windows, ban);
    else {
      try {
        const budget = shared.commandTimeoutMs - ctx.redisMs;
        if (budget <= 0) throw new Error('redis budget spent on the key lookup');
        snapshot = await shared.breaker.run(
          () => withDeadline(shared.store.snapshot(subject, request.windows, ban, consumer.keyHash), budget, 'quota read'),
          budget,
        );
        ctx.redisMs += clock.now() - now;
      } catch {
        metrics.redisErrors.inc({ op: 'quota_read' });
        if (shared.failMode === 'closed') return UNAVAILABLE;
        snapshot = await this.deps.memory.snapshot(subject, request.windows, ban);
      }
    }
    if (snapshot.key !== 'ok') {
      if (snapshot.key === 'invalid_record') this.deps.onInvalidRecord?.(consumer.id);
      this.deps.onInvalidKey?.(consumer.id);
      return INVALID_KEY;
    }
    return { kind: 'read', snapshot, request, now, plan };
  }

  private decided(
    plan: string,
    request: LimitRequest,
    decision: Decision,
    now: number,
    ctx: LimitedRequest,
    keyId: string,
    consumer: string | undefined,
    shared: boolean,
  ): KeyLimitOutcome {
    ctx.decision = decision;
    if (decidedChannel.hasSubscribers) decidedChannel.publish(decidedMessage(plan, request, decision, now, keyId, consumer, shared));
    const outcome = decision.outcome;
    const metrics = this.deps.metrics;
    metrics.limitDecisions.inc({
      plan,
      decision: outcome === 'admitted' ? (decision.short === 0 ? 'admitted' : 'shadow_refused') : 'refused',
      window: outcome === 'banned' || outcome === 'banned_now' ? 'ban' : windowLabel(request, decision.short),
    });
    if (outcome === 'admitted' && decision.short !== 0) {
      // Per window that would have refused it (a shadow-mode window or a candidate limit): rare, and named.
      const n = request.windows.length;
      for (let i = 0; i < n + request.candidates.length; i++) {
        if (decision.short & (1 << i)) metrics.shadowRefusals.inc({ plan, window: i < n ? request.windows[i]!.name : request.candidates[i - n]!.name });
      }
    }
    return { kind: 'decided', decision, request, now };
  }
}
