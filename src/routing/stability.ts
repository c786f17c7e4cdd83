// A route's stability (routes[].stability: experimental, beta, stable, ...) and which plans may call it
// (services.<name>.openapi.stability). Experimental and beta operations are often offered to some plans only: the
// gate refuses a key of another plan with 403 plan_not_allowed before any quota is taken. The plans are resolved
// once per config (compileRoutes), so the request path reads one Set; a stability the map does not list is open to
// every plan.
import type { Config, RouteConfig } from '../config/schema.js';

/** The plans that may call a route, or undefined when every plan may (no stability, or one its service's map does not list). */
export function stabilityPlans(r: Pick<RouteConfig, 'stability' | 'service'>, services: Config['services']): ReadonlySet<string> | undefined {
  if (r.stability === undefined || r.service === undefined) return undefined;
  const map = services?.[r.service]?.openapi?.stability;
  if (!map || !Object.hasOwn(map, r.stability)) return undefined;
  return new Set(map[r.stability]);
}

/** Whether a key of `plan` may call a route with these plans (undefined: every plan). */
export function planAllowed(plans: ReadonlySet<string> | undefined, plan: string): boolean {
  return plans === undefined || plans.has(plan);
}

/**
 * `config check` warnings: a stability value a service's map lists that none of the service's routes carries (a typo
 * such as "Beta" for "beta" leaves the route open to every plan without a word otherwise).
 */
export function stabilityWarnings(config: Pick<Config, 'services' | 'routes'>): string[] {
  const out: string[] = [];
  for (const [name, s] of Object.entries(config.services ?? {})) {
    const used = new Set(config.routes.filter((r) => r.service === name && r.stability !== undefined).map((r) => r.stability));
    for (const value of Object.keys(s.openapi?.stability ?? {})) {
      if (used.has(value)) continue;
      const carried = [...used].sort().join(', ');
      out.push(
        `services.${name}.openapi.stability.${value}: no route of service ${name} has stability ${value}, so these plans limit nothing` +
          (carried ? ` (its routes carry ${carried})` : ''),
      );
    }
  }
  return out;
}
