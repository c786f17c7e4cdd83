// The admin HTTP API, on a listener of its own (admin.host:admin.port): the app that composes its resources (keys in
// keys-routes.ts and import-route.ts, consumers in consumers-routes.ts, usage reports in usage-routes.ts, plans and
// status in plans-routes.ts, services in services-routes.ts) behind one request log, the dashboard, the admin guard,
// the JSON body parser and one error handler. Every change goes through key or consumer administration
// (src/keys/admin.ts, src/consumers/admin.ts), which the CLI uses too; a consumer's webhook endpoints
// (webhooks-routes.ts) through the endpoints registry (src/events/endpoints.ts), the consumer portal's sign-in links
// and sessions (portal-routes.ts) through its access (src/access/), and the operator's view of event
// delivery (events-routes.ts) through the delivery's queues: one set of rules and error codes, and one
// audit line per change. No listen() here: src/server/gateway-server.ts binds it.
import { randomUUID } from 'node:crypto';
import express, { type RequestHandler } from 'express';
import { dashboardRouter } from '../dashboard/routes.js';
import { sendError } from '../http/errors.js';
import { H, isSaneRequestId } from '../http/headers.js';
import type { ConsumerAdmin } from '../consumers/admin.js';
import type { EndpointRegistry } from '../events/endpoints.js';
import type { KeyAdmin } from '../keys/admin.js';
import type { KeyLimitAdmin } from '../limits/key-admin.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { securityHeaders } from '../pipeline/stages/entry.js';
import type { Runtime } from '../routing/runtime.js';
import type { ServiceSnapshot } from '../routing/services.js';
import type { OverviewCache } from '../usage/overview.js';
import type { ReportRunner } from '../usage/report-runner.js';
import type { UsageReports } from '../usage/reports.js';
import { consumerRoutes } from './consumers-routes.js';
import { eventsRoutes, type ConfiguredEndpoint, type DeliveryChangeListener, type EndpointDelivery } from './events-routes.js';
import { AdminGuard } from './guard.js';
import { importRoute } from './import-route.js';
import { keyRoutes } from './keys-routes.js';
import { plansRoutes } from './plans-routes.js';
import { portalRoutes, type PortalAdminOptions } from './portal-routes.js';
import { actorOf, requireJsonBody } from './requests.js';
import { servicesRoutes } from './services-routes.js';
import { Sessions } from './sessions.js';
import type { AdminTokens } from './tokens.js';
import { usageRoutes } from './usage-routes.js';
import { webhookRoutes } from './webhooks-routes.js';
import { ADMIN_ERRORS, jsonErrors } from './json-errors.js';

export interface AdminAppOptions {
  keys: KeyAdmin;
  /** Consumer administration: the /consumers resource. */
  consumers: ConsumerAdmin;
  /** The keys' windows and bans (read, unban, reset). */
  keyLimits: KeyLimitAdmin;
  runtime: Runtime;
  tokens: AdminTokens;
  metrics: Metrics;
  logger: Logger;
  /** The OpenAPI document served at /openapi.json (docs/admin.openapi.yaml, parsed). */
  openapi: unknown;
  /** The usage ledger and deprecated-route report. */
  usage: UsageReports;
  /** Reports over every key: GET /usage's pages, the what-if, the deprecated-route report (usage/report-runner.ts). */
  reports: ReportRunner;
  /** The overview's summary, computed once and shared (usage/overview.ts). */
  overview: OverviewCache;
  /** Whether the gateway's Redis answers ('ok'), is being worked around ('degraded'), or there is none ('none'). */
  redisState: () => Promise<'ok' | 'degraded' | 'none'>;
  /** The services and their targets as this instance sees them now (ServiceRegistry.snapshot). */
  services: () => ServiceSnapshot[];
  /** Webhook endpoints registered for consumers (/consumers/{id}/webhooks). */
  endpoints: EndpointRegistry;
  /** Every endpoint's delivery state, undelivered events, replay and enable (/events/endpoints). */
  delivery: EndpointDelivery;
  /** The endpoints the config in force lists (events.webhooks). */
  configuredEndpoints: () => readonly ConfiguredEndpoint[];
  /** Audits replays and enables. */
  onDeliveryChange?: DeliveryChangeListener;
  /** The consumer portal's links and sessions (/consumers/{id}/portal-links, /consumers/{id}/portal-sessions). */
  portal: Pick<PortalAdminOptions, 'access' | 'linkBase' | 'onChange'>;
}

/** Admin requests are small JSON documents: a key's fields and metadata. */
const MAX_BODY = '64kb';

export function buildAdminApp(o: AdminAppOptions): express.Express {
  const { keys, keyLimits, runtime, logger } = o;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', false);

  const guard = new AdminGuard(o.tokens, () => runtime.config.admin.maxFailuresPerMinute, o.metrics, new Sessions());
  // A reload's tokens are in force from the next admin request on: a removed (or re-hashed) token, and every
  // session it opened, is refused at once, and such sessions stay ended if the token comes back.
  runtime.onChange((next) => {
    o.tokens.replace(next.config.admin.tokens);
    guard.endSessionsOfRevokedTokens();
  });
  app.use(adminRequestLog(logger));
  // The dashboard's page, assets and sign-in: before the API's own headers (the page has a CSP of its own).
  app.use(dashboardRouter(guard));
  app.use(securityHeaders());
  // The document describes the API, nothing in it is secret; tools fetch it without credentials.
  app.get('/openapi.json', (_req, res) => void res.json(o.openapi));
  app.use(guard.requireAdmin);
  // Before the JSON parser: an import body is larger (up to 10 MB) and may be CSV or JSON lines.
  app.post('/keys/import', ...importRoute(keys.importer, actorOf));
  app.use(express.json({ limit: MAX_BODY, strict: true }));
  app.use(requireJsonBody);

  app.use(keyRoutes(keys, keyLimits));
  app.use(consumerRoutes(o.consumers, keyLimits));
  app.use(webhookRoutes({ consumers: o.consumers, endpoints: o.endpoints, enabled: () => runtime.config.portal.webhooks }));
  app.use(portalRoutes({ ...o.portal, consumers: o.consumers, webhooks: () => runtime.config.portal.webhooks }));
  app.use(
    eventsRoutes({
      configured: o.configuredEndpoints,
      registered: o.endpoints,
      delivery: o.delivery,
      ...(o.onDeliveryChange ? { onChange: o.onDeliveryChange } : {}),
    }),
  );
  app.use(usageRoutes({ keys: keys.listing, runtime, usage: o.usage, reports: o.reports, overview: o.overview }));
  app.use(plansRoutes({ runtime, reports: o.reports, redisState: o.redisState }));
  app.use(servicesRoutes(o.services));
  app.use((_req, res) => sendError(res, 'not_found'));
  app.use(
    jsonErrors({
      logger,
      maxBody: MAX_BODY,
      keyError: (err) => ({ code: ADMIN_ERRORS[err.code], message: err.message }),
      failure: { line: 'admin request failed', message: 'The key store did not answer. Retry shortly.' },
    }),
  );
  return app;
}

/** Request id (the caller's X-Request-Id when sane) and one log line per admin request once it is answered. */
function adminRequestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const given = req.headers[H.requestId];
    req.id = isSaneRequestId(given) ? given : randomUUID();
    res.setHeader(H.requestId, req.id);
    const started = performance.now();
    res.once('close', () => {
      const q = req.originalUrl.indexOf('?');
      logger.info(
        {
          admin: true,
          req: { id: req.id, method: req.method, url: q === -1 ? req.originalUrl : req.originalUrl.slice(0, q), remoteAddress: req.socket.remoteAddress },
          res: { statusCode: res.statusCode },
          responseTime: Math.round(performance.now() - started),
          ...(req.adminTokenId ? { by: req.adminTokenId } : {}),
        },
        'admin request',
      );
    });
    next();
  };
}
