// Stages 9-11 of the request path (src/pipeline/stages.ts): declaredBodyLimit, prepareUpstreamHeaders and
// proxyToUpstream, which forwards to the one configured upstream with http-proxy-middleware (httpxy),
// streaming bodies both ways and mending what the library leaves to its caller (hop-by-hop headers,
// timeouts reported as resets, text/plain errors: docs/architecture.md, "Dependencies").
import { Agent as HttpAgent, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Socket } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { Config } from '../config/schema.js';
import { sendError } from '../http/errors.js';
import { connectionTokens, H, HOP_BY_HOP, stripHopByHop } from '../http/headers.js';
import { continueIfExpected } from '../http/expect-continue.js';
import { withoutParams } from '../keys/sources.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestContext } from './context.js';

/** Per-request proxy state, kept in the request's context (req.ctx.proxy) so the library's callbacks can reach it. */
interface ProxyState {
  timedOut: boolean;
  tooLarge: boolean;
  startedAt: bigint;
  /** Date.now() by which the upstream must have sent response headers (timeoutMs from the first attempt). */
  deadlineAt: number;
  /** The current attempt went out on a pooled keep-alive socket. */
  reusedSocket: boolean;
  /** Response headers arrived from the upstream. */
  responded: boolean;
  /** Attempts that failed on a stale pooled socket and were sent again (see retryable()). */
  retries: number;
  /** Sends the request upstream again. */
  retry: () => void;
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
  upstream: Upstream;
  maxBodyBytes: number;
  logger: Logger;
  metrics: Metrics;
  /**
   * The upstream gave a request no response (refused, reset, timed out): called before the gateway answers 502 or 504
   * itself, so what the request was charged is given back first (KeyLimiter.refund). Not for a 413.
   */
  onUpstreamFailed?: (ctx: RequestContext) => Promise<void>;
}

export function createUpstreamAgent(upstream: Upstream): HttpAgent {
  const opts = {
    keepAlive: true,
    maxSockets: upstream.maxSockets,
    maxFreeSockets: Math.min(upstream.maxSockets, 64),
    // Free sockets are dropped before a typical upstream's own 5 s keep-alive timeout closes them under us.
    timeout: 4_000,
    scheduling: 'lifo' as const,
  };
  return new URL(upstream.url).protocol === 'https:' ? new HttpsAgent(opts) : new HttpAgent(opts);
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
    // The upstream gets the path as the client sent it (req.url is already that: /v1 is not an Express mount), less a
    // key sent as a query parameter when hideCredentials is on (the rest of the query as sent).
    const keySources = upstream.hideCredentials ? req.ctx.keySources : undefined;
    req.url = keySources ? withoutParams(req.originalUrl, keySources.params) : req.originalUrl;
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
      const span = traced.start('tollgate.upstream', 'client', { 'server.address': upstreamHost });
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
  const { upstream, maxBodyBytes, logger, metrics, onUpstreamFailed } = opts;
  const agent = createUpstreamAgent(upstream);

  const onProxyReq = (proxyReq: ClientRequest, req: IncomingMessage): void => {
    const state = stateOf(req);
    state.reusedSocket = proxyReq.reusedSocket;
    // httpxy reports its own proxyTimeout as a plain ECONNRESET (indistinguishable from a real reset), so the deadline is kept here. A retried
    // attempt gets what is left of the first one's time: the client never waits longer than timeoutMs for headers.
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

    // A chunked body has no declared length: count it as it streams and abort past the limit.
    // Attached in the same tick httpxy pipes req into proxyReq, so no chunk is missed.
    if (req.headers['content-length'] === undefined) {
      let seen = 0;
      const onData = (chunk: Buffer) => {
        seen += chunk.length;
        if (seen > maxBodyBytes) {
          req.off('data', onData);
          state.tooLarge = true;
          req.unpipe(proxyReq);
          proxyReq.destroy();
        }
      };
      req.on('data', onData);
    }
  };

  const onProxyRes = (proxyRes: IncomingMessage, req: IncomingMessage, res: ServerResponse): void => {
    const state = stateOf(req);
    metrics.upstreamDuration.observe({ status: String(proxyRes.statusCode) }, elapsedSeconds(state.startedAt));
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
  };

  const onError = (err: Error, req: IncomingMessage, res: ServerResponse | Socket): void => {
    if (!('setHeader' in res)) {
      res.destroy();
      return;
    }
    const state = stateOf(req);
    const code = (err as NodeJS.ErrnoException).code;
    if (retryable(state, code, req, res)) {
      // A pooled keep-alive socket the upstream had already closed (its idle timeout raced this request): the
      // upstream never answered on it, so an idempotent request without a body is sent again on another socket.
      state.retries++;
      logger.debug({ reqId: (req as Request).id, errCode: code, retry: state.retries }, 'upstream reset a reused connection before answering; retrying');
      state.retry();
      return;
    }
    const kind = state.tooLarge ? 'too_large' : state.timedOut ? 'timeout' : code === 'ECONNREFUSED' ? 'refused' : 'reset';
    metrics.upstreamErrors.inc({ kind });
    if (kind !== 'too_large') metrics.upstreamDuration.observe({ status: kind }, elapsedSeconds(state.startedAt));
    logger.warn({ reqId: (req as Request).id, kind, errCode: code }, 'upstream request failed');
    const expressRes = res as Response;
    if (state.tooLarge) {
      expressRes.setHeader('connection', 'close');
      sendError(expressRes, 'payload_too_large', `The request body exceeds ${maxBodyBytes} bytes.`);
      return;
    }
    const answer = (): void => {
      if (state.timedOut) sendError(expressRes, 'gateway_timeout', `The upstream did not answer within ${upstream.timeoutMs} ms.`);
      else sendError(expressRes, 'bad_gateway');
    };
    // Only a request the upstream answered nothing (no response headers) is the gateway's own 502/504: one cut off
    // mid-response keeps its charge, as the upstream did serve it; so does one whose client left first (nobody gets
    // the 502, and aborting must not buy free requests).
    if (!onUpstreamFailed || state.responded || expressRes.destroyed || !expressRes.socket || expressRes.socket.destroyed) return answer();
    // The refund is made before the answer, so a client that reads its quota right after a 502 sees it given back.
    onUpstreamFailed(req.ctx).then(answer, answer);
  };

  const proxy = createProxyMiddleware<Request, Response>({
    target: upstream.url,
    changeOrigin: true,
    xfwd: false,
    agent,
    // Giving on.error keeps hpm's default error plugin (text/plain, 504 for everything) out.
    on: {
      proxyReq: onProxyReq as never,
      proxyRes: onProxyRes as never,
      error: onError as never,
    },
  });

  function proxyToUpstreamStage(req: Request, res: Response, next: NextFunction): void {
    const state: ProxyState = {
      timedOut: false,
      tooLarge: false,
      startedAt: process.hrtime.bigint(),
      deadlineAt: Date.now() + upstream.timeoutMs,
      reusedSocket: false,
      responded: false,
      retries: 0,
      retry: () => {
        state.reusedSocket = false;
        // Each attempt adds its own few listeners (httpxy's close/error handlers) to the request and response.
        req.setMaxListeners(req.getMaxListeners() + 4);
        res.setMaxListeners(res.getMaxListeners() + 4);
        proxy(req, res, next).catch(next);
      },
    };
    req.ctx.proxy = state;
    // Every check passed: now a client waiting on `Expect: 100-continue` may send its body.
    continueIfExpected(res);
    proxy(req, res, next).catch(next);
  }

  return { handler: proxyToUpstreamStage, agent };
}

/**
 * Whether a failed attempt may be repeated: only when it went out on a reused keep-alive socket and was reset (or
 * hit a closed pipe) before any response byte, for an idempotent request without a body (nothing of it was
 * consumed), while the client is still there and time is left, at most MAX_STALE_RETRIES times. An attempt on a new
 * connection is never repeated. Node's advice for stale pooled sockets (http.ClientRequest#reusedSocket); Go's
 * http.Transport retries the same way, and nginx's proxy_next_upstream does for idempotent requests.
 */
function retryable(state: ProxyState, code: string | undefined, req: IncomingMessage, res: ServerResponse): boolean {
  if (state.retries >= MAX_STALE_RETRIES || !state.reusedSocket || state.responded || state.timedOut || state.tooLarge) return false;
  if (code !== 'ECONNRESET' && code !== 'EPIPE') return false;
  if (!IDEMPOTENT.has(req.method ?? '')) return false;
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')) return false;
  return !res.headersSent && !res.writableEnded && !res.destroyed && Date.now() < state.deadlineAt;
}

function stateOf(req: IncomingMessage): ProxyState {
  return req.ctx.proxy as ProxyState;
}

function elapsedSeconds(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9;
}
