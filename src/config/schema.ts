// The configuration schema: the file's sections (sections/, a file each, where every field is declared once with its
// default and its meaning) assembled at the root, and the cross-field rules run on the whole file, each a named
// function: those that read one section live in its file, those that read several in rules/. Types are derived from
// it; unknown keys are errors.
import { z } from 'zod';
import type { LoadedDocuments } from '../openapi/operations.js';
import { routeLimitsUseKnownPlans, stabilityPlansKnown, staticKeysUseKnownPlans } from './rules/known-plans.js';
import { eventsNeedRedis } from './rules/events-redis.js';
import { adminPortDiffers, opsPortDiffers, portalPortDiffers, workersNeedRedis } from './rules/ports-and-workers.js';
import { routesLeaveGatewayPathsAlone, routesNameKnownServices, routesWithoutServiceNeedUpstream } from './rules/route-destinations.js';
import { admin, adminTokenIdsUnique } from './sections/admin.js';
import { anonymous } from './sections/anonymous.js';
import { auth, keySourcesDistinct } from './sections/auth.js';
import { ban } from './sections/ban.js';
import { consumers } from './sections/consumers.js';
import { events } from './sections/events.js';
import { keys, staticKeyIdsUnique } from './sections/keys.js';
import { limits } from './sections/limits.js';
import { log } from './sections/log.js';
import { ops } from './sections/ops.js';
import { DEFAULT_PLANS, plans } from './sections/plans.js';
import { portal } from './sections/portal.js';
import { redis } from './sections/redis.js';
import {
  afterSunsetNeedsSunset,
  brownoutsBeforeSunset,
  routes,
  routeWindowNamesUnique,
  stripPrefixLeadsPath,
  sunsetNotBeforeDeprecation,
  type RouteConfig,
} from './sections/routes.js';
import { selfService } from './sections/self-service.js';
import { server } from './sections/server.js';
import { SERVICE_NAME, services } from './sections/services.js';
import { tracing } from './sections/tracing.js';
import { upstream, type UpstreamConfig } from './sections/upstream.js';
import { usage } from './sections/usage.js';

export { openapiBlocks, type OpenapiBlock } from './openapi-blocks.js';
export type { AdminConfig } from './sections/admin.js';
export type { AuthConfig } from './sections/auth.js';
export type { ConsumersConfig } from './sections/consumers.js';
export { defaultEventSource, type EventsConfig, type MeteringConfig, type WebhookConfig } from './sections/events.js';
export type { StaticKeyConfig } from './sections/keys.js';
export type { LimitsConfig } from './sections/limits.js';
export type { ListenerTlsConfig } from './sections/listener-tls.js';
export type { ServiceOpenapiConfig } from './sections/openapi.js';
export type { OpsConfig } from './sections/ops.js';
export type { PlanConfig } from './sections/plans.js';
export type { PortalConfig } from './sections/portal.js';
export type { RedisConfig } from './sections/redis.js';
export type { RouteWindowLimitsConfig } from './sections/route-limits.js';
export { addressRouteLimits, planRouteLimits, type ParsedRouteConfig, type RouteConfig } from './sections/routes.js';
export type { ServiceConfig, ServiceTlsConfig, TargetConfig } from './sections/services.js';
export { UPSTREAM_SERVICE, type UpstreamConfig } from './sections/upstream.js';
export type { UsageConfig } from './sections/usage.js';

export const configSchema = z
  .strictObject({
    server: server.prefault({}).describe('The gateway\'s listener and its timeouts.'),
    upstream: upstream.optional().describe('One backend that receives every request under /v1 (the shorthand for one service); its hideCredentials and maxSockets apply to every service. Beside services, a section without url is those settings alone, no service.'),
    redis: redis.optional().describe('The shared Redis (one of url, cluster, sentinel); leave it out for the in-memory stores (one instance only).'),
    ops: ops.optional().describe('A separate listener for /readyz and /metrics; leave out to serve them on the gateway port.'),
    admin: admin.prefault({}).describe('The admin HTTP API (keys, plans), on a listener of its own.'),
    selfService: selfService.prefault({}).describe('The quota endpoint key holders call on the gateway port.'),
    usage: usage.prefault({}).describe('Usage per key and deprecated-route callers, kept in Redis.'),
    tracing: tracing.prefault({}).describe('OpenTelemetry traces over OTLP/HTTP (off unless otlpEndpoint is set).'),
    log: log.prefault({}).describe('Logging.'),
    limits: limits.prefault({}).describe('How windows apply: enforce or shadow mode.'),
    plans: plans.default(DEFAULT_PLANS).describe('Plans by name: { perMinute, perDay, mode, shadow, selfServiceKeys }. Giving plans replaces the whole default set.'),
    anonymous: anonymous.prefault({}).describe('The per-client limit for requests without a valid key.'),
    ban: ban.prefault({}).describe('The ban ladder for keys that keep hammering after a 429.'),
    consumers: consumers.prefault({}).describe('The consumers behind keys: which of their metadata the upstream gets.'),
    services: services.optional().describe('Backends by name, each with its targets, balancing, retries and health checks (docs/routing.md).'),
    routes: routes.default([]).describe('Routes to services, with their policy (auth, deprecation, sunset, cost, route windows); first match in file order wins.'),
    defaultService: z.string().regex(SERVICE_NAME, 'expected a service name from services').optional().describe('Where requests that match no route go; left out, they get 404 not_found.'),
    methodOverride: z
      .enum(['match', 'refuse'])
      .default('match')
      .describe('A POST carrying X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override or ?_method: "match" routes it as the method it names and sends it upstream as that method (override headers, _method and, for GET or DELETE, the body left out); "refuse" answers 400.'),
    keys: keys.default([]).describe('Static keys for Redis-less use, by the SHA-256 of the key (tollgate keys generate).'),
    auth: auth.prefault({}).describe('How API keys are read and judged: where (sources), which shapes (foreignKeys), and the prefix of issued keys.'),
    portal: portal.prefault({}).describe("What consumers may do for themselves: whether webhook endpoints may be registered for them, and the consumer portal's listener (off unless port is set), its sessions and sign-in limit."),
    events: events.optional().describe('Quota alerts and other events as signed webhooks (CloudEvents), and the metering export; needs redis.'),
  })
  .superRefine(sunsetNotBeforeDeprecation, readsClean('routes'))
  .superRefine(afterSunsetNeedsSunset, readsClean('routes'))
  .superRefine(brownoutsBeforeSunset, readsClean('routes'))
  .superRefine(stabilityPlansKnown, readsClean('services', 'upstream', 'plans'))
  .superRefine(staticKeysUseKnownPlans, readsClean('keys', 'plans'))
  .superRefine(routeLimitsUseKnownPlans, readsClean('routes', 'plans'))
  .superRefine(routeWindowNamesUnique, readsClean('routes'))
  .superRefine(staticKeyIdsUnique, readsClean('keys'))
  .superRefine(workersNeedRedis, readsClean('server', 'redis'))
  .superRefine(eventsNeedRedis, readsClean('events', 'redis'))
  .superRefine(opsPortDiffers, readsClean('ops', 'server'))
  .superRefine(adminPortDiffers, readsClean('admin', 'server', 'ops'))
  .superRefine(portalPortDiffers, readsClean('portal', 'server', 'admin', 'ops'))
  .superRefine(adminTokenIdsUnique, readsClean('admin'))
  .superRefine(keySourcesDistinct, readsClean('auth'))
  .superRefine(routesNameKnownServices, readsClean('services', 'routes', 'defaultService', 'upstream'))
  .superRefine(routesWithoutServiceNeedUpstream, readsClean('services', 'upstream', 'routes'))
  .superRefine(routesLeaveGatewayPathsAlone, readsClean('routes', 'selfService', 'ops'))
  .superRefine(stripPrefixLeadsPath, readsClean('routes'))
  .transform(withUpstream);

/** The upstream section's defaults, for a config that leaves it out. */
const UPSTREAM_DEFAULTS = upstream.parse({});

/**
 * upstream.url is a service (named "upstream": it takes every request under /v1 and routes without a service) when
 * the file writes an upstream section or has no services; the section's defaults are always filled in.
 */
function withUpstream<T extends { upstream?: UpstreamConfig | undefined; services?: Record<string, unknown> | undefined }>(
  cfg: T,
): Omit<T, 'upstream'> & { upstream: UpstreamConfig; upstreamIsService?: boolean } {
  const { upstream: given, ...rest } = cfg;
  return { ...rest, upstream: given ?? UPSTREAM_DEFAULTS, ...(cfg.services ? { upstreamIsService: given !== undefined } : {}) };
}

/**
 * A cross-field rule runs unless a section it reads failed to parse (a wrong type: zod's aborting issues), even when
 * other sections did: `config check` then names every problem in one pass, where zod by default skips every rule after
 * one wrong type anywhere. A section with only unknown fields or out-of-range values parsed, and is read as it is.
 * Reading a section that failed to parse, a rule could only guess, so it waits for that section to be fixed.
 */
function readsClean(...sections: string[]): { when: (payload: z.core.ParsePayload) => boolean } {
  return { when: (payload) => !payload.issues.some((i) => i.continue !== true && sections.includes(String(i.path?.[0]))) };
}

/**
 * A loaded config: every route has its path (those naming an operationId were merged into their operation's route by
 * src/openapi/), and `openapi` holds what the documents added, by route index.
 */
export type Config = Omit<z.output<typeof configSchema>, 'routes'> & { routes: RouteConfig[]; openapi?: LoadedDocuments };
