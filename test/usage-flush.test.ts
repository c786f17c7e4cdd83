// The usage flush's cost to Redis and what it does with a write that fails. A peakMinute flush after a busy hour
// raises a figure for every key in use: counted here on a real redis-server with INFO commandstats, it is a few script
// calls by SHA for N keys (not N calls with the script's text), with the same commands inside per key (HGET per field,
// HSET where larger, PEXPIRE), and the ledger's figures exact. A call that fails answers back only its own keys, and
// the recorder keeps only what was not written: a count is never written twice, a failed key is not re-sent with
// every key of its flush.
import { afterAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { Keyspace } from '../src/storage/keyspace.js';
import { MemoryUsageStore, PEAK_KEYS_PER_CALL, RedisUsageStore, type MinutePeak, type UsageEntry } from '../src/usage/store.js';
import { UsageRecorder } from '../src/usage/recorder.js';
import { dayOf, HOUR_MS } from '../src/util/time.js';
import { ManualClock } from '../src/util/clock.js';
import { silentLogger } from './helpers/gateway.js';
import { commandCalls } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';
import { keySubject } from '../src/limits/subject.js';

const s = useStack({ redis: true, client: true, upstream: false });
const TTL = 86_400_000;
const clients: Redis[] = [];
afterAll(() => {
  for (const c of clients.splice(0)) c.disconnect();
});
/** A connection of its own for the store under test (the assertions read through s.client). */
function storeClient(): Redis {
  const c = s.redis.client();
  clients.push(c);
  return c;
}

function delta(from: Map<string, number>, to: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of to) if (v - (from.get(k) ?? 0)) out[k] = v - (from.get(k) ?? 0);
  return out;
}

describe('peakMinute flush against a real Redis', () => {
  it('N keys on one server: ceil(N / keys per call) script calls by SHA, one HGET and PEXPIRE per key, the figures exact', async () => {
    const ks = new Keyspace('flush1:');
    const store = new RedisUsageStore(storeClient(), ks, undefined, { scriptKeys: 'any' });
    const N = 1000;
    const hour = Math.floor(Date.now() / HOUR_MS);
    const atMs = hour * HOUR_MS;
    const entries: MinutePeak[] = Array.from({ length: N }, (_, i) => ({ id: `key_f${i}`, atMs, peak: 10 + (i % 7) }));
    // Load the script once (a fresh server answers the first EVALSHA with NOSCRIPT, then gets EVAL): what follows
    // is a flush's steady cost.
    expect(await store.raisePeaks([{ id: 'key_warm', atMs, peak: 1 }], TTL)).toEqual([]);

    const before = await commandCalls(s.client);
    expect(await store.raisePeaks(entries, TTL)).toEqual([]);
    const raised = delta(before, await commandCalls(s.client));
    const calls = Math.ceil(N / PEAK_KEYS_PER_CALL);
    expect(raised).toEqual({ evalsha: calls, hget: N, hset: N, pexpire: N, info: 1 });

    const field = `m${hour % 24}`;
    for (const i of [0, 1, 6, 499, 999]) expect(await s.client.hget(ks.usageDay(keySubject(`key_f${i}`), dayOf(atMs)), field)).toBe(String(10 + (i % 7)));
    expect(await s.client.pttl(ks.usageDay(keySubject('key_f3'), dayOf(atMs)))).toBeGreaterThan(TTL - 60_000);

    // Another instance's smaller figures: read, never written.
    const mid = await commandCalls(s.client);
    expect(
      await store.raisePeaks(
        entries.map((e) => ({ ...e, peak: 5 })),
        TTL,
      ),
    ).toEqual([]);
    expect(delta(mid, await commandCalls(s.client))).toEqual({ evalsha: calls, hget: N, pexpire: N, info: 1 });
    expect(await s.client.hget(ks.usageDay(keySubject('key_f6'), dayOf(atMs)), field)).toBe('16');
  });

  it("on a cluster (scriptKeys 'slot') a call holds one slot's keys only", async () => {
    const ks = new Keyspace('flush2:');
    const store = new RedisUsageStore(storeClient(), ks, undefined, { scriptKeys: 'slot' });
    const atMs = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
    await store.raisePeaks([{ id: 'key_warm', atMs, peak: 1 }], TTL);
    const ids = Array.from({ length: 300 }, (_, i) => `key_s${i}`);
    const slots = new Set(ids.map((id) => calculateSlot(ks.usageDay(keySubject(id), dayOf(atMs)))));
    const before = await commandCalls(s.client);
    expect(
      await store.raisePeaks(
        ids.map((id) => ({ id, atMs, peak: 3 })),
        TTL,
      ),
    ).toEqual([]);
    const d = delta(before, await commandCalls(s.client));
    expect(d.evalsha).toBe(slots.size);
    expect(d.hset).toBe(ids.length);
  });

  it('a call that fails answers back its own keys only; the others are written', async () => {
    const ks = new Keyspace('flush3:');
    const store = new RedisUsageStore(storeClient(), ks, undefined, { scriptKeys: 'any' });
    const atMs = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
    const N = PEAK_KEYS_PER_CALL * 3;
    const entries: MinutePeak[] = Array.from({ length: N }, (_, i) => ({ id: `key_x${i}`, atMs, peak: 4 }));
    // A day key holding a string (not a hash): HGET on it fails, and with it the call that carries it (the second).
    const bad = PEAK_KEYS_PER_CALL + 5;
    await s.client.set(ks.usageDay(keySubject(`key_x${bad}`), dayOf(atMs)), 'not a hash');
    const failed = await store.raisePeaks(entries, TTL);
    expect(failed.map((e) => e.id).sort()).toEqual(
      entries
        .slice(PEAK_KEYS_PER_CALL, 2 * PEAK_KEYS_PER_CALL)
        .map((e) => e.id)
        .sort(),
    );
    const field = `m${Math.floor(atMs / HOUR_MS) % 24}`;
    expect(await s.client.hget(ks.usageDay(keySubject('key_x0'), dayOf(atMs)), field)).toBe('4');
    expect(await s.client.hget(ks.usageDay(keySubject(`key_x${N - 1}`), dayOf(atMs)), field)).toBe('4');
  });
});

describe('the recorder keeps only what was not written', () => {
  it('deprecated-route calls: a count that failed comes back alone, one written is never sent again', async () => {
    const ks = new Keyspace('flush4:');
    const store = new RedisUsageStore(storeClient(), ks, undefined, { scriptKeys: 'any' });
    const clock = new ManualClock(Math.floor(Date.now() / HOUR_MS) * HOUR_MS + 1000);
    const day = dayOf(clock.now());
    const route = 'GET /v1/pets/:petId';
    // key_b's field holds text: HINCRBY on it fails (a real Redis error), key_a's and key_c's go in.
    await s.client.hset(ks.deprecatedCalls(route, day), 'key_b', 'not a number');
    const rec = new UsageRecorder({ store, clock, logger: silentLogger, flushIntervalMs: 3_600_000, ttlMs: () => TTL });
    try {
      for (const id of ['key_a', 'key_b', 'key_c']) for (let i = 0; i < 3; i++) rec.deprecatedCall(route, id);
      await rec.flush();
      expect(await s.client.hgetall(ks.deprecatedCalls(route, day))).toEqual({ key_a: '3', key_b: 'not a number', key_c: '3' });
      await s.client.hdel(ks.deprecatedCalls(route, day), 'key_b');
      const before = await commandCalls(s.client);
      await rec.flush();
      // Only key_b's count is sent again: one HINCRBY, and key_a and key_c still read 3.
      expect(delta(before, await commandCalls(s.client)).hincrby).toBe(1);
      expect(await s.client.hgetall(ks.deprecatedCalls(route, day))).toEqual({ key_a: '3', key_b: '3', key_c: '3' });
      const after = await commandCalls(s.client);
      await rec.flush();
      expect(delta(after, await commandCalls(s.client)).hincrby).toBeUndefined();
      const seen = await store.deprecated(route, [day]);
      expect([...seen].map(([id, v]) => [id, v.calls]).sort()).toEqual([
        ['key_a', 3],
        ['key_b', 3],
        ['key_c', 3],
      ]);
    } finally {
      await rec.close();
    }
  });

  it('counts: a batch with failed entries is not re-sent whole, and every count lands exactly once', async () => {
    const clock = new ManualClock(100 * HOUR_MS + 1000);
    const store = new MemoryUsageStore();
    const sent: UsageEntry[][] = [];
    let failIds = new Set(['key_b']);
    const add = store.add.bind(store);
    store.add = async (entries: readonly UsageEntry[]) => {
      sent.push([...entries]);
      const fail = entries.filter((e) => failIds.has(e.id));
      await add(entries.filter((e) => !failIds.has(e.id)));
      return fail;
    };
    const rec = new UsageRecorder({ store, clock, logger: silentLogger, flushIntervalMs: 3_600_000, ttlMs: () => TTL });
    try {
      for (const id of ['key_a', 'key_b', 'key_c']) for (let i = 0; i < 3; i++) rec.count(id, 'r');
      await rec.flush();
      expect(sent[0]!.map((e) => e.id).sort()).toEqual(['key_a', 'key_b', 'key_c']);
      // The next flush sends key_b's count alone (with one more counted since), then nothing.
      rec.count('key_b', 'r');
      failIds = new Set();
      await rec.flush();
      expect(sent[1]).toEqual([{ id: 'key_b', kind: 'r', atMs: 100 * HOUR_MS, n: 4 }]);
      await rec.flush();
      expect(sent).toHaveLength(2);
      const day = dayOf(clock.now());
      for (const [id, n] of [
        ['key_a', 3],
        ['key_b', 4],
        ['key_c', 3],
      ] as const)
        expect((await store.days(id, [day]))[0]).toEqual({ r4: n });
    } finally {
      await rec.close();
    }
  });

  it('peaks: only the failed keys come back at the next flush', async () => {
    const clock = new ManualClock(200 * HOUR_MS + 1000);
    const store = new MemoryUsageStore();
    const sent: MinutePeak[][] = [];
    let failing = true;
    const raise = store.raisePeaks.bind(store);
    store.raisePeaks = async (entries: readonly MinutePeak[]) => {
      sent.push([...entries]);
      const fail = failing ? entries.filter((e) => e.id === 'key_2') : [];
      await raise(entries.filter((e) => !fail.includes(e)));
      return fail;
    };
    const rec = new UsageRecorder({ store, clock, logger: silentLogger, flushIntervalMs: 3_600_000, ttlMs: () => TTL });
    try {
      for (let i = 0; i < 5; i++) rec.minuteCount(`key_${i}`, 7, 200);
      await rec.flush();
      expect(sent[0]).toHaveLength(5);
      failing = false;
      await rec.flush();
      expect(sent[1]).toEqual([{ id: 'key_2', atMs: 200 * HOUR_MS, peak: 7 }]);
      await rec.flush();
      expect(sent).toHaveLength(2);
      expect((await store.days('key_2', [dayOf(clock.now())]))[0]).toEqual({ [`m${200 % 24}`]: 7 });
    } finally {
      await rec.close();
    }
  });
});
