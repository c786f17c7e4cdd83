// The per-request context: what one stage of the request path learns and a later one (or the access log, the
// metrics, a tracing span, the usage ledger) needs. One typed object per request, created by the first stage and
// reachable as `req.ctx` from every stage and from the proxy's callbacks.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthFailure } from '../identity/auth-scheme.js';
import type { Caller } from '../identity/caller.js';
import type { KeySources } from '../http/credentials.js';
import { anonymousClientKey, clientAddress, type ClientAddressSource } from '../limits/client-address.js';
import type { AnonymousDecision } from '../limits/anonymous.js';
import type { Charge, Decision } from '../limits/types.js';
import type { RequestTrace } from '../observability/tracing.js';
import type { CompiledRoute } from '../routing/routes.js';
import type { Service } from '../routing/services.js';
import type { ProxyExchange } from './exchange.js';

declare module 'node:http' {
  interface IncomingMessage {
    /** The request id (X-Request-Id), set first thing on every request. */
    id: string;
    /** This request's context, set first thing on every request (observeRequest). */
    ctx: RequestContext;
  }
}

export class RequestContext {
  /** Who is calling; undefined until authentication found out (and again if the limit check disowns the key). */
  caller: Caller | undefined = undefined;
  authFailure: AuthFailure = 'missing_api_key';
  /** The 401's message when the default one would not say what is wrong (two different keys in one request). */
  authFailureMessage: string | undefined = undefined;
  /**
   * Where this request's key was read from (auth.sources as authentication read them): the proxy removes those
   * headers and query parameters with hideCredentials. Undefined until authentication ran.
   */
  keySources: KeySources | undefined = undefined;
  /**
   * The method the client sent, when a method override was honoured (req.method is then the method the gateway judged
   * and sends upstream, the override headers and its body gone): the access log names both.
   */
  overriddenFrom: string | undefined = undefined;
  /**
   * Set when authentication skipped a key lookup because the anonymous limit is refusing this client (until that
   * clock time): the anonymous stage answers 429 from it without asking Redis again.
   */
  anonymousRefusedUntil = 0;
  /** The anonymous limit's decision, when it admitted this request: a public route's own windows add to its headers. */
  anonymousDecision: AnonymousDecision | undefined = undefined;
  /** Milliseconds this request has waited on Redis so far; the request's Redis budget is what is left of commandTimeoutMs. */
  redisMs = 0;
  /** The configured route pattern the request matched (the metrics' route label), set by the route match stage. */
  route: string | undefined = undefined;
  /** The route the request matched (matched once, before authentication), when one did. */
  matchedRoute: CompiledRoute | undefined = undefined;
  /** The service the request goes to: its route's, or defaultService's. */
  service: Service | undefined = undefined;
  /** The key limit check's decision, for keyed requests that reached it. */
  decision: Decision | undefined = undefined;
  /** What the key limit check charged an admitted request, so the request can be given back if the upstream fails it. */
  charge: Charge | undefined = undefined;
  /**
   * The request body, read whole by request validation (only for an operation that validates a JSON body): what the
   * proxy sends upstream, byte for byte, instead of reading the client.
   */
  body: Buffer | undefined = undefined;
  /** Set by the proxy stage: where the request stands among its tries to the service's targets. */
  proxy: ProxyExchange | undefined = undefined;
  /** This request's trace, when tracing is on (tracing.otlpEndpoint): stages start their spans under it. */
  trace: RequestTrace | undefined = undefined;
  private clientKeyText: string | undefined = undefined;
  private clientAddressText: string | undefined | null = null;

  constructor(
    readonly id: string,
    /** performance.now() when the request arrived. */
    readonly startedAt: number,
    readonly req: IncomingMessage & ClientAddressSource,
  ) {}

  /** The key the anonymous limit meters this request's client under (anonymousClientKey), computed once. */
  clientKey(): string {
    return (this.clientKeyText ??= anonymousClientKey(this.req));
  }

  /** The client's address by the trustProxy rules (clientAddress), computed once: what an allow-list checks. */
  clientAddress(): string | undefined {
    if (this.clientAddressText === null) this.clientAddressText = clientAddress(this.req);
    return this.clientAddressText;
  }
}

/** How a response ended, as the observers are told. */
export interface RequestEnd {
  /** Milliseconds from arrival to the response's close. */
  ms: number;
  /** Sent in full (false: the client left or the connection was cut first). */
  finished: boolean;
}

/**
 * What watches every request from outside the request path: the access log, the request metrics, and later a
 * tracing span and the usage ledger. `requestEnded` is called once per request, after its response closed.
 */
export interface RequestObserver {
  requestEnded(ctx: RequestContext, res: ServerResponse, end: RequestEnd): void;
}
