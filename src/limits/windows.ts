// The windows a request is checked against: its plan's minute and day (and month), then the matched route's own, then
// a key's caps inside its consumer's pool, each with its limit, length and mode, and the request's cost. Built once per
// (plan limits, route, caps, monthly period, config) and cached, so a request allocates nothing for them: the
// RateLimit-Policy header and the limit script's per-window arguments come with them. Only a request with a monthly
// window is copied per check, its length set to the time left in its period (atInstant).
import { planRouteLimits, type Config } from '../config/schema.js';
import type { Runtime, RuntimeConfig } from '../routing/runtime.js';
import { formatRateLimitPolicy, rateLimitItemStart } from '../http/headers.js';
import type { CompiledRoute } from '../routing/routes.js';
import type { MonthPeriod } from './months.js';
import { type CandidateSpec, type KeyLimits, type LimitMode, type LimitRequest, type WindowSpec } from './types.js';
import { DAY_MS, MINUTE_MS } from '../util/time.js';

/** Candidate limits beside a plan's or a route's windows (`shadow: { perMinute, perDay }`). */
export interface CandidateLimits {
  perMinute?: number | undefined;
  perDay?: number | undefined;
}

/** A route's windows for one plan (or `default`): perMinute and/or perDay, and candidates beside them. */
export interface RouteWindowLimits extends CandidateLimits {
  shadow?: CandidateLimits | undefined;
}

/** Bits of a key's own overrides (KeyLimiter.check): a plan's candidate limit never applies to an overridden window. */
export const OWN_MINUTE = 1;
export const OWN_DAY = 2;

/**
 * The plan's two windows, first in a request's list (found there through LimitRequest.plan, not by position), then its
 * monthly one when the limits have perMonth and the request a period (`month`).
 */
export function planWindows(limits: KeyLimits, mode: LimitMode = 'enforce', month?: MonthPeriod): WindowSpec[] {
  const out: WindowSpec[] = [
    { name: 'minute', suffix: 'minute', limit: limits.perMinute, lengthMs: MINUTE_MS, mode },
    { name: 'day', suffix: 'day', limit: limits.perDay, lengthMs: DAY_MS, mode },
  ];
  if (limits.perMonth !== undefined && month) out.push(monthWindow('month', limits.perMonth, month, mode));
  return out;
}

/**
 * A monthly window: its counter's suffix carries the period ("month:2026-11-01"), so the next period is a new counter;
 * its length is the period's (the policy's `w`) until atInstant makes it the time left.
 */
function monthWindow(name: string, limit: number, month: MonthPeriod, mode: LimitMode, cap?: true): WindowSpec {
  return { name, suffix: `month:${month.name}`, limit, lengthMs: month.endMs - month.startMs, mode, endsAt: month.endMs, ...(cap ? { cap } : {}) };
}

/** A key's own limits inside its consumer's pool: each one set is a window counted under the key. */
export interface CapLimits {
  perMinute?: number | undefined;
  perDay?: number | undefined;
  perMonth?: number | undefined;
}

/** A key's caps inside its consumer's pool, named "key:minute", "key:day", "key:month" (only those it sets). */
export function capWindows(caps: CapLimits, mode: LimitMode, month?: MonthPeriod): WindowSpec[] {
  const out: WindowSpec[] = [];
  if (caps.perMinute !== undefined) out.push({ name: 'key:minute', suffix: 'minute', limit: caps.perMinute, lengthMs: MINUTE_MS, mode, cap: true });
  if (caps.perDay !== undefined) out.push({ name: 'key:day', suffix: 'day', limit: caps.perDay, lengthMs: DAY_MS, mode, cap: true });
  if (caps.perMonth !== undefined && month) out.push(monthWindow('key:month', caps.perMonth, month, mode, true));
  return out;
}

/**
 * The request as checked at `now` (the gateway's clock): each monthly window's length becomes the time left to its
 * period's end, the expiry its counter gets when this request opens it and the reset a window not yet opened shows.
 * A request without a monthly window is itself (nothing is copied).
 */
export function atInstant(request: LimitRequest, now: number): LimitRequest {
  const calendar = request.calendar;
  if (calendar.length === 0) return request;
  const windows = [...request.windows];
  const scriptArgs = [...request.scriptArgs];
  for (const i of calendar) {
    const w = windows[i]!;
    // At least 1 ms: the period was chosen from this same clock, so it has not ended.
    const left = Math.max(1, w.endsAt! - now);
    windows[i] = { ...w, lengthMs: left };
    scriptArgs[2 * i + 1] = left;
  }
  return { ...request, windows, scriptArgs };
}

/** A route's windows, named "<route>:minute" and "<route>:day" (only those it sets). */
export function routeWindows(route: string, limits: RouteWindowLimits, mode: LimitMode): WindowSpec[] {
  const out: WindowSpec[] = [];
  if (limits.perMinute !== undefined)
    out.push({ name: `${route}:minute`, suffix: `route:${route}:minute`, limit: limits.perMinute, lengthMs: MINUTE_MS, mode });
  if (limits.perDay !== undefined) out.push({ name: `${route}:day`, suffix: `route:${route}:day`, limit: limits.perDay, lengthMs: DAY_MS, mode });
  return out;
}

/**
 * Candidates for the windows at `windows[from]` to `windows[to - 1]` (a plan's two, or a route's): each candidate limit
 * given goes with the window of the same length, named "<window>:shadow"; appended to `out`.
 */
export function candidatesFor(
  windows: readonly WindowSpec[],
  from: number,
  to: number,
  limits: CandidateLimits | undefined,
  out: CandidateSpec[] = [],
): CandidateSpec[] {
  if (!limits) return out;
  for (let i = from; i < to; i++) {
    const w = windows[i]!;
    // No candidate limits for a monthly window.
    if (w.endsAt !== undefined) continue;
    const limit = w.lengthMs === MINUTE_MS ? limits.perMinute : limits.perDay;
    if (limit !== undefined) out.push({ name: `${w.name}:shadow`, limit, lengthMs: w.lengthMs, of: i });
  }
  return out;
}

export function limitRequest(windows: readonly WindowSpec[], cost = 1, candidates: readonly CandidateSpec[] = []): LimitRequest {
  const shown: number[] = [];
  windows.forEach((w, i) => w.mode === 'enforce' && shown.push(i));
  const calendar: number[] = [];
  windows.forEach((w, i) => w.endsAt !== undefined && calendar.push(i));
  return Object.freeze({
    windows: Object.freeze([...windows]),
    plan: Object.freeze({ minute: windows.findIndex((w) => w.suffix === 'minute' && !w.cap), day: windows.findIndex((w) => w.suffix === 'day' && !w.cap) }),
    shadow: windows.reduce((mask, w, i) => (w.mode === 'shadow' ? mask | (1 << i) : mask), 0),
    candidates: Object.freeze([...candidates]),
    cost,
    shown: Object.freeze(shown),
    // Only enforced windows: a client that honours RateLimit must not slow down for a limit that is not in force.
    policy: formatRateLimitPolicy(shown.map((i) => ({ name: windows[i]!.name, limit: windows[i]!.limit, windowSeconds: windows[i]!.lengthMs / 1000 }))),
    rateLimitItems: Object.freeze(shown.map((i) => rateLimitItemStart(windows[i]!.name))),
    // Known from the config alone, so such a request is refused without asking a store (and strikes nothing).
    unpayable: windows.find((w) => w.mode === 'enforce' && w.limit < cost),
    scriptArgs: Object.freeze([...windows.flatMap((w) => [w.limit, w.lengthMs]), ...candidates.flatMap((c) => [c.of + 1, c.limit])]),
    calendar: Object.freeze(calendar),
  });
}

const planOnly = new WeakMap<KeyLimits, Map<string, LimitRequest>>();

/**
 * The plan's windows alone, cost 1 (a request no route adds to), one object per KeyLimits, mode and candidates (the
 * candidates object is the config's, replaced whole on reload).
 */
export function planRequest(limits: KeyLimits, mode: LimitMode = 'enforce', candidates?: CandidateLimits): LimitRequest {
  let byMode = planOnly.get(limits);
  if (!byMode) planOnly.set(limits, (byMode = new Map()));
  const at = candidates ? `${mode} ${candidates.perMinute} ${candidates.perDay}` : mode;
  let r = byMode.get(at);
  if (!r) {
    const windows = planWindows(limits, mode);
    byMode.set(at, (r = limitRequest(windows, 1, candidatesFor(windows, 0, 2, candidates))));
  }
  return r;
}

/** The mode of a plan's own windows: the plan's, else limits.mode. */
export function planMode(config: Config, plan: string): LimitMode {
  return config.plans[plan]?.mode ?? config.limits.mode;
}

/** The plan's candidate limits for a key: those of the windows the key has no override of (`own`: OWN_* bits). */
export function planCandidates(config: Config, plan: string, own = 0): CandidateLimits | undefined {
  const c = Object.hasOwn(config.plans, plan) ? config.plans[plan]!.shadow : undefined;
  if (!c || own === 0) return c;
  const perMinute = own & OWN_MINUTE ? undefined : c.perMinute;
  const perDay = own & OWN_DAY ? undefined : c.perDay;
  return perMinute === undefined && perDay === undefined ? undefined : { perMinute, perDay };
}

/** A route's window limits for a plan: its own entry, else `default`. */
function routeLimitsFor(route: CompiledRoute, plan: string): RouteWindowLimits | undefined {
  return route.limits && (Object.hasOwn(route.limits, plan) ? route.limits[plan] : route.limits.default);
}

/** A route's windows for a plan (its own entry, else `default`), in the route's mode, else limits.mode. */
export function routeWindowsFor(config: Config, route: CompiledRoute, plan: string): WindowSpec[] {
  const limits = routeLimitsFor(route, plan);
  return limits ? routeWindows(route.limitName, limits, route.mode ?? config.limits.mode) : [];
}

/** What a request adds to its plan's limits: a key's caps inside its consumer's pool, the monthly period in force. */
export interface RequestExtras {
  /** Interned (quota.ts): one object per distinct set of values. */
  caps?: CapLimits | undefined;
  month?: MonthPeriod | undefined;
}

/** The plan's windows and candidates, then the route's (if any) with theirs, then the caps, at `cost`. */
function buildRequest(
  config: Config,
  plan: string,
  limits: KeyLimits,
  own: number,
  route: CompiledRoute | undefined,
  cost: number,
  extras: RequestExtras,
): LimitRequest {
  const mode = planMode(config, plan);
  const windows = planWindows(limits, mode, extras.month);
  const candidates = candidatesFor(windows, 0, 2, planCandidates(config, plan, own));
  if (route) {
    const from = windows.length;
    windows.push(...routeWindowsFor(config, route, plan));
    candidatesFor(windows, from, windows.length, routeLimitsFor(route, plan)?.shadow, candidates);
  }
  if (extras.caps) windows.push(...capWindows(extras.caps, mode, extras.month));
  return limitRequest(windows, cost, candidates);
}

/** The part of a cache key the extras make: '' for none (nearly every request). */
function extrasKey(limits: KeyLimits, extras: RequestExtras | undefined): string {
  const month = (limits.perMonth !== undefined || extras?.caps?.perMonth !== undefined) && extras?.month ? extras.month.name : '';
  const caps = extras?.caps ? `${extras.caps.perMinute}/${extras.caps.perDay}/${extras.caps.perMonth}` : '';
  return month === '' && caps === '' ? '' : `\u0000${month}\u0000${caps}`;
}

/**
 * Resolves and caches the LimitRequest of each (plan, plan limits, route): the cache is dropped whenever the config
 * in force changes (a reload), so new costs, windows and modes apply to the next request.
 */
export class RequestWindows {
  private cache = new Map<string, LimitRequest>();
  private for: RuntimeConfig | undefined;
  private readonly routeIndex = new WeakMap<CompiledRoute, number>();

  constructor(private readonly runtime: Runtime) {}

  /**
   * The windows and cost of a request of a key of `plan` (limits: the pool's effective ones, the key's own for a key
   * without a consumer; own: which of them are overrides, OWN_* bits) to `route`; `extras`: a key's caps inside its
   * consumer's pool, and the monthly period (used only when a monthly limit applies). Monthly windows come with their
   * period's length: atInstant gives them the time left.
   */
  forRequest(plan: string, limits: KeyLimits, route: CompiledRoute | undefined, own = 0, extras?: RequestExtras): LimitRequest {
    const current = this.fresh();
    const config = current.config;
    const more = extrasKey(limits, extras);
    const simple = !route || (route.cost === 1 && !route.limits);
    if (simple && more === '') return planRequest(limits, planMode(config, plan), planCandidates(config, plan, own));
    const index = route ? this.indexOf(current, route) : -2;
    // A route matched under the config before a reload is not cached (its index means nothing now).
    if (index === -1) return buildRequest(config, plan, limits, own, route, route!.cost, extras ?? {});
    const at = `${simple ? 'plan' : index}\u0000${plan}\u0000${limits.perMinute}/${limits.perDay}/${limits.perMonth}/${own}${more}`;
    let r = this.cache.get(at);
    if (!r) {
      if (this.cache.size >= 10_000) this.cache.clear();
      r = buildRequest(config, plan, limits, own, simple ? undefined : route, simple ? 1 : route!.cost, extras ?? {});
      this.cache.set(at, r);
    }
    return r;
  }

  /**
   * What the quota endpoint shows a key of `plan`: its plan's windows, then every route window that applies to the
   * plan, in config order (a route named twice by method shares its windows: listed once), and their candidates; then
   * a key's caps inside its consumer's pool.
   */
  forQuota(plan: string, limits: KeyLimits, own = 0, extras?: RequestExtras): LimitRequest {
    const current = this.fresh();
    const at = `quota\u0000${plan}\u0000${limits.perMinute}/${limits.perDay}/${limits.perMonth}/${own}${extrasKey(limits, extras)}`;
    let r = this.cache.get(at);
    if (!r) {
      const config = current.config;
      const mode = planMode(config, plan);
      const windows = planWindows(limits, mode, extras?.month);
      const candidates = candidatesFor(windows, 0, 2, planCandidates(config, plan, own));
      const seen = new Set<string>();
      for (const route of current.routes) {
        const from = windows.length;
        for (const w of routeWindowsFor(config, route, plan)) {
          if (seen.has(w.suffix)) continue;
          seen.add(w.suffix);
          windows.push(w);
        }
        candidatesFor(windows, from, windows.length, routeLimitsFor(route, plan)?.shadow, candidates);
      }
      if (extras?.caps) windows.push(...capWindows(extras.caps, mode, extras.month));
      r = limitRequest(windows, 1, candidates);
      this.cache.set(at, r);
    }
    return r;
  }

  private fresh(): RuntimeConfig {
    const current = this.runtime.current;
    if (current !== this.for) {
      this.for = current;
      this.cache = new Map();
    }
    return current;
  }

  private indexOf(current: RuntimeConfig, route: CompiledRoute): number {
    let i = this.routeIndex.get(route);
    if (i === undefined) this.routeIndex.set(route, (i = current.routes.indexOf(route)));
    return i;
  }
}

/** Every route window's Redis suffix in the config (for `keys reset`, which empties them all). */
export function allRouteSuffixes(config: Config): string[] {
  const out = new Set<string>();
  for (const r of config.routes) {
    const limits = planRouteLimits(r);
    if (!limits) continue;
    const name = r.name ?? r.path;
    for (const l of Object.values(limits)) for (const w of routeWindows(name, l, 'enforce')) out.add(w.suffix);
  }
  return [...out];
}
