// The proxy's rules as data in, decision out: after each try's outcome, whether to try again (and where), stream the
// response, or answer for the upstream, and whether the request's points go back. No sockets, no timers, no clock of
// its own: src/pipeline/proxy.ts feeds it what happened and carries the decision out (test/proxy-rules.test.ts).

/** How a try ended before the gateway had a response to pass on. */
export type TryFailure =
  /** The connection was refused (or failed before connecting). */
  | 'refused'
  /** No connection within connectTimeoutMs. */
  | 'connect_timeout'
  /** The connection broke before response headers. */
  | 'reset'
  /** The request's timeoutMs ran out (counted from the proxy stage, waiting for a pooled connection included). */
  | 'timeout'
  /** This try's perTryTimeoutMs ran out (a retryable request). */
  | 'try_timeout'
  /** The client stopped sending its body for responseIdleTimeoutMs. */
  | 'body_idle'
  /** A chunked body grew past maxBodyBytes. */
  | 'too_large'
  /** The client closed its connection first. */
  | 'client_gone';

export type TryOutcome =
  /** Response headers arrived with this status (101 only for a request that did not ask to upgrade). */
  | { type: 'status'; status: number }
  /**
   * `reached`: this try had a connection to its target; `reusedSocket`: a pooled keep-alive one; `queued`: it was still
   * waiting for a connection of the target's pool (every one busy with other requests) when it ended; `tlsError`: the
   * TLS layer's error code when TLS failed (the target's certificate not verified, or the target refusing the session).
   */
  | { type: 'failed'; failure: TryFailure; reached: boolean; reusedSocket: boolean; queued?: boolean; tlsError?: string };

/** The request's progress so far, as the rules need it. */
export interface ExchangeState {
  /** Further tries made under the service's retry rules (at most `retries`). */
  retries: number;
  /** Tries sent again after stale pooled sockets. */
  staleRetries: number;
  /** Some earlier try had a connection to its target (before this outcome). */
  reached: boolean;
  /** Clock time by which response headers must have arrived (timeoutMs from the proxy stage). */
  deadlineAt: number;
  /** An idempotent method and no body: it may be sent again after it reached a target. */
  repeatable: boolean;
  /** The client's connection is gone: nobody to answer. */
  clientGone: boolean;
}

export interface RetrySettings {
  retries: number;
  retryOn: ReadonlySet<number>;
}

/** What the gateway answers itself; `refund`: the request never reached a target, so its points go back. */
export interface Answer {
  do: 'answer';
  code: 'bad_gateway' | 'gateway_timeout' | 'payload_too_large' | 'request_timeout';
  refund: boolean;
}

export type Decision =
  /** Pass the response on to the client. */
  | { do: 'stream' }
  /**
   * Try again: on the same target (`stale`) or another. `budgeted`: the retry must be taken from the service's retry
   * budget; `otherwise`: the answer when it cannot be (budget spent, no target left).
   */
  | { do: 'retry'; reason: 'connect' | 'reset' | 'status' | 'timeout' | 'stale'; budgeted: boolean; otherwise: Answer | { do: 'stream' } }
  | Answer
  /** The client left: nothing to answer, nothing given back (leaving must not buy free requests). */
  | { do: 'drop' };

/**
 * How many times one request may be re-sent after stale pooled sockets. A socket the upstream closed for idleness is
 * the freshest in the (LIFO) pool, so the next one picked may be stale too; past this, the pool is not the problem.
 */
export const MAX_STALE_RETRIES = 3;

/** RFC 9110 §9.2.2: methods a client may repeat automatically. */
export const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE']);

/**
 * The decision after a try's outcome.
 * - A status in `retryOn`, for a repeatable request with tries left: retried on another target (budgeted); a 101 the
 *   request did not ask for: 502. Any other status is streamed.
 * - Could not connect: retried on another target for any method (nothing was sent; outside the budget: it adds no
 *   load on a target).
 * - Reset, or this try's own timeout: retried for a repeatable request only (budgeted). A reset on a reused pooled
 *   socket of a repeatable request is a stale socket: sent again on the same target, outside the retry count.
 * - The request's deadline: 504, never retried. A body grown too large: 413; a body the client stopped sending: 408.
 * Points go back only when no try of the request ever had a connection to a target.
 */
export function decide(outcome: TryOutcome, state: ExchangeState, settings: RetrySettings, now: number): Decision {
  if (state.clientGone || (outcome.type === 'failed' && outcome.failure === 'client_gone')) return { do: 'drop' };
  const timeLeft = now < state.deadlineAt;
  const triesLeft = state.retries < settings.retries && timeLeft;
  if (outcome.type === 'status') {
    if (settings.retryOn.has(outcome.status) && state.repeatable && triesLeft)
      return { do: 'retry', reason: 'status', budgeted: true, otherwise: { do: 'stream' } };
    if (outcome.status === 101) return { do: 'answer', code: 'bad_gateway', refund: false };
    return { do: 'stream' };
  }
  const reached = state.reached || outcome.reached;
  const answer = (code: Answer['code']): Answer => ({ do: 'answer', code, refund: !reached });
  switch (outcome.failure) {
    case 'client_gone':
      return { do: 'drop' };
    case 'too_large':
      // The client's fault, whoever it reached: charged as admitted.
      return { do: 'answer', code: 'payload_too_large', refund: false };
    case 'body_idle':
      return answer('request_timeout');
    case 'timeout':
      return answer('gateway_timeout');
    case 'refused':
    case 'connect_timeout':
      return triesLeft ? { do: 'retry', reason: 'connect', budgeted: false, otherwise: answer('bad_gateway') } : answer('bad_gateway');
    case 'reset':
      if (outcome.reusedSocket && state.repeatable && state.staleRetries < MAX_STALE_RETRIES && timeLeft)
        return { do: 'retry', reason: 'stale', budgeted: false, otherwise: answer('bad_gateway') };
      return state.repeatable && triesLeft ? { do: 'retry', reason: 'reset', budgeted: true, otherwise: answer('bad_gateway') } : answer('bad_gateway');
    case 'try_timeout':
      return state.repeatable && triesLeft
        ? { do: 'retry', reason: 'timeout', budgeted: true, otherwise: answer('gateway_timeout') }
        : answer('gateway_timeout');
  }
}

/**
 * What a try's outcome tells passive health (ServiceRegistry.recordResult): `status_<code>` (failed when 5xx), or the
 * failure kind. A client's fault (body too large or idle) says nothing of the target: undefined. A stale pooled
 * socket is the pool's race, not the target's failure: undefined too.
 */
export function healthRecord(outcome: TryOutcome, decision: Decision): { failed: boolean; kind: string } | undefined {
  if (outcome.type === 'status') return { failed: outcome.status >= 500, kind: `status_${outcome.status}` };
  if (decision.do === 'retry' && decision.reason === 'stale') return undefined;
  // A try that timed out in the pool's queue never reached the target: a full pool (clients slow to read their
  // answers) says nothing of the target's health, and ejecting for it would let slow clients take targets out.
  if (outcome.queued) return undefined;
  switch (outcome.failure) {
    case 'too_large':
    case 'body_idle':
    case 'client_gone':
      return undefined;
    case 'try_timeout':
      return { failed: true, kind: 'timeout' };
    default:
      return { failed: true, kind: outcome.failure };
  }
}
