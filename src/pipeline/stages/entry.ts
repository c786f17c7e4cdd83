// Entry: what every request gets before anything is decided about it (its id and context, the security headers), and
// the gateway's own paths, which are never routed (the quota endpoint answered here, /healthz and the rest let past).
import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import helmet from 'helmet';
import { H, isSaneRequestId } from '../../http/headers.js';
import { gatewayPaths } from '../../http/paths.js';
import type { Tracing } from '../../observability/tracing.js';
import { pathOf } from '../../routing/routes.js';
import type { Runtime } from '../../routing/runtime.js';
import { RequestContext, type RequestObserver } from '../context.js';

/**
 * R. The gateway's own endpoints are never routed: the quota endpoint is answered here (Q), and /healthz (and
 * /readyz, /metrics on the gateway port) leave the request path for their handlers, whatever defaultService says.
 */
export function ownEndpoints(runtime: Runtime, quota: RequestHandler | undefined): RequestHandler {
  return function ownEndpointsStage(req, res, next) {
    if (quota && isQuotaRequest(req, runtime)) return quota(req, res, (err?: unknown) => next(err ?? 'route'));
    const path = pathOf(req.url).toLowerCase();
    if (gatewayPaths(runtime.config).some((own) => own.toLowerCase() === path)) return next('route');
    next();
  };
}

/** GET (or HEAD) of selfService.path, read per request (a reload applies at once); the query is ignored. */
function isQuotaRequest(req: Request, runtime: Runtime): boolean {
  const { enabled, path } = runtime.config.selfService;
  if (!enabled || (req.method !== 'GET' && req.method !== 'HEAD')) return false;
  const q = req.url.indexOf('?');
  if ((q === -1 ? req.url : req.url.slice(0, q)) !== path) return false;
  req.ctx.route = path;
  return true;
}

/**
 * 1. Gives each request its id (the caller's X-Request-Id when sane and not carrying the request's own key, else a new
 * UUID; echoed in the response) and its context, and tells the observers once the response is over: one `close`
 * listener per request.
 */
export function observeRequest(
  observers: readonly RequestObserver[],
  accessLog?: (req: Request, res: Response) => void,
  tracing?: Tracing,
  idCarriesKey?: (req: Request, id: string) => boolean,
): RequestHandler {
  return function observeRequestStage(req, res, next) {
    const given = req.headers[H.requestId];
    const id = isSaneRequestId(given) && !idCarriesKey?.(req, given) ? given : randomUUID();
    const ctx = new RequestContext(id, performance.now(), req);
    req.id = id;
    req.ctx = ctx;
    res.setHeader(H.requestId, id);
    // `close` comes after `finish` for a response sent in full, and alone for one cut short (the client left).
    if (tracing) ctx.trace = tracing.startRequest(req);
    res.once('close', () => {
      const end = { ms: performance.now() - ctx.startedAt, finished: res.writableFinished };
      for (const o of observers) o.requestEnded(ctx, res, end);
      if (tracing && ctx.trace)
        tracing.endRequest(ctx.trace, res, {
          route: ctx.route,
          plan: ctx.caller?.plan,
          keyId: ctx.caller?.id,
          decision: ctx.decision?.outcome,
          finished: end.finished,
        });
    });
    accessLog?.(req, res);
    next();
  };
}

/** 2. Security headers for a JSON API (helmet). */
export function securityHeaders(): RequestHandler {
  return helmet({
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
  });
}
