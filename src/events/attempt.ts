// One delivery attempt of one event to one webhook endpoint: the CloudEvent POSTed as it was queued
// (application/cloudevents+json), signed per Standard Webhooks with each of the endpoint's active secrets, within
// 15 s for the whole exchange; redirects are never followed (a 3xx is a failure: a receiver that moved is told to the
// operator, not guessed at). The answer becomes an outcome the dispatcher settles the queue with: delivered (2xx),
// retry (any other status, a timeout, a connection refused or reset), retry-after (429 or 503 with Retry-After),
// disable (410 Gone: the receiver says it is gone for good), refused-address (a registered endpoint whose host now
// resolves outside events.allowTargets: retried, as the address may change, and said so in the endpoint's lastError).
import type { AddressGuard } from '../outbound/address-guard.js';
import { OutboundError, type OutboundClient } from '../outbound/client.js';
import { parseRetryAfter } from './schedule.js';
import type { WebhookSigner } from './signing.js';

/** The whole attempt's bound: connect, headers and body. */
export const ATTEMPT_TIMEOUT_MS = 15_000;
/** A receiver's answer body is not used: the first KiB is read, the rest discarded. */
const MAX_ANSWER_BYTES = 1024;

/** What an attempt needs of the outbound client: its request() (OutboundClient; tests may stand in for it). */
export type WebhookPoster = Pick<OutboundClient, 'request'>;

export type AttemptOutcome =
  | { kind: 'delivered'; status: number }
  | { kind: 'retry'; status?: number; error: string }
  | { kind: 'retry-after'; status: number; retryAfterMs: number; error: string }
  | { kind: 'disable'; status: 410; error: string }
  | { kind: 'refused-address'; error: string };

export interface AttemptInput {
  poster: WebhookPoster;
  url: string;
  /** The endpoint's signer: every active secret signs. */
  signer: WebhookSigner;
  /** The CloudEvent's id: the webhook-id header, the receiver's key for spotting a redelivery. */
  eventId: string;
  /** The CloudEvent as JSON text: the body, byte for byte what is signed. */
  body: string;
  /** Registered endpoints only; configured ones are trusted as written. */
  guard?: AddressGuard | undefined;
  /** The attempt's time (ms): webhook-timestamp. */
  now: number;
  timeoutMs?: number;
}

/** One attempt; never rejects: every failure is an outcome. */
export async function attemptDelivery(input: AttemptInput): Promise<AttemptOutcome> {
  const timeoutMs = input.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
  let answer: { status: number; headers: Record<string, string | string[] | undefined> };
  try {
    answer = await input.poster.request({
      url: input.url,
      method: 'POST',
      headers: {
        'content-type': 'application/cloudevents+json',
        'user-agent': 'Tollgate-Webhooks',
        ...input.signer.headers(input.eventId, input.body, new Date(input.now)),
      },
      body: input.body,
      timeoutMs,
      ...(input.guard === undefined ? {} : { guard: input.guard }),
      maxBodyBytes: MAX_ANSWER_BYTES,
    });
  } catch (err) {
    return failedRequest(err, timeoutMs);
  }
  const { status } = answer;
  if (status >= 200 && status < 300) return { kind: 'delivered', status };
  if (status === 410) return { kind: 'disable', status, error: 'HTTP 410 Gone: the endpoint is disabled until enabled again' };
  if (status >= 300 && status < 400) {
    const location = header(answer.headers, 'location');
    return { kind: 'retry', status, error: `HTTP ${status}: redirects are not followed${location ? ` (Location: ${location.slice(0, 200)})` : ''}` };
  }
  if (status === 429 || status === 503) {
    const retryAfterMs = parseRetryAfter(answer.headers['retry-after'], input.now);
    if (retryAfterMs !== undefined)
      return { kind: 'retry-after', status, retryAfterMs, error: `HTTP ${status}, Retry-After ${header(answer.headers, 'retry-after')}` };
  }
  return { kind: 'retry', status, error: `HTTP ${status}` };
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** A request that got no answer (the client's OutboundError kinds; anything else is a failure to retry too). */
function failedRequest(err: unknown, timeoutMs: number): AttemptOutcome {
  if (!(err instanceof OutboundError)) return { kind: 'retry', error: `failed: ${err instanceof Error ? err.message : String(err)}` };
  const code = err.code ? ` (${err.code})` : '';
  switch (err.kind) {
    case 'address_refused':
      return { kind: 'refused-address', error: `address refused: ${err.message}; retried, as the address may change` };
    case 'timeout':
      return { kind: 'retry', error: `timeout: no complete answer within ${timeoutMs / 1000} s` };
    default:
      return { kind: 'retry', error: `${err.kind}: ${err.message}${code}` };
  }
}
