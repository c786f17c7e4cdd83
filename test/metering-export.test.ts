// `tollgate usage export` as users run it (node dist/cli.js, a private Redis, receivers on loopback implementing each
// billing system's documented contract): the ledger's closed hours for several keys, consumers and hours (a key moved
// between consumers inside an hour among them) reach each destination exactly, whatever happens on the way: a run
// killed once the receiver has its first batch, a receiver failing a batch, an acknowledgement lost (Lago then holds
// the events and says so with value_already_exist), one bad event in a batch. A second run sends nothing; a late
// change to the ledger goes out as one correction; --force sends again; Lago gets batches of at most 100, Stripe one
// event per request with its identifier, and hours older than Stripe's 35 days are skipped and reported.
import { createHash } from 'node:crypto';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { RedisConsumerStore } from '../src/consumers/redis-store.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import { keySubject } from '../src/limits/subject.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { hourOfDay } from '../src/usage/store.js';
import { DAY_MS, HOUR_MS, dayOf } from '../src/util/time.js';
import { assertBuilt, CliProcess, runCli, tempDir, type CliResult } from './helpers/cli.js';
import { LagoReceiver, OpenMeterReceiver, StripeReceiver, type ReceivedCloudEvent } from './helpers/metering-receivers.js';
import { TestRedis } from './helpers/redis-server.js';

const PREFIX = 'meter:';
const ks = new Keyspace(PREFIX);
let redis: TestRedis;
let client: Redis;
let conn: RedisConnection;
let dir: ReturnType<typeof tempDir>;
let configFile: string;

/** The hour this test file started in: every seeded hour is some whole hours before it. */
const BASE = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
const ago = (hours: number) => BASE - hours * HOUR_MS;
const hourIso = (ms: number) => new Date(ms).toISOString().slice(0, 13);

interface Counts {
  admitted: number;
  refused: number;
  upstreamFailed: number;
}
/** What the ledger holds, as the test wrote it: `<key>|<consumer>|<hour ms>` -> counts. */
let ledger: Map<string, Counts>;

async function count(keyId: string, consumer: string, hourMs: number, c: { a?: number; r?: number; b?: number; f?: number }): Promise<void> {
  const day = dayOf(hourMs);
  const h = hourOfDay(hourMs);
  const key = consumer ? ks.consumerUsageDay(consumer, keyId, day) : ks.usageDay(keySubject(keyId), day);
  for (const [letter, n] of Object.entries(c)) if (n) await client.hincrby(key, `${letter}${h}`, n);
  if (consumer) {
    await client.sadd(ks.keyConsumers(keyId), consumer);
    await client.sadd(ks.consumerUsageKeys(consumer), keyId);
  }
  const id = `${keyId}|${consumer}|${hourMs}`;
  const was = ledger.get(id) ?? { admitted: 0, refused: 0, upstreamFailed: 0 };
  ledger.set(id, { admitted: was.admitted + (c.a ?? 0), refused: was.refused + (c.r ?? 0) + (c.b ?? 0), upstreamFailed: was.upstreamFailed + (c.f ?? 0) });
}

async function key(id: string, consumer?: string, metadata?: Record<string, string>): Promise<void> {
  await new RedisKeyStore(conn, ks).create({
    id,
    plan: 'free',
    createdAt: new Date().toISOString(),
    status: 'active',
    hash: createHash('sha256').update(id).digest('hex'),
    ...(consumer ? { consumer } : {}),
    ...(metadata ? { metadata } : {}),
  });
}

async function consumer(id: string, metadata: Record<string, string>): Promise<void> {
  await new RedisConsumerStore(conn, ks).create({ id, name: id, plan: 'free', status: 'active', metadata, createdAt: new Date().toISOString() });
}

/** Several keys, consumers and hours; a key moved into a consumer in the middle of an hour; an hour still open. */
async function seed(): Promise<void> {
  ledger = new Map();
  await consumer('acme', { lagoSubscriptionId: 'sub_acme', stripeCustomerId: 'cus_acme' });
  await consumer('globex', { lagoSubscriptionId: 'sub_globex', stripeCustomerId: 'cus_globex' });
  await key('k_solo', undefined, { lagoSubscriptionId: 'sub_solo', stripeCustomerId: 'cus_solo' });
  await key('k_a1', 'acme');
  await key('k_a2', 'acme');
  await key('k_g1', 'globex');
  await key('k_moved', 'acme');
  for (let h = 2; h <= 30; h += 3) {
    await count('k_solo', '', ago(h), { a: h, r: h % 4 });
    await count('k_a1', 'acme', ago(h), { a: 10 + h, b: 1, f: h % 2 });
    await count('k_g1', 'globex', ago(h + 1), { a: 7, r: 2 });
  }
  await count('k_a2', 'acme', ago(5), { a: 1 });
  await count('k_a2', 'acme', ago(6), { r: 3 });
  // Moved into acme at half past: both parts of the hour, each billed to whom it was counted under.
  await count('k_moved', '', ago(4), { a: 3 });
  await count('k_moved', 'acme', ago(4), { a: 4, r: 1 });
  await count('k_moved', 'acme', ago(3), { a: 2 });
  // The hour now running is not closed: never exported.
  await client.hincrby(ks.usageDay(keySubject('k_solo'), dayOf(BASE)), `a${hourOfDay(BASE)}`, 99);
}

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  client = redis.client();
  conn = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
  dir = tempDir();
  configFile = dir.write('gateway.yaml', {
    upstream: { url: 'http://127.0.0.1:9' },
    redis: { url: redis.url, prefix: PREFIX },
    plans: { free: { perMinute: 60, perDay: 1000 } },
  });
});

afterAll(async () => {
  await CliProcess.killAll();
  client?.disconnect();
  await conn?.close();
  await redis?.stop();
  dir?.remove();
});

const exportArgs = (...args: string[]) => ['usage', 'export', ...args, '--config', configFile, '--json', '--quiet'];
function exportRun(...args: string[]): Promise<CliResult> {
  return runCli(exportArgs(...args));
}
async function exportOk(...args: string[]): Promise<Record<string, unknown> & { events: number; corrections: number; batches: number; unchanged: number }> {
  const r = await exportRun(...args);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as never;
}

/** A receiver's events added up per key, consumer and hour: an hour's counts plus each correction's delta. */
function fromCloudEvents(events: Iterable<ReceivedCloudEvent>, shape: 'cloudevents' | 'openmeter'): Map<string, Counts> {
  const out = new Map<string, Counts>();
  for (const e of events) {
    const d = e.data as unknown as { key: string; consumer: string | null; start: string; delta?: Counts } & Counts;
    const amounts = shape === 'cloudevents' && e.type === 'usage.hour.correction' ? d.delta! : d;
    const id = `${d.key}|${d.consumer ?? ''}|${Date.parse(d.start)}`;
    const was = out.get(id) ?? { admitted: 0, refused: 0, upstreamFailed: 0 };
    out.set(id, {
      admitted: was.admitted + amounts.admitted,
      refused: was.refused + amounts.refused,
      upstreamFailed: was.upstreamFailed + amounts.upstreamFailed,
    });
  }
  return out;
}

const sorted = (m: Map<string, Counts>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));

describe('usage export to a CloudEvents receiver (OpenMeter)', () => {
  let om: OpenMeterReceiver;
  beforeAll(async () => {
    await redis.flush();
    await seed();
    om = await new OpenMeterReceiver().start();
  });
  afterAll(() => om.close());

  it('sends every closed key-hour once, ids and subjects as designed, and a second run sends nothing', async () => {
    const r = await exportOk('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '10');
    expect(sorted(fromCloudEvents(om.events.values(), 'openmeter'))).toEqual(sorted(ledger));
    expect(r.events).toBe(ledger.size);
    expect(r.batches).toBe(Math.ceil(ledger.size / 10));
    expect(om.requests.every((q) => q.headers['content-type'] === 'application/cloudevents-batch+json')).toBe(true);
    const ids = [...om.events.values()].map((e) => e.id);
    expect(ids).toContain(`k_moved:${hourIso(ago(4))}`);
    expect(ids).toContain(`k_moved:${hourIso(ago(4))}:consumer:acme`);
    expect(ids).toContain(`k_a1:${hourIso(ago(2))}`);
    expect(ids.every((id) => !id.includes('.'))).toBe(true);
    const a1 = [...om.events.values()].find((e) => e.id === `k_a1:${hourIso(ago(2))}`)!;
    expect(a1).toMatchObject({ type: 'usage.hour', source: 'urn:tollgate:meter', subject: 'acme', time: new Date(ago(2)).toISOString() });
    expect(a1.data).toEqual({
      key: 'k_a1',
      consumer: 'acme',
      start: new Date(ago(2)).toISOString(),
      end: new Date(ago(1)).toISOString(),
      admitted: 12,
      refused: 1,
      upstreamFailed: 0,
    });
    expect([...om.events.values()].find((e) => e.id === `k_solo:${hourIso(ago(2))}`)!.subject).toBe('key:k_solo');
    // The open hour is not sent.
    expect(ids).not.toContain(`k_solo:${hourIso(BASE)}`);

    const before = om.requests.length;
    const again = await exportOk('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '10');
    expect(again).toMatchObject({ events: 0, corrections: 0, batches: 0, unchanged: ledger.size });
    expect(om.requests.length).toBe(before);
  });

  it('a late change to an exported hour goes out as one correction, with the new totals and the delta', async () => {
    await count('k_a1', 'acme', ago(5), { a: 5, r: 1 });
    const r = await exportOk('--to', `${om.url}/api/v1/events`, '--format', 'openmeter');
    expect(r).toMatchObject({ events: 0, corrections: 1, batches: 1 });
    const c = om.events.get(`urn:tollgate:meter\u0000k_a1:${hourIso(ago(5))}:correction:1`)!;
    expect(c.type).toBe('usage.hour');
    expect(c.data).toMatchObject({ admitted: 5, refused: 1, upstreamFailed: 0, correction: 1, totals: { admitted: 20, refused: 2, upstreamFailed: 1 } });
    expect(sorted(fromCloudEvents(om.events.values(), 'openmeter'))).toEqual(sorted(ledger));
    expect((await exportOk('--to', `${om.url}/api/v1/events`, '--format', 'openmeter')).corrections).toBe(0);
  });

  it('the cloudevents format sends corrections as usage.hour.correction, and --force sends every hour again', async () => {
    const to = `${om.url}/api/v1/events?mapping=plain`;
    const first = await exportOk('--to', to);
    expect(first.events).toBe(ledger.size);
    await count('k_g1', 'globex', ago(3), { a: 1 });
    const r = await exportOk('--to', to);
    expect(r.corrections).toBe(1);
    const c = [...om.requests].pop()!;
    const [event] = JSON.parse(c.body) as ReceivedCloudEvent[];
    expect(event).toMatchObject({ id: `k_g1:${hourIso(ago(3))}:correction:1`, type: 'usage.hour.correction', subject: 'consumer:globex' });
    expect(event!.data).toMatchObject({ admitted: 8, refused: 2, delta: { admitted: 1, refused: 0, upstreamFailed: 0 }, corrects: `k_g1:${hourIso(ago(3))}` });

    const before = om.requests.length;
    const forced = await exportOk('--to', to, '--force');
    expect(forced.events).toBe(ledger.size);
    expect(om.requests.length).toBeGreaterThan(before);
    // After --force the checkpoint holds the same counts: nothing more to send.
    expect((await exportOk('--to', to)).batches).toBe(0);
  });
});

describe('a run that stops part way', () => {
  beforeAll(async () => {
    await redis.flush();
    await seed();
  });

  it('killed once the receiver has its first batch: the next run sends the rest, de-duplicated by id it equals the ledger, and a third sends nothing', async () => {
    const om = await new OpenMeterReceiver().start();
    try {
      const args = exportArgs('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '5');
      const proc = CliProcess.start(args);
      om.plan.beforeAnswer = async (n) => {
        if (n !== 1) return;
        proc.signal('SIGKILL');
        await proc.waitForExit();
      };
      expect((await proc.waitForExit()).signal).toBe('SIGKILL');
      expect(om.batches).toHaveLength(1);
      // The killed run's lock lives out its short TTL (renewed while a run is alive); the test ends it rather than wait.
      const lock = (await client.keys(`${PREFIX}metering:*:lock`))[0]!;
      expect(await client.pttl(lock)).toBeLessThanOrEqual(30_000);
      const busy = await exportRun('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '5');
      expect(busy.code).toBe(1);
      expect(busy.stderr).toMatch(/error: another export to .* is running \(or one that stopped less than 30 s ago\)/);
      await client.del(lock);
      om.plan = {};
      const r = await exportOk('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '5');
      expect(r.events).toBe(ledger.size);
      expect(sorted(fromCloudEvents(om.events.values(), 'openmeter'))).toEqual(sorted(ledger));
      // The first batch went twice (its acknowledgement never reached the checkpoint); its ids are the same.
      expect(om.batches.flat().length).toBe(ledger.size + 5);
      expect((await exportOk('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '5')).batches).toBe(0);
    } finally {
      await om.close();
    }
  });

  it('a receiver failing batch 2: exit 1 naming it, batch 1 kept; the next run sends the rest', async () => {
    const om = await new OpenMeterReceiver().start();
    try {
      om.plan.failWith = (n) => (n === 2 ? 503 : undefined);
      const failed = await exportRun('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '5');
      expect(failed.code).toBe(1);
      expect(failed.stderr).toMatch(/error: the export stopped: .* answered 503/);
      expect(JSON.parse(failed.stdout)).toMatchObject({ events: 5, batches: 2, checkpoint: { recorded: 5, mark: null } });
      om.plan = {};
      const r = await exportOk('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '5');
      expect(r.events).toBe(ledger.size - 5);
      expect(sorted(fromCloudEvents(om.events.values(), 'openmeter'))).toEqual(sorted(ledger));
      expect(om.batches.flat().length).toBe(ledger.size);
      expect((r.checkpoint as { mark: string }).mark).toBe(new Date(Math.floor((Date.now() - 10 * 60_000) / HOUR_MS) * HOUR_MS).toISOString());
    } finally {
      await om.close();
    }
  });

  it('one bad event in a batch is refused alone (the batch split until it is), every other event is acknowledged', async () => {
    const om = await new OpenMeterReceiver().start();
    try {
      const bad = `k_solo:${hourIso(ago(8))}`;
      om.invalidIds.add(bad);
      const r = await exportRun('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--batch-size', '8', '--id', 'split-test');
      expect(r.code).toBe(1);
      const report = JSON.parse(r.stdout) as { events: number; refused: Array<{ id: string; reason: string }> };
      expect(report.refused).toEqual([{ id: bad, reason: expect.stringMatching(/^HTTP 400 .*is invalid/) }]);
      expect(report.events).toBe(ledger.size - 1);
      expect(r.stderr).toContain(`warning: refused ${bad}: HTTP 400`);
      // Once the destination takes it, the next run sends that one alone.
      om.invalidIds.clear();
      const next = await exportOk('--to', `${om.url}/api/v1/events`, '--format', 'openmeter', '--id', 'split-test');
      expect(next).toMatchObject({ events: 1, batches: 1 });
      expect(sorted(fromCloudEvents(om.events.values(), 'openmeter'))).toEqual(sorted(ledger));
    } finally {
      await om.close();
    }
  });
});

describe('usage export to a file', () => {
  beforeAll(async () => {
    await redis.flush();
    await seed();
  });

  it('appends JSON lines of CloudEvents, fsync per batch; a second run appends nothing; a correction appends one line', async () => {
    const file = join(dir.dir, 'hours.jsonl');
    const r = await exportOk('--to', file);
    expect(r.events).toBe(ledger.size);
    const lines = () => readFileSync(file, 'utf8').trimEnd().split('\n');
    const events = lines().map((l) => JSON.parse(l) as ReceivedCloudEvent);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    expect(sorted(fromCloudEvents(events, 'cloudevents'))).toEqual(sorted(ledger));
    expect((await exportOk('--to', file)).events).toBe(0);
    expect(lines()).toHaveLength(ledger.size);
    await count('k_a2', 'acme', ago(5), { f: 1 });
    expect((await exportOk('--to', file)).corrections).toBe(1);
    expect(lines()).toHaveLength(ledger.size + 1);
    expect(
      sorted(
        fromCloudEvents(
          lines().map((l) => JSON.parse(l) as ReceivedCloudEvent),
          'cloudevents',
        ),
      ),
    ).toEqual(sorted(ledger));
    expect(existsSync(file)).toBe(true);
  });
});

describe('usage export to Lago', () => {
  const subscriptions = new Set(['sub_acme', 'sub_globex', 'sub_solo']);
  beforeAll(async () => {
    await redis.flush();
    await seed();
    // More hours than one batch takes: three keys of acme over 40 hours.
    for (const id of ['k_bulk1', 'k_bulk2', 'k_bulk3']) {
      await key(id, 'acme');
      for (let h = 2; h < 42; h++) await count(id, 'acme', ago(h), { a: h });
    }
    // A key with no subscription to bill: skipped and reported, never sent.
    await key('k_nosub');
    await count('k_nosub', '', ago(3), { a: 1 });
  });

  /** What Lago holds, per subscription and hour: the admitted requests (a correction's delta added). */
  function lagoTotals(lago: LagoReceiver): Map<string, number> {
    const out = new Map<string, number>();
    for (const e of lago.events.values()) {
      const id = `${e.external_subscription_id}|${e.properties.key as string}|${e.timestamp * 1000}`;
      out.set(id, (out.get(id) ?? 0) + (e.properties.admitted as number));
    }
    return out;
  }
  function ledgerTotals(): Map<string, number> {
    const sub = (keyId: string, consumerId: string) => (consumerId ? `sub_${consumerId}` : keyId === 'k_solo' ? 'sub_solo' : undefined);
    const out = new Map<string, number>();
    for (const [id, c] of ledger) {
      const [keyId, consumerId, hour] = id.split('|') as [string, string, string];
      const s = sub(keyId, consumerId);
      if (!s) continue;
      const k = `${s}|${keyId}|${hour}`;
      out.set(k, (out.get(k) ?? 0) + c.admitted);
    }
    return out;
  }

  it('a wrong API key (401) stops the run after one request: not a refusal of each event in turn', async () => {
    const lago = await new LagoReceiver('lago_key', subscriptions).start();
    try {
      const r = await exportRun('--to', `${lago.url}/api/v1/events/batch`, '--format', 'lago', '--header', 'Authorization: Bearer wrong', '--id', 'lago-401');
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/error: the export stopped: .* answered 401/);
      expect(lago.requests).toHaveLength(1);
      expect(JSON.parse(r.stdout)).toMatchObject({ events: 0, refused: [], checkpoint: { recorded: 0, mark: null } });
    } finally {
      await lago.close();
    }
  });

  it('batches of at most 100 with the bearer key; a lost acknowledgement is found again as value_already_exist; the totals equal the ledger', async () => {
    const lago = await new LagoReceiver('lago_key', subscriptions).start();
    try {
      const args = ['--to', `${lago.url}/api/v1/events/batch`, '--format', 'lago', '--header', 'Authorization: Bearer lago_key', '--lago-code', 'api_requests'];
      // Lago ingests the second batch, and the answer is lost.
      lago.plan.loseAckWith = (n) => (n === 2 ? 502 : undefined);
      const first = await exportRun(...args);
      expect(first.code).toBe(1);
      expect(JSON.parse(first.stdout)).toMatchObject({ events: 100, batches: 2 });
      lago.plan = {};
      const r = await exportRun(...args);
      expect(r.code, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout) as { events: number; batches: number; skipped: Array<{ id: string; reason: string }> };
      // k_moved's part of its hour before it joined acme has no subscription either.
      expect(report.skipped).toHaveLength(2);
      expect(report.skipped).toEqual(
        expect.arrayContaining([
          { id: `k_nosub:${hourIso(ago(3))}`, reason: 'no lagoSubscriptionId in the metadata of key k_nosub' },
          { id: `k_moved:${hourIso(ago(4))}`, reason: 'no lagoSubscriptionId in the metadata of key k_moved' },
        ]),
      );
      expect(r.stderr).toContain(`warning: skipped k_nosub:${hourIso(ago(3))}: no lagoSubscriptionId`);
      // The resent batch was refused whole (value_already_exist for each of its events), which counts as acknowledged.
      expect(lago.requests.some((q) => q.status === 422 && q.body.length > 0)).toBe(true);
      expect(Math.max(...lago.batchSizes)).toBeLessThanOrEqual(100);
      expect(lago.batchSizes.reduce((a, b) => a + b, 0)).toBe(ledger.size - 2);
      expect(sorted(new Map([...lagoTotals(lago)].map(([k, v]) => [k, { admitted: v, refused: 0, upstreamFailed: 0 }])))).toEqual(
        sorted(new Map([...ledgerTotals()].map(([k, v]) => [k, { admitted: v, refused: 0, upstreamFailed: 0 }]))),
      );
      const one = [...lago.events.values()].find((e) => e.transaction_id === `k_a1:${hourIso(ago(2))}`)!;
      expect(one).toEqual({
        transaction_id: `k_a1:${hourIso(ago(2))}`,
        external_subscription_id: 'sub_acme',
        code: 'api_requests',
        timestamp: ago(2) / 1000,
        properties: { admitted: 12, refused: 1, upstreamFailed: 0, key: 'k_a1' },
      });
      const again = await exportRun(...args);
      expect(JSON.parse(again.stdout)).toMatchObject({ events: 0, batches: 0 });
    } finally {
      await lago.close();
    }
  });
});

describe('usage export to Stripe', () => {
  beforeAll(async () => {
    await redis.flush();
    await seed();
    // 35 days and 2 hours ago: still in the ledger, past what Stripe takes.
    await count('k_solo', '', ago(35 * 24 + 2), { a: 4 });
    await key('k_nocus');
    await count('k_nocus', '', ago(3), { a: 1 });
  });

  it('one meter event per request with its identifier; too-old hours and keys with no customer skipped and reported; the totals equal the ledger', async () => {
    const stripe = await new StripeReceiver('sk_test_123').start();
    try {
      const args = [
        '--to',
        `${stripe.url}/v1/billing/meter_events`,
        '--format',
        'stripe',
        '--header',
        'Authorization: Bearer sk_test_123',
        '--stripe-event-name',
        'api_requests',
      ];
      const r = await exportRun(...args);
      expect(r.code, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout) as { events: number; batches: number; skipped: Array<{ id: string; reason: string }> };
      const old = `k_solo:${hourIso(ago(35 * 24 + 2))}`;
      expect(report.skipped).toEqual(
        expect.arrayContaining([
          { id: old, reason: 'older than the 35 days Stripe takes meter events for' },
          { id: `k_nocus:${hourIso(ago(3))}`, reason: 'no stripeCustomerId in the metadata of key k_nocus' },
          { id: `k_moved:${hourIso(ago(4))}`, reason: 'no stripeCustomerId in the metadata of key k_moved' },
        ]),
      );
      expect(report.skipped).toHaveLength(3);
      expect(r.stderr).toContain(`warning: skipped ${old}: older than the 35 days`);
      const sendable = ledger.size - 3;
      expect(report.events).toBe(sendable);
      expect(report.batches).toBe(sendable);
      expect(stripe.perRequest.every((n) => n === 1)).toBe(true);
      expect(stripe.requests.every((q) => q.status === 200)).toBe(true);
      const e = stripe.events.get(`k_a1:${hourIso(ago(2))}`)!;
      expect(e).toMatchObject({ event_name: 'api_requests', payload: { stripe_customer_id: 'cus_acme', value: '12' }, timestamp: ago(2) / 1000 });
      // Per customer and hour, Stripe's sums equal the ledger's admitted requests.
      const customer = (keyId: string, c: string) => (c ? `cus_${c}` : keyId === 'k_solo' ? 'cus_solo' : undefined);
      const want = new Map<string, number>();
      for (const [id, c] of ledger) {
        const [keyId, c2, hour] = id.split('|') as [string, string, string];
        const cus = customer(keyId, c2);
        if (!cus || Number(hour) < Date.now() - 35 * DAY_MS) continue;
        want.set(`${cus}|${hour}`, (want.get(`${cus}|${hour}`) ?? 0) + c.admitted);
      }
      const got = new Map<string, number>();
      for (const ev of stripe.events.values())
        got.set(
          `${ev.payload.stripe_customer_id}|${ev.timestamp * 1000}`,
          (got.get(`${ev.payload.stripe_customer_id}|${ev.timestamp * 1000}`) ?? 0) + Number(ev.payload.value),
        );
      expect([...got].sort()).toEqual([...want].sort());

      // A late change: one more request, with its own identifier.
      await count('k_g1', 'globex', ago(3), { a: 2 });
      const next = await exportRun(...args);
      expect(JSON.parse(next.stdout)).toMatchObject({ events: 0, corrections: 1, batches: 1 });
      expect(stripe.events.get(`k_g1:${hourIso(ago(3))}:correction:1`)?.payload.value).toBe('2');
    } finally {
      await stripe.close();
    }
  });
});

describe("usage export without --to: the config's events.metering", () => {
  beforeAll(async () => {
    await redis.flush();
    await seed();
  });

  it("exports to the section's destination under its checkpoint (what the events thread runs), flags overriding fields", async () => {
    const file = join(dir.dir, 'configured.jsonl');
    const withSection = dir.write('with-metering.yaml', {
      upstream: { url: 'http://127.0.0.1:9' },
      redis: { url: redis.url, prefix: PREFIX },
      plans: { free: { perMinute: 60, perDay: 1000 } },
      events: { metering: { to: file, id: 'billing-file' } },
    });
    const r = await runCli(['usage', 'export', '--config', withSection, '--json', '--quiet']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ destination: 'billing-file', to: file, format: 'cloudevents', events: ledger.size });
    expect(await client.get(ks.meteringMark('billing-file'))).not.toBeNull();
    const again = await runCli(['usage', 'export', '--config', withSection, '--json', '--quiet', '--id', 'another-checkpoint']);
    expect(JSON.parse(again.stdout)).toMatchObject({ destination: 'another-checkpoint', events: ledger.size });
  });
});

describe('usage export: usage errors exit 2 with one line, before Redis is asked anything', () => {
  it.each([
    [['--to', 'ftp://example.com/x'], /--to must be an http\(s\) URL or a file path/],
    [['--to', 'x.jsonl', '--format', 'lago'], /--format lago sends to a URL/],
    [['--to', 'x.jsonl', '--format', 'csv'], /argument 'csv' is invalid/],
    [['--to', 'x.jsonl', '--since', 'last week'], /--since must be an ISO-8601 date-time or a duration/],
    [['--to', 'x.jsonl', '--header', 'no colon'], /--header must be "Name: value"/],
    [['--to', 'x.jsonl', '--batch-size', '0'], /--batch-size must be a positive whole number/],
    [['--format', 'openmeter'], /--to is required: the config has no events.metering to export to/],
  ])('%j', async (args, message) => {
    const r = await runCli(['usage', 'export', ...args, '--config', configFile, '--redis', 'redis://127.0.0.1:1']);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });
});
