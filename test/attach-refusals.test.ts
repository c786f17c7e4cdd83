// The attach preview's estimate (src/usage/attach-refusals.ts): what keys would have been refused had they shared a
// pool, from ledger hours worked out by hand: a burst of three keys in one minute, the same burst across an hour's
// end, steady traffic for an hour, a consumer's own keys already pooled, the day window, pools without limits; the
// keys' shares add up to the pool's figure; and the replay reads the last 7 days' hours of the joining keys with no
// consumer and of the consumer's keys under it, nothing else.
import { describe, expect, it } from 'vitest';
import { apportion, estimate, replayPools } from '../src/usage/attach-refusals.js';
import { MemoryUsageStore, type UsageStore } from '../src/usage/store.js';
import { ManualClock } from '../src/util/clock.js';
import { DAY_MS, HOUR_MS } from '../src/util/time.js';

const T0 = Date.UTC(2026, 10, 20, 10);
const limits = (perMinute: number | null, perDay: number | null = null) => ({ limits: { perMinute, perDay, perMonth: null } });
/** A key's hours: [requests, peakMinute] from the period's first hour on. */
const key = (id: string, hours: Array<[number, number]>, joining = true) => ({
  id,
  joining,
  pooled: !joining,
  requests: hours.map(([a]) => a),
  peaks: hours.map(([, m]) => m),
});

describe('the estimate', () => {
  it('three keys of 60 in one minute each (180 together) in a pool of 60 a minute: 120 points, 40 of each key', () => {
    const e = estimate([key('k_a', [[60, 60]]), key('k_b', [[60, 60]]), key('k_c', [[60, 60]])], limits(60, 10_000), T0, T0 + HOUR_MS);
    expect(e).toEqual({
      from: new Date(T0).toISOString(),
      to: new Date(T0 + HOUR_MS).toISOString(),
      requests: 180,
      pointsRefused: 120,
      minute: { limit: 60, pointsRefused: 120 },
      day: { limit: 10_000, pointsRefused: 0 },
      hoursAffected: 1,
      hours: [{ start: new Date(T0).toISOString(), requests: 180, busiestMinute: 180, pointsRefused: 120 }],
      keysAffected: 3,
      keys: ['k_a', 'k_b', 'k_c'].map((id) => ({ id, joining: true, requests: 60, pointsRefused: 40 })),
    });
  });

  it("the same burst across an hour's end: its window counted once (the larger hour), the shares over both hours", () => {
    // Each key's window reached 30 in the first hour and 60 in the next: one window, 30 requests in each hour.
    const keys = ['k_a', 'k_b', 'k_c'].map((id) =>
      key(id, [
        [30, 30],
        [30, 60],
      ]),
    );
    const e = estimate(keys, limits(60), T0, T0 + 2 * HOUR_MS);
    expect(e.minute).toEqual({ limit: 60, pointsRefused: 120 });
    expect(e.day).toBeNull();
    expect(e.hours.map((h) => [h.busiestMinute, h.pointsRefused])).toEqual([
      [180, 120],
      [90, 30],
    ]);
    expect(e.keys.map((k) => k.pointsRefused)).toEqual([40, 40, 40]);
  });

  it('steady traffic for an hour: what 61 windows of the limit cannot hold is refused, not only the busiest window', () => {
    // 180 a minute for 60 minutes against 60: 7200 refused in fact; at most 61 windows x 60 admitted: at least 7140.
    const e = estimate([key('k_a', [[10_800, 180]])], limits(60), T0, T0 + HOUR_MS);
    expect(e.minute).toEqual({ limit: 60, pointsRefused: 7140 });
    expect(e.hours[0]).toMatchObject({ busiestMinute: 180, pointsRefused: 7140 });
  });

  it("a consumer's own keys: their checks reported the pool's window, so the largest of them is the pool's busiest minute", () => {
    const e = estimate([key('k_old', [[40, 50]], false), key('k_old2', [[10, 50]], false), key('k_new', [[30, 30]])], limits(60), T0, T0 + HOUR_MS);
    // 50 (the pool's) + 30 (the joining key's own): 80 against 60.
    expect(e.hours[0]).toMatchObject({ requests: 80, busiestMinute: 80, pointsRefused: 20 });
    expect(e.keys).toEqual([
      { id: 'k_old', joining: false, requests: 40, pointsRefused: 10 },
      { id: 'k_new', joining: true, requests: 30, pointsRefused: 8 },
      { id: 'k_old2', joining: false, requests: 10, pointsRefused: 2 },
    ]);
  });

  it("the day window: the what-if's bound over the period, shared by the keys' requests", () => {
    // 25 hours of 100 requests from two keys (60 and 40) against 1000 a day: at most two windows, 2000 admitted.
    const hours = (n: number): Array<[number, number]> => Array.from({ length: 25 }, () => [n, 1]);
    const e = estimate([key('k_a', hours(60)), key('k_b', hours(40))], limits(60, 1000), T0, T0 + 25 * HOUR_MS);
    expect(e.minute).toEqual({ limit: 60, pointsRefused: 0 });
    expect(e.day).toEqual({ limit: 1000, pointsRefused: 500 });
    expect(e.pointsRefused).toBe(500);
    expect(e.hoursAffected).toBe(0);
    expect(e.keys.map((k) => [k.id, k.pointsRefused])).toEqual([
      ['k_a', 300],
      ['k_b', 200],
    ]);
  });

  it('a pool without limits refuses nothing; keys without requests are not listed', () => {
    const e = estimate([key('k_a', [[500, 500]])], limits(null), T0, T0 + HOUR_MS);
    expect([e.minute, e.day, e.pointsRefused, e.keys]).toEqual([null, null, 0, []]);
  });

  it('apportions a whole figure by weights, adding up to it', () => {
    expect(apportion(10, [1, 1, 1])).toEqual([4, 3, 3]);
    expect(apportion(7, [0, 2, 5])).toEqual([0, 2, 5]);
    expect(apportion(0, [1, 2])).toEqual([0, 0]);
    expect(apportion(5, [0, 0])).toEqual([0, 0]);
  });
});

describe('the replay', () => {
  it("reads the last 7 days of the joining keys with no consumer and of the consumer's keys under it", async () => {
    const now = T0 + 30 * 60_000;
    const store: UsageStore = new MemoryUsageStore();
    const at = (h: number) => T0 - h * HOUR_MS;
    await store.add(
      [
        // Joining keys, with no consumer: this hour and 6 days ago; 8 days ago is outside the period.
        { id: 'k_a', kind: 'a', atMs: at(0), n: 60 },
        { id: 'k_b', kind: 'a', atMs: at(0), n: 60 },
        { id: 'k_a', kind: 'a', atMs: at(6 * 24), n: 10 },
        { id: 'k_a', kind: 'a', atMs: at(8 * 24), n: 999 },
        // A key of the consumer, under it; and what it was counted under another consumer (not this pool's).
        { id: 'k_c', kind: 'a', atMs: at(0), consumer: 'acme', n: 30 },
        { id: 'k_c', kind: 'a', atMs: at(0), consumer: 'other', n: 500 },
        // A joining key's hours under another consumer are left out (that pool's, not its own).
        { id: 'k_b', kind: 'a', atMs: at(1), consumer: 'other', n: 400 },
      ],
      8 * DAY_MS,
    );
    await store.raisePeaks(
      [
        { id: 'k_a', atMs: at(0), peak: 60 },
        { id: 'k_b', atMs: at(0), peak: 60 },
        { id: 'k_a', atMs: at(6 * 24), peak: 10 },
        { id: 'k_a', atMs: at(8 * 24), peak: 999 },
        { id: 'k_c', atMs: at(0), consumer: 'acme', peak: 30 },
        { id: 'k_b', atMs: at(1), consumer: 'other', peak: 400 },
      ],
      8 * DAY_MS,
    );
    const replay = replayPools(store, new ManualClock(now));
    const [e, fresh] = await replay([
      { consumer: 'acme', exists: true, joining: ['k_a', 'k_b'], ...limits(60) },
      { consumer: 'newco', exists: false, joining: ['k_c'], ...limits(60) },
    ]);
    expect(e).toMatchObject({
      from: new Date(T0 - 7 * DAY_MS).toISOString(),
      to: new Date(T0 + HOUR_MS).toISOString(),
      requests: 160,
      // 60 + 60 + 30 against 60 in this hour.
      pointsRefused: 90,
      hours: [{ start: new Date(T0).toISOString(), requests: 150, busiestMinute: 150, pointsRefused: 90 }],
    });
    expect(e!.keys).toEqual([
      { id: 'k_a', joining: true, requests: 70, pointsRefused: 36 },
      { id: 'k_b', joining: true, requests: 60, pointsRefused: 36 },
      { id: 'k_c', joining: false, requests: 30, pointsRefused: 18 },
    ]);
    // A consumer to be created has no keys of its own; k_c's hours with no consumer: none.
    expect(fresh).toMatchObject({ requests: 0, pointsRefused: 0, keys: [] });
  });

  it('a key the consumer has now: what it was counted with no consumer, before it joined, is in the pool as its own', async () => {
    const store: UsageStore = new MemoryUsageStore();
    await store.add(
      [
        { id: 'k_m', kind: 'a', atMs: T0, n: 60 },
        { id: 'k_j', kind: 'a', atMs: T0, n: 60 },
      ],
      8 * DAY_MS,
    );
    await store.raisePeaks(
      [
        { id: 'k_m', atMs: T0, peak: 60 },
        { id: 'k_j', atMs: T0, peak: 60 },
      ],
      8 * DAY_MS,
    );
    const replay = replayPools(store, new ManualClock(T0 + 60_000));
    const [e] = await replay([{ consumer: 'acme', exists: true, joining: ['k_j'], members: ['k_m'], ...limits(60) }]);
    expect(e).toMatchObject({ requests: 120, pointsRefused: 60, hours: [{ busiestMinute: 120, pointsRefused: 60 }] });
    expect(e!.keys).toEqual([
      { id: 'k_j', joining: true, requests: 60, pointsRefused: 30 },
      { id: 'k_m', joining: false, requests: 60, pointsRefused: 30 },
    ]);
  });
});
