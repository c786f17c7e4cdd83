// A request's quota as the key limits need it: whose windows it counts in (the key's own, or its consumer's pool), the
// plan in force, the limits of the pool with any own limits that have not ended, and a key's caps inside its pool.
// Worked out per request from the caller alone (no store call): an own limit's end is compared with the gateway's
// clock, so an override that ends needs no one to remove it.
import type { MonthPeriods, MonthPeriod } from './months.js';
import { keySubject, type QuotaSubject } from './subject.js';
import type { KeyLimits } from './types.js';
import { OWN_DAY, OWN_MINUTE, type CapLimits } from './windows.js';

/**
 * Own limits a key or a consumer may carry over its plan's, and when they end (ISO-8601; past it, the plan's values
 * apply again). `limitsReason` says why they were given (a launch week); nothing here reads it.
 */
export interface OwnLimits {
  perMinute?: number | undefined;
  perDay?: number | undefined;
  perMonth?: number | undefined;
  limitsExpiresAt?: string | undefined;
  limitsReason?: string | undefined;
}

/** The consumer a key belongs to, as the limits need it. */
export interface LimitedConsumer extends OwnLimits {
  id: string;
  /** The plan in force for every key of the consumer. */
  plan: string;
  /** 1-31: its monthly windows run from this day (31: the last day of a shorter month); absent: calendar months. */
  billingDay?: number | undefined;
}

/**
 * Who is calling, as the key limits need it: the key (its id, plan and own limits; keyHash and keyRevision when the
 * limit check re-validates its record) and, for a key of a consumer, the consumer. Declared here so limits/ need not
 * import the request path; the authenticated caller has all of it.
 */
export interface LimitedCaller extends OwnLimits {
  id: string;
  /** The key's own plan: the plan in force for a key without a consumer. */
  plan: string;
  keyHash?: string | undefined;
  keyRevision?: string | undefined;
  consumer?: LimitedConsumer | undefined;
}

/** The plans' limits as configured: minute, day and an optional month. */
export interface PlanLimits {
  perMinute: number;
  perDay: number;
  perMonth?: number | undefined;
}

/** A request's quota: see the file's header. */
export interface Quota {
  /** The plan in force: the consumer's for a key of one, else the key's. */
  plan: string;
  /** The key's subject: for a key of a consumer, in the consumer's slot with the consumer as its pool. */
  subject: QuotaSubject;
  /** The pool's limits (the plan's, with the own limits in force of the pool's owner), interned. */
  limits: KeyLimits;
  /** Which of `limits` are own limits (OWN_* bits): a plan's candidate limits leave those windows alone. */
  own: number;
  /** A key of a consumer: its own limits in force, its caps inside the pool (interned); undefined when none. */
  caps: CapLimits | undefined;
  /** The monthly period in force, when a monthly limit applies (pool or cap). */
  month: MonthPeriod | undefined;
}

const endsAt = new Map<string, number>();

/** Whether own limits still apply at `now`: no end, or an end still ahead (an unreadable end counts as passed). */
export function ownLimitsInForce(own: OwnLimits, now: number): boolean {
  const at = own.limitsExpiresAt;
  if (at === undefined) return true;
  let ms = endsAt.get(at);
  if (ms === undefined) {
    if (endsAt.size >= 10_000) endsAt.clear();
    ms = Date.parse(at);
    endsAt.set(at, ms);
  }
  return now < ms;
}

const interned = new Map<string, KeyLimits & CapLimits>();

/** One frozen object per distinct set of values, so the request windows' caches (keyed by identity) share it. */
function intern(perMinute: number | undefined, perDay: number | undefined, perMonth: number | undefined): KeyLimits & CapLimits {
  const at = `${perMinute}/${perDay}/${perMonth}`;
  let v = interned.get(at);
  if (!v) {
    if (interned.size >= 10_000) interned.clear();
    v = Object.freeze({ perMinute: perMinute!, perDay: perDay!, ...(perMonth !== undefined ? { perMonth } : {}) });
    interned.set(at, v);
  }
  return v;
}

/** The pool's limits: the owner's own ones in force over its plan's; undefined without a usable plan. */
export function limitsInForce(owner: OwnLimits, plan: PlanLimits | undefined, now: number): { limits: KeyLimits; own: number } | undefined {
  const mine = ownLimitsInForce(owner, now);
  const perMinute = (mine ? owner.perMinute : undefined) ?? plan?.perMinute;
  const perDay = (mine ? owner.perDay : undefined) ?? plan?.perDay;
  if (perMinute === undefined || perDay === undefined) return undefined;
  const perMonth = (mine ? owner.perMonth : undefined) ?? plan?.perMonth;
  const own = mine ? (owner.perMinute !== undefined ? OWN_MINUTE : 0) | (owner.perDay !== undefined ? OWN_DAY : 0) : 0;
  return { limits: intern(perMinute, perDay, perMonth), own };
}

/** A key's caps inside its consumer's pool: its own limits in force (undefined when it has none). */
export function capsInForce(key: OwnLimits, now: number): CapLimits | undefined {
  if (key.perMinute === undefined && key.perDay === undefined && key.perMonth === undefined) return undefined;
  if (!ownLimitsInForce(key, now)) return undefined;
  return intern(key.perMinute, key.perDay, key.perMonth);
}

/**
 * The quota of one request of `caller` at `now`: a key without a consumer counts in its own windows, its own limits
 * over its plan's (as ever); a key of a consumer counts in the consumer's pool (the consumer's plan, the consumer's own
 * limits over it) and its own limits are caps inside it. Undefined when the plan in force is not configured.
 */
export function quotaOf(caller: LimitedCaller, plans: Readonly<Record<string, PlanLimits | undefined>>, now: number, periods: MonthPeriods): Quota | undefined {
  const consumer = caller.consumer;
  const plan = consumer ? consumer.plan : caller.plan;
  const config = Object.hasOwn(plans, plan) ? plans[plan] : undefined;
  const pool = limitsInForce(consumer ?? caller, config, now);
  if (!pool) return undefined;
  const caps = consumer ? capsInForce(caller, now) : undefined;
  const monthly = pool.limits.perMonth !== undefined || caps?.perMonth !== undefined;
  return {
    plan,
    subject: keySubject(caller.id, consumer?.id),
    limits: pool.limits,
    own: pool.own,
    caps,
    month: monthly ? periods.at(now, consumer?.billingDay) : undefined,
  };
}
