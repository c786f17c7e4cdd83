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
  /**
   * When the deadline passed, the client had not sent its whole body yet, and not because a target held it back (a
   * target not reading is the target's doing): the deadline was lost to the client's slowness, not the backend's.
   */
  clientBodyPending: boolean;
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
 * - A status the gateway cannot write to its client (below 100 or above 999; Node's client parser lets `099` through):
 *   502, as for a 101 nobody asked for.
 * - The request's deadline: 504, never retried; 408 when the client had not finished sending its body by then (its
 *   slowness, not the backend's). A body grown too large: 413; a body the client stopped sending: 408.
 * Points go back only when no try of the request ever had a connection to a target.
 */
export function decide(outcome: TryOutcome, state: ExchangeState, settings: RetrySettings, now: number): Decision {
  if (state.clientGone || (outcome.type === 'failed' && outcome.failure === 'client_gone')) return { do: 'drop' };
  const timeLeft = now < state.deadlineAt;
  const triesLeft = state.retries < settings.retries && timeLeft;
  if (outcome.type === 'status') {
    if (!writableStatus(outcome.status)) return { do: 'answer', code: 'bad_gateway', refund: false };
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
      return answer(state.clientBodyPending ? 'request_timeout' : 'gateway_timeout');
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

/** A status Node's server side can write (RFC 9110: three digits; Node refuses below 100 and above 999). */
export function writableStatus(status: number): boolean {
  return Number.isInteger(status) && status >= 100 && status <= 999;
}

/**
 * The upstream's reason phrase as the client gets it: undefined (Node then writes the status's standard phrase) when it
 * holds a character the header-character check refuses (a control character or DEL; RFC 9112: HTAB, SP, VCHAR,
 * obs-text), which writeHead would throw on.
 */
export function relayedReason(reason: string | undefined): string | undefined {
  return reason && !/[^\t\x20-\x7e\x80-\xff]/.test(reason) ? reason : undefined;
}

/**
 * The per-try timer of a try about to start, or undefined (the try may take what is left of the deadline). A per-try
 * timeout exists to move a request off a hung target: it is armed only for a repeatable request that has a retry left
 * and another available target it has not tried (`anotherTarget`), and only when shorter than the time left. With one
 * target (or the last one left) it is not armed: sending the same request to the same target again would abandon the
 * work in progress there, add load to a target that is already slow, and leave the repeat less time than the first.
 */
export function perTryTimeout(
  perTryTimeoutMs: number | undefined,
  state: ExchangeState,
  settings: RetrySettings,
  anotherTarget: boolean,
  now: number,
): number | undefined {
  if (perTryTimeoutMs === undefined || !state.repeatable || !anotherTarget || state.retries >= settings.retries) return undefined;
  return perTryTimeoutMs < state.deadlineAt - now ? perTryTimeoutMs : undefined;
}

/**
 * What a try's outcome tells passive health (ServiceRegistry.recordResult): `status_<code>` (failed when 5xx), or the
 * failure kind: `tls` for a failure of the TLS layer (a certificate not verified, the target refusing the session),
 * `bad_status` for a status the gateway cannot pass on. A client's fault (body too large, idle or too slow for the
 * deadline) says nothing of the target: undefined. A stale pooled socket is the pool's race, not the target's failure:
 * undefined too.
 */
export function healthRecord(outcome: TryOutcome, decision: Decision): { failed: boolean; kind: string } | undefined {
  if (outcome.type === 'status') {
    if (!writableStatus(outcome.status)) return { failed: true, kind: 'bad_status' };
    return { failed: outcome.status >= 500, kind: `status_${outcome.status}` };
  }
  if (decision.do === 'retry' && decision.reason === 'stale') return undefined;
  if (decision.do === 'answer' && decision.code === 'request_timeout') return undefined;
  if (outcome.tlsError) return { failed: true, kind: 'tls' };
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
