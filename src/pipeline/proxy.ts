// Stages 9-11 of the request path (src/pipeline/stages.ts): declaredBodyLimit, prepareUpstreamHeaders and
// proxyToUpstream, which forwards to a target of the route's service with http-proxy-middleware (httpxy), its
// `router` hook choosing the target (and its keep-alive pool) per try, streaming bodies both ways and mending what
// the library leaves to its caller (hop-by-hop headers, timeouts reported as resets, text/plain errors:
// docs/architecture.md, "Dependencies"). Retries on another target follow the rules in retryReason(); every answer
// the gateway gives itself for a failed upstream goes through answerUpstreamFailure().
import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import type { NextFunction, Request, Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { Config } from '../config/schema.js';
import { sendError } from '../http/errors.js';
import { connectionTokens, formatRetryAfter, H, HOP_BY_HOP, stripHopByHop } from '../http/headers.js';
import { continueIfExpected } from '../http/expect-continue.js';
import { withoutParams } from '../http/credentials.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestContext } from './context.js';
import { forwardedTarget } from '../routing/routes.js';
import type { Service, ServiceRegistry } from '../routing/services.js';
import type { Target } from '../routing/target.js';

/** Per-request proxy state, kept in the request's context (req.ctx.proxy) so the library's callbacks can reach it. */
interface ProxyState {
  service: Service;
  /** The target of the current try, and every target tried so far (a retry goes to another while there is one). */
  target: Target | undefined;
  readonly tried: Set<Target>;
  timedOut: boolean;
  tooLarge: boolean;
  startedAt: bigint;
  /** Date.now() by which the upstream must have sent response headers (timeoutMs from the first try). */
  deadlineAt: number;
  /** The current try went out on a pooled keep-alive socket. */
  reusedSocket: boolean;
  /** The current try's connection is up (nothing of the request can have reached the target before that). */
  connected: boolean;
  /** The current try did not connect within connectTimeoutMs. */
  connectTimedOut: boolean;
  /** Response headers arrived from the upstream. */
  responded: boolean;
  /** Tries sent again after stale pooled sockets (see staleSocket()). */
  staleRetries: number;
  /** Tries repeated under the service's retry rules (at most its `retries`). */
  retries: number;
  /** Body bytes read from the client so far (a chunked body is counted against maxBodyBytes). */
  bodySeen: number;
  /** A body's chunks kept until a try connects, so a try that could not connect can be sent whole to another target. */
  replay: { chunks: Buffer[]; recording: boolean } | undefined;
  /** The stream the next try sends as its body, in place of the request itself (a replay). */
  source: PassThrough | undefined;
  /** This try's response is written here, not by httpxy, so a status in retryOn can be dropped and retried. */
  selfHandle: boolean;
  /** Ends the current try's count of requests in flight on its target (least-requests); idempotent. */
  endTry: () => void;
  /** The current try's upstream request. */
  proxyReq: ClientRequest | undefined;
}

/**
 * How many times one request may be re-sent after stale pooled sockets. A socket the upstream closed for idleness is
 * the freshest in the (LIFO) pool, so the next one picked may be stale too; past this, the pool is not the problem.
 */
const MAX_STALE_RETRIES = 3;

/** RFC 9110 §9.2.2: methods a client may repeat automatically. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

type Upstream = Config['upstream'];

export interface ProxyOptions {
  services: ServiceRegistry;
  maxBodyBytes: number;
  logger: Logger;
  metrics: Metrics;
  /**
   * The upstream gave a request no response (refused, reset, timed out): called before the gateway answers 502 or 504
   * itself, so what the request was charged is given back first (KeyLimiter.refund). Not for a 413.
   */
  onUpstreamFailed?: (ctx: RequestContext) => Promise<void>;
}

/**
 * Rewrites the client's headers into the upstream request's: hop-by-hop headers out, forwarding headers in,
 * consumer headers only as the gateway sets them, and the key kept from the upstream when hideCredentials is on
 * (Authorization, and the headers and query parameters auth.sources names).
 * Runs before the proxy because httpxy copies req.headers into the upstream request as they stand.
 */
export function prepareUpstreamHeaders(upstream: Upstream) {
  // The upstream span's server.address, worked out once rather than per traced request.
  const upstreamHost = new URL(upstream.url).host;
  return function prepareUpstreamHeadersStage(req: Request, res: Response, next: NextFunction): void {
    // The service gets the path as the client sent it, less the route's stripPrefix (the target's base path is
    // prepended by the proxy), and less a key sent as a query parameter when hideCredentials is on (the rest of the
    // query as sent).
    const route = req.ctx.matchedRoute;
    const forwarded = route ? forwardedTarget(route, req.originalUrl) : req.originalUrl;
    const keySources = upstream.hideCredentials ? req.ctx.keySources : undefined;
    req.url = keySources ? withoutParams(forwarded, keySources.params) : forwarded;
    const keyHeaders = keySources?.headers;
    const h = req.headers as Record<string, string | string[] | undefined>;
    // The body keeps its framing on the upstream hop. Without a length or chunked, Node sends a GET/DELETE/OPTIONS
    // body raw and the upstream parses it as a next request: smuggled past authentication, with any X-Consumer-Id.
    // So Content-Length survives a client's `Connection: content-length`, and a chunked body (Node's parser lets
    // Transfer-Encoding through only when it ends in chunked) is re-chunked although Transfer-Encoding is hop-by-hop.
    const contentLength = h['content-length'];
    const chunkedBody = h['transfer-encoding'] !== undefined;
    // Header names the client's Connection header lists are hop-by-hop too (RFC 9110 §7.6.1).
    const dropped = connectionTokens(h.connection);

    // Append to the client's X-Forwarded-For only when the peer is a proxy we trust; otherwise the peer is the client.
    const peer = req.socket.remoteAddress ?? '';
    const trust = req.app.get('trust proxy fn') as (addr: string, i: number) => boolean;
    const prior = h['x-forwarded-for'];
    const priorText = Array.isArray(prior) ? prior.join(', ') : prior;
    const consumer = req.ctx.consumer;

    // One new header object, in the order httpxy sends it: Host and the framing, then the gateway's own headers (an
    // upstream that keeps only its first N header lines (Node: 2000) then drops the client's extras, never the
    // consumer's identity or X-Forwarded-For), then the client's, less hop-by-hop ones, Expect, any spelling of the
    // headers the gateway owns (claimsGatewayHeader) and, with hideCredentials, the key.
    const out: Record<string, string | string[]> = {};
    if (h.host !== undefined) out.host = h.host;
    if (contentLength !== undefined) out['content-length'] = contentLength;
    else if (chunkedBody) out['transfer-encoding'] = 'chunked';
    out['x-forwarded-for'] = priorText && trust(peer, 0) ? `${priorText}, ${peer}` : peer;
    out['x-forwarded-proto'] = req.protocol;
    out['x-forwarded-host'] = req.host ?? '';
    if (route?.stripPrefix !== undefined) out['x-forwarded-prefix'] = route.stripPrefix;
    out[H.requestId] = res.getHeader(H.requestId) as string;
    if (consumer) {
      out[H.consumerId] = consumer.id;
      out[H.consumerPlan] = consumer.plan;
    }
    // With tracing on, the upstream call is a span of its own, and the upstream gets its trace context (the same trace
    // id as the caller's traceparent, the call span as parent; the caller's tracestate carried). Off, both headers pass
    // as the client sent them, like any other.
    const traced = req.ctx.trace;
    if (traced) {
      const service = req.ctx.service?.name;
      const span = traced.start('tollgate.upstream', 'client', { 'server.address': service === undefined || service === 'upstream' ? upstreamHost : service });
      traced.inject(span, out);
      res.once('close', () => traced.end(span, undefined, res.statusCode >= 500, res.statusCode));
    }
    for (const name in h) {
      const value = h[name];
      if (value === undefined || Object.hasOwn(out, name) || NOT_FORWARDED.has(name) || dropped?.has(name) || claimsGatewayHeader(name)) continue;
      if (name === 'authorization' && upstream.hideCredentials) continue;
      if (keyHeaders && keyHeaders.length > 0 && keyHeaders.includes(name)) continue;
      out[name] = value;
    }
    req.headers = out;
    next();
  };
}

/** Request headers never copied from the client: hop-by-hop ones and Expect (answered here). */
const NOT_FORWARDED = new Set([...HOP_BY_HOP, 'expect']);

/**
 * Whether a client header (its lower-case name) would reach the upstream as one the gateway owns: its consumer
 * headers (X-Consumer-*), forwarding headers (X-Forwarded-*, X-Real-IP, Forwarded) and X-Request-Id. Those come
 * only from the gateway. An underscore counts as a dash: CGI/WSGI, PHP-FPM and nginx with underscores_in_headers
 * fold `X_Consumer_Id` into X-Consumer-Id, which would join the gateway's own value (`key_real,key_VICTIM`).
 */
function claimsGatewayHeader(name: string): boolean {
  // Every owned name but Forwarded starts with "x": most headers are passed on after one character check.
  if (name.charCodeAt(0) !== 120 /* x */) return name === 'forwarded';
  const folded = name.includes('_') ? name.replaceAll('_', '-') : name;
  return folded.startsWith('x-consumer-') || folded.startsWith('x-forwarded-') || folded === H.requestId || folded === 'x-real-ip';
}

/** 413 before the upstream is called when Content-Length already says the body is too large. */
export function declaredBodyLimit(maxBodyBytes: number) {
  return function declaredBodyLimitStage(req: Request, res: Response, next: NextFunction): void {
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > maxBodyBytes) {
      // The body is not read; close the connection after answering rather than drain an oversized upload.
      res.setHeader('connection', 'close');
      return sendError(res, 'payload_too_large', `The request body exceeds ${maxBodyBytes} bytes.`);
    }
    next();
  };
}

export function createProxy(opts: ProxyOptions) {
  const { services, maxBodyBytes, logger, metrics, onUpstreamFailed } = opts;

  const onProxyReq = (proxyReq: ClientRequest, req: IncomingMessage): void => {
    const state = stateOf(req);
    const { connectTimeoutMs } = state.service.settings;
    state.proxyReq = proxyReq;
    state.reusedSocket = proxyReq.reusedSocket;
    state.responded = false;
    state.connectTimedOut = false;
    // The try counted as in flight on its target since it was picked (attempt()); it ends with its upstream request.
    proxyReq.once('close', state.endTry);
    // httpxy reports its own proxyTimeout as a plain ECONNRESET (indistinguishable from a real reset), so the deadline is kept here. A retried
    // try gets what is left of the first one's time: the client never waits longer than timeoutMs for headers.
    const timer = setTimeout(
      () => {
        state.timedOut = true;
        proxyReq.destroy();
      },
      Math.max(0, state.deadlineAt - Date.now()),
    );
    proxyReq.once('response', () => {
      state.responded = true;
      clearTimeout(timer);
    });
    proxyReq.once('close', () => clearTimeout(timer));

    // Whether the try got a connection: until then nothing of the request can have reached the target.
    const socket = proxyReq.socket;
    if (socket && socket.connecting) {
      state.connected = false;
      // Only a connect timeout that comes before the request's deadline is one (else the deadline answers 504).
      const connectTimer =
        connectTimeoutMs < state.deadlineAt - Date.now()
          ? setTimeout(() => {
              state.connectTimedOut = true;
              proxyReq.destroy();
            }, connectTimeoutMs)
          : undefined;
      socket.once('connect', () => {
        clearTimeout(connectTimer);
        connectedNow(state);
      });
      proxyReq.once('close', () => clearTimeout(connectTimer));
    } else connectedNow(state);

    // Once per request (not per try): the client's body is read once, whichever stream carries it to a target.
    // Attached in the same tick httpxy pipes the body into proxyReq, so no chunk is missed.
    if (state.source !== undefined || state.tried.size > 1) return;
    const chunked = req.headers['content-length'] === undefined;
    const onData = (chunk: Buffer) => {
      state.bodySeen += chunk.length;
      if (state.replay?.recording) state.replay.chunks.push(chunk);
      // A chunked body has no declared length: count it as it streams and abort past the limit.
      if (chunked && state.bodySeen > maxBodyBytes) {
        req.off('data', onData);
        state.tooLarge = true;
        req.unpipe();
        stateOf(req).source?.destroy();
        proxyReq.destroy();
      }
    };
    if (hasBody(req)) {
      if (!state.connected) state.replay = { chunks: [], recording: true };
      req.on('data', onData);
    }
  };

  const onProxyRes = (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse): void => {
    const state = stateOf(req);
    const { service } = state;
    const target = state.target!;
    const status = proxyRes.statusCode ?? 502;
    metrics.upstreamDuration.observe({ status: String(status) }, elapsedSeconds(state.startedAt));
    metrics.serviceRequests.inc({ service: service.name, target: target.url, outcome: `${Math.floor(status / 100)}xx` });
    services.recordResult(service, target, status >= 500, `status_${status}`);
    if (state.selfHandle && service.settings.retryOn.has(status) && mayRetry(state, 'status', req, res)) {
      // Dropped: only response headers came from this try, and none of it reaches the client. httpxy ties the
      // response to the client's once this callback returns (a response that ends early cuts the client off), so
      // that tie is undone first, and the connection of this try is closed rather than drained.
      // Its upstream request's errors are this try's, not the next one's: they go nowhere.
      const dropped = state.proxyReq;
      dropped?.removeAllListeners('error');
      dropped?.on('error', () => undefined);
      process.nextTick(() => {
        proxyRes.removeAllListeners('close');
        proxyRes.removeAllListeners('error');
        proxyRes.on('error', () => undefined);
        proxyRes.destroy();
      });
      retry(req, res, 'status');
      return;
    }
    // Hop-by-hop headers and X-Powered-By go; a header the gateway already set wins over the upstream's, except
    // Link, whose values add up. (A pass over the upstream's few headers, not over the gateway's many.)
    const h = proxyRes.headers as Record<string, unknown>;
    stripHopByHop(h);
    for (const name in h) {
      if (name === 'x-powered-by') delete h[name];
      else if (res.hasHeader(name)) {
        if (name === 'link') h.link = `${String(res.getHeader('link'))}, ${String(h.link)}`;
        else delete h[name];
      }
    }
    // httpxy fills a missing Connection with "keep-alive", which would override the client's "Connection: close":
    // state what this client connection really does. A connection kept open also gets the Keep-Alive hint Node gives
    // its own answers, so clients stop reusing it before the server's idle timeout. (A draining server turns both
    // into Connection: close as the headers are written: closeConnectionsAfterResponses in http-server.ts.)
    const own = res.getHeader('connection');
    if (own !== undefined) h.connection = String(own);
    else if (!res.shouldKeepAlive) h.connection = 'close';
    else {
      h.connection = 'keep-alive';
      const idleMs = (res.socket as (Socket & { server?: { keepAliveTimeout?: number } }) | null)?.server?.keepAliveTimeout;
      if (idleMs && idleMs >= 1000) h['keep-alive'] = `timeout=${Math.floor(idleMs / 1000)}`;
    }
    if (state.selfHandle) {
      // httpxy writes no response when told selfHandleResponse (it still cuts one side when the other closes): the
      // status and the mended headers, as its own passes would write them, then the body streamed.
      res.statusCode = status;
      if (proxyRes.statusMessage) res.statusMessage = proxyRes.statusMessage;
      for (const name in h) if (h[name] !== undefined) res.setHeader(name, h[name] as string | string[]);
      proxyRes.pipe(res);
    }
  };

  const onError = (err: Error, req: IncomingMessage, res: ServerResponse | Socket): void => {
    if (!('setHeader' in res)) {
      res.destroy();
      return;
    }
    const state = stateOf(req);
    state.endTry();
    const code = (err as NodeJS.ErrnoException).code;
    if (staleSocket(state, code, req, res)) {
      // A pooled keep-alive socket the upstream had already closed (its idle timeout raced this request): the
      // upstream never answered on it, so an idempotent request without a body is sent again on another socket.
      state.staleRetries++;
      logger.debug({ reqId: (req as Request).id, errCode: code, retry: state.staleRetries }, 'upstream reset a reused connection before answering; retrying');
      retry(req, res, 'stale');
      return;
    }
    const kind = state.tooLarge
      ? 'too_large'
      : state.timedOut
        ? 'timeout'
        : !state.connected
          ? state.connectTimedOut
            ? 'connect_timeout'
            : 'refused'
          : 'reset';
    if (kind !== 'too_large' && state.target) {
      // A response cut off after its headers was counted by its status already; it is still a failure of the target.
      if (!state.responded) metrics.serviceRequests.inc({ service: state.service.name, target: state.target.url, outcome: kind });
      services.recordResult(state.service, state.target, true, kind);
      const reason = kind === 'refused' || kind === 'connect_timeout' ? 'connect' : kind === 'reset' ? 'reset' : undefined;
      if (reason && mayRetry(state, reason, req, res)) {
        logger.debug({ reqId: (req as Request).id, kind, target: state.target.url, retry: state.retries + 1 }, 'try failed; retrying on another target');
        retry(req, res, reason);
        return;
      }
    }
    answerUpstreamFailure(req as Request, res as Response, kind === 'connect_timeout' ? 'refused' : kind, code);
  };

  /**
   * The one place the gateway answers for an upstream that gave no response after all tries: 413 (the body grew
   * past the limit while streaming), 504 (no response headers within the service's timeoutMs) or 502 (every try was
   * refused or reset). The request's metrics and log line are written here too.
   */
  function answerUpstreamFailure(req: Request, res: Response, kind: 'too_large' | 'timeout' | 'refused' | 'reset', errCode?: string): void {
    const state = stateOf(req);
    metrics.upstreamErrors.inc({ kind });
    if (kind !== 'too_large') metrics.upstreamDuration.observe({ status: kind }, elapsedSeconds(state.startedAt));
    logger.warn({ reqId: req.id, kind, errCode, service: state.service.name, tries: state.tried.size + state.staleRetries }, 'upstream request failed');
    if (kind === 'too_large') {
      res.setHeader('connection', 'close');
      sendError(res, 'payload_too_large', `The request body exceeds ${maxBodyBytes} bytes.`);
      return;
    }
    const answer = (): void => {
      if (kind === 'timeout') sendError(res, 'gateway_timeout', `The upstream did not answer within ${state.service.settings.timeoutMs} ms.`);
      else sendError(res, 'bad_gateway');
    };
    refundThen(req, res, answer);
  }

  /**
   * Gives back what the request was charged (windows and usage ledger), then answers: for a request no target gave a
   * response. One cut off mid-response keeps its charge, as the upstream did serve it; so does one whose client left
   * first (nobody gets the answer, and aborting must not buy free requests). The refund comes before the answer, so a
   * client that reads its quota right after a 502 sees it given back.
   */
  function refundThen(req: Request, res: Response, answer: () => void): void {
    if (!onUpstreamFailed || stateOf(req).responded || res.destroyed || !res.socket || res.socket.destroyed) return answer();
    onUpstreamFailed(req.ctx).then(answer, answer);
  }

  /** Whether the service's rules allow another try now, and the retry budget has one (counted as taken). */
  function mayRetry(state: ProxyState, reason: 'connect' | 'reset' | 'status', req: IncomingMessage, res: ServerResponse): boolean {
    if (state.retries >= state.service.settings.retries || state.timedOut || state.tooLarge) return false;
    if (res.headersSent || res.writableEnded || res.destroyed || Date.now() >= state.deadlineAt) return false;
    // Could not connect: nothing was sent, any method goes again (its body replayed). Otherwise only an idempotent
    // request without a body, and never once response bytes have gone to the client.
    if (reason !== 'connect' && (!IDEMPOTENT.has(req.method ?? '') || hasBody(req))) return false;
    // A try that could not connect reached no target: its retry adds no load over the request itself, so it is
    // outside the budget (which bounds the extra load retries put on a service's targets).
    if (reason !== 'connect' && !state.service.budget.tryRetry(Date.now())) {
      metrics.serviceRetries.inc({ service: state.service.name, reason: 'budget_exhausted' });
      return false;
    }
    return true;
  }

  function retry(req: IncomingMessage, res: ServerResponse, reason: 'connect' | 'reset' | 'status' | 'stale'): void {
    const state = stateOf(req);
    if (reason !== 'stale') {
      state.retries++;
      metrics.serviceRetries.inc({ service: state.service.name, reason });
    }
    if (state.replay) {
      // The body so far, then the rest of it as the client sends it, into a fresh stream for the next try.
      req.unpipe();
      state.source?.destroy();
      const source = new PassThrough();
      for (const chunk of state.replay.chunks) source.write(chunk);
      if (req.readableEnded) source.end();
      else req.pipe(source);
      state.source = source;
    }
    // Each try adds its own few listeners (httpxy's close/error handlers) to the request and response.
    req.setMaxListeners(req.getMaxListeners() + 4);
    res.setMaxListeners(res.getMaxListeners() + 4);
    attempt(req as Request, res as Response, reason === 'stale' ? state.target : undefined);
  }

  /** One try: a target of the service (another than those tried while one is available), then the proxy. */
  function attempt(req: Request, res: Response, same?: Target): void {
    const state = stateOf(req);
    const target = same ?? state.service.pick(Date.now(), state.tried);
    if (!target) {
      // Every target went out while this request was being tried (or just before it): nothing to try.
      // Its limits were taken already (the health stage found a target a moment ago): given back first.
      if (state.tried.size === 0) return refundThen(req, res, () => answerNoHealthyUpstream(res, state.service));
      return answerUpstreamFailure(req, res, 'refused');
    }
    state.endTry();
    state.target = target;
    state.tried.add(target);
    // In flight from the moment it is picked, so that concurrent picks already see it (least-requests).
    const endTry = target.begin();
    state.endTry = endTry;
    res.once('close', endTry);
    const settings = state.service.settings;
    state.selfHandle = settings.retryOn.size > 0 && state.retries < settings.retries && IDEMPOTENT.has(req.method) && !hasBody(req);
    // hpm calls next(err) after its error event, which onError has answered (or retried): nothing more to do there.
    proxy(req, res, () => undefined).catch(() => undefined);
  }

  const proxy = createProxyMiddleware<Request, Response>({
    // The target is chosen per try (attempt()); the router hook hands it to httpxy with the target's own keep-alive
    // pool, the replayed body when there is one, and whether this try's response is written here (selfHandle).
    router: (req: Request, _res: Response, options: Record<string, unknown>) => {
      const state = stateOf(req);
      options.agent = state.target!.agent;
      if (state.source) options.buffer = state.source;
      options.selfHandleResponse = state.selfHandle;
      return state.target!.url;
    },
    changeOrigin: true,
    xfwd: false,
    // Giving on.error keeps hpm's default error plugin (text/plain, 504 for everything) out.
    on: {
      proxyReq: onProxyReq as never,
      proxyRes: onProxyRes as never,
      error: onError as never,
    },
  } as never);

  function proxyToUpstreamStage(req: Request, res: Response, next: NextFunction): void {
    const service = req.ctx.service;
    if (!service) return next();
    const state: ProxyState = {
      service,
      target: undefined,
      tried: new Set(),
      timedOut: false,
      tooLarge: false,
      startedAt: process.hrtime.bigint(),
      deadlineAt: Date.now() + service.settings.timeoutMs,
      reusedSocket: false,
      connected: false,
      connectTimedOut: false,
      responded: false,
      staleRetries: 0,
      retries: 0,
      bodySeen: 0,
      replay: undefined,
      source: undefined,
      selfHandle: false,
      endTry: () => undefined,
      proxyReq: undefined,
    };
    req.ctx.proxy = state;
    service.budget.request(Date.now());
    // Every check passed: now a client waiting on `Expect: 100-continue` may send its body.
    continueIfExpected(res);
    attempt(req, res);
  }

  return { handler: proxyToUpstreamStage };
}

/** 503 no_healthy_upstream: every target of the service is out; Retry-After says when one may be back. */
export function answerNoHealthyUpstream(res: Response, service: Service): void {
  res.setHeader(H.retryAfter, formatRetryAfter(service.retryAfterSeconds(Date.now()) * 1000));
  sendError(res, 'no_healthy_upstream');
}

/** The try has its connection: a body kept for replay is no longer needed (it is on its way to this target). */
function connectedNow(state: ProxyState): void {
  state.connected = true;
  if (state.replay) state.replay = { chunks: [], recording: false };
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Whether a failed try may be repeated on the same target: only when it went out on a reused keep-alive socket and was reset (or
 * hit a closed pipe) before any response byte, for an idempotent request without a body (nothing of it was
 * consumed), while the client is still there and time is left, at most MAX_STALE_RETRIES times. A try on a new
 * connection is never repeated this way. Node's advice for stale pooled sockets (http.ClientRequest#reusedSocket); Go's
 * http.Transport retries the same way, and nginx's proxy_next_upstream does for idempotent requests.
 */
function staleSocket(state: ProxyState, code: string | undefined, req: IncomingMessage, res: ServerResponse): boolean {
  if (state.staleRetries >= MAX_STALE_RETRIES || !state.reusedSocket || state.responded || state.timedOut || state.tooLarge) return false;
  if (code !== 'ECONNRESET' && code !== 'EPIPE') return false;
  if (!IDEMPOTENT.has(req.method ?? '') || hasBody(req)) return false;
  return !res.headersSent && !res.writableEnded && !res.destroyed && Date.now() < state.deadlineAt;
}

function stateOf(req: IncomingMessage): ProxyState {
  return req.ctx.proxy as ProxyState;
}

function elapsedSeconds(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9;
}
