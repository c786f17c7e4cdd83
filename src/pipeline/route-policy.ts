// Stage 4 of the request path: deprecation and sunset policy of configured routes (RFC 9745, RFC 8594).
// Route patterns are compiled once per config load; per request only the compiled matchers run.
import type { NextFunction, Request, Response } from 'express';
import { match, type MatchFunction } from 'path-to-regexp';
import type { Clock } from '../util/clock.js';
import type { RouteConfig } from '../config/schema.js';
import { sendError } from '../http/errors.js';
import { H, formatDeprecation, formatLink, formatSunset } from '../http/headers.js';
import type { Runtime } from '../config/runtime.js';

export interface CompiledRoute {
  readonly method: string;
  readonly pattern: string;
  readonly matches: MatchFunction<Record<string, string | string[]>>;
  readonly sunsetMs: number | undefined;
  readonly gone: boolean;
  /** Response headers this route adds, formatted once. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
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
      headers,
    };
  });
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

export function routePolicy(runtime: Runtime, clock: Clock) {
  return function routePolicyStage(req: Request, res: Response, next: NextFunction): void {
    // Patterns are full paths ("/v1/pets/:petId"), matched against the path as the client sent it.
    const route = findRoute(runtime.current.routes, req.method, policyPath(pathOf(req.originalUrl)));
    res.locals.route = route?.pattern;
    if (!route) return next();
    for (const [name, value] of route.headers) res.setHeader(name, value);
    if (route.gone && route.sunsetMs !== undefined && clock.now() >= route.sunsetMs) {
      return sendError(res, 'gone', `${req.method} ${route.pattern} was retired at ${new Date(route.sunsetMs).toISOString()}.`);
    }
    next();
  };
}
