// The windows a request is checked against: its plan's minute and day, then the matched route's own, each with its
// limit, length and mode, and the request's cost. Built once per (plan limits, route, config) and cached, so a request
// allocates nothing for them: the RateLimit-Policy header and the limit script's per-window arguments come with them.
import { planRouteLimits, type Config } from '../config/schema.js';
import type { Runtime, RuntimeConfig } from '../routing/runtime.js';
import { formatRateLimitPolicy } from '../http/headers.js';
import type { CompiledRoute } from '../routing/routes.js';
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

/** The plan's two windows, first in a request's list (found there through LimitRequest.plan, not by position). */
export function planWindows(limits: KeyLimits, mode: LimitMode = 'enforce'): WindowSpec[] {
  return [
    { name: 'minute', suffix: 'minute', limit: limits.perMinute, lengthMs: MINUTE_MS, mode },
    { name: 'day', suffix: 'day', limit: limits.perDay, lengthMs: DAY_MS, mode },
  ];
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
    const limit = w.lengthMs === MINUTE_MS ? limits.perMinute : limits.perDay;
    if (limit !== undefined) out.push({ name: `${w.name}:shadow`, limit, lengthMs: w.lengthMs, of: i });
  }
  return out;
}

export function limitRequest(windows: readonly WindowSpec[], cost = 1, candidates: readonly CandidateSpec[] = []): LimitRequest {
  const shown: number[] = [];
  windows.forEach((w, i) => w.mode === 'enforce' && shown.push(i));
  return Object.freeze({
    windows: Object.freeze([...windows]),
    plan: Object.freeze({ minute: windows.findIndex((w) => w.suffix === 'minute'), day: windows.findIndex((w) => w.suffix === 'day') }),
    shadow: windows.reduce((mask, w, i) => (w.mode === 'shadow' ? mask | (1 << i) : mask), 0),
    candidates: Object.freeze([...candidates]),
    cost,
    shown: Object.freeze(shown),
    // Only enforced windows: a client that honours RateLimit must not slow down for a limit that is not in force.
    policy: formatRateLimitPolicy(shown.map((i) => ({ name: windows[i]!.name, limit: windows[i]!.limit, windowSeconds: windows[i]!.lengthMs / 1000 }))),
    // Known from the config alone, so such a request is refused without asking a store (and strikes nothing).
    unpayable: windows.find((w) => w.mode === 'enforce' && w.limit < cost),
    scriptArgs: Object.freeze([...windows.flatMap((w) => [w.limit, w.lengthMs]), ...candidates.flatMap((c) => [c.of + 1, c.limit])]),
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

/** The plan's windows and candidates, then the route's (if any) with theirs, at `cost`. */
function buildRequest(config: Config, plan: string, limits: KeyLimits, own: number, route: CompiledRoute | undefined, cost: number): LimitRequest {
  const windows = planWindows(limits, planMode(config, plan));
  const candidates = candidatesFor(windows, 0, 2, planCandidates(config, plan, own));
  if (route) {
    const from = windows.length;
    windows.push(...routeWindowsFor(config, route, plan));
    candidatesFor(windows, from, windows.length, routeLimitsFor(route, plan)?.shadow, candidates);
  }
  return limitRequest(windows, cost, candidates);
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
   * The windows and cost of a request of a key of `plan` (limits: the key's effective ones; own: which of them are the
   * key's own overrides, OWN_* bits) to `route`.
   */
  forRequest(plan: string, limits: KeyLimits, route: CompiledRoute | undefined, own = 0): LimitRequest {
    const current = this.fresh();
    const config = current.config;
    if (!route || (route.cost === 1 && !route.limits)) return planRequest(limits, planMode(config, plan), planCandidates(config, plan, own));
    const index = this.indexOf(current, route);
    // A route matched under the config before a reload is not cached (its index means nothing now).
    if (index < 0) return buildRequest(config, plan, limits, own, route, route.cost);
    const at = `${index}\u0000${plan}\u0000${limits.perMinute}/${limits.perDay}/${own}`;
    let r = this.cache.get(at);
    if (!r) {
      if (this.cache.size >= 10_000) this.cache.clear();
      r = buildRequest(config, plan, limits, own, route, route.cost);
      this.cache.set(at, r);
    }
    return r;
  }

  /**
   * What the quota endpoint shows a key of `plan`: its plan's windows, then every route window that applies to the
   * plan, in config order (a route named twice by method shares its windows: listed once), and their candidates.
   */
  forQuota(plan: string, limits: KeyLimits, own = 0): LimitRequest {
    const current = this.fresh();
    const at = `quota\u0000${plan}\u0000${limits.perMinute}/${limits.perDay}/${own}`;
    let r = this.cache.get(at);
    if (!r) {
      const config = current.config;
      const windows = planWindows(limits, planMode(config, plan));
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
