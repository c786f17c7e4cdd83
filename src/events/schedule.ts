// When a webhook delivery that failed is tried again. At least once: each event is tried at 0, ~5 s, ~20 s and ~50 s
// (three retries inside the first minute: most failures are a receiver restarting or a blip), then after 5 min,
// 30 min, 2 h, 5 h, 10 h and 14 h, so an endpoint that is down for a day still gets it; each delay counts from the end
// of the failed attempt and carries +-20% jitter, so the retries of many events, and of many gateways, do not arrive at
// a recovering receiver in one wave. The first-minute delays are 5, 15 and 30 s (not 35): with +20% jitter on each,
// their sum stays under 60 s. A 429 or 503 with Retry-After is honoured, both ways: a receiver that asks for 2 s gets
// 2 s, one that asks for a day gets an hour at most (or the schedule's own delay at that point, when that is longer).
// Pure functions: the clock and the random source come in as arguments.
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../util/time.js';

/** The delays after each failed attempt (after the 1st, the 2nd, ...), before jitter. */
export const RETRY_DELAYS_MS: readonly number[] = [5_000, 15_000, 30_000, 5 * MINUTE_MS, 30 * MINUTE_MS, 2 * HOUR_MS, 5 * HOUR_MS, 10 * HOUR_MS, 14 * HOUR_MS];
/** Delivery is tried for at least this long after the first attempt. */
export const MIN_RETRY_SPAN_MS = DAY_MS;
/** Each delay is the schedule's times a factor drawn from [1 - JITTER, 1 + JITTER). */
export const JITTER = 0.2;
/** The longest Retry-After honoured as given (unless the schedule's own delay is longer). */
export const RETRY_AFTER_CAP_MS = HOUR_MS;
/** The shortest wait a Retry-After gets (0, or a date in the past): never a loop of immediate retries. */
export const MIN_DELAY_MS = 1_000;

/** A schedule: the delays after each failed attempt, and the span delivery is kept up for at least. */
export interface RetrySchedule {
  readonly delaysMs: readonly number[];
  readonly minSpanMs: number;
}

export const DEFAULT_SCHEDULE: RetrySchedule = { delaysMs: RETRY_DELAYS_MS, minSpanMs: MIN_RETRY_SPAN_MS };

/** A delay with +-JITTER applied; `random` answers in [0, 1) like Math.random. */
export function jittered(ms: number, random: () => number = Math.random): number {
  return Math.floor(ms * (1 - JITTER + 2 * JITTER * random()));
}

export interface NextAttemptInput {
  /** Attempts made so far, the one that just failed included (1 after the first). */
  attempts: number;
  /** When the first attempt was due (ms). */
  firstAt: number;
  /** Now (ms): the failed attempt's end. */
  now: number;
  /** What a 429 or 503 asked for (parseRetryAfter), if it did. */
  retryAfterMs?: number | undefined;
  random?: () => number;
  schedule?: RetrySchedule;
}

/**
 * How long to wait before the next attempt, or undefined when the schedule is over (the event is dead). After the
 * listed delays are used up, one more attempt is made at minSpanMs after the first when that is still ahead (only
 * shortened waits, from Retry-After, get there early): delivery is given up neither before that span nor after more
 * than delaysMs.length + 2 attempts.
 */
export function nextAttemptDelay(input: NextAttemptInput): number | undefined {
  const { attempts, firstAt, now, retryAfterMs } = input;
  const schedule = input.schedule ?? DEFAULT_SCHEDULE;
  const random = input.random ?? Math.random;
  const honoured = (delay: number): number =>
    retryAfterMs === undefined ? delay : Math.min(Math.max(MIN_DELAY_MS, retryAfterMs), Math.max(RETRY_AFTER_CAP_MS, delay));
  if (attempts <= schedule.delaysMs.length) return honoured(jittered(schedule.delaysMs[attempts - 1] ?? 0, random));
  // The last attempt, at the span's end: a Retry-After may put it later, never earlier.
  const left = firstAt + schedule.minSpanMs - now;
  if (attempts > schedule.delaysMs.length + 1 || left <= 0) return undefined;
  return Math.max(left, honoured(left));
}

/**
 * A Retry-After value as milliseconds from now: delta-seconds (`120`) or an HTTP-date (`Wed, 21 Oct 2026 07:28:00 GMT`,
 * RFC 9110 section 10.2.3). Undefined for anything else (the schedule's delay then applies). A date in the past is 0.
 */
export function parseRetryAfter(value: string | readonly string[] | undefined, now: number): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds) ? seconds * 1000 : undefined;
  }
  // Date.parse also takes forms RFC 9110 does not (ISO 8601, bare dates): only the three HTTP-date forms are read
  // (IMF-fixdate and RFC 850's end in GMT; asctime's has no zone and means GMT).
  if (!/^[A-Za-z]{3,9},? [\w -]+ \d{2}:\d{2}:\d{2} GMT$|^[A-Za-z]{3} [A-Za-z]{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}$/.test(text)) return undefined;
  const at = Date.parse(/GMT$/.test(text) ? text : `${text} GMT`);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
