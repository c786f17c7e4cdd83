// A consumer's changes on the real request path: two gateways composed as `tollgate serve` composes them, on one
// private redis-server (the consumers' store and its change feed) and a real upstream. A consumer is changed through
// its store, as the admin API changes it (write the record, publish its id), and every key of it must answer the new
// record on both instances within a second of the write: suspended (403 consumer_suspended, no quota taken, the
// upstream not called), resumed, given another plan (X-Consumer-Plan upstream), deleted (401). While Redis is down, a
// consumer an instance has cached keeps working and one it never read is answered 503, as keys are. The upstream
// gets the consumer's metadata fields consumers.forwardMetadata lists, each value only as it is, and never a client's
// own X-Consumer-Metadata-* header.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import type { ConsumerRecord } from '../src/consumers/types.js';
import { Metrics } from '../src/observability/metrics.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { useStack } from './helpers/stack.js';
import type { SeenRequest } from './helpers/upstream.js';

const TOKEN = generateAdminToken();
const PREFIX = 'cg:';
const stack = useStack({ redis: true, client: true });

interface Gateway {
  running: RunningGateway;
  composed: ComposedGateway;
}
const gateways: Gateway[] = [];

/** consumers.forwardMetadata of this file's gateways (a reload's test changes it on one of them). */
const FORWARDED = ['billing_id', 'Tier', 'note', 'region', 'absent', 'constructor'];

function rawConfig(forwardMetadata: string[] = FORWARDED): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0 },
    // failMode open: while Redis is down the windows fall back to memory, so what is tested there is identity alone.
    redis: { url: stack.redis.url, prefix: PREFIX, commandTimeoutMs: 1000, failMode: 'open' },
    plans: { free: { perMinute: 1000, perDay: 100_000 }, business: { perMinute: 5000, perDay: 500_000 } },
    anonymous: { perMinute: 1000 },
    upstream: { url: stack.up.url },
    admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
    consumers: { forwardMetadata },
    // A reload (below) applies log.level to the shared logger: silent, as the tests' logger is.
    log: { level: 'silent' },
  };
}

async function start(): Promise<Gateway> {
  const composed = await composeGateway({
    config: testConfig(rawConfig()),
    logger: silentLogger,
    metrics: new Metrics(),
    env: {},
    upstreamCheckTimeoutMs: 500,
  });
  const running = await startGateway({ gateway: composed, logger: silentLogger });
  const g = { running, composed };
  gateways.push(g);
  return g;
}

let a: Gateway;
let b: Gateway;

beforeAll(async () => {
  a = await start();
  b = await start();
  // Both instances listen to the consumers' change feed before anything is changed, as a gateway does once started.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const [, listeners] = (await stack.client.pubsub('NUMSUB', `${PREFIX}consumers:events`)) as [string, number];
    if (Number(listeners) >= 2) break;
    if (Date.now() > deadline) throw new Error('the gateways did not subscribe to the consumers change feed');
    await new Promise((r) => setTimeout(r, 20));
  }
});

afterAll(async () => {
  for (const g of gateways) await g.running.shutdown().catch(() => {});
});

/** The store every instance reads: a change is written there and announced on the change feed, as the admin API does. */
const store = () => a.composed.consumerStore;

async function createConsumer(id: string, fields: Partial<ConsumerRecord> = {}): Promise<ConsumerRecord> {
  const c: ConsumerRecord = { id, name: id, plan: 'free', status: 'active', createdAt: new Date().toISOString(), ...fields };
  await store().create(c);
  await store().publishChange(id);
  return c;
}

/** Writes the consumer's record and announces it; returns the moment (performance.now) the write was made. */
async function changeConsumer(c: ConsumerRecord): Promise<number> {
  await store().update(c);
  const at = performance.now();
  await store().publishChange(c.id);
  return at;
}

/**
 * Issues a key through the admin API and attaches it to the consumer as attaching writes it (record, change feed);
 * undefined: a key without a consumer.
 */
async function keyOf(consumer: string | undefined): Promise<{ id: string; key: string }> {
  const res = await fetch(`${a.running.adminUrl}/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ plan: 'free' }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await res.json()) as { id: string; key: string };
  expect(res.status, JSON.stringify(body)).toBe(201);
  if (consumer === undefined) return body;
  const keys = a.composed.keys.store;
  await keys.update({ ...(await keys.get(body.id))!, consumer });
  await keys.publishChange(body.id);
  return body;
}

interface Answer {
  status: number;
  code: string | undefined;
  /** The X-Consumer-Plan the upstream received (its echo), on a 200. */
  plan: string | undefined;
}

async function call(g: Gateway, key: string): Promise<Answer> {
  const res = await fetch(`http://127.0.0.1:${g.running.port}/v1/things`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(10_000) });
  const body = (await res.json()) as { code?: string; headers?: Record<string, string> };
  return { status: res.status, code: body.code, plan: body.headers?.['x-consumer-plan'] };
}

/**
 * Asks every instance with every key, over and over, until `done` holds for all of them or 3 s have passed; answers
 * how long after `since` each pair first satisfied it (Infinity: never).
 */
async function until(keys: readonly string[], since: number, done: (a: Answer) => boolean): Promise<number[]> {
  const pairs = [a, b].flatMap((g) => keys.map((key) => ({ g, key, at: Infinity })));
  while (performance.now() - since < 3000 && pairs.some((p) => p.at === Infinity)) {
    await Promise.all(
      pairs
        .filter((p) => p.at === Infinity)
        .map(async (p) => {
          if (done(await call(p.g, p.key))) p.at = performance.now() - since;
        }),
    );
  }
  return pairs.map((p) => p.at);
}

/** Every rate-limit window and ban in Redis, byte for byte (DUMP), by name. */
async function windows(): Promise<Map<string, string>> {
  const names = [
    ...(await stack.client.keys(`${PREFIX}rl:*`)),
    ...(await stack.client.keys(`${PREFIX}ban*`)),
    ...(await stack.client.keys(`${PREFIX}strikes*`)),
  ];
  const out = new Map<string, string>();
  for (const n of names.sort()) out.set(n, ((await stack.client.dumpBuffer(n)) ?? Buffer.alloc(0)).toString('base64'));
  return out;
}

const delays: Record<string, number> = {};

describe("a consumer's change reaches every key on every instance within a second", () => {
  let acme: ConsumerRecord;
  let keys: string[];

  beforeAll(async () => {
    acme = await createConsumer('acme');
    keys = [(await keyOf('acme')).key, (await keyOf('acme')).key];
    // Every instance has read the keys and their consumer: what is measured below is a change to a cached consumer.
    for (const g of [a, b]) for (const key of keys) expect((await call(g, key)).status).toBe(200);
  });

  it('suspended: 403 consumer_suspended for every key on both instances, before any quota is taken or the upstream is called', async () => {
    const at = await changeConsumer((acme = { ...acme, status: 'suspended', suspendedAt: new Date().toISOString() }));
    const took = await until(keys, at, (r) => r.code === 'consumer_suspended');
    delays.suspend = Math.max(...took);
    expect(
      took.every((ms) => ms < 1000),
      `ms from the write to the first 403 per instance and key: ${took.map(Math.round).join(', ')}`,
    ).toBe(true);

    const before = await windows();
    const upstreamCalls = stack.up.seen.length;
    for (const g of [a, b])
      for (const key of keys) {
        const r = await call(g, key);
        expect([r.status, r.code]).toEqual([403, 'consumer_suspended']);
      }
    expect(stack.up.seen.length).toBe(upstreamCalls);
    expect(await windows()).toEqual(before);
    // The quota endpoint still answers the key its own quota.
    const quota = await fetch(`http://127.0.0.1:${a.running.port}/ratelimit`, {
      headers: { authorization: `Bearer ${keys[0]}` },
      signal: AbortSignal.timeout(10_000),
    });
    expect(quota.status).toBe(200);
  });

  it('resumed: served again on both instances', async () => {
    const at = await changeConsumer((acme = { ...acme, status: 'active' }));
    const took = await until(keys, at, (r) => r.status === 200);
    delays.resume = Math.max(...took);
    expect(
      took.every((ms) => ms < 1000),
      took.map(Math.round).join(', '),
    ).toBe(true);
  });

  it("another plan: the upstream's X-Consumer-Plan names it on both instances", async () => {
    expect((await call(a, keys[0]!)).plan).toBe('free');
    const at = await changeConsumer((acme = { ...acme, plan: 'business' }));
    const took = await until(keys, at, (r) => r.status === 200 && r.plan === 'business');
    delays.plan = Math.max(...took);
    expect(
      took.every((ms) => ms < 1000),
      took.map(Math.round).join(', '),
    ).toBe(true);
  });

  it('deleted: every key of it is refused 401 invalid_api_key on both instances', async () => {
    await store().delete(acme.id);
    const at = performance.now();
    await store().publishChange(acme.id);
    const took = await until(keys, at, (r) => r.status === 401 && r.code === 'invalid_api_key');
    delays.delete = Math.max(...took);
    expect(
      took.every((ms) => ms < 1000),
      took.map(Math.round).join(', '),
    ).toBe(true);
  });

  afterAll(() => {
    console.log(
      `consumer change to every key on both instances (ms, slowest pair): ${JSON.stringify(Object.fromEntries(Object.entries(delays).map(([k, v]) => [k, Math.round(v)])))}`,
    );
  });
});

/** The headers the upstream received for one request of the key (found by its X-Request-Id). */
async function upstreamGot(g: Gateway, key: string, headers: Record<string, string> = {}): Promise<SeenRequest> {
  const id = randomUUID();
  const res = await fetch(`http://127.0.0.1:${g.running.port}/v1/things`, {
    headers: { authorization: `Bearer ${key}`, 'x-request-id': id, ...headers },
    signal: AbortSignal.timeout(10_000),
  });
  expect(res.status, await res.text()).toBe(200);
  const seen = stack.up.seen.find((s) => s.headers['x-request-id'] === id);
  expect(seen).toBeDefined();
  return seen!;
}

/** Every X-Consumer-Metadata-* header line as the upstream read it (any spelling), [lower-case name, value], sorted. */
function metadataLines(seen: SeenRequest): string[][] {
  const lines: string[][] = [];
  for (let i = 0; i < seen.rawHeaders.length; i += 2) {
    const name = seen.rawHeaders[i]!.toLowerCase();
    if (name.replaceAll('_', '-').startsWith('x-consumer-metadata-')) lines.push([name, seen.rawHeaders[i + 1]!]);
  }
  return lines.sort();
}

/** What a client sends in the hope the upstream takes it for the gateway's. */
const FORGED = {
  'x-consumer-metadata-billing-id': 'forged',
  'x-consumer-metadata-secret': 'forged',
  'x-consumer-metadata-absent': 'forged',
  x_consumer_metadata_tier: 'forged',
};

describe("the consumer's metadata upstream (consumers.forwardMetadata)", () => {
  let key: string;

  beforeAll(async () => {
    await createConsumer('meta', {
      metadata: { billing_id: 'cus_123', Tier: 'gold plus', note: 'line\r\nX-Injected: 1', region: 'Zürich', secret: 'hidden' },
    });
    key = (await keyOf('meta')).key;
  });

  it("sends the listed fields as X-Consumer-Metadata-<field>, a value only as it is, and never a client's own", async () => {
    for (const g of [a, b]) {
      const seen = await upstreamGot(g, key, FORGED);
      // billing_id and Tier as their headers; note (CR LF) and region (not ASCII) left out, not altered; absent and
      // constructor are no field of the record; secret is not listed.
      expect(metadataLines(seen)).toEqual([
        ['x-consumer-metadata-billing-id', 'cus_123'],
        ['x-consumer-metadata-tier', 'gold plus'],
      ]);
      expect(seen.headers['x-injected']).toBeUndefined();
      expect(JSON.stringify(seen.rawHeaders)).not.toMatch(/forged|hidden|Injected|rich/);
      expect([seen.headers['x-consumer-id'], seen.headers['x-consumer-plan']]).toEqual(['meta', 'free']);
    }
  });

  it("a key without a consumer: no metadata header at all, the client's own dropped as well", async () => {
    const alone = await keyOf(undefined);
    expect(metadataLines(await upstreamGot(a, alone.key, FORGED))).toEqual([]);
  });

  it("a reload's list applies to the next request; an empty list sends nothing", async () => {
    try {
      a.composed.runtime.apply(testConfig(rawConfig(['secret'])));
      expect(metadataLines(await upstreamGot(a, key, FORGED))).toEqual([['x-consumer-metadata-secret', 'hidden']]);
      a.composed.runtime.apply(testConfig(rawConfig([])));
      expect(metadataLines(await upstreamGot(a, key, FORGED))).toEqual([]);
    } finally {
      a.composed.runtime.apply(testConfig(rawConfig()));
    }
    expect(metadataLines(await upstreamGot(a, key))).toHaveLength(2);
  });

  it("a change of the consumer's metadata is sent from the next request on every instance", async () => {
    const c = (await store().get('meta'))!;
    await changeConsumer({ ...c, metadata: { ...c.metadata, billing_id: 'cus_456' } });
    for (const g of [a, b]) {
      const deadline = performance.now() + 1000;
      let value: string | undefined;
      while (performance.now() < deadline && (value = (await upstreamGot(g, key)).headers['x-consumer-metadata-billing-id'] as string) !== 'cus_456');
      expect(value).toBe('cus_456');
    }
  });
});

describe('while Redis is down', () => {
  it('a consumer an instance has cached keeps working; a consumer it never read is answered 503, as an unread key is', async () => {
    await createConsumer('cached');
    const cachedKey = (await keyOf('cached')).key;
    expect((await call(a, cachedKey)).status).toBe(200);
    // A key this instance has cached whose consumer it has not: created after the key's first request (401 then, the
    // key itself cached as valid), announced, so that no copy of it is held anywhere.
    const lateKey = (await keyOf('late')).key;
    expect((await call(a, lateKey)).status).toBe(401);
    await createConsumer('late');
    const deadline = Date.now() + 2000;
    while (a.composed.consumers!.peek('late') !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(a.composed.consumers!.peek('late')).toBeUndefined();

    await stack.redis.kill();
    try {
      expect((await call(a, cachedKey)).status).toBe(200);
      const r = await call(a, lateKey);
      expect([r.status, r.code]).toEqual([503, 'service_unavailable']);
    } finally {
      await stack.redis.startProcess();
    }
  });
});
