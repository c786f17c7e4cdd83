// Stage 11 of the request path (src/pipeline/request-path.ts): proxyToUpstream, which sends the request to a target of
// the route's service and streams the answer back. Each try is an UpstreamTry (upstream-try.ts), the body a
// RequestBody (request-body.ts), where the request stands among its tries a ProxyExchange (exchange.ts); what follows
// a try's outcome (retry, stream, answer, give points back) is decide() in proxy-rules.ts. This file carries those
// decisions out: the request's deadline, the per-try timer, the response relayed with its idle timer, and
// answerUpstreamFailure(), the one place the gateway answers for an upstream. The headers each try sends were
// prepared by stage 10 (stages/upstream.ts).
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { sendError } from '../http/errors.js';
import { claimsGatewayHeader, connectionTokens, formatRetryAfter, H, isHopByHop } from '../http/headers.js';
import { continueIfExpected } from '../http/expect-continue.js';
import { forwardInformational, isProxyHopResponseField, passedTrailers, relayedTrailers } from '../http/intermediary.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestContext } from './context.js';
import { METHOD_OVERRIDE_HEADERS } from '../routing/routes.js';
import type { Service, ServiceRegistry } from '../routing/services.js';
import type { Target } from '../routing/target.js';
import { decide, healthRecord, IDEMPOTENT, perTryTimeout, relayedReason, writableStatus, type Answer, type Decision, type TryOutcome } from './proxy-rules.js';
import { ProxyExchange } from './exchange.js';
import { RequestBody } from './request-body.js';
import { UpstreamTry } from './upstream-try.js';

export interface ProxyOptions {
  services: ServiceRegistry;
  maxBodyBytes: number;
  /** server.responseIdleTimeoutMs: a response the client stops reading, or a body it stops sending, is cut after this. */
  responseIdleTimeoutMs: number;
  logger: Logger;
  metrics: Metrics;
  /** The clock deadlines are reckoned on: the services' own (ServiceRegistry.now) unless a test gives another. */
  now?: () => number;
  /**
   * The request never reached a target (no try had a connection, or no target was healthy): called before the gateway
   * answers, so the points it was charged are back first (KeyLimiter.refund).
   */
  onNotReached?: (ctx: RequestContext) => Promise<void>;
  /**
   * The request reached a target that gave it no complete answer (timeout, reset, a response cut off): it keeps its
   * points and the ledger counts it upstreamFailed beside admitted (KeyLimiter.upstreamFailed).
   */
  onReachedFailed?: (ctx: RequestContext) => void;
}

/**
 * The client's request trailers the backend gets (a chunked body's, http/intermediary.ts passedTrailers): none by a
 * name the gateway owns or reads as a header (its own headers, the key's headers, the method overrides), which a
 * backend merging trailers into headers would otherwise take as judged.
 */
function requestTrailers(req: Request): Array<[string, string]> | undefined {
  if (req.rawTrailers.length === 0) return undefined;
  const keyHeaders = req.ctx.keySources?.headers;
  const overrides: readonly string[] = METHOD_OVERRIDE_HEADERS;
  const connection = req.rawHeaders.filter((_, i) => i % 2 === 1 && req.rawHeaders[i - 1]!.toLowerCase() === 'connection');
  return passedTrailers(req.rawTrailers, connection, (name) => claimsGatewayHeader(name) || overrides.includes(name) || keyHeaders?.includes(name) === true);
}

/**
 * The failure label of metrics and the log line, for what the gateway answered: `tls` for a failure of the TLS layer
 * (its code logged beside it), `body_timeout` for a deadline lost to a client's slow body.
 */
function failureKind(outcome: TryOutcome, a?: Answer): string {
  if (outcome.type === 'status') return outcome.status === 101 ? 'upgrade' : writableStatus(outcome.status) ? 'status' : 'bad_status';
  if (outcome.tlsError) return 'tls';
  switch (outcome.failure) {
    case 'timeout':
      return a?.code === 'request_timeout' ? 'body_timeout' : 'timeout';
    case 'try_timeout':
      return 'timeout';
    case 'connect_timeout':
      return 'refused';
    default:
      return outcome.failure;
  }
}

/** The relay (createProxy's ResponseRelay) an upstream response or a client response belongs to, for its listeners. */
const RELAY = Symbol('relay');
type Relayed = { [RELAY]?: { data(chunk: Buffer): void; end(): void; upstreamClosed(): void; clientClosed(): void } };

export function createProxy(opts: ProxyOptions) {
  const { services, maxBodyBytes, logger, metrics, onNotReached, onReachedFailed, responseIdleTimeoutMs } = opts;
  const now = opts.now ?? opts.services.now;

  function proxyToUpstreamStage(req: Request, res: Response, next: NextFunction): void {
    const service = req.ctx.service;
    if (!service) return next();
    const at = now();
    const { timeoutMs } = service.settings;
    const x = new ProxyExchange(service, at + timeoutMs, IDEMPOTENT.has(req.method) && !hasBody(req), process.hrtime.bigint());
    req.ctx.proxy = x;
    service.budget.request(at);
    // One listener for the whole request, whatever its tries: a client that leaves ends the try in flight.
    res.once('close', () => {
      if (res.writableFinished) return;
      x.clientGone = true;
      x.current?.abort('client_gone');
    });
    // The deadline runs from here: a try waiting for a pooled connection is waiting on it too.
    x.deadlineTimer = setTimeout(() => {
      x.clientBodyPending = x.body?.awaitingClient ?? false;
      x.current?.abort('timeout');
    }, timeoutMs);
    // Every check passed: now a client waiting on `Expect: 100-continue` may send its body.
    continueIfExpected(res);
    if (hasBody(req)) {
      x.body = new RequestBody(
        req,
        {
          maxBytes: maxBodyBytes,
          idleMs: responseIdleTimeoutMs,
          onTooLarge: () => bodyFailed(req, res, x, 'too_large'),
          onIdle: () => bodyFailed(req, res, x, 'body_idle'),
          trailers: () => requestTrailers(req),
        },
        // Read whole already by request validation: these bytes go upstream, Content-Length set to their count.
        req.ctx.body,
      );
    }
    if (!attempt(req, res, x, undefined)) noTargetAtAll(req, res, x);
  }

  /** One try on `same` target (a stale socket) or on one not tried yet while there is one; false: no target. */
  function attempt(req: Request, res: Response, x: ProxyExchange, same: Target | undefined): boolean {
    const { service } = x;
    const at = now();
    const target = same ?? service.pick(at, x.tried);
    if (!target) return false;
    x.target = target;
    x.tried.add(target);
    x.tries++;
    // In flight from the moment it is picked, so that concurrent picks already see it (least-requests).
    const endTry = target.begin();
    const settings = service.settings;
    const t: UpstreamTry = new UpstreamTry(
      { target, method: req.method, url: req.url, headers: req.headers as OutgoingHttpHeaders, connectTimeoutMs: settings.connectTimeoutMs },
      {
        onReached: () => x.body?.reachedTarget(),
        onOutcome: (outcome, upRes) => settled(req, res, x, t, outcome, upRes),
        onClose: endTry,
      },
    );
    x.current = t;
    t.req.on('information', (info) => forwardInformational(res, info));
    // A try of a repeatable request may get less than the whole deadline, so that another target has time left: only
    // while there is another target to go to (perTryTimeout in proxy-rules.ts).
    clearTimeout(x.tryTimer);
    const anotherTarget = settings.perTryTimeoutMs !== undefined && service.targets.some((other) => !x.tried.has(other) && other.available(at));
    const perTry = perTryTimeout(settings.perTryTimeoutMs, x, settings, anotherTarget, at);
    if (perTry !== undefined) x.tryTimer = setTimeout(() => t.abort('try_timeout'), perTry);
    if (x.body) x.body.sendTo(t.req);
    else t.req.end();
    return true;
  }

  function settled(req: Request, res: Response, x: ProxyExchange, t: UpstreamTry, outcome: TryOutcome, upRes: IncomingMessage | undefined): void {
    clearTimeout(x.tryTimer);
    if (x.done) return;
    const at = now();
    const { service } = x;
    const target = x.target!;
    const decision = decide(outcome, x, service.settings, at);
    if (outcome.type === 'failed' && outcome.tlsError)
      logger.warn(
        { reqId: req.id, service: service.name, target: target.url, code: outcome.tlsError, kind: failureKind(outcome) },
        outcome.reached
          ? 'TLS with the target failed after the handshake (it refused the session)'
          : 'TLS handshake with the target failed: counted as a connect failure',
      );
    if (decision.do !== 'drop') {
      const health = healthRecord(outcome, decision);
      if (health) {
        if (outcome.type === 'status') metrics.upstreamDuration.observe({ status: String(outcome.status) }, elapsedSeconds(x.startedAt));
        metrics.serviceRequests.inc({
          service: service.name,
          target: target.url,
          outcome: outcome.type === 'status' && health.kind !== 'bad_status' ? `${Math.floor(outcome.status / 100)}xx` : health.kind,
        });
        services.recordResult(service, target, health.failed, health.kind);
      }
    }
    // A stale pooled socket's try never reached the target's application (it had closed the connection).
    if (t.reached && !(decision.do === 'retry' && decision.reason === 'stale')) x.reached = true;
    carryOut(req, res, x, t, outcome, upRes, decision);
  }

  function carryOut(req: Request, res: Response, x: ProxyExchange, t: UpstreamTry, outcome: TryOutcome, upRes: IncomingMessage | undefined, d: Decision): void {
    switch (d.do) {
      case 'drop':
        x.finish();
        upRes?.destroy();
        return;
      case 'stream':
        x.finish(false);
        return relay(req, res, x, t, upRes!);
      case 'answer':
        // A response this try did get (a 101) is not passed on.
        if (upRes) t.req.destroy();
        return answerUpstreamFailure(req, res, x, outcome, d);
      case 'retry': {
        const { service } = x;
        if (d.budgeted && !service.budget.tryRetry(now())) {
          metrics.serviceRetries.inc({ service: service.name, reason: 'budget_exhausted' });
          return carryOut(req, res, x, t, outcome, upRes, d.otherwise);
        }
        // A response dropped for a retry: only its headers came, none of it reaches the client; its connection is
        // closed rather than drained.
        if (upRes) t.req.destroy();
        x.body?.detach();
        if (d.reason === 'stale') {
          x.staleRetries++;
          logger.debug({ reqId: req.id, retry: x.staleRetries }, 'upstream reset a reused connection before answering; retrying');
        } else {
          x.retries++;
          metrics.serviceRetries.inc({ service: service.name, reason: d.reason });
          logger.debug({ reqId: req.id, kind: failureKind(outcome), target: x.target?.url, retry: x.retries }, 'try failed; retrying');
        }
        if (!attempt(req, res, x, d.reason === 'stale' ? x.target : undefined)) carryOut(req, res, x, t, outcome, upRes, d.otherwise);
        return;
      }
    }
  }

  /**
   * The body failed (too large, or it stopped arriving): before response headers, the try ends and the gateway answers
   * (413, 408); while a response is already streaming, the exchange is cut on both sides.
   */
  function bodyFailed(req: Request, res: Response, x: ProxyExchange, failure: 'too_large' | 'body_idle'): void {
    const t = x.current;
    if (t && !t.settled) return t.abort(failure);
    logger.warn({ reqId: req.id, kind: failure, service: x.service.name }, 'request body failed while the response streamed; closed');
    metrics.upstreamErrors.inc({ kind: failure });
    t?.req.destroy();
    res.destroy();
  }

  /**
   * The response, passed on: its status, reason phrase (one that fails the header-character check dropped) and headers
   * mended, set on `res` when its first byte (or its end) comes, so that a response cut off before any byte of its body
   * leaves `res` as the gateway had it and the client gets a 502 instead of an empty reply. Then its body with
   * backpressure: a client that stops reading for responseIdleTimeoutMs is cut off and the upstream connection
   * closed, so it cannot hold the target's pool. The work is ResponseRelay's, one per response.
   */
  function relay(req: Request, res: Response, x: ProxyExchange, t: UpstreamTry, upRes: IncomingMessage): void {
    const r = new ResponseRelay(req, res, x, t, upRes);
    (upRes as Relayed)[RELAY] = r;
    (res as Relayed)[RELAY] = r;
    upRes.on('data', onUpstreamData);
    upRes.on('end', onUpstreamEnd);
    upRes.on('close', onUpstreamClose);
    res.once('close', onClientClose);
    if (res.destroyed) t.req.destroy();
  }

  // The relay's listeners: made once per proxy, each finding its relay on the emitter, so a response relayed costs
  // one object rather than a closure per listener. 'end' and 'close' come once per response.
  function onUpstreamData(this: IncomingMessage, chunk: Buffer): void {
    (this as Relayed)[RELAY]!.data(chunk);
  }
  function onUpstreamEnd(this: IncomingMessage): void {
    (this as Relayed)[RELAY]!.end();
  }
  function onUpstreamClose(this: IncomingMessage): void {
    (this as Relayed)[RELAY]!.upstreamClosed();
  }
  function onClientClose(this: ServerResponse): void {
    (this as Relayed)[RELAY]!.clientClosed();
  }

  /**
   * One response being relayed (relay() above). Every listener is guarded: a throw while relaying closes this exchange
   * (or answers 502 when nothing was written) and never reaches the process.
   */
  class ResponseRelay {
    private started = false;
    private addTrailers: (() => void) | undefined;
    /** A listener threw and the exchange is closed: the others have nothing left to do. */
    private broken = false;
    private idle: NodeJS.Timeout | undefined;

    constructor(
      private readonly req: Request,
      private readonly res: Response,
      private readonly x: ProxyExchange,
      private readonly t: UpstreamTry,
      private readonly upRes: IncomingMessage,
    ) {}

    data(chunk: Buffer): void {
      if (this.broken) return;
      try {
        if (!this.started) this.start();
        if (this.res.write(chunk)) return;
        this.upRes.pause();
        this.idle = setTimeout(() => this.cutIdle(), responseIdleTimeoutMs);
        this.res.once('drain', () => {
          clearTimeout(this.idle);
          this.upRes.resume();
        });
      } catch (err) {
        this.fail(err);
      }
    }

    end(): void {
      if (this.broken) return;
      try {
        const { x, t } = this;
        // The target answered before the whole body arrived: what is left of it goes nowhere, and the target
        // connection, its request unfinished, cannot be used again.
        if (x.body && !x.body.complete) {
          x.body.stop();
          t.req.destroy();
        }
        if (!this.started) this.start();
        this.addTrailers?.();
        this.res.end();
      } catch (err) {
        this.fail(err);
      }
    }

    upstreamClosed(): void {
      if (this.broken) return;
      try {
        const { req, res, x, upRes } = this;
        clearTimeout(this.idle);
        if (upRes.complete || res.destroyed) return;
        // Cut off by the target after its headers: counted by its status already, still a failure of the target.
        services.recordResult(x.service, x.target!, true, 'reset');
        metrics.upstreamErrors.inc({ kind: 'reset' });
        logger.warn({ reqId: req.id, kind: 'reset', service: x.service.name, written: res.headersSent }, 'upstream cut its response off');
        onReachedFailed?.(req.ctx);
        // Nothing of it reached the client yet: the gateway answers for the target, as for a reset before headers (and
        // closes a connection whose request body is still unread).
        if (!res.headersSent) {
          if (x.body && !x.body.complete) res.setHeader('connection', 'close');
          return void sendError(res, 'bad_gateway');
        }
        res.destroy();
      } catch (err) {
        this.fail(err);
      }
    }

    clientClosed(): void {
      clearTimeout(this.idle);
      this.x.body?.stop();
      if (!this.res.writableFinished) this.t.req.destroy();
    }

    /** Status, reason phrase and headers set on `res`, at the response's first byte or its end. */
    private start(): void {
      const { res, upRes } = this;
      this.started = true;
      res.statusCode = upRes.statusCode!;
      const reason = relayedReason(upRes.statusMessage);
      if (reason) res.statusMessage = reason;
      relayResponseHeaders(upRes, res);
      this.addTrailers = relayedTrailers(res, upRes);
    }

    private cutIdle(): void {
      logger.warn({ reqId: this.req.id, service: this.x.service.name, idleMs: responseIdleTimeoutMs }, 'client stopped reading the response; closed');
      metrics.upstreamErrors.inc({ kind: 'client_idle' });
      this.res.destroy();
      this.t.req.destroy();
    }

    private fail(err: unknown): void {
      const { req, res, x, t } = this;
      this.broken = true;
      logger.error({ reqId: req.id, service: x.service.name, err }, 'relaying the upstream response failed; closed');
      metrics.upstreamErrors.inc({ kind: 'relay' });
      t.req.destroy();
      if (!this.started && !res.headersSent) return void sendError(res, 'bad_gateway');
      res.destroy();
    }
  }

  /**
   * The one place the gateway answers for an upstream that gave no usable response: 413 (the body grew past the limit
   * while streaming), 408 (the client stopped sending its body), 504 (no response headers within timeoutMs) or 502
   * (refused, reset, a 101 nobody asked for). Points go back first when the request never reached a target (so a
   * client that reads its quota right after sees them); one that reached a target keeps them, counted upstreamFailed.
   */
  function answerUpstreamFailure(req: Request, res: Response, x: ProxyExchange, outcome: TryOutcome, a: Answer): void {
    x.finish();
    const kind = failureKind(outcome, a);
    metrics.upstreamErrors.inc({ kind });
    if (a.code === 'bad_gateway' || a.code === 'gateway_timeout') metrics.upstreamDuration.observe({ status: kind }, elapsedSeconds(x.startedAt));
    const tlsCode = outcome.type === 'failed' ? outcome.tlsError : undefined;
    logger.warn(
      { reqId: req.id, kind, ...(tlsCode ? { code: tlsCode } : {}), service: x.service.name, tries: x.tries, reached: x.reached },
      'upstream request failed',
    );
    const answer = (): void => {
      if (a.code === 'payload_too_large') {
        res.setHeader('connection', 'close');
        sendError(res, 'payload_too_large', `The request body exceeds ${maxBodyBytes} bytes.`);
      } else if (a.code === 'request_timeout') {
        res.setHeader('connection', 'close');
        sendError(
          res,
          'request_timeout',
          kind === 'body_timeout'
            ? `The request body was not complete within ${x.service.settings.timeoutMs} ms.`
            : `No part of the request body arrived for ${responseIdleTimeoutMs} ms.`,
        );
      } else if (a.code === 'gateway_timeout') sendError(res, 'gateway_timeout', `The upstream did not answer within ${x.service.settings.timeoutMs} ms.`);
      else if (kind === 'bad_status') sendError(res, 'bad_gateway', 'The upstream answered with a status the gateway cannot pass on.');
      else sendError(res, 'bad_gateway');
    };
    if (a.refund && onNotReached) return void onNotReached(req.ctx).then(answer, answer);
    if (a.code === 'bad_gateway' || a.code === 'gateway_timeout') onReachedFailed?.(req.ctx);
    answer();
  }

  /** Every target went out between the health stage and the first try: points back, then 503. */
  function noTargetAtAll(req: Request, res: Response, x: ProxyExchange): void {
    x.finish();
    const answer = (): void => answerNoHealthyUpstream(res, x.service);
    if (onNotReached) return void onNotReached(req.ctx).then(answer, answer);
    answer();
  }

  return { handler: proxyToUpstreamStage };
}

/**
 * The upstream's response headers as the client gets them, set on `res`: hop-by-hop headers and X-Powered-By go; a
 * header the gateway already set wins over the upstream's, except Link, whose values add up; Connection says what this
 * client connection really does. Read straight from the upstream's headers, with nothing copied or deleted: a copy
 * with `delete` turned every response's header object into a slow dictionary (about 3 µs a request under the profiler).
 */
function relayResponseHeaders(upRes: IncomingMessage, res: ServerResponse): void {
  const h = upRes.headers;
  const listed = connectionTokens(h.connection);
  for (const name in h) {
    const value = h[name];
    if (value === undefined || isHopByHop(name) || listed?.has(name) || name === 'x-powered-by' || isProxyHopResponseField(name)) continue;
    if (res.hasHeader(name)) {
      if (name === 'link') res.setHeader('link', `${String(res.getHeader('link'))}, ${String(value)}`);
      continue;
    }
    res.setHeader(name, value);
  }
  // A connection kept open gets the Keep-Alive hint Node gives its own answers, so clients stop reusing it before the
  // server's idle timeout. (A draining server turns both into Connection: close as the headers are written:
  // closeConnectionsAfterResponses in http-server.ts.)
  if (res.hasHeader('connection')) return;
  if (!res.shouldKeepAlive) return void res.setHeader('connection', 'close');
  res.setHeader('connection', 'keep-alive');
  const idleMs = (res.socket as (Socket & { server?: { keepAliveTimeout?: number } }) | null)?.server?.keepAliveTimeout;
  if (idleMs && idleMs >= 1000) res.setHeader('keep-alive', `timeout=${Math.floor(idleMs / 1000)}`);
}

/** 503 no_healthy_upstream: every target of the service is out; Retry-After says when one may be back. */
export function answerNoHealthyUpstream(res: Response, service: Service): void {
  res.setHeader(H.retryAfter, formatRetryAfter(service.retryAfterSeconds() * 1000));
  sendError(res, 'no_healthy_upstream');
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function elapsedSeconds(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9;
}
