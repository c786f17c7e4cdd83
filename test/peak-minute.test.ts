// The usage ledger's peakMinute (docs/keys-and-limits.md, "peakMinute"): per key and hour, the highest count of the
// key's minute window that any limit check reported in that hour. Two gateway instances on one real Redis: each learns
// the fleet's count from its own checks' replies, keeps its maximum in memory and raises the ledger's m<h> with its
// usage flush, so the ledger holds the larger of the two, never an instance's smaller one. It costs the request path
// no Redis command (INFO commandstats while flushes wait), and a flush one script call by SHA for the keys and days whose
// figure grew since the instance last wrote it (many keys per call; none when nothing grew). The memory
// store (tollgate dev) keeps it too; a reply arriving late for an earlier hour is not lost.
import { describe, expect, it } from 'vitest';
import { hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { MemoryUsageStore, type UsageStore } from '../src/usage/store.js';
import { dayOf, HOUR_MS } from '../src/util/time.js';
import { UsageRecorder } from '../src/usage/recorder.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { commandCalls, startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { useStack } from './helpers/stack.js';
import type { Config } from '../src/config/schema.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'peak:';
const ks = new Keyspace(PREFIX);
const TOKEN = 'tga_peak-test-token';
const s = useStack<{ a: LimitsGateway; b: LimitsGateway }>({
  redis: true,
  client: true,
  gateway: async () => ({ a: await startLimitsGateway(config()), b: await startLimitsGateway(config()) }),
});
const api = new CheckedApi({ target: () => s.gw.a.gateway.adminApp!, token: TOKEN });

function config(): Config {
  return testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: s.up.url },
    redis: { url: s.redis.url, prefix: PREFIX, commandTimeoutMs: 2000 },
    admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    plans: { metered: { perMinute: 100, perDay: 10_000 } },
    // Flushes only when the test asks: what the request path sends is measured apart from them.
    usage: { retentionDays: 2, flushIntervalMs: 60_000 },
  });
}

async function call(gw: LimitsGateway, key: string): Promise<number> {
  const res = await fetch(`${gw.url}/v1/things`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

/** The key's hourly buckets over the last two hours, as the admin API answers them (checked against the document). */
async function hourly(id: string): Promise<Array<{ start: string; admitted: number; peakMinute: number }>> {
  const path = `/keys/${id}/usage?granularity=hour&from=${new Date(Date.now() - HOUR_MS).toISOString()}`;
  const res = await api.get(path);
  expect(res.status, res.text).toBe(200);
  expect(api.problems).toEqual([]);
  return res.body.buckets;
}

describe('peakMinute', () => {
  it('7 requests in one minute window then 3 in the next, over two instances: the hour keeps 7, the larger instance maximum', async () => {
    const { id, key } = await s.gw.a.createKey({ plan: 'metered' });
    // The first six through A (A's replies say 1..6), the seventh through B (the fleet's count: 7).
    for (let i = 0; i < 6; i++) expect(await call(s.gw.a, key)).toBe(200);
    expect(await call(s.gw.b, key)).toBe(200);
    // A new minute window (a reset starts one, as the next minute would), three requests in it, through both.
    await s.gw.a.gateway.keyLimits.resetWindows(id);
    for (const gw of [s.gw.a, s.gw.b, s.gw.a]) expect(await call(gw, key)).toBe(200);
    // B (maximum 7) writes first, then A (maximum 6, then 3): A's smaller figure must not lower the ledger's.
    await s.gw.b.gateway.flushUsage();
    await s.gw.a.gateway.flushUsage();
    const hour = Math.floor(Date.now() / HOUR_MS);
    const field = await s.client.hget(ks.usageDay(keySubject(id), dayOf(Date.now())), `m${hour % 24}`);
    const buckets = await hourly(id);
    const busy = buckets.filter((x) => x.admitted > 0);
    // Ten admitted, in the hour the checks ran (two buckets only if the hour turned during the test).
    expect(busy.reduce((n, x) => n + x.admitted, 0)).toBe(10);
    expect(Math.max(...buckets.map((x) => x.peakMinute))).toBe(7);
    if (busy.length === 1) {
      expect(field).toBe('7');
      expect(busy[0]!.peakMinute).toBe(7);
    }
    // A day's bucket shows its busiest hour's figure, not a sum.
    const day = await api.get(`/keys/${id}/usage?granularity=day`);
    expect(day.status, day.text).toBe(200);
    expect(Math.max(...day.body.buckets.map((x: { peakMinute: number }) => x.peakMinute))).toBe(7);
    expect(api.problems).toEqual([]);
  });

  it('costs the request path no Redis command; a flush costs one script call by SHA for its keys on each instance', async () => {
    const k1 = await s.gw.a.createKey({ plan: 'metered' });
    const k2 = await s.gw.a.createKey({ plan: 'metered' });
    // Cached keys, loaded script, nothing pending: what follows is the request path alone.
    for (const k of [k1, k2]) for (const gw of [s.gw.a, s.gw.b]) expect(await call(gw, k.key)).toBe(200);
    await Promise.all([s.gw.a.gateway.flushUsage(), s.gw.b.gateway.flushUsage()]);
    const N = 12;
    const before = await commandCalls(s.client);
    for (let i = 0; i < N; i++) expect(await call(i % 2 ? s.gw.a : s.gw.b, i % 3 ? k1.key : k2.key)).toBe(200);
    const during = await commandCalls(s.client);
    const delta = (cmd: string, from: Map<string, number>, to: Map<string, number>) => (to.get(cmd) ?? 0) - (from.get(cmd) ?? 0);
    // One limit-script call per request and nothing else sent by a client (what a script runs inside is counted
    // under its own command names: HGET and HSET, which the raise script would add, must not move).
    expect(delta('evalsha', before, during)).toBe(N);
    expect(delta('eval', before, during)).toBe(0);
    expect(delta('hset', before, during)).toBe(0);
    expect(delta('hget', before, during)).toBe(0);

    await Promise.all([s.gw.a.gateway.flushUsage(), s.gw.b.gateway.flushUsage()]);
    const flushed = await commandCalls(s.client);
    // Two keys, one day, two instances that both saw both keys: one raise call by SHA per instance (both keys in
    // it; the script was loaded by the first flush above), with one HGET, HSET and PEXPIRE per key inside; nothing
    // more on the ledger, no script text sent.
    expect(delta('evalsha', during, flushed)).toBe(2);
    expect(delta('eval', during, flushed)).toBe(0);
    expect(delta('hget', during, flushed)).toBe(4);
    expect(delta('pexpire', during, flushed)).toBe(4);
    // A bound: HSET only where the figure is larger than the ledger's (the instance that writes second may hold
    // smaller ones), and which instance writes second is a race.
    expect(delta('hset', during, flushed)).toBeGreaterThanOrEqual(2);
    expect(delta('hset', during, flushed)).toBeLessThanOrEqual(4);
    expect(delta('hincrby', during, flushed)).toBe(0);
    // Nothing grew since: the next flush writes nothing. A new window that stays below the hour's figure neither.
    await s.gw.a.gateway.keyLimits.resetWindows(k1.id);
    expect(await call(s.gw.a, k1.key)).toBe(200);
    await Promise.all([s.gw.a.gateway.flushUsage(), s.gw.b.gateway.flushUsage()]);
    const idle = await commandCalls(s.client);
    expect(delta('evalsha', flushed, idle)).toBe(1); // the request's limit check
    expect(delta('hget', flushed, idle)).toBe(0);
  });

  it('a Redis-less gateway (tollgate dev) keeps it in its memory ledger', async () => {
    const memory = await startLimitsGateway(testConfig({ upstream: { url: s.up.url }, plans: { metered: { perMinute: 100, perDay: 1000 } } }));
    try {
      const { id, key } = await memory.createKey({ plan: 'metered' });
      for (let i = 0; i < 5; i++) expect(await call(memory, key)).toBe(200);
      await memory.gateway.flushUsage();
      const u = await memory.gateway.usage.keyUsage(id, Date.now() - HOUR_MS, Date.now() + 1, 'hour');
      expect(Math.max(...u.buckets.map((x) => x.peakMinute))).toBe(5);
      expect(u.totals.admitted).toBe(5);
    } finally {
      await memory.close();
    }
  });

  it('keeps each hour apart, and a late reply for an earlier hour raises that hour, not the current one', async () => {
    const store: UsageStore = new MemoryUsageStore();
    const recorder = new UsageRecorder({ store, clock: { now: () => Date.now() }, logger: silentLogger, flushIntervalMs: 60_000, ttlMs: () => 1 });
    const h = Math.floor(Date.now() / HOUR_MS) - 3; // three hours ago: hours h and h + 1 of whatever day they fall in
    for (const n of [3, 5, 4]) recorder.minuteCount('key_x', n, h);
    recorder.minuteCount('key_x', 2, h + 1);
    recorder.minuteCount('key_x', 9, h); // an answer from hour h that came in after one from h + 1
    recorder.minuteCount('key_x', 0, h + 1);
    recorder.minuteCount('key_y', 0, h); // a count of 0 (a refused first request) records nothing
    await recorder.close();
    const field = (hour: number) => `m${hour % 24}`;
    const read = async (hour: number) => (await store.days('key_x', [dayOf(hour * HOUR_MS)]))[0]![field(hour)];
    expect(await read(h)).toBe(9);
    expect(await read(h + 1)).toBe(2);
    expect((await store.days('key_y', [dayOf(h * HOUR_MS)]))[0]).toEqual({});
    // Raised, never lowered, by a later flush with a smaller figure.
    await store.raisePeaks([{ id: 'key_x', atMs: h * HOUR_MS, peak: 4 }], 1);
    expect(await read(h)).toBe(9);
  });
});
