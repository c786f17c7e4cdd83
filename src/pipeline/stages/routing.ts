// Routing: the route and service a request goes to, matched once before anything is counted, and the refusals that
// need only the request and its service (a path a backend may read as another, a transfer coding the gateway cannot
// undo, a service with no healthy target). A request no route or defaultService takes leaves the request path here.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { sendError } from '../../http/errors.js';
import { H } from '../../http/headers.js';
import { unimplementedCodings } from '../../http/intermediary.js';
import { METHOD_OVERRIDE_HEADERS, NO_BODY_METHODS, routingMethod } from '../../routing/routes.js';
import type { Runtime } from '../../routing/runtime.js';
import type { ServiceRegistry } from '../../routing/services.js';
import { answerNoHealthyUpstream } from '../proxy.js';
import { ambiguityOf } from '../request-target.js';

/** Labels requests that defaultService takes (they match no route) in metrics and traces. */
export const DEFAULT_ROUTE_LABEL = '(default)';

/**
 * M. The route, matched once per request before anything else is decided (its pattern labels the metrics of every
 * answer, 401 and 429 included), and the service it goes to; defaultService for a request no route matches. A POST
 * with a method override is matched as the method it names (routingMethod): the backend runs that one. An override
 * the gateway cannot route is refused here, 400, before anything is counted.
 */
export function matchRoute(runtime: Runtime, services: ServiceRegistry): RequestHandler {
  return function matchRouteStage(req, res, next) {
    const { table, config } = runtime.current;
    const as = routingMethod(req.method, req.headers, req.originalUrl, config.methodOverride);
    if (as.refused !== undefined) return sendError(res, 'invalid_method_override', as.refused);
    if (as.method !== req.method) honourOverride(req, res, as.method);
    const route = table.match(as.method, req.originalUrl, req.headers.host ?? '');
    const serviceName = route?.service ?? config.defaultService;
    const service = serviceName === undefined ? undefined : services.get(serviceName);
    if (!service) return next('route');
    if (route?.stability !== undefined) res.setHeader(H.apiStability, route.stability);
    req.ctx.matchedRoute = route;
    req.ctx.route = route?.pattern ?? DEFAULT_ROUTE_LABEL;
    req.ctx.service = service;
    next();
  };
}

/** 3. A /v1 path an upstream may read as another path is refused with 400 before anything else (ambiguityOf). */
export function refuseAmbiguousPaths(req: Request, res: Response, next: NextFunction): void {
  const problem = ambiguityOf(req.originalUrl);
  if (problem) return sendError(res, 'invalid_request', `The request path must not contain ${problem}.`);
  next();
}

/**
 * T. A request body in a transfer coding the gateway cannot undo (`Transfer-Encoding: gzip, chunked`: every coding but
 * chunked) gets 501 before anything is counted: Node takes off the chunked framing alone, and the backend would read
 * the rest as the body itself. The body is not read: the connection is closed after the answer.
 */
export function refuseTransferCodings(req: Request, res: Response, next: NextFunction): void {
  const te = req.headers['transfer-encoding'];
  if (te === undefined || te === 'chunked') return next();
  const codings = unimplementedCodings(te);
  if (codings.length === 0) return next();
  res.setHeader('connection', 'close');
  const named = codings[0]!.length > 40 ? `${codings[0]!.slice(0, 40)}...` : codings[0]!;
  sendError(res, 'not_implemented', `The transfer coding ${JSON.stringify(named)} is not implemented: send the body chunked alone, or with Content-Length.`);
}

/**
 * A POST whose override was honoured becomes the request the gateway judged: the method the override names (what every
 * later stage, the proxy included, reads), without the override headers (the `_method` parameter is left out of the
 * forwarded target, pipeline/proxy.ts), and without its body when that method takes none (NO_BODY_METHODS). A
 * backend then runs exactly what its route's policy was applied to, whether or not it honours overrides itself: never
 * the POST twin, with its body, through a GET route that costs less or needs no key. The body left unread is not
 * worth keeping the connection for: it closes after the answer.
 */
function honourOverride(req: Request, res: Response, method: string): void {
  req.ctx.overriddenFrom = req.method;
  req.method = method;
  const h = req.headers;
  for (const name of METHOD_OVERRIDE_HEADERS) delete h[name];
  if (!NO_BODY_METHODS.has(method)) return;
  const hadBody = h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0');
  delete h['content-length'];
  delete h['transfer-encoding'];
  delete h['content-type'];
  delete h['content-encoding'];
  if (hadBody) res.setHeader('connection', 'close');
}

/** H. Every target of the service is out: 503 at once, before any limit counts the request (it costs nothing). */
export function requireHealthyService(req: Request, res: Response, next: NextFunction): void {
  const service = req.ctx.service!;
  if (!service.hasAvailable()) return answerNoHealthyUpstream(res, service);
  next();
}
