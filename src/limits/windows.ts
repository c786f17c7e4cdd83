// The windows a request is checked against: its plan's minute and day, then the matched route's own, each with its
// limit, length and mode, and the request's cost. Built once per (plan limits, route, config) and cached, so a request
// allocates nothing for them: the RateLimit-Policy header and the limit script's per-window arguments come with them.
import type { Config } from '../config/schema.js';
import type { Runtime, RuntimeConfig } from '../config/runtime.js';
import { formatRateLimitPolicy } from '../http/headers.js';
import type { CompiledRoute } from '../routes/policy.js';
import { DAY_MS, MINUTE_MS, type KeyLimits, type LimitMode, type LimitRequest, type WindowSpec } from './types.js';

/** A route's windows for one plan (or `default`): perMinute and/or perDay. */
export interface RouteWindowLimits {
  perMinute?: number | undefined;
  perDay?: number | undefined;
}

/** The plan's two windows, always first in a request's list. */
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

export function limitRequest(windows: readonly WindowSpec[], cost = 1): LimitRequest {
  return Object.freeze({
    windows: Object.freeze([...windows]),
    cost,
    policy: formatRateLimitPolicy(windows.map((w) => ({ name: w.name, limit: w.limit, windowSeconds: w.lengthMs / 1000 }))),
    // Shadow mode rides on the limit's sign: one argument per window less for the script to read.
    scriptArgs: Object.freeze(windows.flatMap((w) => [w.mode === 'shadow' ? -w.limit : w.limit, w.lengthMs])),
  });
}

const planOnly = new WeakMap<KeyLimits, Map<LimitMode, LimitRequest>>();

/** The plan's windows alone, cost 1 (a request no route adds to), one object per KeyLimits and mode. */
export function planRequest(limits: KeyLimits, mode: LimitMode = 'enforce'): LimitRequest {
  let byMode = planOnly.get(limits);
  if (!byMode) planOnly.set(limits, (byMode = new Map()));
  let r = byMode.get(mode);
  if (!r) byMode.set(mode, (r = limitRequest(planWindows(limits, mode))));
  return r;
}

/** The mode of a plan's own windows: the plan's, else limits.mode. */
export function planMode(config: Config, plan: string): LimitMode {
  return config.plans[plan]?.mode ?? config.limits.mode;
}

/** A route's windows for a plan (its own entry, else `default`), in the route's mode, else limits.mode. */
export function routeWindowsFor(config: Config, route: CompiledRoute, plan: string): WindowSpec[] {
  const limits = route.limits && (Object.hasOwn(route.limits, plan) ? route.limits[plan] : route.limits.default);
  return limits ? routeWindows(route.limitName, limits, route.mode ?? config.limits.mode) : [];
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

  /** The windows and cost of a request of a key of `plan` (limits: the key's effective ones) to `route`. */
  forRequest(plan: string, limits: KeyLimits, route: CompiledRoute | undefined): LimitRequest {
    const current = this.fresh();
    const config = current.config;
    if (!route || (route.cost === 1 && !route.limits)) return planRequest(limits, planMode(config, plan));
    const index = this.indexOf(current, route);
    // A route matched under the config before a reload is not cached (its index means nothing now).
    if (index < 0) return limitRequest([...planWindows(limits, planMode(config, plan)), ...routeWindowsFor(config, route, plan)], route.cost);
    const at = `${index}\u0000${plan}\u0000${limits.perMinute}/${limits.perDay}`;
    let r = this.cache.get(at);
    if (!r) {
      if (this.cache.size >= 10_000) this.cache.clear();
      r = limitRequest([...planWindows(limits, planMode(config, plan)), ...routeWindowsFor(config, route, plan)], route.cost);
      this.cache.set(at, r);
    }
    return r;
  }

  /**
   * What the quota endpoint shows a key of `plan`: its plan's windows, then every route window that applies to the
   * plan, in config order (a route named twice by method shares its windows: listed once).
   */
  forQuota(plan: string, limits: KeyLimits): LimitRequest {
    const current = this.fresh();
    const at = `quota\u0000${plan}\u0000${limits.perMinute}/${limits.perDay}`;
    let r = this.cache.get(at);
    if (!r) {
      const windows = planWindows(limits, planMode(current.config, plan));
      const seen = new Set<string>();
      for (const route of current.routes) {
        for (const w of routeWindowsFor(current.config, route, plan)) {
          if (seen.has(w.suffix)) continue;
          seen.add(w.suffix);
          windows.push(w);
        }
      }
      r = limitRequest(windows);
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
    if (!r.limits) continue;
    const name = r.name ?? r.path;
    for (const l of Object.values(r.limits)) for (const w of routeWindows(name, l, 'enforce')) out.add(w.suffix);
  }
  return [...out];
}
