// Builds the gateway's Express app from config and dependencies. No I/O at import and no listen():
// tests drive the returned app in-process, and only src/server/gateway-server.ts binds a port.
import express, { type ErrorRequestHandler, type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import helmet from 'helmet';
import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from './util/clock.js';
import { sendError } from './http/errors.js';
import { H, isSaneRequestId } from './http/headers.js';
import type { Logger } from './observability/logger.js';
import { Metrics } from './observability/metrics.js';
import { healthz, metricsHandler, readyz, type ReadinessCheck } from './observability/ops.js';
import { createProxy, declaredBodyLimit, prepareUpstreamHeaders } from './pipeline/proxy.js';
import { pathOf, routePolicy } from './pipeline/route-policy.js';
import type { Runtime } from './config/runtime.js';

declare module 'node:http' {
  interface IncomingMessage {
    /** The request id (X-Request-Id), set first thing on every request. */
    id: string;
  }
}

export interface GatewayDeps {
  runtime: Runtime;
  logger: Logger;
  clock?: Clock;
  metrics?: Metrics;
  /** What /readyz checks (Redis, the upstream). */
  readiness?: readonly ReadinessCheck[];
  /** Request-path stages that run before route policy and the proxy: authentication, then limits. */
  stages?: readonly RequestHandler[];
  /**
   * Whether /readyz and /metrics are served on the gateway port (the default), or only on the separate ops listener
   * (`ops` in the config: src/observability/ops.ts buildOpsApp). /healthz stays either way: load balancers probe the port they send to.
   */
  opsOnGatewayPort?: boolean;
}

export interface Gateway {
  app: express.Express;
  metrics: Metrics;
  /** Releases what the app holds (the upstream connection pool). */
  close(): void;
}

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);
/** A request target under /v1: the segment itself, then a slash, a query or the end. */
const UNDER_V1 = /^\/v1(?:[/?]|$)/i;

export function buildGateway(deps: GatewayDeps): Gateway {
  const { runtime, logger } = deps;
  const clock = deps.clock ?? systemClock;
  const metrics = deps.metrics ?? new Metrics();
  // Sections that only change on restart are read once here; reloadable ones are read per request from runtime.
  const { server, upstream } = runtime.config;

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', false);
  app.set('trust proxy', server.trustProxy);

  // Express's router captures an absolute-form target's scheme and host when it starts and re-applies them around
  // every mounted handler (turning the proxied path into "/http://host"), so the target is reduced before it runs.
  const handle = (app as unknown as { handle: (req: Request, res: Response, next?: NextFunction) => void }).handle.bind(app);
  (app as unknown as { handle: typeof handle }).handle = (req, res, next) => {
    normalizeRequestTarget(req);
    handle(req, res, next);
  };
  const proxy = createProxy({ upstream, maxBodyBytes: server.maxBodyBytes, logger, metrics });
  const v1 = inSequence([
    refuseAmbiguousPaths,
    ...(deps.stages ?? []),
    routePolicy(runtime, clock),
    declaredBodyLimit(server.maxBodyBytes),
    prepareUpstreamHeaders(upstream),
    proxy.handler,
  ]);
  // The whole gateway path is one router layer: every request's id, access-log line and metrics, the security
  // headers, then for /v1 the request path. /v1 is matched here as Express would mount it (case-insensitive, a whole
  // segment) but without the mount's rewriting of req.url around the stages: they and the upstream see the full path.
  app.use(
    inSequence([
      observeRequests(logger, metrics),
      helmet({
        // A JSON API serves no documents: nothing may load from or frame its answers (OWASP REST Security Cheat Sheet:
        // CSP frame-ancestors 'none', X-Frame-Options DENY, nosniff, HSTS).
        contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
        crossOriginResourcePolicy: { policy: 'same-origin' },
        xFrameOptions: { action: 'deny' },
        // Headers that only mean something for HTML pages in a browser are left out: every response carries only
        // what protects an API client, and no bytes for the rest.
        crossOriginOpenerPolicy: false,
        originAgentCluster: false,
        xDnsPrefetchControl: false,
        xDownloadOptions: false,
        xPermittedCrossDomainPolicies: false,
        xXssProtection: false,
      }),
      function v1Path(req, res, next) {
        if (UNDER_V1.test(req.url)) v1(req, res, next);
        else next();
      },
    ]),
  );

  // After /v1, so proxied traffic does not walk past the ops routes (no path of theirs starts with /v1).
  app.get('/healthz', healthz);
  if (deps.opsOnGatewayPort ?? true) {
    app.get('/readyz', readyz(deps.readiness ?? []));
    app.get('/metrics', metricsHandler(metrics));
  }

  app.use((_req: Request, res: Response) => sendError(res, 'not_found'));
  app.use(errorHandler(logger));

  return { app, metrics, close: () => proxy.agent.destroy() };
}

/**
 * An absolute-form request target (`GET http://other.host/v1/x HTTP/1.1`) is reduced to its path and query,
 * so routing and the proxy only ever see a path: the configured upstream is the only host contacted.
 */
function normalizeRequestTarget(req: Request): void {
  let url = req.url;
  // A fragment is never part of a request target (RFC 9112 §3.2) but Node's parser lets one through. Routing ignores
  // it while the route policy and the upstream would see it (`/v1/pets/1#x` escaping a 410): it is dropped here.
  const hash = url.indexOf('#');
  if (hash >= 0) {
    url = url.slice(0, hash) || '/';
    req.url = url;
    req.originalUrl = url;
  }
  if (url.charCodeAt(0) !== 47 /* "/" */ && /^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    try {
      const u = new URL(url);
      req.url = (u.pathname || '/') + u.search;
    } catch {
      req.url = '/';
    }
    req.originalUrl = req.url;
  }
}

/**
 * A /v1 path an upstream may read as another path is refused with 400 before anything else: the path goes upstream
 * unchanged, and what the upstream serves must be what the /v1 prefix and the route policy saw. So no "." or ".."
 * segment (also percent-encoded: `/v1/../admin`), no encoded slash or backslash (`%2F`, `%5C`: a WSGI server
 * decodes them, so `/v1/pets%2F1` is `/v1/pets/1` to Flask or Django), no backslash (a separator to some servers),
 * and no ";" (Tomcat and Spring drop `;params` from each segment, so `/v1/pets;x/1` is `/v1/pets/1` there).
 */
const DOT_SEGMENT = /(?:^|\/)\.\.?(?:\/|$)/;
const ENCODED_SEPARATOR = /%2f|%5c/i;
const MAY_BE_AMBIGUOUS = /[.%\\;]/;
function refuseAmbiguousPaths(req: Request, res: Response, next: NextFunction): void {
  const path = pathOf(req.originalUrl);
  // Most paths hold no ".", "%", backslash or ";" at all: nothing to look for.
  if (!MAY_BE_AMBIGUOUS.test(path)) return next();
  const problem = ambiguityOf(path);
  if (problem) return sendError(res, 'invalid_request', `The request path must not contain ${problem}.`);
  next();
}

/** What makes the path ambiguous, as the 400's message names it; undefined for a path every upstream reads alike. */
function ambiguityOf(path: string): string | undefined {
  if (path.includes('%') && ENCODED_SEPARATOR.test(path)) return 'an encoded slash or backslash (%2F, %5C)';
  if (path.includes('\\')) return 'a backslash';
  if (path.includes(';')) return '";" parameters';
  if (DOT_SEGMENT.test(path.includes('%') ? path.replace(/%2e/gi, '.') : path)) return '"." or ".." segments';
  return undefined;
}

/**
 * The /v1 stages as one handler that runs them in order, as Express would as separate handlers (an error or a
 * rejected promise goes to the error handler), but with one router layer instead of one per stage.
 */
export function inSequence(stages: readonly RequestHandler[]): RequestHandler {
  return function v1Stages(req, res, done) {
    let i = 0;
    const next = (err?: unknown): void => {
      if (err !== undefined && err !== null) return done(err);
      const stage = stages[i++];
      if (!stage) return done();
      try {
        const result: unknown = stage(req, res, next);
        if (result instanceof Promise) result.catch((e: unknown) => done(e ?? new Error('a request stage failed')));
      } catch (e) {
        done(e);
      }
    };
    next();
  };
}

/**
 * Gives each request its id (the caller's X-Request-Id when sane, else a new UUID; echoed in the response), and
 * once the response is over writes its access-log line and its metrics. One `close` listener per request, and the
 * root logger itself: no child logger per request (what pino-http does, and most of what it cost; bench/README.md).
 */
function observeRequests(logger: Logger, metrics: Metrics): RequestHandler {
  return function observeRequestsStage(req, res, next) {
    const start = performance.now();
    const given = req.headers[H.requestId];
    const id = isSaneRequestId(given) ? given : randomUUID();
    req.id = id;
    res.setHeader(H.requestId, id);
    // `close` comes after `finish` for a response sent in full, and alone for one cut short (the client left).
    res.once('close', () => {
      const ms = performance.now() - start;
      const finished = res.writableFinished;
      const status = res.statusCode;
      if (finished) {
        const path = pathOf(req.originalUrl);
        const route =
          (res.locals.route as string | undefined) ?? (OPS_PATHS.has(path) ? path : path === '/v1' || path.startsWith('/v1/') ? '/v1/*' : 'unmatched');
        metrics.requests.inc({ route, method: KNOWN_METHODS.has(req.method) ? req.method : 'OTHER', status: String(status) });
        metrics.requestDuration.observe({ route }, ms / 1000);
      }
      const failed = status >= 500;
      const level = failed ? 'error' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      const consumer = res.locals.consumer as { id: string } | undefined;
      logger[level](
        {
          req: { id, method: req.method, url: req.originalUrl, remoteAddress: req.socket.remoteAddress },
          res: { statusCode: status },
          responseTime: Math.round(ms),
          ...(consumer ? { consumer: consumer.id } : {}),
          ...(finished ? {} : { aborted: true }),
        },
        failed ? 'request errored' : 'request completed',
      );
    });
    next();
  };
}

function errorHandler(logger: Logger): ErrorRequestHandler {
  return function gatewayErrorHandler(err, req, res, _next) {
    // The proxy's own error listener has usually answered already; never answer twice.
    if (res.headersSent) {
      if (!res.writableEnded) res.destroy();
      return;
    }
    const status = typeof err?.status === 'number' ? err.status : typeof err?.statusCode === 'number' ? err.statusCode : 500;
    if (status === 413) return sendError(res, 'payload_too_large');
    if (status === 400) return sendError(res, 'invalid_request');
    if (status > 400 && status < 500) return sendError(res, 'not_found');
    logger.error({ reqId: req.id, err: { message: String(err?.message), code: err?.code } }, 'unhandled error');
    sendError(res, 'internal_error');
  };
}
