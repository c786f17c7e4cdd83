// Reports on a thread of their own, on a private redis-server: the thread answers exactly what the same reports
// answer in process (pages, sums by hour and day, the what-if, the deprecated-route report), runs at the lowest CPU
// priority on its own Redis connection, starts with the first report and ends once idle, and a gateway that closes
// fails the reports it was running (nothing partial) rather than leaving them hanging.
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { KeyAdminError } from '../src/keys/admin-errors.js';
import { KeyRecords } from '../src/keys/records.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { RedisKeptReports, ReportError } from '../src/usage/kept-reports.js';
import { decodeCursor } from '../src/usage/report-pages.js';
import { InProcessReports } from '../src/usage/report-runner.js';
import { decodeWhatIfCursor } from '../src/usage/whatif-pages.js';
import { ReportThread, type ReportThreadData } from '../src/workers/report-thread.js';
import { UsageReports } from '../src/usage/reports.js';
import { RedisUsageStore } from '../src/usage/store.js';
import { DAY_MS, HOUR_MS, dayOf } from '../src/util/time.js';
import { clientAddresses } from './helpers/limits.js';
import { TestRedis } from './helpers/redis-server.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'thread:';
let redis: TestRedis;
let client: Redis;
let conn: RedisConnection;
let local: InProcessReports;

/** Nice values of this process's threads (/proc/self/task/<tid>/stat, field 19). */
function threadNices(): number[] {
  return readdirSync('/proc/self/task').flatMap((tid) => {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      return [Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])];
    } catch {
      return [];
    }
  });
}

// At nice 0 where what is checked is what a report answers: at the gateway's nice 19, two busy processes at nice 0
// leave the thread about 1.5% of a core, and a test of its answers would time out on a loaded machine. The priority
// has its own test.
const data = (): ReportThreadData => ({
  redis: { url: redis.url },
  prefix: PREFIX,
  commandTimeoutMs: 5000,
  readsInFlight: 8,
  readRest: 1,
  nice: 0,
  memoryMb: 128,
});

async function until(cond: () => Promise<boolean> | boolean, what: string): Promise<void> {
  for (let i = 0; i < 250; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
  // 300 keys, each with a different pattern over the last 3 days (so that sorting and sums have something to tell).
  const ks = new Keyspace(PREFIX);
  const today = dayOf(Date.now());
  const p = client.pipeline();
  for (let i = 0; i < 300; i++) {
    const id = `key_t${String(i).padStart(5, '0')}`;
    const plan = i % 3 === 0 ? 'free' : 'pro';
    p.set(
      ks.keyRecord(id),
      JSON.stringify({ id, name: `customer ${i}`, plan, createdAt: new Date().toISOString(), status: 'active', hash: id.padEnd(64, '0') }),
    );
    p.sadd(ks.keyIds(), id);
    for (let d = 0; d < 3; d++) {
      const day: Record<string, string> = {};
      for (let h = 0; h < 24; h += 1 + (i % 5))
        Object.assign(day, { [`a${h}`]: String(1 + ((i * 7 + h + d) % 90)), [`r${h}`]: String(i % 4), [`m${h}`]: String((i + h) % 60) });
      p.hset(ks.usageDay(keySubject(id), today - d), day);
    }
  }
  // key_t00003 was counted under consumer acme today (its day there, and acme in its set of consumers).
  p.hset(ks.consumerUsageDay('acme', 'key_t00003', today), 'a1', '11');
  p.sadd(ks.keyConsumers('key_t00003'), 'acme');
  p.sadd(ks.consumerUsageKeys('acme'), 'key_t00003');
  p.hset(ks.deprecatedCalls('GET /v1/old', today), 'key_t00001', '5', 'key_t00002', '9', 'key_t00003@acme', '2');
  p.hset(ks.deprecatedLastSeen('GET /v1/old'), 'key_t00001', String(Date.now() - 1000), 'key_t00002', String(Date.now()));
  await p.exec();
  conn = connectRedis({ url: redis.url, commandTimeoutMs: 5000, purpose: 'cli' });
  const store = new RedisKeyStore(conn, ks);
  // Reports kept for their pages in Redis, as the thread keeps them: a page one computed, the other answers.
  local = new InProcessReports(new UsageReports(new RedisUsageStore(conn.client, ks), new KeyRecords(store)), new RedisKeptReports(conn.client, ks));
}, 120_000);

afterAll(async () => {
  await conn?.close();
  client?.disconnect();
  await redis?.stop();
});

describe('the report thread', () => {
  it('answers what the same reports answer in process: pages, sums by hour and day, the what-if, deprecated routes', async () => {
    const thread = new ReportThread(data());
    try {
      const to = Date.now();
      const query = { fromMs: to - 3 * DAY_MS, toMs: to, sort: 'admitted' as const, order: 'desc' as const };
      const [a, b] = [await thread.page(query, 120), await local.page(query, 120)];
      expect(a.total).toBe(300);
      expect(a.keys).toEqual(b.keys);
      expect(a.keys[0]!.admitted).toBeGreaterThan(a.keys[119]!.admitted);
      expect(a.keys[0]!.name).toMatch(/^customer /);
      // The next page from the thread's kept report, by its cursor.
      const next = decodeCursor(a.next!)!;
      expect((await thread.page(next, 1000)).keys).toEqual((await local.page(next, 1000)).keys);
      for (const [fromMs, g] of [
        [to - 24 * HOUR_MS, 'hour'],
        [to - 3 * DAY_MS, 'day'],
      ] as const) {
        const s = await thread.summary(fromMs, to, g);
        expect(s).toEqual(await local.summary(fromMs, to, g));
        expect(s.buckets).toHaveLength(g === 'hour' ? 25 : 4);
        expect(s.totals.admitted).toBeGreaterThan(0);
        expect(Math.max(...s.buckets.map((x) => x.peakMinute))).toBe(59);
      }
      const input = { plan: 'pro', current: { perMinute: 100, perDay: 10_000 }, perMinute: 40, perDay: 500, fromMs: to - 2 * DAY_MS, toMs: to };
      const sim = await thread.simulate(input, 1000);
      expect(sim).toEqual(await local.simulate(input, 1000));
      expect(sim.totals).toMatchObject({ keysInPlan: 200, keysAffected: expect.any(Number) });
      expect((sim.totals as { keysAffected: number }).keysAffected).toBeGreaterThan(0);
      // A what-if in pages: the thread's first page, the next from the in-process runner (the kept copy is in Redis).
      const small = await thread.simulate(input, 5);
      expect(small.keys).toEqual(sim.keys.slice(0, 5));
      const more = await local.simulate(decodeWhatIfCursor(small.next!)!, 1000);
      expect(more.keys).toEqual(sim.keys.slice(5));
      expect(more.next).toBeNull();
      const routes = [
        { method: 'GET' as const, path: '/v1/old', deprecation: '2026-01-01T00:00:00Z', afterSunset: 'gone' as const },
        // Deprecated without a date, made from an OpenAPI operation: listed, under its operationId.
        { method: 'GET' as const, path: '/v1/undated', deprecated: true, operationId: 'undated', afterSunset: 'pass' as const },
      ];
      const dep = await thread.deprecatedRoutes(to - 2 * DAY_MS, to, routes);
      expect(dep).toEqual(await local.deprecatedRoutes(to - 2 * DAY_MS, to, routes));
      expect(dep[0]!.keys.map((k) => [k.id, k.calls, k.name])).toEqual([
        ['key_t00002', 9, 'customer 2'],
        ['key_t00001', 5, 'customer 1'],
        ['key_t00003', 2, 'customer 3'],
      ]);
      expect(dep[1]).toEqual({ method: 'GET', path: '/v1/undated', operationId: 'undated', afterSunset: 'pass', keys: [] });
      // Grouped by consumer: the same answers from the thread as in process.
      const byConsumer = await thread.deprecatedRoutes(to - 2 * DAY_MS, to, routes, 'consumer');
      expect(byConsumer).toEqual(await local.deprecatedRoutes(to - 2 * DAY_MS, to, routes, 'consumer'));
      expect(byConsumer[0]!.consumers!.map((c) => [c.consumer, c.calls])).toEqual([
        [null, 14],
        ['acme', 2],
      ]);
      const cq = { ...query, groupBy: 'consumer' as const };
      const [ca, cb] = [await thread.consumerPage(cq, 1), await local.consumerPage(cq, 1)];
      expect(ca.total).toBe(2);
      expect(ca.consumers).toEqual(cb.consumers);
      expect((await thread.consumerPage(decodeCursor(ca.next!)!, 10)).consumers.map((c) => c.consumer)).toEqual(['acme']);
      const acme = await thread.consumerUsage('acme', to - DAY_MS, to, 'day');
      expect(acme).toEqual(await local.consumerUsage('acme', to - DAY_MS, to, 'day'));
      expect([acme.keys, acme.totals.admitted]).toEqual([1, 11]);
    } finally {
      await thread.close();
    }
  }, 60_000);

  it('runs at the lowest CPU priority on a connection of its own, starts with the first report and ends once idle', async () => {
    const before = threadNices().filter((n) => n === 19).length;
    const thread = new ReportThread({ ...data(), nice: 19 }, undefined, 400);
    try {
      expect(thread.running).toBe(false);
      expect((await clientAddresses(client, 'tollgate-reports')).size).toBe(0);
      await thread.summary(Date.now() - DAY_MS, Date.now(), 'hour');
      expect(thread.running).toBe(true);
      expect((await clientAddresses(client, 'tollgate-reports')).size).toBe(1);
      // One more thread of this process at nice 19: the report thread (this process's own threads stay at 0).
      expect(threadNices().filter((n) => n === 19).length).toBe(before + 1);
      // Idle for its idle time: the thread and its connection end; the next report starts a new one.
      await until(() => !thread.running, 'the idle thread to end');
      await until(async () => (await clientAddresses(client, 'tollgate-reports')).size === 0, 'its connection to close');
      await until(() => threadNices().filter((n) => n === 19).length === before, 'the thread to be gone');
      const again = await thread.summary(Date.now() - DAY_MS, Date.now(), 'day');
      expect(again.totals.admitted).toBeGreaterThan(0);
      expect(thread.running).toBe(true);
    } finally {
      await thread.close();
    }
    expect(thread.running).toBe(false);
  }, 60_000);

  it("a report that needs more than the thread's heap (resourceLimits) fails alone with report_out_of_memory; the next report runs", async () => {
    // Another keyspace: 6,000 keys whose records carry 16 metadata entries of 250 characters (4 KB each), so that a
    // report that keeps every row (sorted by a figure) holds far more than 32 MB; a sum over keys holds none of them.
    // (At 24 MB the sum itself ran out once on Node.js 24 with the machine's cores busy: the thread's own code and
    // buffers take part of the heap.)
    const big = 'big:';
    const ks = new Keyspace(big);
    for (let i = 0; i < 6000; i += 500) {
      const p = client.pipeline();
      for (let j = i; j < i + 500; j++) {
        const id = `key_b${String(j).padStart(5, '0')}`;
        const metadata = Object.fromEntries(Array.from({ length: 16 }, (_, m) => [`field${m}`, `${j}-${m}-`.padEnd(250, 'x')]));
        p.set(ks.keyRecord(id), JSON.stringify({ id, plan: 'pro', metadata, createdAt: new Date().toISOString(), status: 'active', hash: id.padEnd(64, '0') }));
        p.sadd(ks.keyIds(), id);
      }
      await p.exec();
    }
    const thread = new ReportThread({ ...data(), prefix: big, memoryMb: 32, readRest: 0, readsInFlight: 32 });
    try {
      const to = Date.now();
      // Small enough: the overview's sums read ids only.
      expect((await thread.summary(to - DAY_MS, to, 'day')).totals.admitted).toBe(0);
      const err = await thread.page({ fromMs: to - DAY_MS, toMs: to, sort: 'admitted', order: 'desc' }, 10).then(
        () => 'answered',
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ReportError);
      expect((err as ReportError).code).toBe('report_out_of_memory');
      expect((err as ReportError).message).toMatch(/^the usage report needed more than the report thread's 32 MB \(usage\.reportMemoryMb/);
      // This process goes on, and so does the next report (a new thread).
      expect(thread.running).toBe(false);
      expect((await thread.summary(to - DAY_MS, to, 'day')).totals.admitted).toBe(0);
      expect(thread.running).toBe(true);
    } finally {
      await thread.close();
      await client.eval("for _, k in ipairs(redis.call('KEYS', 'big:*')) do redis.call('DEL', k) end", 0);
    }
  }, 120_000);

  it('a report in flight when the gateway closes fails as incomplete (503), and nothing is asked of a closed thread', async () => {
    const thread = new ReportThread(data());
    const to = Date.now();
    const running = thread.page({ fromMs: to - 3 * DAY_MS, toMs: to, sort: 'id', order: 'asc' }, 10).then(
      () => 'answered',
      (err: unknown) => err,
    );
    await thread.close();
    const err = await running;
    expect(err).toBeInstanceOf(KeyAdminError);
    expect((err as KeyAdminError).code).toBe('incomplete');
    expect((err as KeyAdminError).message).toMatch(/could not be completed.*shutting down/);
    await expect(thread.summary(to - DAY_MS, to, 'day')).rejects.toMatchObject({ code: 'incomplete' });
  }, 120_000);

  it('a Redis that refuses the reads fails the report with the error, as incomplete', async () => {
    const thread = new ReportThread({ ...data(), redis: { url: redis.url, username: 'nobody', password: 'wrong' }, commandTimeoutMs: 1000 });
    try {
      const err = await thread.summary(Date.now() - DAY_MS, Date.now(), 'day').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KeyAdminError);
      expect((err as KeyAdminError).code).toBe('incomplete');
      expect((err as KeyAdminError).message).toMatch(/the usage summary could not be completed/);
    } finally {
      await thread.close();
    }
  }, 120_000);
});

describe('paced reads', () => {
  it('each read keeps its place for as long again once answered, and its answer is given at once', async () => {
    const { pacedReadLimit } = await import('../src/storage/read-limit.js');
    const reads = pacedReadLimit(1, 1);
    const events: Array<[string, number]> = [];
    const t0 = performance.now();
    const at = () => performance.now() - t0;
    const read = (i: number) =>
      reads(async () => {
        events.push([`start ${i}`, at()]);
        await new Promise((r) => setTimeout(r, 40));
        events.push([`end ${i}`, at()]);
        return i;
      }).then((v) => events.push([`answer ${v}`, at()]));
    await Promise.all([read(1), read(2), read(3)]);
    const when = new Map(events);
    expect(events.map(([e]) => e)).toEqual(['start 1', 'end 1', 'answer 1', 'start 2', 'end 2', 'answer 2', 'start 3', 'end 3', 'answer 3']);
    for (const i of [1, 2]) {
      const took = when.get(`end ${i}`)! - when.get(`start ${i}`)!;
      // A bound: the next read waits at least as long as this one took (timers may fire a millisecond early or late).
      expect(when.get(`start ${i + 1}`)! - when.get(`end ${i}`)!).toBeGreaterThanOrEqual(took - 2);
      // The answer is not held back by the rest.
      expect(when.get(`answer ${i}`)! - when.get(`end ${i}`)!).toBeLessThan(took);
    }
  });
});
