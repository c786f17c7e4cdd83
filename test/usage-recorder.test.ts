// The usage recorder's peakMinute writes: a timer's flush writes the open hour's figures at most once a minute (under
// steady traffic almost every active key's figure grows between two flushes, and writing each at every flush cost Redis
// a third of a command per request in the bench), a closed hour's at the next flush, an explicit flush everything.
// The memory store, a manual clock, no timer reached (its interval is far longer than the test).
import { afterEach, describe, expect, it } from 'vitest';
import { UsageRecorder } from '../src/usage/recorder.js';
import { MemoryUsageStore, type MinutePeak } from '../src/usage/store.js';
import { HOUR_MS } from '../src/util/time.js';
import { ManualClock } from '../src/util/clock.js';
import { silentLogger } from './helpers/gateway.js';

const recorders: UsageRecorder[] = [];
afterEach(async () => {
  for (const r of recorders.splice(0)) await r.close();
});

function recorder(clock: ManualClock): { rec: UsageRecorder; writes: MinutePeak[][] } {
  const store = new MemoryUsageStore();
  const writes: MinutePeak[][] = [];
  const raise = store.raisePeaks.bind(store);
  store.raisePeaks = async (entries: readonly MinutePeak[]) => {
    writes.push([...entries]);
    return raise(entries);
  };
  const rec = new UsageRecorder({ store, clock, logger: silentLogger, flushIntervalMs: 60_000, ttlMs: () => 86_400_000 });
  recorders.push(rec);
  return { rec, writes };
}

describe('peakMinute writes', () => {
  it("a timer's flush writes the open hour's figures at most once a minute; a closed hour's at the next flush; an explicit flush all", async () => {
    const clock = new ManualClock(10 * HOUR_MS);
    const hour = 10;
    const { rec, writes } = recorder(clock);
    rec.minuteCount('k1', 3, hour);
    await rec.flush(false);
    expect(writes).toEqual([[{ id: 'k1', atMs: hour * HOUR_MS, peak: 3 }]]);
    // Grown 5 s later: not written by the timer yet (the open hour is written once a minute).
    rec.minuteCount('k1', 5, hour);
    clock.advance(5_000);
    await rec.flush(false);
    expect(writes).toHaveLength(1);
    // A minute after the last write: written.
    clock.advance(60_000);
    await rec.flush(false);
    expect(writes[1]).toEqual([{ id: 'k1', atMs: hour * HOUR_MS, peak: 5 }]);
    // The hour closes with a figure not written yet: the next flush writes it, whatever the minute.
    rec.minuteCount('k1', 9, hour);
    clock.set((hour + 1) * HOUR_MS + 1_000);
    rec.minuteCount('k1', 1, hour + 1);
    await rec.flush(false);
    expect(writes[2]).toContainEqual({ id: 'k1', atMs: hour * HOUR_MS, peak: 9 });
    // An explicit flush writes the open hour's figure at once.
    rec.minuteCount('k1', 4, hour + 1);
    await rec.flush();
    expect(writes.at(-1)).toContainEqual({ id: 'k1', atMs: (hour + 1) * HOUR_MS, peak: 4 });
  });
});
