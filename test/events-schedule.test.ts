// The retry schedule of webhook delivery (src/events/schedule.ts): its delays, jitter, end, and Retry-After.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_SCHEDULE,
  JITTER,
  MIN_RETRY_SPAN_MS,
  RETRY_AFTER_CAP_MS,
  RETRY_DELAYS_MS,
  jittered,
  nextAttemptDelay,
  parseRetryAfter,
} from '../src/events/schedule.js';
import { HOUR_MS } from '../src/util/time.js';

const T0 = Date.UTC(2026, 10, 29, 8, 0, 0);

/** Every attempt's time after the first, failing each time, with a fixed random value; attempts take no time. */
function attemptTimes(random: number): number[] {
  const times = [0];
  for (let attempts = 1; ; attempts++) {
    const now = T0 + times[times.length - 1]!;
    const delay = nextAttemptDelay({ attempts, firstAt: T0, now, random: () => random });
    if (delay === undefined) return times;
    times.push(now + delay - T0);
    if (attempts > 50) throw new Error('the schedule does not end');
  }
}

describe('retry schedule', () => {
  it('tries three more times within the first minute, whatever the jitter', () => {
    for (const r of [0, 0.5, 0.999999]) {
      const times = attemptTimes(r);
      expect(times[3]).toBeLessThan(60_000);
      expect(times[1]).toBeGreaterThanOrEqual(4_000);
    }
    // Without jitter (the middle of its range): 0, 5 s, 20 s, 50 s.
    expect(attemptTimes(0.5).slice(0, 4)).toEqual([0, 5_000, 20_000, 50_000]);
  });

  it('then grows: 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, and keeps trying at least 24 hours', () => {
    const times = attemptTimes(0.5);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(gaps).toEqual([...RETRY_DELAYS_MS]);
    expect(gaps.slice(3)).toEqual([5 * 60_000, 30 * 60_000, 2 * HOUR_MS, 5 * HOUR_MS, 10 * HOUR_MS, 14 * HOUR_MS]);
    for (const r of [0, 0.5, 0.999999]) {
      const t = attemptTimes(r);
      expect(t[t.length - 1]).toBeGreaterThanOrEqual(MIN_RETRY_SPAN_MS);
      expect(t.length).toBe(RETRY_DELAYS_MS.length + 1);
    }
  });

  it('jitters each delay by at most 20% either way', () => {
    expect(jittered(10_000, () => 0)).toBe(8_000);
    expect(jittered(10_000, () => 0.5)).toBe(10_000);
    expect(jittered(10_000, () => 0.999999)).toBeLessThanOrEqual(12_000);
    expect(JITTER).toBe(0.2);
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const d = nextAttemptDelay({ attempts: 4, firstAt: T0, now: T0 })!;
      expect(d).toBeGreaterThanOrEqual(0.8 * 300_000);
      expect(d).toBeLessThanOrEqual(1.2 * 300_000);
      seen.add(d);
    }
    expect(seen.size).toBeGreaterThan(50);
  });

  it('honours Retry-After, shorter or longer than the schedule, capped at an hour or the schedule delay', () => {
    const base = { firstAt: T0, now: T0, random: () => 0.5 };
    expect(nextAttemptDelay({ ...base, attempts: 1, retryAfterMs: 2_000 })).toBe(2_000);
    expect(nextAttemptDelay({ ...base, attempts: 1, retryAfterMs: 120_000 })).toBe(120_000);
    expect(nextAttemptDelay({ ...base, attempts: 1, retryAfterMs: 5 * HOUR_MS })).toBe(RETRY_AFTER_CAP_MS);
    // At the 10 h step the schedule's own delay is the cap.
    expect(nextAttemptDelay({ ...base, attempts: 8, retryAfterMs: 48 * HOUR_MS })).toBe(10 * HOUR_MS);
    // Never an immediate retry loop.
    expect(nextAttemptDelay({ ...base, attempts: 1, retryAfterMs: 0 })).toBe(1_000);
  });

  it('ends only after the span, however short the receiver asked the waits to be', () => {
    const n = DEFAULT_SCHEDULE.delaysMs.length;
    let now = T0;
    let attempts = 0;
    for (;;) {
      attempts++;
      const d = nextAttemptDelay({ attempts, firstAt: T0, now, retryAfterMs: 1_000, random: () => 0.5 });
      if (d === undefined) break;
      now += d;
      expect(attempts).toBeLessThanOrEqual(n + 2);
    }
    expect(attempts).toBe(n + 2);
    expect(now - T0).toBeGreaterThanOrEqual(MIN_RETRY_SPAN_MS);
  });

  it('takes a schedule of its own (tests use short ones)', () => {
    const schedule = { delaysMs: [100, 200], minSpanMs: 0 };
    const d = (attempts: number) => nextAttemptDelay({ attempts, firstAt: T0, now: T0 + 300, random: () => 0.5, schedule });
    expect([d(1), d(2), d(3)]).toEqual([100, 200, undefined]);
  });
});

describe('Retry-After', () => {
  it('reads delta-seconds', () => {
    expect(parseRetryAfter('2', T0)).toBe(2_000);
    expect(parseRetryAfter(' 120 ', T0)).toBe(120_000);
    expect(parseRetryAfter(['3', '9'], T0)).toBe(3_000);
  });

  it('reads the three HTTP-date forms', () => {
    const at = Date.UTC(2026, 10, 29, 8, 0, 30);
    expect(parseRetryAfter('Sun, 29 Nov 2026 08:00:30 GMT', T0)).toBe(at - T0);
    expect(parseRetryAfter('Sunday, 29-Nov-26 08:00:30 GMT', T0)).toBe(at - T0);
    expect(parseRetryAfter('Sun Nov 29 08:00:30 2026', T0)).toBe(at - T0);
    expect(parseRetryAfter('Sun, 29 Nov 2026 07:00:00 GMT', T0)).toBe(0);
  });

  it('ignores anything else', () => {
    for (const v of [undefined, '', '-1', '1.5', 'soon', '2026-11-29T08:00:30Z', '99999999999999999999']) expect(parseRetryAfter(v, T0)).toBeUndefined();
  });
});
