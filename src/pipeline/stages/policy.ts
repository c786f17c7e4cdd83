// Policy: what the caller and the route allow, once the caller is known. Before any quota is taken, and from the
// cached caller alone (no Redis command): a suspended consumer, an address outside the allow-lists, a route outside
// the scopes, a plan the route's stability is not open to. After the key limits: deprecation, sunset and brownouts
// (so a brownout counts as the retirement will), and the request against its operation's OpenAPI description.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { sendError } from '../../http/errors.js';
import { formatRetryAfter, H } from '../../http/headers.js';
import { continueIfExpected } from '../../http/expect-continue.js';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { pathOf, policyPath, scopeNamesOf, unservedAt } from '../../routing/routes.js';
import { planAllowed } from '../../routing/stability.js';
import { invalidRequestsName } from '../../usage/reports.js';
import type { Clock } from '../../util/clock.js';
import { DescriptionError, type ValidationProblem } from '../../validation/validator.js';
import { readWholeBody } from '../request-body.js';
import { catalogueChannel, CHANNELS, type DeprecatedCalledMessage } from '../../observability/catalogue.js';
import type { CompiledRoute } from '../../routing/routes.js';

/** The catalogue's channel of keyed calls to deprecated routes (observability/catalogue.ts). */
const deprecatedChannel = catalogueChannel(CHANNELS.deprecatedCalled);

/**
 * A keyed call of a deprecated route as the catalogue's message: the operation is its operationId (a route of an OpenAPI
 * operation, or one naming routes[].operationId), else "METHOD /pattern" as the usage report names the route.
 */
export function deprecatedMessage(route: CompiledRoute, name: string, keyId: string, consumer: string | undefined, at: number): DeprecatedCalledMessage {
  return {
    keyId,
    ...(consumer !== undefined ? { consumer } : {}),
    operation: route.operationId ?? route.operation?.operationId ?? name,
    route: name,
    ...(route.sunsetMs !== undefined ? { sunset: new Date(route.sunsetMs).toISOString() } : {}),
    ...(route.successor !== undefined ? { successor: route.successor } : {}),
    at,
  };
}

/**
 * Counts keyed calls of deprecated routes for the usage report (stage 8), and keyed requests that do not match their
 * operation's description (stage V: the ledger's validationFailed and the invalid-request report).
 */
export interface UsageCounts {
  /** `consumer`: the key's consumer, whose ledger the request was counted in (absent for a key without one). */
  deprecatedCall(route: string, id: string, consumer?: string): void;
  invalidRequest(operation: string, id: string, pointer: string, consumer?: string): void;
}

/** C. A key whose consumer is suspended: 403, before anything is counted. */
export function consumerStatus(req: Request, res: Response, next: NextFunction): void {
  const consumer = req.ctx.caller?.consumer;
  if (consumer?.status !== 'suspended') return next();
  sendError(res, 'consumer_suspended', `The consumer ${consumer.id} this API key belongs to is suspended.`);
}

/**
 * A. A caller whose key or consumer has allowed CIDRs is served only from an address both allow: the client's address
 * as trustProxy derives it (src/limits/client-address.ts: X-Forwarded-For only from a trusted proxy, IPv4-mapped
 * IPv6 as IPv4). The address is worked out only for such a caller.
 */
export function allowedAddress(req: Request, res: Response, next: NextFunction): void {
  const access = req.ctx.caller?.access;
  if (!access?.limitsAddresses) return next();
  const address = req.ctx.clientAddress();
  if (access.allowsAddress(address)) return next();
  sendError(res, 'address_not_allowed', `This API key may not be used from ${address ?? 'this address'}.`);
}

/**
 * G. A caller whose key or consumer has scopes may call only the routes both name: by the route's name,
 * `service:<name>` or `operation:<operationId>` (CompiledRoute.scopeNames, worked out per config). A request no route
 * takes (defaultService's) answers to its service's name alone.
 */
export function scopes(req: Request, res: Response, next: NextFunction): void {
  const ctx = req.ctx;
  const access = ctx.caller?.access;
  if (!access?.limitsScopes) return next();
  const names = ctx.matchedRoute?.scopeNames ?? scopeNamesOf(undefined, ctx.service!.name);
  if (access.allowsRoute(names)) return next();
  sendError(res, 'scope_denied', `This API key's scopes do not reach ${req.method} ${ctx.route ?? ''}: it answers to ${names.join(', ')}.`);
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
  if (!plans || !ctx.caller || planAllowed(plans, ctx.caller.plan)) return next();
  const open = [...plans];
  sendError(
    res,
    'plan_not_allowed',
    `This route is ${ctx.matchedRoute!.stability}: plan ${ctx.caller.plan} is not allowed to call it (${open.length > 0 ? `open to ${open.join(', ')}` : 'open to no plan'}).`,
  );
}

/**
 * 8. The matched route's deprecation headers (read per request: a reload applies at once), 410 once retired or
 * during a brownout (one decision: unservedAt; the clock is read only for a route with a sunset to enforce or
 * brownouts). A brownout's 410 comes where a retirement's does, after the key limits: the request counts as a retired
 * route's does, so a brownout rehearses the sunset exactly, quota included. A keyed call of a deprecated route is
 * counted for the usage report (who still calls it), in memory, written in batches.
 */
export function routePolicy(clock: Clock, usage?: UsageCounts): RequestHandler {
  return function routePolicyStage(req, res, next) {
    const route = req.ctx.matchedRoute;
    if (!route) return next();
    const caller = req.ctx.caller;
    if (route.deprecatedAs !== undefined && caller) {
      usage?.deprecatedCall(route.deprecatedAs, caller.id, caller.consumer?.id);
      if (deprecatedChannel.hasSubscribers)
        deprecatedChannel.publish(deprecatedMessage(route, route.deprecatedAs, caller.id, caller.consumer?.id, clock.now()));
    }
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
  usage?: UsageCounts | undefined;
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
    const caller = req.ctx.caller;
    if (caller)
      o.usage?.invalidRequest(
        invalidRequestsName({ service: route.service, operation: v.operation }),
        caller.id,
        pointer.slice(0, MAX_POINTER_KEPT),
        caller.consumer?.id,
      );
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
