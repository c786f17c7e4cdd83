// Route policy: deprecation and sunset of configured routes (RFC 9745, RFC 8594), as a decision with no Express; and
// what the key limits need of a route (its cost, its windows: src/limits/windows.ts turns them into a request's windows).
// Route patterns are compiled once per config load (Runtime); per request only the compiled matchers run.
import { match, type MatchFunction } from 'path-to-regexp';
import type { RouteConfig } from '../config/schema.js';
import { H, formatDeprecation, formatLink, formatSunset } from '../http/headers.js';

export interface CompiledRoute {
  readonly method: string;
  readonly pattern: string;
  readonly matches: MatchFunction<Record<string, string | string[]>>;
  readonly sunsetMs: number | undefined;
  readonly gone: boolean;
  /** For a deprecated route, its name in the usage report ("<METHOD> <pattern>"): keyed calls of it are counted. */
  readonly deprecatedAs: string | undefined;
  /** Response headers this route adds, formatted once. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** Points a request of this route takes from every window that applies (1 by default). */
  readonly cost: number;
  /** The name of its windows: routes[].name, else its path. */
  readonly limitName: string;
  /** Its windows by plan name (and "default"), if any. */
  readonly limits: RouteConfig['limits'];
  /** Its windows' own mode, if set. */
  readonly mode: RouteConfig['mode'];
}

export function compileRoutes(routes: readonly RouteConfig[]): CompiledRoute[] {
  return routes.map((r) => {
    const headers: Array<[string, string]> = [];
    const links: string[] = [];
    if (r.deprecation) headers.push([H.deprecation, formatDeprecation(Date.parse(r.deprecation))]);
    if (r.sunset) headers.push([H.sunset, formatSunset(Date.parse(r.sunset))]);
    if (r.link && r.deprecation) links.push(formatLink(r.link, 'deprecation'));
    if (r.link && r.sunset && !r.deprecation) links.push(formatLink(r.link, 'sunset'));
    if (links.length > 0) headers.push([H.link, links.join(', ')]);
    return {
      method: r.method,
      pattern: r.path,
      matches: match(r.path, { decode: false, end: true }),
      sunsetMs: r.sunset ? Date.parse(r.sunset) : undefined,
      gone: r.afterSunset === 'gone',
      deprecatedAs: r.deprecation ? deprecatedRouteName(r) : undefined,
      headers,
      cost: r.cost,
      limitName: r.name ?? r.path,
      limits: r.limits,
      mode: r.mode,
    };
  });
}

/** A deprecated route's name in the usage report and its Redis keys: "<METHOD> <pattern>". */
export function deprecatedRouteName(r: Pick<RouteConfig, 'method' | 'path'>): string {
  return `${r.method} ${r.path}`;
}

export function findRoute(routes: readonly CompiledRoute[], method: string, path: string): CompiledRoute | undefined {
  for (const r of routes) {
    if (r.method !== '*' && r.method !== method && !(r.method === 'GET' && method === 'HEAD')) continue;
    if (r.matches(path)) return r;
  }
  return undefined;
}

/** A request target's path: everything before the query. */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query >= 0 ? url.slice(0, query) : url;
}

/**
 * The path as route patterns are matched against it. The path goes upstream byte for byte, and an upstream may read
 * `/v1//pets/1` or `/v1/p%65ts/1` as `/v1/pets/1`: so the policy sees what such an upstream would see, or a retired
 * route could be reached by spelling it differently. Repeated slashes are merged and percent-encoded unreserved
 * characters (RFC 3986 §2.3, equivalent to their decoded form by §6.2.2.2) are decoded; other escapes stay as they
 * are. Dot segments never get here (refused with 400 before authentication).
 */
export function policyPath(path: string): string {
  let p = path.includes('//') ? path.replace(/\/{2,}/g, '/') : path;
  if (p.includes('%'))
    p = p.replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
      const c = String.fromCharCode(parseInt(hex, 16));
      return /[A-Za-z0-9\-._~]/.test(c) ? c : encoded;
    });
  return p;
}

/**
 * The route policy decision for one request: the configured route it matches (the first, in config order), if any,
 * and whether that route is retired (afterSunset: gone, and its sunset has passed). The routePolicy stage
 * (src/pipeline/stages.ts) adds the route's headers and answers 410 for a retired one.
 */
export function matchRoute(routes: readonly CompiledRoute[], method: string, requestPath: string): CompiledRoute | undefined {
  // Patterns are full paths ("/v1/pets/:petId"), matched against the path as the client sent it.
  return findRoute(routes, method, policyPath(pathOf(requestPath)));
}

export function isRetired(route: CompiledRoute, nowMs: number): boolean {
  return route.gone && route.sunsetMs !== undefined && nowMs >= route.sunsetMs;
}
