// GET /usage's pages across gateway instances while traffic moves the figures, on one private redis-server: two
// gateways answer the pages of one export in turn, and between pages real requests through both make the keys at the
// bottom of the order the busiest. Every key is on exactly one page, sorted by id (a keyset cursor) or by a figure
// (the report kept in Redis, named by its cursor, read by either instance); a kept report that expired answers 410.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { hourOfDay } from '../src/usage/store.js';
import { DAY_MS, HOUR_MS, dayOf } from '../src/util/time.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { CheckedApi } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'pages:';
const TOKEN = 'tga_pages-test-token';
const ks = new Keyspace(PREFIX);
let redis: TestRedis;
let client: Redis;
let up: TestUpstream;
let a: TestGateway;
let b: TestGateway;
const api = new CheckedApi({ token: TOKEN });

/** 24 keys; key i has i + 1 requests admitted in the ledger before the export starts. */
const N = 24;
const keys = Array.from({ length: N }, (_, i) => ({ id: `key_pg${String(i).padStart(2, '0')}`, plain: `customer-pages-key-${String(i).padStart(4, '0')}` }));
const seeded = new Map(keys.map((k, i) => [k.id, i + 1]));
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

async function seed(): Promise<void> {
  const now = Date.now();
  const p = client.pipeline();
  for (const k of keys) {
    const rec = { id: k.id, plan: 'metered', createdAt: new Date(now).toISOString(), status: 'active', hash: sha(k.plain) };
    p.set(ks.keyRecord(k.id), JSON.stringify(rec));
    p.set(ks.keyByHash(rec.hash), k.id);
    p.sadd(ks.keyIds(), k.id);
    // Counted an hour ago, so that the export's period (to: now + 1 h) also holds what the traffic below adds.
    p.hset(ks.usageDay(keySubject(k.id), dayOf(now - HOUR_MS)), `a${hourOfDay(now - HOUR_MS)}`, String(seeded.get(k.id)));
  }
  await p.exec();
}

const admin = (gw: TestGateway, path: string) => api.get(path, { at: gw.gateway.adminApp! });

/** `n` real requests with each key given, half through each gateway. */
async function traffic(ids: readonly string[], n: number): Promise<void> {
  await Promise.all(
    ids.map(async (id, j) => {
      const plain = keys.find((k) => k.id === id)!.plain;
      for (let i = 0; i < n; i++) {
        const gw = (i + j) % 2 ? a : b;
        const res = await fetch(`${gw.url}/v1/things`, { headers: { authorization: `Bearer ${plain}` } });
        expect(res.status).toBe(200);
        await res.arrayBuffer();
      }
    }),
  );
}

/** Admitted per key now (the ledger, every day of the period). */
async function admittedNow(): Promise<Map<string, number>> {
  const res = await admin(a, `/usage?sort=id&order=asc&limit=1000&${period}`);
  return new Map((res.body.keys as Array<{ id: string; admitted: number }>).map((k) => [k.id, k.admitted]));
}

const to = Date.now() + HOUR_MS;
const period = `from=${encodeURIComponent(new Date(to - 2 * DAY_MS).toISOString())}&to=${encodeURIComponent(new Date(to).toISOString())}`;

/**
 * Every page of the export asked of the two gateways in turn (a, b, a, ...); before each page after the first,
 * `between(rows so far)` runs traffic. Returns every row and the number of pages.
 */
async function exportAll(q: string, between: (seen: Array<{ id: string; admitted: number }>) => Promise<void>) {
  const rows: Array<{ id: string; admitted: number }> = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    if (pages > 0) await between(rows);
    const res = await admin(pages % 2 ? b : a, `/usage?${q}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status, res.text).toBe(200);
    rows.push(...res.body.keys);
    cursor = res.body.nextCursor;
    pages++;
  } while (cursor !== null && pages < 50);
  return { rows, pages };
}

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
  up = await TestUpstream.start();
  await seed();
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    // Every check answered by Redis on a loaded machine (none admitted from memory and counted later): the ledger moves
    // as the traffic goes.
    redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 2000 },
    auth: { foreignKeys: true },
    admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
    plans: { metered: { perMinute: 100_000, perDay: 1_000_000 } },
  });
  // The whole request path: the key check in Redis counts each admitted request in the ledger.
  a = await startTestGateway(config, { keyStages: true });
  b = await startTestGateway(config, { keyStages: true });
}, 60_000);

afterAll(async () => {
  await a?.close();
  await b?.close();
  await up?.close();
  client?.disconnect();
  await redis?.stop();
  expect(api.problems).toEqual([]);
});

describe("GET /usage's pages from two instances while traffic moves the figures", () => {
  it('sorted by a figure: every key exactly once, every page from the first page figures, read from Redis by either instance', async () => {
    const before = await admittedNow();
    const boosted = new Set<string>();
    const e = await exportAll(`sort=admitted&order=desc&limit=5&${period}`, async (seen) => {
      // The five keys lowest in the order, not yet listed nor made busy, become the busiest: recomputed per page, they
      // would jump ahead of the pages already read (and be missed) and push keys already read onto the next page.
      const rest = [...before]
        .filter(([id]) => !seen.some((r) => r.id === id) && !boosted.has(id))
        .sort((x, y) => x[1] - y[1] || (x[0] < y[0] ? -1 : 1))
        .slice(0, 5)
        .map(([id]) => id);
      rest.forEach((id) => boosted.add(id));
      await traffic(rest, 40);
    });
    expect(e.pages).toBe(5);
    expect(e.rows.map((r) => r.id).sort()).toEqual(keys.map((k) => k.id));
    // The figures of the moment the first page was asked, in their order then.
    expect(e.rows.map((r) => [r.id, r.admitted])).toEqual([...before].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1)));
    // Meanwhile the figures did move.
    const after = await admittedNow();
    expect(boosted.size).toBe(10);
    expect([...after].filter(([id, n]) => n > before.get(id)!).map(([id]) => id)).toEqual([...boosted].sort());
    // One report kept, and for a bounded time.
    const kept = await client.keys(`${PREFIX}report:*`);
    expect(kept).toHaveLength(1);
    const ttl = await client.pttl(kept[0]!);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5 * 60_000);
  }, 120_000);

  it('sorted by id: a keyset cursor, every key present throughout exactly once, whatever keys come and go', async () => {
    for (const k of await client.keys(`${PREFIX}report:*`)) await client.del(k);
    let step = 0;
    const e = await exportAll(`sort=id&order=asc&limit=5&${period}`, async (seen) => {
      step++;
      await traffic([keys[N - step]!.id], 3);
      // A key already listed is deleted (an offset would then skip a key), and one whose id sorts before the cursor is
      // added (an offset would show a key twice).
      if (step === 1) await client.srem(ks.keyIds(), seen[0]!.id);
      if (step === 2) {
        const rec = { id: 'key_pa00', plan: 'metered', createdAt: new Date().toISOString(), status: 'active', hash: sha('customer-pages-key-new1') };
        await client.set(ks.keyRecord(rec.id), JSON.stringify(rec));
        await client.sadd(ks.keyIds(), rec.id);
      }
    });
    expect(e.pages).toBe(5);
    expect(e.rows.map((r) => r.id)).toEqual(keys.map((k) => k.id));
    // Nothing kept: each page reads its own keys.
    expect(await client.keys(`${PREFIX}report:*`)).toEqual([]);
    // Descending, from either instance: the same keys, the other way.
    const desc = await exportAll(`sort=id&order=desc&limit=7&${period}`, async () => {});
    expect(desc.rows.map((r) => r.id)).toEqual(['key_pa00', ...keys.slice(1).map((k) => k.id)].reverse());
    await client.sadd(ks.keyIds(), keys[0]!.id);
    await client.srem(ks.keyIds(), 'key_pa00');
  }, 120_000);

  it('a kept report that is gone answers 410 report_expired; a cursor made for the other sort is refused', async () => {
    const first = await admin(a, `/usage?sort=rateLimited&limit=10&${period}`);
    expect(first.status).toBe(200);
    for (const k of await client.keys(`${PREFIX}report:*`)) await client.del(k);
    const res = await admin(b, `/usage?cursor=${first.body.nextCursor}`);
    expect(res.status).toBe(410);
    expect(res.body.code).toBe('report_expired');
    expect(res.body.message).toMatch(/ask for the first page again/);
    // Only keys above 0 (none has a refusal): one empty page, nothing kept; not with sort=id.
    for (const k of await client.keys(`${PREFIX}report:*`)) await client.del(k);
    const none = await admin(b, `/usage?sort=rateLimited&nonzero=true&limit=5&${period}`);
    expect([none.status, none.body.keys, none.body.total, none.body.nextCursor]).toEqual([200, [], 0, null]);
    const busy = await admin(b, `/usage?sort=admitted&nonzero=true&limit=5&${period}`);
    expect([busy.body.total, busy.body.keys.length]).toEqual([N, 5]);
    const more = await admin(a, `/usage?cursor=${busy.body.nextCursor}&nonzero=true`);
    expect(more.status, more.text).toBe(200);
    expect((await admin(a, `/usage?cursor=${busy.body.nextCursor}&nonzero=false`)).status).toBe(400);
    const nzId = await admin(a, `/usage?sort=id&nonzero=true&${period}`);
    expect(nzId.status).toBe(400);
    expect(nzId.text).toMatch(/query\.nonzero/);
    const byId = await admin(a, `/usage?sort=id&limit=10&${period}`);
    const raw = JSON.parse(Buffer.from(byId.body.nextCursor as string, 'base64url').toString('utf8'));
    const forged = Buffer.from(JSON.stringify({ ...raw, s: 'admitted' })).toString('base64url');
    const bad = await admin(b, `/usage?cursor=${forged}`);
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/query\.cursor/);
  }, 60_000);
});
