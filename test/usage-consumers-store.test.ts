// The usage ledger of keys with a consumer, in both stores (the same behaviour test over Redis and memory): a count
// under a consumer lands in the consumer's day (usage:{c:<consumer>}:<key>:<day>, the consumer's slot, where the limit
// script of such a key runs), a key's reads find its own days and its days under every consumer in its set
// (key:{<key>}:consumers), split by consumer on request; the deprecated-route and invalid-request hashes name a caller
// under a consumer `<key>@<consumer>`. On Redis: what a key never counted under a consumer costs a report is unchanged
// (one script call), and a key with consumers costs one more per consumer.
import { keySubject } from '../src/limits/subject.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { Keyspace } from '../src/storage/keyspace.js';
import { MAX_KEY_CONSUMERS, MemoryUsageStore, RedisUsageStore, spanOf, type UsageStore } from '../src/usage/store.js';
import { UsageRecorder } from '../src/usage/recorder.js';
import { DAY_MS, dayOf, HOUR_MS } from '../src/util/time.js';
import { ManualClock } from '../src/util/clock.js';
import { silentLogger } from './helpers/gateway.js';
import { commandCalls } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';

const s = useStack({ redis: true, client: true, upstream: false });
const TTL = 3 * DAY_MS;
const clients: Redis[] = [];
afterAll(() => {
  for (const c of clients.splice(0)) c.disconnect();
});

/** Monday 2026-11-23 10:00 UTC: day 1; the next day is day 2. */
const DAY1_AT = Date.UTC(2026, 10, 23, 10);
const DAY2_AT = DAY1_AT + DAY_MS;
const day1 = dayOf(DAY1_AT);
const day2 = dayOf(DAY2_AT);
const h = 10;

let prefixes = 0;
interface Subject {
  name: string;
  make(): { store: UsageStore; ks: Keyspace };
}
const subjects: Subject[] = [
  {
    name: 'Redis',
    make: () => {
      const ks = new Keyspace(`ucs${prefixes++}:`);
      const c = s.redis.client();
      clients.push(c);
      return { store: new RedisUsageStore(c, ks), ks };
    },
  },
  { name: 'memory', make: () => ({ store: new MemoryUsageStore(), ks: new Keyspace('unused:') }) },
];

describe.each(subjects)('the ledger under consumers ($name store)', (subject) => {
  it('a key counted under A on day 1 and under B on day 2: read whole by key, split by consumer', async () => {
    const { store } = subject.make();
    await store.recordKeyConsumer('key_m', 'cons_A');
    await store.add(
      [
        { id: 'key_m', kind: 'r', atMs: DAY1_AT - 2 * HOUR_MS, n: 1 }, // before it joined A: under none
        { id: 'key_m', consumer: 'cons_A', kind: 'a', atMs: DAY1_AT, n: 5 },
        { id: 'key_m', consumer: 'cons_B', kind: 'a', atMs: DAY2_AT, n: 7 },
        { id: 'key_m', consumer: 'cons_B', kind: 'f', atMs: DAY2_AT, n: 1 },
      ],
      TTL,
    );
    await store.raisePeaks(
      [
        { id: 'key_m', consumer: 'cons_A', atMs: DAY1_AT, peak: 4 },
        { id: 'key_m', atMs: DAY1_AT, peak: 9 },
      ],
      TTL,
    );
    expect(await store.days('key_m', [day1, day2])).toEqual([
      { r8: 1, [`a${h}`]: 5, [`m${h}`]: 9 },
      { [`a${h}`]: 7, [`f${h}`]: 1 },
    ]);
    const split = await store.daysByConsumer('key_m', [day1, day2]);
    expect([...split.keys()]).toEqual(['', 'cons_A', 'cons_B']);
    expect(split.get('cons_A')).toEqual([{ [`a${h}`]: 5, [`m${h}`]: 4 }, {}]);
    expect(split.get('cons_B')).toEqual([{}, { [`a${h}`]: 7, [`f${h}`]: 1 }]);
    expect(split.get('')).toEqual([{ r8: 1, [`m${h}`]: 9 }, {}]);

    const span = spanOf(day1 * DAY_MS, (day2 + 1) * DAY_MS);
    const [total] = await store.sums('key_m', span, 'total');
    expect(total).toMatchObject({ admitted: 12, rateLimited: 1, upstreamFailed: 1, peakMinute: 9 });
    const byDay = await store.sumsByConsumer('key_m', span, 'day');
    expect(byDay.get('cons_A')!.map((d) => d.admitted)).toEqual([5, 0]);
    expect(byDay.get('cons_B')!.map((d) => d.admitted)).toEqual([0, 7]);
    expect((await store.sumsUnder('key_m', 'cons_B', span, 'total'))[0]!.admitted).toBe(7);
    expect(await store.consumerKeys('cons_A')).toEqual(['key_m']);
    expect(await store.consumerKeys('cons_B')).toEqual(['key_m']);
    // A key never counted under a consumer reads as it always did.
    expect([...(await store.daysByConsumer('key_plain', [day1])).keys()]).toEqual(['']);
  });

  it('the recorder writes refunds and upstream failures to the ledger the request was counted in, not the key now', async () => {
    const { store } = subject.make();
    const clock = new ManualClock(DAY1_AT);
    const rec = new UsageRecorder({ store, clock, logger: silentLogger, flushIntervalMs: 3_600_000, ttlMs: () => TTL });
    try {
      rec.count('key_r', 'a', 'cons_A');
      rec.count('key_r', 'a', 'cons_A');
      rec.count('key_r', 'b');
      // The key moves to B; the request admitted under A a moment ago then fails to reach a target.
      rec.notReached('key_r', DAY1_AT, 'cons_A');
      rec.upstreamFailed('key_r', DAY1_AT, 'cons_B');
      rec.minuteCount('key_r', 3, Math.floor(DAY1_AT / HOUR_MS), 'cons_A');
      rec.deprecatedCall('GET /v1/old', 'key_r', 'cons_A');
      rec.deprecatedCall('GET /v1/old', 'key_r');
      rec.invalidRequest('pets listPets', 'key_r', '/query/limit', 'cons_B');
      await rec.flush();
    } finally {
      await rec.close();
    }
    const split = await store.daysByConsumer('key_r', [day1]);
    expect(split.get('cons_A')).toEqual([{ [`a${h}`]: 1, [`m${h}`]: 3 }]);
    expect(split.get('cons_B')).toEqual([{ [`f${h}`]: 1, [`v${h}`]: 1 }]);
    expect(split.get('')).toEqual([{ [`b${h}`]: 1 }]);
    const calls = await store.deprecated('GET /v1/old', [day1]);
    expect([...calls.entries()].sort()).toEqual([
      ['key_r', { id: 'key_r', consumer: '', calls: 1, lastMs: DAY1_AT }],
      ['key_r@cons_A', { id: 'key_r', consumer: 'cons_A', calls: 1, lastMs: DAY1_AT }],
    ]);
    const invalid = await store.invalid('pets listPets', [day1]);
    expect([...invalid.values()]).toEqual([{ id: 'key_r', consumer: 'cons_B', calls: 1, lastMs: DAY1_AT, pointer: '/query/limit' }]);
  });

  it(`reads of a key counted under more than ${MAX_KEY_CONSUMERS} consumers fail (bounded), never answer part of it`, async () => {
    const { store } = subject.make();
    for (let i = 0; i <= MAX_KEY_CONSUMERS; i++) await store.recordKeyConsumer('key_many', `c${i}`);
    await expect(store.days('key_many', [day1])).rejects.toThrow(/more than the 100/);
    await expect(store.sums('key_many', spanOf(DAY1_AT, DAY1_AT + HOUR_MS), 'total')).rejects.toThrow(/more than the 100/);
  });
});

describe('the ledger under consumers on Redis', () => {
  it("keeps a consumer's days in the consumer's slot, where the limit script of its keys runs", async () => {
    const ks = new Keyspace('slots:');
    const store = new RedisUsageStore(s.client, ks);
    await store.add([{ id: 'key_s', consumer: 'acme', kind: 'r', atMs: DAY1_AT, n: 1 }], TTL);
    const day = ks.consumerUsageDay('acme', 'key_s', day1);
    expect(day).toBe(`slots:usage:{c:acme}:key_s:${day1}`);
    expect(await s.client.hgetall(day)).toEqual({ [`r${h}`]: '1' });
    expect(calculateSlot(day)).toBe(calculateSlot('{c:acme}'));
    expect(await s.client.pttl(day)).toBeGreaterThan(TTL - 60_000);
    expect(await s.client.smembers(ks.keyConsumers('key_s'))).toEqual(['acme']);
    expect(calculateSlot(ks.keyConsumers('key_s'))).toBe(calculateSlot(ks.keyRecord('key_s')));
    expect(await s.client.smembers(ks.consumerUsageKeys('acme'))).toEqual(['key_s']);
  });

  it('what the limit script writes under a consumer is read back; sums cost one call per key plus one per consumer', async () => {
    const ks = new Keyspace('cost:');
    const store = new RedisUsageStore(s.client, ks);
    // The limit script's own writes: HINCRBY on the consumer's day (the attach wrote the key's set beforehand).
    await store.recordKeyConsumer('key_c', 'c1');
    await store.recordKeyConsumer('key_c', 'c2');
    await s.client.hincrby(ks.consumerUsageDay('c1', 'key_c', day1), `a${h}`, 3);
    await s.client.hincrby(ks.consumerUsageDay('c2', 'key_c', day2), `a${h}`, 4);
    await s.client.hincrby(ks.usageDay(keySubject('key_plain'), day1), `a${h}`, 2);
    const span = spanOf(day1 * DAY_MS, (day2 + 1) * DAY_MS);
    const calls = async (fn: () => Promise<unknown>): Promise<number> => {
      const before = await commandCalls(s.client);
      await fn();
      const after = await commandCalls(s.client);
      return (after.get('evalsha') ?? 0) + (after.get('eval') ?? 0) - (before.get('evalsha') ?? 0) - (before.get('eval') ?? 0);
    };
    await store.sums('key_plain', span, 'total'); // the script loaded once
    expect(await calls(() => store.sums('key_plain', span, 'total'))).toBe(1);
    expect(await calls(() => store.sums('key_c', span, 'total'))).toBe(3);
    expect((await store.sums('key_plain', span, 'total'))[0]!.admitted).toBe(2);
    expect((await store.sums('key_c', span, 'day')).map((d) => d.admitted)).toEqual([3, 4]);
    expect((await store.days('key_c', [day1, day2])).map((d) => d[`a${h}`])).toEqual([3, 4]);
  });
});
