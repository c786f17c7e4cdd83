// A consumer's pooled quota on the real request path: two gateways composed as `tollgate serve` composes them, on one
// private redis-server and a real upstream on loopback; consumers and keys made through the admin API. The pool is
// exact across keys and instances (300 requests at once, 50 admitted), a key's own perMinute is its cap inside the
// pool, the RateLimit headers name the window closest to refusing, a key's own perMonth whose limitsExpiresAt has
// passed caps nothing, and a key moved to another consumer counts against the new pool only, from the next request,
// on both instances, without a 401 while the instances learn of the move.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import { Metrics } from '../src/observability/metrics.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const PREFIX = 'cpg:';
const stack = useStack({ redis: true, client: true });

interface Gateway {
  running: RunningGateway;
  composed: ComposedGateway;
}
const gateways: Gateway[] = [];

async function start(): Promise<Gateway> {
  const composed = await composeGateway({
    config: testConfig({
      server: { host: '127.0.0.1', port: 0 },
      redis: { url: stack.redis.url, prefix: PREFIX, commandTimeoutMs: 2000, failMode: 'closed' },
      // team: the pool of 50 a minute; big: room enough that only a cap or the pool under test refuses.
      plans: { team: { perMinute: 50, perDay: 100_000 }, big: { perMinute: 100_000, perDay: 10_000_000 } },
      anonymous: { perMinute: 100_000 },
      // No ban: each refusal here is the window's, 429 rate_limit_exceeded, however many there are.
      ban: { enabled: false },
      upstream: { url: stack.up.url },
      admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
      log: { level: 'silent' },
    }),
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
  // Both instances listen to the keys' and consumers' change feeds before anything changes, as a started gateway does.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const counts = (await stack.client.pubsub('NUMSUB', `${PREFIX}keys:events`, `${PREFIX}consumers:events`)) as Array<string | number>;
    if (Number(counts[1]) >= 2 && Number(counts[3]) >= 2) break;
    if (Date.now() > deadline) throw new Error('the gateways did not subscribe to the change feeds');
    await new Promise((r) => setTimeout(r, 20));
  }
});

afterAll(async () => {
  for (const g of gateways) await g.running.shutdown().catch(() => {});
});

async function admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${a.running.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function consumer(id: string, plan: string): Promise<void> {
  const r = await admin('POST', '/consumers', { id, name: id, plan });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}

/** A key issued through the admin API, in the consumer, with these fields of its own. */
async function key(consumerId: string, fields: Record<string, unknown> = {}): Promise<{ id: string; key: string }> {
  const r = await admin('POST', '/keys', { plan: 'big', consumer: consumerId, ...fields });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; key: string };
}

interface Answer {
  status: number;
  code: string | undefined;
  message: string | undefined;
  /** X-RateLimit-Limit and -Remaining: the window closest to refusing. */
  limit: number;
  remaining: number;
  policy: string | null;
}

async function call(g: Gateway, k: string): Promise<Answer> {
  const res = await fetch(`http://127.0.0.1:${g.running.port}/v1/things`, { headers: { authorization: `Bearer ${k}` }, signal: AbortSignal.timeout(20_000) });
  const body = (await res.json()) as { code?: string; message?: string };
  return {
    status: res.status,
    code: body.code,
    message: body.message,
    limit: Number(res.headers.get('x-ratelimit-limit')),
    remaining: Number(res.headers.get('x-ratelimit-remaining')),
    policy: res.headers.get('ratelimit-policy'),
  };
}

async function quota(g: Gateway, k: string): Promise<{ plan: string; windows: Array<{ name: string; limit: number; remaining: number }> }> {
  const res = await fetch(`http://127.0.0.1:${g.running.port}/ratelimit`, { headers: { authorization: `Bearer ${k}` }, signal: AbortSignal.timeout(10_000) });
  expect(res.status).toBe(200);
  return (await res.json()) as { plan: string; windows: Array<{ name: string; limit: number; remaining: number }> };
}

/** What a pool's minute window has counted (0 before its first request). */
async function poolMinute(consumerId: string): Promise<number> {
  return Number((await stack.client.get(`${PREFIX}rl:{c:${consumerId}}:minute`)) ?? 0);
}

describe("a consumer's pool across keys and instances", () => {
  it('300 requests at once over two keys and two instances against a pool of 50 a minute: exactly 50 admitted, 250 refused 429', async () => {
    await consumer('pool50', 'team');
    const keys = [(await key('pool50')).key, (await key('pool50')).key];
    const answers = await Promise.all(Array.from({ length: 300 }, (_, i) => call(i % 2 === 0 ? a : b, keys[(i >> 1) % 2]!)));
    const admitted = answers.filter((r) => r.status === 200).length;
    const refused = answers.filter((r) => r.status === 429 && r.code === 'rate_limit_exceeded').length;
    console.log(
      `pool of 50 a minute, 300 requests at once over 2 keys and 2 instances: ${admitted} admitted (200), ${refused} refused (429 rate_limit_exceeded)`,
    );
    expect([admitted, refused]).toEqual([50, 250]);
    expect(await poolMinute('pool50')).toBe(50);
    // Each answer's headers name the pool's minute: the window closest to refusing.
    expect(new Set(answers.map((r) => r.limit))).toEqual(new Set([50]));
    expect(answers.filter((r) => r.status === 429).every((r) => r.remaining === 0)).toBe(true);
  });

  it("a key's own perMinute 10 is its cap inside the pool: 10 admitted of 30 at once, the rest refused by key:minute", async () => {
    await consumer('capco', 'big');
    const capped = (await key('capco', { perMinute: 10 })).key;
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => call(i % 2 === 0 ? a : b, capped)));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(10);
    const refusals = answers.filter((r) => r.status === 429);
    expect(refusals).toHaveLength(20);
    expect(refusals.every((r) => r.code === 'rate_limit_exceeded' && /\(key:minute window\)/.test(r.message ?? ''))).toBe(true);
    expect(answers.every((r) => r.limit === 10)).toBe(true);
    // The pool counted only what was admitted.
    expect(await poolMinute('capco')).toBe(10);
  });

  it('the headers show the window closest to refusing: the cap while it has less left, the pool once the pool has less', async () => {
    await consumer('headco', 'team');
    const capped = (await key('headco', { perMinute: 10 })).key;
    const free = (await key('headco')).key;
    const first = await call(a, capped);
    expect([first.status, first.limit, first.remaining]).toEqual([200, 10, 9]);
    expect(first.policy).toBe('"minute";q=50;w=60, "day";q=100000;w=86400, "key:minute";q=10;w=60');
    for (let i = 0; i < 45; i++) expect((await call(i % 2 === 0 ? a : b, free)).status).toBe(200);
    // Pool: 46 of 50 used (4 left); cap: 2 of 10 after this one (8 left): the pool is closer.
    const second = await call(b, capped);
    expect([second.status, second.limit, second.remaining]).toEqual([200, 50, 3]);
    const q = await quota(b, capped);
    expect(q.plan).toBe('team');
    expect(q.windows.map((w) => [w.name, w.limit, w.remaining])).toEqual([
      ['minute', 50, 3],
      ['day', 100_000, 99_953],
      ['key:minute', 10, 8],
    ]);
  });

  it("a key's own perMonth whose limitsExpiresAt has passed caps nothing: the plan's values apply", async () => {
    await consumer('endedco', 'team');
    const ended = (await key('endedco', { perMonth: 3, limitsExpiresAt: '2020-01-01T00:00:00Z', limitsReason: 'launch week' })).key;
    const live = (await key('endedco', { perMonth: 3, limitsExpiresAt: '2999-01-01T00:00:00Z' })).key;
    const endedAnswers = await Promise.all(Array.from({ length: 8 }, (_, i) => call(i % 2 === 0 ? a : b, ended)));
    expect(endedAnswers.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(endedAnswers[0]!.policy).toBe('"minute";q=50;w=60, "day";q=100000;w=86400');
    expect((await quota(a, ended)).windows.map((w) => w.name)).toEqual(['minute', 'day']);
    // The same limit still in force caps the key at 3 for the month.
    const liveAnswers = [];
    for (let i = 0; i < 5; i++) liveAnswers.push(await call(i % 2 === 0 ? a : b, live));
    expect(liveAnswers.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    expect(liveAnswers[3]!.message).toMatch(/\(key:month window\)/);
    expect((await quota(a, live)).windows.map((w) => w.name)).toEqual(['minute', 'day', 'key:month']);
  });
});

describe('a key moved to another consumer', () => {
  it('counts against the new pool only from the next request on both instances, with no 401 while they learn of the move', async () => {
    await consumer('oldco', 'big');
    await consumer('newco', 'big');
    const moved = await key('oldco');
    for (const g of [a, b]) expect((await call(g, moved.key)).status).toBe(200);
    expect(await poolMinute('oldco')).toBe(2);

    // Traffic on both instances all through the move.
    const answers: Answer[] = [];
    let stop = false;
    const traffic = [a, b].map(async (g) => {
      while (!stop) answers.push(await call(g, moved.key));
    });
    await new Promise((r) => setTimeout(r, 100));
    const patched = await admin('PATCH', `/keys/${moved.id}`, { consumer: 'newco' });
    expect(patched.status).toBe(200);
    const at = performance.now();
    const oldAfterMove = await poolMinute('oldco');
    // From here on, within a second, each instance's requests count in newco's pool and never again in oldco's.
    const took = await Promise.all(
      [a, b].map(async (g) => {
        for (;;) {
          const before = await poolMinute('newco');
          const r = await call(g, moved.key);
          if (r.status === 200 && (await poolMinute('newco')) > before) return performance.now() - at;
          if (performance.now() - at > 3000) return Infinity;
        }
      }),
    );
    await new Promise((r) => setTimeout(r, 100));
    stop = true;
    await Promise.all(traffic);
    expect(
      took.every((ms) => ms < 1000),
      `ms from the move to the first request counted in the new pool, per instance: ${took.map(Math.round).join(', ')}`,
    ).toBe(true);
    const oldSettled = await poolMinute('oldco');
    for (const g of [a, b]) expect((await call(g, moved.key)).status).toBe(200);
    expect(await poolMinute('oldco')).toBe(oldSettled);
    // Requests in flight when the move was written may have counted in the old pool; none after it reached them.
    expect(oldSettled - oldAfterMove).toBeLessThanOrEqual(2);
    expect(answers.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.code}`)).toEqual([]);
  });

  it('an instance that has not heard of the move yet answers the next request from the new pool, not 401', async () => {
    await consumer('fromco', 'big');
    await consumer('toco', 'big');
    const moved = await key('fromco');
    for (const g of [a, b]) expect((await call(g, moved.key)).status).toBe(200);
    // The move written as the admin API writes it (record, then the new consumer's copy, then the old one removed),
    // but not announced yet: both instances still hold the key as fromco's.
    const store = a.composed.keys.store;
    await store.update({ ...(await store.get(moved.id))!, consumer: 'toco' });
    for (const g of [a, b]) {
      const r = await call(g, moved.key);
      expect([r.status, r.code]).toEqual([200, undefined]);
    }
    expect([await poolMinute('fromco'), await poolMinute('toco')]).toEqual([2, 2]);
    await store.publishChange(moved.id);
  });
});
