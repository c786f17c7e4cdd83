// A route's stability (routes[].stability: experimental, beta, stable, ...) and which plans may call it
// (services.<name>.openapi.stability; upstream.openapi.stability for the routes without a service, which go to the
// upstream). Experimental and beta operations are often offered to some plans only: the gate refuses a key of another
// plan with 403 plan_not_allowed before any quota is taken. The plans are resolved once per config (compileRoutes), so
// the request path reads one Set; a stability the map does not list is open to every plan.
import { openapiBlocks, UPSTREAM_SERVICE, type Config, type RouteConfig } from '../config/schema.js';

/** The services' and the upstream's openapi blocks: where a route's stability map is. */
export type StabilityMaps = Partial<Pick<Config, 'services' | 'upstream'>>;

/** The stability map of the service a route goes to (the upstream's for a route without a service). */
function mapOf(service: string | undefined, config: StabilityMaps): Readonly<Record<string, readonly string[]>> | undefined {
  return service === undefined ? config.upstream?.openapi?.stability : config.services?.[service]?.openapi?.stability;
}

/** The plans that may call a route, or undefined when every plan may (no stability, or one its service's map does not list). */
export function stabilityPlans(r: Pick<RouteConfig, 'stability' | 'service'>, config: StabilityMaps): ReadonlySet<string> | undefined {
  if (r.stability === undefined) return undefined;
  const map = mapOf(r.service, config);
  if (!map || !Object.hasOwn(map, r.stability)) return undefined;
  return new Set(map[r.stability]);
}

/** Whether a key of `plan` may call a route with these plans (undefined: every plan). */
export function planAllowed(plans: ReadonlySet<string> | undefined, plan: string): boolean {
  return plans === undefined || plans.has(plan);
}

/**
 * `config check` warnings: a stability value a service's map lists that none of the service's routes carries (a typo
 * such as "Beta" for "beta" leaves the route open to every plan without a word otherwise), and a gated stability on a
 * public route (auth: none): the gate judges a key's plan, so a client that sends no key passes it. One line per
 * stability value, naming its public routes.
 */
export function stabilityWarnings(config: Pick<Config, 'services' | 'upstream' | 'routes'>): string[] {
  const out: string[] = [];
  for (const { service, at, openapi, upstream } of openapiBlocks(config)) {
    const routeService = upstream ? undefined : service;
    const used = new Set(config.routes.filter((r) => r.service === routeService && r.stability !== undefined).map((r) => r.stability));
    const whose = upstream ? `the upstream (${UPSTREAM_SERVICE})` : `service ${service}`;
    for (const value of Object.keys(openapi.stability ?? {})) {
      const open = config.routes.filter((r) => r.service === routeService && r.stability === value && r.auth === 'none');
      if (open.length > 0) {
        const names = open.slice(0, 5).map((r) => `${r.method} ${r.path}${r.operationId ? ` (${r.operationId})` : ''}`);
        out.push(
          `${at.join('.')}.stability.${value}: ${open.length === 1 ? 'route' : `${open.length} routes`} ${names.join(', ')}${open.length > 5 ? ', ...' : ''} ` +
            `${open.length === 1 ? 'is' : 'are'} public (auth: none), and the gate judges a key's plan: a request without a key passes it. ` +
            'Make the operation keyed (its security) to hold it for the plans listed',
        );
      }
      if (used.has(value)) continue;
      const carried = [...used].sort().join(', ');
      out.push(
        `${at.join('.')}.stability.${value}: no route of ${whose} has stability ${value}, so these plans limit nothing` +
          (carried ? ` (its routes carry ${carried})` : ''),
      );
    }
  }
  return out;
}
