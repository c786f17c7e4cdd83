// Where routes go: a route's service (and defaultService) is a configured one; a route without a service is under /v1
// and has an upstream section to take it; no route takes a path the gateway answers itself. They read routes beside
// services, upstream, selfService and ops, so they run on the whole config (schema.ts).
import { gatewayPaths, isUnderUpstreamPrefix, routeMatcher, UPSTREAM_PREFIX } from '../../http/paths.js';
import type { Ctx } from '../sections/fields.js';
import { routeName, type ParsedRouteConfig } from '../sections/routes.js';
import { UPSTREAM_SERVICE } from '../sections/upstream.js';

type RoutingCfg = {
  services?: Record<string, unknown> | undefined;
  upstream?: unknown;
  routes: ParsedRouteConfig[];
  defaultService?: string | undefined;
  selfService: { path: string; enabled: boolean };
  ops?: unknown;
};

export function routesNameKnownServices(cfg: RoutingCfg, ctx: Ctx): void {
  const known = Object.keys(cfg.services ?? {});
  const expected = known.length ? `expected one of ${known.join(', ')}` : 'no services are configured';
  cfg.routes.forEach((r, i) => {
    if (r.service !== undefined && !known.includes(r.service))
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'service'], message: `route ${routeName(r)}: unknown service; ${expected}`, input: r.service });
  });
  if (cfg.defaultService !== undefined && !known.includes(cfg.defaultService))
    ctx.addIssue({ code: 'custom', path: ['defaultService'], message: `unknown service; ${expected}`, input: cfg.defaultService });
  if (cfg.services && cfg.upstream !== undefined && Object.hasOwn(cfg.services, UPSTREAM_SERVICE))
    ctx.addIssue({
      code: 'custom',
      path: ['services', UPSTREAM_SERVICE],
      message: `the name "${UPSTREAM_SERVICE}" is taken by the upstream section (its service); rename one`,
      input: UPSTREAM_SERVICE,
    });
}

/**
 * A route without a service goes to upstream.url, which takes /v1: so it must be under /v1, and with services
 * configured, an upstream section must be there to take it.
 */
export function routesWithoutServiceNeedUpstream(cfg: RoutingCfg, ctx: Ctx): void {
  const upstreamIsService = !cfg.services || cfg.upstream !== undefined;
  cfg.routes.forEach((r, i) => {
    // A route naming an operationId goes where its operation's document says (a path of its own is refused there).
    if (r.service !== undefined || r.path === undefined || r.operationId !== undefined) return;
    if (!upstreamIsService)
      ctx.addIssue({
        code: 'custom',
        path: ['routes', i, 'service'],
        message: `route ${routeName(r)} names no service and there is no upstream section to take it; name one of the services`,
        input: undefined,
      });
    else if (!isUnderUpstreamPrefix(r.path))
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'path'], message: `expected a path under ${UPSTREAM_PREFIX}/, such as ${UPSTREAM_PREFIX}/pets/:petId`, input: r.path });
    else if (r.stripPrefix !== undefined)
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'stripPrefix'], message: `route ${routeName(r)}: stripPrefix needs a service (the upstream gets /v1 paths whole)`, input: r.stripPrefix });
  });
}

export function routesLeaveGatewayPathsAlone(cfg: RoutingCfg, ctx: Ctx): void {
  const own = gatewayPaths(cfg);
  cfg.routes.forEach((r, i) => {
    if (r.path === undefined) return;
    let m: ((p: string) => unknown) | undefined;
    try {
      m = routeMatcher(r.path);
    } catch {
      return; // reported by validRoutePattern
    }
    const taken = own.filter((p) => m(p) || m(p.toLowerCase()));
    if (taken.length > 0)
      ctx.addIssue({
        code: 'custom',
        path: ['routes', i, 'path'],
        message: `route ${routeName(r)} would take the gateway's own ${taken.join(', ')}; those are never routed`,
        input: r.path,
      });
  });
}
