// The proxy's rules as a table, without sockets (src/pipeline/proxy-rules.ts): after each try's outcome, retry (where,
// and whether the retry budget pays), stream, or answer, and whether the request's points go back (only when no try
// ever had a connection to a target); and what each outcome tells passive health.
import { describe, expect, it } from 'vitest';
import {
  decide,
  healthRecord,
  MAX_STALE_RETRIES,
  perTryTimeout,
  relayedReason,
  type ExchangeState,
  type TryFailure,
  type TryOutcome,
} from '../src/pipeline/proxy-rules.js';

const NOW = 1_000_000;
const settings = { retries: 1, retryOn: new Set([503]) };
const state = (s: Partial<ExchangeState> = {}): ExchangeState => ({
  retries: 0,
  staleRetries: 0,
  reached: false,
  deadlineAt: NOW + 1000,
  repeatable: true,
  clientGone: false,
  clientBodyPending: false,
  ...s,
});
const failed = (failure: TryFailure, reached: boolean, reusedSocket = false): TryOutcome => ({ type: 'failed', failure, reached, reusedSocket });
const status = (s: number): TryOutcome => ({ type: 'status', status: s });
const bad = (refund: boolean) => ({ do: 'answer', code: 'bad_gateway', refund });
const timeout = (refund: boolean) => ({ do: 'answer', code: 'gateway_timeout', refund });

describe('decide(outcome, state, settings, now)', () => {
  const table: Array<[string, TryOutcome, Partial<ExchangeState>, unknown]> = [
    ['a 200 is streamed', status(200), {}, { do: 'stream' }],
    ['a 500 not in retryOn is streamed', status(500), {}, { do: 'stream' }],
    [
      'a 503 in retryOn, repeatable, a try left: retried (budgeted), else streamed',
      status(503),
      {},
      { do: 'retry', reason: 'status', budgeted: true, otherwise: { do: 'stream' } },
    ],
    ['a 503 in retryOn, a POST with a body: streamed', status(503), { repeatable: false }, { do: 'stream' }],
    ['a 503 in retryOn, no tries left: streamed', status(503), { retries: 1 }, { do: 'stream' }],
    ['a 101 nobody asked for: 502, points kept (it reached the target)', status(101), {}, bad(false)],
    ['a status below 100 (`HTTP/1.1 099 Weird`), which the gateway cannot write: 502, points kept', status(99), {}, bad(false)],
    ['status 0: 502', status(0), {}, bad(false)],
    ['a status above 999: 502', status(1000), {}, bad(false)],
    ['an unwritable status is 502 even when retryOn would name it', status(99), {}, bad(false)],
    ['status 999 (three digits, writable): streamed', status(999), {}, { do: 'stream' }],
    [
      'refused, a try left: retried for any method, outside the budget',
      failed('refused', false),
      { repeatable: false },
      { do: 'retry', reason: 'connect', budgeted: false, otherwise: bad(true) },
    ],
    ['refused on the last try, nothing ever connected: 502 and points back', failed('refused', false), { retries: 1 }, bad(true)],
    ['refused on the last try after an earlier try connected: 502, points kept', failed('refused', false), { retries: 1, reached: true }, bad(false)],
    ['connect timeout, past the deadline: no retry, 502, points back', failed('connect_timeout', false), { deadlineAt: NOW }, bad(true)],
    [
      'reset after connecting, repeatable: retried (budgeted), else 502 kept',
      failed('reset', true),
      {},
      { do: 'retry', reason: 'reset', budgeted: true, otherwise: bad(false) },
    ],
    ['reset after connecting, a POST with a body: 502, points kept', failed('reset', true), { repeatable: false }, bad(false)],
    [
      'reset on a reused pooled socket, repeatable: sent again on the same target (stale), unbudgeted',
      failed('reset', true, true),
      {},
      { do: 'retry', reason: 'stale', budgeted: false, otherwise: bad(false) },
    ],
    [
      `reset on a reused socket after ${MAX_STALE_RETRIES} stale retries: an ordinary reset`,
      failed('reset', true, true),
      { staleRetries: MAX_STALE_RETRIES },
      { do: 'retry', reason: 'reset', budgeted: true, otherwise: bad(false) },
    ],
    ['the request deadline, reached: 504, points kept', failed('timeout', true), {}, timeout(false)],
    ['the request deadline while waiting for a pooled connection: 504, points back', failed('timeout', false), {}, timeout(true)],
    ['the deadline is never retried, even with tries left', failed('timeout', true), { retries: 0 }, timeout(false)],
    [
      "the deadline while the client was still sending its body: 408 (the client's slowness), points kept",
      failed('timeout', true),
      { clientBodyPending: true, repeatable: false },
      { do: 'answer', code: 'request_timeout', refund: false },
    ],
    [
      'the deadline while the client was still sending its body, no try connected: 408, points back',
      failed('timeout', false),
      { clientBodyPending: true, repeatable: false },
      { do: 'answer', code: 'request_timeout', refund: true },
    ],
    [
      'a try timeout, repeatable, a try left: retried on another target (budgeted)',
      failed('try_timeout', true),
      {},
      { do: 'retry', reason: 'timeout', budgeted: true, otherwise: timeout(false) },
    ],
    ['a try timeout on the last try: 504, points kept', failed('try_timeout', true), { retries: 1 }, timeout(false)],
    [
      'a try timeout of a POST with a body (no per-try timer is armed for one, but the rule holds): 504',
      failed('try_timeout', true),
      { repeatable: false },
      timeout(false),
    ],
    ['a chunked body past the limit: 413, points kept', failed('too_large', false), {}, { do: 'answer', code: 'payload_too_large', refund: false }],
    ['a body the client stopped sending, reached: 408, points kept', failed('body_idle', true), {}, { do: 'answer', code: 'request_timeout', refund: false }],
    ['the client left: nothing answered, nothing given back', failed('client_gone', false), {}, { do: 'drop' }],
    ['the client left before a response arrived: dropped', status(200), { clientGone: true }, { do: 'drop' }],
  ];
  it.each(table)('%s', (_name, outcome, s, expected) => {
    expect(decide(outcome, state(s), settings, NOW)).toEqual(expected);
  });

  it('a status in retryOn that cannot be written is still a 502, not a retry', () => {
    expect(decide(status(99), state(), { retries: 1, retryOn: new Set([99]) }, NOW)).toEqual(bad(false));
  });

  it('a retry needs time left: a reset one millisecond past the deadline is answered', () => {
    expect(decide(failed('reset', true), state({ deadlineAt: NOW }), settings, NOW)).toEqual(bad(false));
    expect(decide(failed('reset', true), state({ deadlineAt: NOW + 1 }), settings, NOW)).toMatchObject({ do: 'retry' });
  });
});

describe('healthRecord(outcome, decision): what passive health is told', () => {
  it('statuses as status_<code> (failed when 5xx); failures by kind; a try timeout as a timeout', () => {
    expect(healthRecord(status(200), { do: 'stream' })).toEqual({ failed: false, kind: 'status_200' });
    expect(healthRecord(status(503), { do: 'stream' })).toEqual({ failed: true, kind: 'status_503' });
    expect(healthRecord(status(101), bad(false) as never)).toEqual({ failed: false, kind: 'status_101' });
    for (const kind of ['refused', 'connect_timeout', 'reset', 'timeout'] as const)
      expect(healthRecord(failed(kind, true), bad(false) as never)).toEqual({ failed: true, kind });
    expect(healthRecord(failed('try_timeout', true), bad(false) as never)).toEqual({ failed: true, kind: 'timeout' });
  });

  it("nothing for the client's doing (too large, idle body, gone) nor for a stale pooled socket", () => {
    for (const kind of ['too_large', 'body_idle', 'client_gone'] as const) expect(healthRecord(failed(kind, true), { do: 'drop' })).toBeUndefined();
    const stale = { do: 'retry', reason: 'stale', budgeted: false, otherwise: bad(false) } as const;
    expect(healthRecord(failed('reset', true, true), stale as never)).toBeUndefined();
  });

  it("nothing for a try that timed out still queued for a pooled connection: a full pool is not the target's failure", () => {
    for (const kind of ['timeout', 'try_timeout'] as const) {
      expect(healthRecord({ type: 'failed', failure: kind, reached: false, reusedSocket: false, queued: true }, timeout(true) as never)).toBeUndefined();
      // Connecting (a socket of its own, no answer to the handshake) is the target's failure.
      expect(healthRecord(failed(kind, false), timeout(true) as never)).toEqual({ failed: true, kind: 'timeout' });
    }
  });
});

describe('healthRecord: a client too slow with its body, an unwritable status, a TLS failure', () => {
  it("a deadline lost to the client's body says nothing of the target; the backend's own deadline is its timeout", () => {
    const late = decide(failed('timeout', true), state({ clientBodyPending: true, repeatable: false }), settings, NOW);
    expect(healthRecord(failed('timeout', true), late)).toBeUndefined();
    expect(healthRecord(failed('timeout', true), decide(failed('timeout', true), state(), settings, NOW))).toEqual({ failed: true, kind: 'timeout' });
  });

  it('a status the gateway cannot pass on is a failure of the target (bad_status)', () => {
    expect(healthRecord(status(99), bad(false) as never)).toEqual({ failed: true, kind: 'bad_status' });
  });

  it('a failure of the TLS layer is reported as tls, before or after the handshake', () => {
    for (const reached of [false, true]) {
      const outcome: TryOutcome = {
        type: 'failed',
        failure: reached ? 'reset' : 'refused',
        reached,
        reusedSocket: false,
        tlsError: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
      };
      expect(healthRecord(outcome, bad(!reached) as never)).toEqual({ failed: true, kind: 'tls' });
    }
  });
});

describe('relayedReason(reason): the reason phrase the client gets', () => {
  const table: Array<[string, string | undefined, string | undefined]> = [
    ['an ordinary phrase passes', 'Not Found', 'Not Found'],
    ['a tab and obs-text (RFC 9112) pass', 'O\tK \xe9', 'O\tK \xe9'],
    ['a control character: dropped (Node writes the standard phrase)', 'O\x01K', undefined],
    ['DEL: dropped', 'O\x7fK', undefined],
    ['a NUL: dropped', 'O\x00K', undefined],
    ['a bare CR or LF: dropped', 'O\rK', undefined],
    ['none: none', undefined, undefined],
    ['empty: none', '', undefined],
  ];
  it.each(table)('%s', (_name, reason, expected) => expect(relayedReason(reason)).toBe(expected));
});

describe('perTryTimeout(perTryTimeoutMs, state, settings, anotherTarget, now): a try is cut early only to go elsewhere', () => {
  const table: Array<[string, number | undefined, Partial<ExchangeState>, boolean, number | undefined]> = [
    ['a repeatable request, a retry left, another target: armed', 300, {}, true, 300],
    ['no other target to go to (a single-target service, or the last untried one): not armed', 300, {}, false, undefined],
    ['no retry left: not armed (the last try gets the rest of the deadline)', 300, { retries: 1 }, true, undefined],
    ['a POST with a body: not armed', 300, { repeatable: false }, true, undefined],
    ['not shorter than the time left: not armed', 1000, {}, true, undefined],
    ['not configured: not armed', undefined, {}, true, undefined],
  ];
  it.each(table)('%s', (_name, ms, s, another, expected) => expect(perTryTimeout(ms, state(s), settings, another, NOW)).toBe(expected));
});
