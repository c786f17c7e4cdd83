// The request path: every stage a request passes, in the order it runs, in this one file. Each stage is a small
// named unit; the decisions (authentication, the anonymous limit, key limits, route policy) live in plain classes
// and functions with no Express in them, and the stages here turn their outcomes into HTTP. Stages talk through the
// request's typed context (req.ctx, src/pipeline/context.ts).
//
//   0. normalizeRequestTarget   absolute-form target -> path, fragment dropped (before Express routes; server/app.ts)
//   1. observeRequest           request id, context, req.log (pino-http); access log and metrics once the response is over
//   2. securityHeaders          helmet, for a JSON API
//   R. ownEndpoints             the quota endpoint (Q below); /healthz, /readyz, /metrics leave the request path
//   M. matchRoute               the route (host, method or the one a POST's override names, path; first in file order)
//                               and its service, or defaultService; neither: the request leaves the request path (404
//                               not_found); an override that cannot be routed: 400 invalid_method_override; one that
//                               is honoured makes the request that method (override headers, and a GET/DELETE body, go);
//                               from here on every answer carries the route's X-API-Stability      [routes with stability]
//   -- requests with a service only --
//   3. refuseAmbiguousPaths     400 for a path a backend may read as another (dot segments, %2F, \, ;)
//   T. refuseTransferCodings    501 for a transfer coding the gateway does not implement (all but chunked)
//   H. requireHealthyService    503 no_healthy_upstream when every target of the service is out (nothing counted)
//   4. authenticate             key from auth.sources (bearer, header, query) -> consumer (key cache; store read on a
//                               miss); on a public route a key store that cannot answer leaves the request anonymous
//   5. anonymousLimit           per-client limit for requests without a valid key (429)
//   P. publicRouteLimits        a public route's own limits per client address, for requests without a valid key,
//                               one Redis round trip (429, with RateLimit headers)          [only auth: none with limits]
//   6. requireApiKey            401 for whoever is still without a valid key                       [not for auth: none]
//   S. requireAllowedPlan       403 plan_not_allowed for a key whose plan the route's stability is not open to, before
//                               any quota is taken                      [routes whose stability the service's map lists]
//   7. keyLimits                ban check, plan and route windows with the route's cost, one Redis round trip (429,
//                               with RateLimit headers; shadow windows only report; 403 for a cost
//                               no enforced window can hold, before Redis)    [auth: none only with a valid key]
//   8. routePolicy              Deprecation / Sunset / Link headers; 410 for a retired route or during a brownout
//   V. validateRequest          the request against its operation's OpenAPI description: parameters, and a JSON body
//                               read whole (413 over server.maxBodyBytes, 408 when it stops); counted per key and
//                               operation; enforce: 400 invalid_request with every problem    [only routes that validate]
//   9. declaredBodyLimit        413 when Content-Length is over server.maxBodyBytes
//  10. prepareUpstreamHeaders   hop-by-hop out, X-Forwarded-* and X-Consumer-* in (only the gateway's own), Via;
//                               stripPrefix
//  11. proxyToUpstream          a target of the service, retries on another; stream there and back (src/pipeline/proxy.ts)
//
//   -- GET selfService.path (/ratelimit) only: the quota endpoint --
//   4-6 as above (a bad or missing key is a 401 that counts toward the anonymous limit), then
//   Q.  answerQuota             the key's own plan, windows and ban, read without counting (never the upstream)
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import helmet from 'helmet';
import type { Runtime } from '../routing/runtime.js';
import { sendError } from '../http/errors.js';
import { formatRetryAfter, H, isSaneRequestId, setRateLimitHeaders, type RateWindow } from '../http/headers.js';
import type { Authenticator } from '../keys/authenticator.js';
import {
  compileKeySources,
  DEFAULT_KEY_SOURCES,
  keyShapeText,
  mentionsPresentedKey,
  readPresentedKey,
  recordedKeyShapes,
  type KeySources,
} from '../http/credentials.js';
import type { AnonymousDecision, AnonymousLimiter } from '../limits/anonymous.js';
import type { KeyLimiter, KeyLimitOutcome, QuotaOutcome } from '../limits/key-limits.js';
import type { PublicLimitOutcome, PublicRouteLimiter } from '../limits/public-limits.js';
import type { LimitRequest, WindowSpec, WindowState } from '../limits/types.js';
import type { Logger } from '../observability/logger.js';
import { gatewayPaths } from '../http/paths.js';
import { METHOD_OVERRIDE_HEADERS, NO_BODY_METHODS, pathOf, policyPath, routingMethod, unservedAt } from '../routing/routes.js';
import { planAllowed } from '../routing/stability.js';
import type { Metrics } from '../observability/metrics.js';
import { continueIfExpected } from '../http/expect-continue.js';
import { unimplementedCodings } from '../http/intermediary.js';
import { DescriptionError, type ValidationProblem } from '../validation/validator.js';
import type { ServiceRegistry } from '../routing/services.js';
import type { Clock } from '../util/clock.js';
import type { Tracing } from '../observability/tracing.js';
import { RequestContext, type RequestObserver } from './context.js';
import { answerNoHealthyUpstream, declaredBodyLimit, prepareUpstreamHeaders } from './proxy.js';
import { readWholeBody } from './request-body.js';
import { invalidRequestsName } from '../usage/reports.js';
import { ambiguityOf } from './request-target.js';

export interface RequestPathParts {
  runtime: Runtime;
  clock: Clock;
  logger: Logger;
  /** Told of every request once its response is over (the metrics). */
  observers: readonly RequestObserver[];
  /** The access log (pino-http): started for every request in stage 1, it writes its line when the response is over. */
  accessLog?: (req: Request, res: Response) => void;
  /** OpenTelemetry traces, when tracing.otlpEndpoint is set: a server span per request, child spans in stages 4, 7, 10. */
  tracing?: Tracing;
  /**
   * The key stages' decisions (4-7). Always there in the gateway composeGateway builds; left out only by tests of
   * the proxy and route policy, which then run without keys.
   */
  keys?: { authenticator: Authenticator; anonymous: AnonymousLimiter; limiter: KeyLimiter; publicLimits?: PublicRouteLimiter };
  /** Stage 11, created with the services' connection pools (createProxy). */
  proxyToUpstream: RequestHandler;
  /** The services routes go to, with their targets' health (src/routing/services.ts). */
  services: ServiceRegistry;
  /**
   * Counts keyed calls of deprecated routes for the usage report (stage 8), and keyed requests that do not match their
   * operation's description (stage V: the ledger's validationFailed and the invalid-request report); absent: not counted.
   */
  usage?: { deprecatedCall(route: string, id: string): void; invalidRequest(operation: string, id: string, pointer: string): void };
  /** Counts requests that do not match their operation's description (stage V); absent: not counted. */
  metrics?: Metrics;
}

/**
 * The request path as one handler: every stage in order. A stage that calls next('route') sends the request out of
 * it, to the gateway's own routes after it (/healthz, /readyz, /metrics, and the 404).
 */
export function requestPath(p: RequestPathParts): RequestHandler {
  const { server, upstream, auth } = p.runtime.config;
  // Read per request: a reload's sources apply to the next request (parsed once per config; the last config's kept
  // here, so a request compares one array reference instead of looking its sources up).
  let sourceTexts: readonly string[] | undefined;
  let compiledSources = DEFAULT_KEY_SOURCES;
  const sources = (): KeySources => {
    const texts = p.runtime.config.auth.sources;
    if (texts !== sourceTexts) {
      compiledSources = compileKeySources(texts);
      sourceTexts = texts;
    }
    return compiledSources;
  };
  const keyShaped = keyShapeText(auth.issuedPrefix);
  const idCarriesKey = (req: Request, id: string): boolean => keyShaped.holds(id) || recordedKeyShapes().holds(id) || mentionsPresentedKey(req, sources(), id);
  const quota = p.keys
    ? inSequence([authenticate(p.keys.authenticator, p.logger, sources), anonymousLimit(p.keys.anonymous), requireApiKey, answerQuota(p.keys.limiter)])
    : undefined;
  // A public route's request whose key the limit check disowns is metered by its address after all (stages 5 and P).
  const byAddress = p.keys ? inSequence([anonymousLimit(p.keys.anonymous), publicRouteLimits(p.keys.publicLimits)]) : undefined;
  return inSequence([
    observeRequest(p.observers, p.accessLog, p.tracing, idCarriesKey),
    securityHeaders(),
    ownEndpoints(p.runtime, quota),
    matchRoute(p.runtime, p.services),
    refuseAmbiguousPaths,
    refuseTransferCodings,
    requireHealthyService,
    // Stages 4-7. A public route (auth: none) needs no key: a request without a valid key is metered by its address
    // (the anonymous limit, then the route's own limits), one with a valid key by its key (its plan, the route's cost).
    ...(p.keys
      ? [
          authenticate(p.keys.authenticator, p.logger, sources),
          anonymousLimit(p.keys.anonymous),
          publicRouteLimits(p.keys.publicLimits),
          keyedRoutesOnly(requireApiKey),
          requireAllowedPlan,
          keyLimits(p.keys.limiter, byAddress),
        ]
      : []),
    routePolicy(p.clock, p.usage),
    validateRequest({ maxBodyBytes: server.maxBodyBytes, idleMs: server.responseIdleTimeoutMs, logger: p.logger, metrics: p.metrics, usage: p.usage }),
    declaredBodyLimit(server.maxBodyBytes),
    prepareUpstreamHeaders(upstream, { via: server.via }),
    p.proxyToUpstream,
  ]);
}

/**
 * R. The gateway's own endpoints are never routed: the quota endpoint is answered here (Q), and /healthz (and
 * /readyz, /metrics on the gateway port) leave the request path for their handlers, whatever defaultService says.
 */
function ownEndpoints(runtime: Runtime, quota: RequestHandler | undefined): RequestHandler {
  return function ownEndpointsStage(req, res, next) {
    if (quota && isQuotaRequest(req, runtime)) return quota(req, res, (err?: unknown) => next(err ?? 'route'));
    const path = pathOf(req.url).toLowerCase();
    if (gatewayPaths(runtime.config).some((own) => own.toLowerCase() === path)) return next('route');
    next();
  };
}

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

/** A key stage that a public route (auth: none) skips: no key is required there. */
function keyedRoutesOnly(stage: RequestHandler): RequestHandler {
  return function keyedRouteStage(req, res, next) {
    if (req.ctx.matchedRoute?.auth === 'none') return next();
    return stage(req, res, next);
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
          plan: ctx.consumer?.plan,
          keyId: ctx.consumer?.id,
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

/** 3. A /v1 path an upstream may read as another path is refused with 400 before anything else (ambiguityOf). */
export function refuseAmbiguousPaths(req: Request, res: Response, next: NextFunction): void {
  const problem = ambiguityOf(req.originalUrl);
  if (problem) return sendError(res, 'invalid_request', `The request path must not contain ${problem}.`);
  next();
}

/**
 * 4. Finds out who is calling, from the key the configured sources present (http/credentials.ts); only a key store that
 * cannot answer is answered here (503, never a 401).
 */
export function authenticate(authenticator: Authenticator, logger: Logger, sources: () => KeySources = () => DEFAULT_KEY_SOURCES): RequestHandler {
  return async function authenticateStage(req, res, next) {
    const ctx = req.ctx;
    const span = ctx.trace?.start('tollgate.authenticate');
    // A route made from an OpenAPI document reads its key where its operation's security schemes say.
    const from = ctx.matchedRoute?.keySources ?? sources();
    ctx.keySources = from;
    const presented = readPresentedKey(req, from);
    if (presented.kind === 'conflict') ctx.authFailureMessage = 'The request carries two different API keys; send one key, in one place.';
    const outcome = await authenticator.authenticate(presented, ctx);
    if (span) ctx.trace!.end(span, typeof outcome === 'object' ? 'consumer' : outcome, outcome === 'unavailable');
    if (typeof outcome === 'object') ctx.consumer = outcome;
    else if (outcome === 'unavailable' && ctx.matchedRoute?.auth === 'none') {
      // A public route serves requests without a key: this one is metered as one (by its address) rather than refused.
      logger.warn({ reqId: req.id }, 'api key could not be verified on a public route (key store unavailable): metered by address');
      ctx.authFailure = 'invalid_api_key';
    } else if (outcome === 'unavailable') {
      // The key may be fine: the store did not answer. Not a 401, which would tell the client its key is wrong.
      logger.warn({ reqId: req.id }, 'api key could not be verified: key store unavailable');
      return sendError(res, 'service_unavailable', 'The API key could not be verified right now. Retry shortly.');
    } else ctx.authFailure = outcome;
    next();
  };
}

/** 5. Requests without a valid key are metered per client address; a keyed request passes untouched. */
export function anonymousLimit(anonymous: AnonymousLimiter): RequestHandler {
  const answer = (res: Response, next: NextFunction, d: AnonymousDecision): void => {
    setRateLimitHeaders(res, [{ name: 'minute', limit: d.limit, remaining: d.remaining, resetMs: d.resetMs, windowSeconds: 60 }], d.policy, d.now);
    if (d.admitted) return next();
    res.setHeader(H.retryAfter, formatRetryAfter(d.resetMs));
    sendError(res, 'rate_limit_exceeded', `Too many requests without a valid API key from this address. Retry after ${formatRetryAfter(d.resetMs)} seconds.`);
  };
  return function anonymousLimitStage(req, res, next) {
    const ctx = req.ctx;
    if (ctx.consumer) return next();
    const client = ctx.clientKey();
    // Still refused: answered from memory, no Redis call.
    const known = anonymous.knownRefusal(client, ctx.anonymousRefusedUntil);
    if (known) return answer(res, next, known);
    anonymous
      .consume(client)
      .then((d) => {
        ctx.anonymousDecision = d;
        answer(res, next, d);
      })
      .catch(next);
  };
}

/**
 * P. A public route's own limits per client address, for a request without a valid key the anonymous limit admitted:
 * both must pass. The RateLimit headers list the anonymous limit's window and the route's enforced ones together.
 */
export function publicRouteLimits(limiter: PublicRouteLimiter | undefined): RequestHandler {
  const answer = (req: Request, res: Response, next: NextFunction, o: PublicLimitOutcome): void => {
    if (o.kind === 'cost_exceeds_limit') {
      const w = o.window;
      return sendError(
        res,
        'cost_exceeds_limit',
        `This request costs ${o.cost} points, more than the ${w.name} window of this route holds for one address in all (${w.limit}): it can never be admitted without an API key.`,
      );
    }
    const { decision: d, request, now } = o;
    const windows = request.shown.map((i) => rateWindow(request.windows[i]!, d.windows[i]!));
    const anon = req.ctx.anonymousDecision;
    if (anon) windows.unshift({ name: 'minute', limit: anon.limit, remaining: anon.remaining, resetMs: anon.resetMs - (now - anon.now), windowSeconds: 60 });
    if (windows.length > 0) setRateLimitHeaders(res, windows, [anon?.policy ?? '', request.policy].filter((p) => p !== '').join(', '), now);
    if (d.outcome === 'admitted') return next();
    res.setHeader(H.retryAfter, formatRetryAfter(d.retryMs));
    sendError(
      res,
      'rate_limit_exceeded',
      `Too many requests without a valid API key from this address to this route (${shortNames(request, d.short)} window). Retry after ${formatRetryAfter(d.retryMs)} seconds.`,
    );
  };
  return function publicRouteLimitsStage(req, res, next) {
    const ctx = req.ctx;
    const route = ctx.matchedRoute;
    if (!limiter || ctx.consumer || !route || route.auth !== 'none' || !route.addressLimits) return next();
    limiter
      .check(route, ctx.clientKey())
      .then((o) => answer(req, res, next, o))
      .catch(next);
  };
}

/** 6. 401 for whoever has no valid key by now (the anonymous limit let them through). */
export function requireApiKey(req: Request, res: Response, next: NextFunction): void {
  const ctx = req.ctx;
  if (ctx.consumer) return next();
  const code = ctx.authFailure;
  res.setHeader('www-authenticate', code === 'missing_api_key' ? 'Bearer realm="tollgate"' : 'Bearer realm="tollgate", error="invalid_token"');
  const sources = ctx.keySources;
  if (code === 'missing_api_key' && sources && !sources.bearerOnly) return sendError(res, code, `An API key is required: send ${sources.howToSend}.`);
  sendError(res, code, code === 'invalid_api_key' ? ctx.authFailureMessage : undefined);
}

/**
 * S. A route whose stability its service's openapi.stability lists is open to those plans only: a key of another plan
 * is refused here, 403, before the key limits, so no window counts it, no ban strike follows and the backend never
 * hears of it. A public route's request without a valid key passes (it has no plan; it is metered by its address);
 * one with a valid key is judged by its key's plan, as its key's windows meter it there.
 */
export function requireAllowedPlan(req: Request, res: Response, next: NextFunction): void {
  const ctx = req.ctx;
  const plans = ctx.matchedRoute?.stabilityPlans;
  if (!plans || !ctx.consumer || planAllowed(plans, ctx.consumer.plan)) return next();
  const open = [...plans];
  sendError(
    res,
    'plan_not_allowed',
    `This route is ${ctx.matchedRoute!.stability}: plan ${ctx.consumer.plan} is not allowed to call it (${open.length > 0 ? `open to ${open.join(', ')}` : 'open to no plan'}).`,
  );
}

/**
 * The store no longer accepts the key authentication found (revoked, rotated past its grace, unreadable since it was
 * cached): the request is answered as one without a valid key, 401.
 */
function disownKey(req: Request, res: Response, next: NextFunction): void {
  req.ctx.consumer = undefined;
  req.ctx.authFailure = 'invalid_api_key';
  requireApiKey(req, res, next);
}

/** A window as it stands (remaining: limit less points used). */
function rateWindow(w: Pick<WindowSpec, 'name' | 'limit' | 'lengthMs'>, state: WindowState): RateWindow {
  return { name: w.name, limit: w.limit, remaining: Math.max(0, w.limit - state.used), resetMs: state.resetMs, windowSeconds: w.lengthMs / 1000 };
}

/**
 * The rate-limit headers of a request's enforced windows as they stand: a window in shadow mode or a candidate limit
 * is never shown (a client must not slow down for a limit not in force); none enforced, no such headers.
 */
function setWindowHeaders(res: Response, request: LimitRequest, states: readonly WindowState[], now: number): void {
  if (request.shown.length === 0) return;
  setRateLimitHeaders(
    res,
    request.shown.map((i) => rateWindow(request.windows[i]!, states[i]!)),
    request.policy,
    now,
  );
}

/** The names of the windows a refusal found short, as its message says them: "minute", "minute and store:day". */
function shortNames(request: LimitRequest, short: number): string {
  const names = request.windows.filter((w, i) => w.mode === 'enforce' && short & (1 << i)).map((w) => w.name);
  return names.join(' and ');
}

/**
 * 7. Ban check and every window that applies (the plan's, the matched route's, with its cost): RateLimit headers of
 * the enforced windows on every answer, 429 for a refusal, 403 for a cost an enforced window can never hold. A window
 * in shadow mode or a candidate limit that would refuse only reports (metrics, ledger), never in the headers.
 */
export function keyLimits(limiter: KeyLimiter, byAddress?: RequestHandler): RequestHandler {
  const answer = (req: Request, res: Response, next: NextFunction, o: KeyLimitOutcome): void => {
    if (o.kind === 'no_plan') return sendError(res, 'service_unavailable', 'This API key has no usable plan right now.');
    if (o.kind === 'unavailable') return sendError(res, 'service_unavailable', 'Rate limits cannot be checked right now. Retry shortly.');
    if (o.kind === 'invalid_key' && byAddress && req.ctx.matchedRoute?.auth === 'none') {
      // A public route: a key the store no longer accepts leaves the request anonymous, metered by its address.
      req.ctx.consumer = undefined;
      req.ctx.authFailure = 'invalid_api_key';
      void byAddress(req, res, next);
      return;
    }
    if (o.kind === 'invalid_key') return disownKey(req, res, next);
    if (o.kind === 'cost_exceeds_limit') {
      // No Retry-After and no window headers: waiting never helps, and no store was read.
      const w = o.window;
      return sendError(
        res,
        'cost_exceeds_limit',
        `This request costs ${o.cost} points, more than the ${w.name} window of this key holds in all (${w.limit}): it can never be admitted.`,
      );
    }
    const { decision: d, request } = o;
    setWindowHeaders(res, request, d.windows, o.now);
    if (d.outcome === 'admitted') return next();
    res.setHeader(H.retryAfter, formatRetryAfter(d.retryMs));
    if (d.outcome === 'banned' || d.outcome === 'banned_now') {
      return sendError(
        res,
        'api_key_banned',
        `This API key is banned for ${formatRetryAfter(d.retryMs)} more seconds after repeated 429s (ban level ${d.banLevel}).`,
      );
    }
    sendError(res, 'rate_limit_exceeded', `Rate limit exceeded (${shortNames(request, d.short)} window). Retry after ${formatRetryAfter(d.retryMs)} seconds.`);
  };
  return function keyLimitsStage(req, res, next) {
    // A public route's request without a valid key was metered by its address (stages 5 and P).
    if (!req.ctx.consumer && req.ctx.matchedRoute?.auth === 'none') return next();
    const traced = req.ctx.trace;
    const span = traced?.start('tollgate.limit_check', 'client', { 'db.system.name': 'redis' });
    limiter
      .check(req.ctx.consumer!, req.ctx, req.ctx.matchedRoute)
      .then((o) => {
        if (span) traced!.end(span, o.kind === 'decided' ? o.decision.outcome : o.kind, o.kind === 'unavailable');
        answer(req, res, next, o);
      })
      .catch((err: unknown) => {
        if (span) traced!.end(span, 'error', true);
        next(err);
      });
  };
}

/**
 * Q. The quota endpoint's answer: the caller's plan, its windows (limit, remaining, reset: the plan's, then every
 * route window that applies to its plan) and ban, with RateLimit headers listing them all, from one read-only store
 * call; nothing is counted and the upstream is never called. Errors as the key limits stage answers them (503 without
 * a plan or Redis with failMode closed, 401 for a key the store no longer accepts).
 */
export function answerQuota(limiter: KeyLimiter): RequestHandler {
  const answer = (req: Request, res: Response, next: NextFunction, o: QuotaOutcome): void => {
    if (o.kind === 'no_plan') return sendError(res, 'service_unavailable', 'This API key has no usable plan right now.');
    if (o.kind === 'unavailable') return sendError(res, 'service_unavailable', 'Rate limits cannot be read right now. Retry shortly.');
    if (o.kind === 'invalid_key') return disownKey(req, res, next);
    const { snapshot: s, request, now } = o;
    setWindowHeaders(res, request, s.windows, now);
    res.setHeader('cache-control', 'no-store');
    const listed = (w: RateWindow, mode: string) => ({
      name: w.name,
      limit: w.limit,
      remaining: w.remaining,
      resetAt: new Date(now + w.resetMs).toISOString(),
      mode,
    });
    res.status(200).json({
      plan: req.ctx.consumer!.plan,
      // Every window with its mode, the shadow ones too (the headers show only the enforced), then the candidate
      // limits, each on its window's count.
      windows: [
        ...request.windows.map((w, i) => listed(rateWindow(w, s.windows[i]!), w.mode)),
        ...request.candidates.map((c) => listed(rateWindow(c, s.windows[c.of]!), 'shadow')),
      ],
      banned: s.banMs > 0 ? { until: new Date(now + s.banMs).toISOString() } : null,
    });
  };
  return function answerQuotaStage(req, res, next) {
    limiter
      .quota(req.ctx.consumer!, req.ctx)
      .then((o) => answer(req, res, next, o))
      .catch(next);
  };
}

/**
 * 8. The matched route's deprecation headers (read per request: a reload applies at once), 410 once retired or
 * during a brownout (one decision: unservedAt; the clock is read only for a route with a sunset to enforce or
 * brownouts). A brownout's 410 comes where a retirement's does, after the key limits: the request counts as a retired
 * route's does, so a brownout rehearses the sunset exactly, quota included. A keyed call of a deprecated route is
 * counted for the usage report (who still calls it), in memory, written in batches.
 */
export function routePolicy(clock: Clock, usage?: RequestPathParts['usage']): RequestHandler {
  return function routePolicyStage(req, res, next) {
    const route = req.ctx.matchedRoute;
    if (!route) return next();
    if (usage && route.deprecatedAs !== undefined && req.ctx.consumer) usage.deprecatedCall(route.deprecatedAs, req.ctx.consumer.id);
    for (const [name, value] of route.headers) res.setHeader(name, value);
    if (!route.timed) return next();
    const now = clock.now();
    const unserved = unservedAt(route, now);
    if (unserved?.kind === 'retired') {
      return sendError(res, 'gone', `${req.method} ${route.pattern} was retired at ${new Date(route.sunsetMs!).toISOString()}.`);
    }
    if (unserved?.kind === 'brownout') {
      // Retry-After: when the route is served again. The sunset is there: brownouts need one.
      const sunset = new Date(route.sunsetMs!).toISOString();
      res.setHeader(H.retryAfter, formatRetryAfter(unserved.untilMs - now));
      return sendError(
        res,
        'gone',
        `${req.method} ${route.pattern} is browned out until ${new Date(unserved.untilMs).toISOString()}: ` +
          `${route.gone ? `it will be retired on ${sunset}` : `its sunset is ${sunset}`}${route.successor ? `; move to ${route.successor}` : ''}.`,
      );
    }
    next();
  };
}

/**
 * V. The request against its operation's OpenAPI description (routes of a document whose validate mode is not off).
 * It runs after the key limits, so an invalid request costs its points like any other: a key cannot make the gateway
 * parse and check bodies without limit by sending invalid ones (401 and 429 come first, and cost no validation). A
 * JSON body is read whole first, only for an operation that describes one and a request that sends one: at most
 * server.maxBodyBytes (413 beyond), within server.responseIdleTimeoutMs between bytes (408), and those bytes are what
 * the upstream gets. Any other request streams as before. A request that does not match is counted (the metric, and
 * per key the ledger's validationFailed and the invalid-request report) and its first problem's pointer logged; in
 * shadow mode it goes upstream all the same, in enforce mode it is answered 400 invalid_request with every problem.
 */
export function validateRequest(o: {
  maxBodyBytes: number;
  idleMs: number;
  logger: Logger;
  metrics?: Metrics | undefined;
  usage?: RequestPathParts['usage'] | undefined;
}): RequestHandler {
  /** Validators whose description could not be applied, already logged (once each, per config load). */
  const brokenLogged = new WeakSet<object>();
  const judge = (req: Request, res: Response, next: NextFunction, rawBody: Buffer | undefined): void => {
    const route = req.ctx.matchedRoute!;
    const v = route.validation!;
    const url = req.originalUrl;
    const q = url.indexOf('?');
    let problems: ValidationProblem[];
    try {
      problems = v.validator.validate({
        path: v.validator.pathParams(policyPath(pathOf(url))),
        query: q === -1 ? '' : url.slice(q + 1),
        headers: req.headers,
        ...(rawBody ? { rawBody } : {}),
      });
    } catch (err) {
      if (!(err instanceof DescriptionError)) throw err;
      // The document's fault, not the client's: the request goes through unchecked, and the operator is told once.
      if (!brokenLogged.has(v.validator)) {
        brokenLogged.add(v.validator);
        o.logger.error(
          { operation: v.operation, err: { message: err.message } },
          'request validation is off for this operation: its description cannot be applied',
        );
      }
      return next();
    }
    if (problems.length === 0) return next();
    const service = req.ctx.service?.name ?? route.service;
    o.metrics?.validationFailures.inc({ service, operation: v.operation, mode: v.mode });
    const pointer = problems[0]!.pointer;
    const consumer = req.ctx.consumer;
    if (consumer)
      o.usage?.invalidRequest(invalidRequestsName({ service: route.service, operation: v.operation }), consumer.id, pointer.slice(0, MAX_POINTER_KEPT));
    o.logger.info(
      { reqId: req.id, service, operation: v.operation, mode: v.mode, pointer: pointer.slice(0, MAX_POINTER_KEPT), problems: problems.length },
      v.mode === 'enforce' ? 'request refused: it does not match the API description' : 'request does not match the API description (shadow: proxied)',
    );
    if (v.mode === 'shadow') return next();
    sendError(
      res,
      'invalid_request',
      `The request does not match the API's description of ${v.operation}: see problems.`,
      problems.map((p) => ({ path: p.pointer, message: p.message })),
    );
  };
  return function validateRequestStage(req, res, next) {
    const v = req.ctx.matchedRoute?.validation;
    if (!v) return next();
    if (!v.validator.wantsBody(req.headers)) return judge(req, res, next, undefined);
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > o.maxBodyBytes) {
      res.setHeader('connection', 'close');
      return sendError(res, 'payload_too_large', `The request body exceeds ${o.maxBodyBytes} bytes.`);
    }
    // The body is about to be read: a client waiting on `Expect: 100-continue` may send it now.
    continueIfExpected(res);
    readWholeBody(req, { maxBytes: o.maxBodyBytes, idleMs: o.idleMs })
      .then((body) => {
        if (body === 'client_gone') return;
        if (body === 'too_large' || body === 'body_idle') {
          res.setHeader('connection', 'close');
          return body === 'too_large'
            ? sendError(res, 'payload_too_large', `The request body exceeds ${o.maxBodyBytes} bytes.`)
            : sendError(res, 'request_timeout', `No part of the request body arrived for ${o.idleMs} ms.`);
        }
        // The upstream gets these bytes with their length (a chunked body is sent with Content-Length).
        req.ctx.body = body;
        req.headers['content-length'] = String(body.length);
        delete req.headers['transfer-encoding'];
        judge(req, res, next, body);
      })
      .catch(next);
  };
}

/** A pointer kept in the report and the log: the first characters (a pointer may name properties the client made up). */
const MAX_POINTER_KEPT = 200;

/**
 * Stages as one handler that runs them in order, as Express would as separate handlers (an error or a rejected
 * promise goes to the error handler), but with one router layer instead of one per stage.
 */
export function inSequence(stages: readonly RequestHandler[]): RequestHandler {
  return function stagesInSequence(req, res, done) {
    let i = 0;
    const next = (err?: unknown): void => {
      // next('route'): the request leaves the sequence for the handlers after it, as in Express.
      if (err === 'route') return done();
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
