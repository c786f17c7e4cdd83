// The gateway's HTTP paths: its own (never routed) and how a route's path pattern matches a request path. The config
// rules (src/config/schema.ts) and the route table (src/routing/routes.ts) both use them, so they live below both.
import { match } from 'path-to-regexp';

/** The upstream shorthand's prefix: upstream.url takes every request under it, and the routes that name no service. */
export const UPSTREAM_PREFIX = '/v1';
// The segment itself, then a slash or the end, in any case (as the gateway always took it): /v1x is not under it.
const UNDER_UPSTREAM_PREFIX = new RegExp(`^${UPSTREAM_PREFIX}(?:/|$)`, 'i');

/** Whether a path is under /v1 (UPSTREAM_PREFIX): the config's rules and the route table both ask it. */
export function isUnderUpstreamPrefix(path: string): boolean {
  return UNDER_UPSTREAM_PREFIX.test(path);
}

/** The gateway's own paths are never routed: /healthz, the quota endpoint and (on the gateway port) /readyz, /metrics. */
export function gatewayPaths(cfg: { selfService: { path: string; enabled: boolean }; ops?: unknown }): string[] {
  return ['/healthz', ...(cfg.selfService.enabled ? [cfg.selfService.path] : []), ...(cfg.ops ? [] : ['/readyz', '/metrics'])];
}

/**
 * A route path's matcher (path-to-regexp, undecoded): exact or a pattern matches the whole path; a prefix ending in
 * /* matches the prefix itself and everything under it. Used by the config rules and compiled once per config.
 */
export function routeMatcher(path: string): (p: string) => false | { params: Partial<Record<string, string | string[]>> } {
  if (path.endsWith('/*')) {
    const base = path.slice(0, -2);
    if (base === '') return () => ({ params: {} });
    return match(base, { decode: false, end: false });
  }
  return match(path, { decode: false, end: true });
}
