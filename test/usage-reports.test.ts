// Usage reports at scale and under failure, on a private redis-server: a 35-day report over thousands of keys answers
// 200 on the admin connection (not the request path's, nor its 100 ms timeout), the overview's summary is computed
// once for concurrent and repeated viewers, and a record that fails to read fails the report (admin API 503, CLI exit
// 1 with one line) instead of leaving the key out of a billing export.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { DAY_MS, dayOf } from '../src/util/time.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startTestGateway as startGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { clientAddresses, commandCalls, monitorRedis } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { keySubject } from '../src/limits/subject.js';

/**
 * A gateway whose key filter has finished its first build: the build reads every key record (SSCAN, GET) in the
 * background, and these tests count what reports send Redis.
 */
async function startTestGateway(...args: Parameters<typeof startGateway>): Promise<TestGateway> {
  const gw = await startGateway(...args);
  for (let i = 0; i < 500 && !gw.gateway.keys.knownHashes.isCertain; i++) await new Promise((r) => setTimeout(r, 10));
  return gw;
}

const TOKEN = 'tga_reports-test-token';
const PASSWORD = 'reports-pw';
let redis: TestRedis;
let client: Redis;
const api = new CheckedApi({ token: TOKEN });

/** Keys with a ledger of `days` days (one admitted request per hour, 24 a day), written straight into Redis. */
async function seed(prefix: string, ids: string[], days: number): Promise<void> {
  const ks = new Keyspace(prefix);
  const today = dayOf(Date.now());
  const perDay: Record<string, string> = {};
  for (let h = 0; h < 24; h++) perDay[`a${h}`] = '1';
  for (let i = 0; i < ids.length; i += 500) {
    const p = client.pipeline();
    for (const id of ids.slice(i, i + 500)) {
      const rec = { id, plan: 'metered', createdAt: new Date().toISOString(), status: 'active', hash: id.padEnd(64, '0') };
      p.set(ks.keyRecord(id), JSON.stringify(rec));
      p.sadd(ks.keyIds(), id);
      for (let d = 0; d < days; d++) p.hset(ks.usageDay(keySubject(id), today - d), perDay);
    }
    await p.exec();
  }
}

function config(prefix: string, redisExtra: Record<string, unknown> = {}) {
  return testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: 'http://127.0.0.1:9' },
    redis: { url: redis.url, prefix, ...redisExtra },
    admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
    plans: { metered: { perMinute: 40, perDay: 10_000 } },
    usage: { retentionDays: 35 },
  });
}

const admin = (gw: TestGateway, path: string) => api.get(path, { at: gw.gateway.adminApp! });

const ids = (tag: string, n: number): string[] => Array.from({ length: n }, (_, i) => `key_${tag}${String(i).padStart(6, '0')}`);

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
}, 120_000);

afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
  expect(api.problems).toEqual([]);
});

describe('usage reports over many keys', () => {
  it('a 35-day report over 2,000 keys answers 200 with every key, with the request path at its default 100 ms timeout', async () => {
    await seed('big:', ids('b', 2000), 35);
    const gw = await startTestGateway(config('big:'));
    try {
      expect(gw.runtime.config.redis!.commandTimeoutMs).toBe(100);
      const to = Date.now();
      const from = to - 35 * DAY_MS;
      const res = await admin(gw, `/usage?from=${new Date(from).toISOString()}&to=${new Date(to).toISOString()}&limit=1000&sort=id`);
      expect(res.status, res.text).toBe(200);
      expect(res.body.total).toBe(2000);
      // Every seeded hour in the period counted: the first and last day partly, every other whole.
      const expected = Math.floor(to / 3_600_000) - Math.floor(Math.max(from, (dayOf(to) - 34) * DAY_MS) / 3_600_000) + 1;
      for (const k of res.body.keys) expect(k.admitted).toBe(expected);
    } finally {
      await gw.close();
    }
  }, 120_000);

  it("runs its reads on the report thread's own connection: the request path's connection sends none of them", async () => {
    const some = ids('m', 50);
    await seed('mon:', some, 3);
    const gw = await startTestGateway(config('mon:'));
    try {
      const gatewayAddrs = await clientAddresses(client, 'tollgate-gateway');
      // The request path's connection (and the change feed's subscriber, which shares its name).
      // A bound: the subscriber connects in the background and may not be connected yet.
      expect(gatewayAddrs.size).toBeGreaterThanOrEqual(1);
      // The report thread starts with the first report: no connection of its own before.
      expect((await clientAddresses(client, 'tollgate-reports')).size).toBe(0);
      const watcher = redis.client();
      const mon = await monitorRedis(watcher);
      const res = await admin(gw, '/usage?limit=100');
      expect(res.status, res.text).toBe(200);
      expect(res.body.total).toBe(50);
      const seen = await mon.stop();
      const reportAddrs = await clientAddresses(client, 'tollgate-reports');
      expect(reportAddrs.size).toBe(1);
      for (const a of gatewayAddrs) expect(reportAddrs.has(a)).toBe(false);
      // What the clients sent (the script's own HGETALLs inside Redis show as source "lua").
      const sent = seen.filter((c) => c.source !== 'lua');
      const ledger = sent.filter((c) => ['evalsha', 'eval'].includes(c.args[0]!.toLowerCase()) && c.args[3]?.startsWith('mon:'));
      const reportReads = [...ledger, ...sent.filter((c) => ['get', 'sscan'].includes(c.args[0]!.toLowerCase()) && c.args[1]?.startsWith('mon:'))];
      // Every record, each key's ledger over the period in one call, and the id set.
      expect(new Set(ledger.map((c) => c.args[3]!.replace(/:usage:.*/, ''))).size).toBe(50);
      // Nothing else and nothing twice: 50 records, 50 ledgers, and a 50-member set that one SSCAN returns whole.
      expect(reportReads.length).toBe(50 + 50 + 1);
      expect(new Set(reportReads.map((c) => c.source))).toEqual(reportAddrs);
    } finally {
      await gw.close();
    }
    // Closing the gateway ends the thread and its connection.
    for (let i = 0; i < 100 && (await clientAddresses(client, 'tollgate-reports')).size > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect((await clientAddresses(client, 'tollgate-reports')).size).toBe(0);
  }, 60_000);

  it('the overview summary is computed once for concurrent and repeated viewers, and says how old it is', async () => {
    await seed('ov:', ids('o', 200), 8);
    const gw = await startTestGateway(config('ov:'));
    try {
      const before = (await commandCalls(client)).get('hgetall') ?? 0;
      const now = Date.now();
      const path = (t: number) => `/usage/summary?granularity=day&from=${new Date(t - 7 * DAY_MS).toISOString()}&to=${new Date(t).toISOString()}`;
      const [x, y] = await Promise.all([admin(gw, path(now)), admin(gw, path(now))]);
      const z = await admin(gw, path(now + 5000));
      for (const r of [x, y, z]) expect(r.status, r.text).toBe(200);
      expect(y.body).toEqual(x.body);
      expect(z.body.asOf).toBe(x.body.asOf);
      expect(Math.abs(Date.parse(x.body.asOf) - now)).toBeLessThan(30_000);
      expect(x.body.totals.admitted).toBeGreaterThan(200 * 24 * 6);
      // One computation: each of the 200 keys' 8 days read once (7 days back touch 8 UTC days).
      const reads = ((await commandCalls(client)).get('hgetall') ?? 0) - before;
      expect(reads).toBe(200 * 8);
    } finally {
      await gw.close();
    }
  }, 60_000);
});

describe("GET /usage's pages come from one computation of the report", () => {
  const prefix = 'pg:';
  const all = ids('p', 1200);
  const period = (to: number) => `from=${new Date(to - 35 * DAY_MS).toISOString()}&to=${new Date(to).toISOString()}`;
  let gw: TestGateway;
  let other: TestGateway;

  beforeAll(async () => {
    await seed(prefix, all, 3);
    // Counts that differ from key to key (and tie in groups), so the default sort (admitted, desc) matters.
    const ks = new Keyspace(prefix);
    const p = client.pipeline();
    all.forEach((id, i) => p.hset(ks.usageDay(keySubject(id), dayOf(Date.now())), 'a0', String((i % 13) + 1)));
    await p.exec();
    gw = await startTestGateway(config(prefix));
    other = await startTestGateway(config(prefix));
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    await other?.close();
  });

  /** Every page of a report, following nextCursor (each page from `pick(page number)`); what Redis ran meanwhile. */
  async function exportAll(q: string, pick: (n: number) => TestGateway = () => gw, between?: () => Promise<void>) {
    const before = await commandCalls(client);
    const rows: Array<{ id: string; admitted: number }> = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await admin(pick(pages), `/usage?${q}${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status, res.text).toBe(200);
      expect(res.body.total).toBe(all.length);
      rows.push(...res.body.keys);
      cursor = res.body.nextCursor;
      pages++;
      if (pages === 1) await between?.();
    } while (cursor !== null && pages < 100);
    const after = await commandCalls(client);
    const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
    return { rows, pages, hgetall: delta('hgetall'), scripts: delta('evalsha') + delta('eval'), sscan: delta('sscan') };
  }

  it('a multi-page export has every key exactly once, in order, and reads the ledger once whatever the page count', async () => {
    const to = Date.now();
    const small = await exportAll(`${period(to)}&limit=100`);
    const large = await exportAll(`${period(to)}&limit=1000`);
    expect(small.pages).toBe(12);
    expect(large.pages).toBe(2);
    for (const e of [small, large]) {
      expect(e.rows.map((r) => r.id).sort()).toEqual([...all].sort());
      // admitted descending, ties by id ascending.
      for (let i = 1; i < e.rows.length; i++) {
        const [a, b] = [e.rows[i - 1]!, e.rows[i]!];
        expect(a.admitted > b.admitted || (a.admitted === b.admitted && a.id < b.id), `${a.id} before ${b.id}`).toBe(true);
      }
    }
    expect(small.rows).toEqual(large.rows);
    // Each key's 36 days (35 days back touch 36 UTC days) read once for the whole export, in one call per key; the
    // id set scanned once: 12 pages cost what 2 do.
    expect(small.hgetall).toBe(all.length * 36);
    expect(large.hgetall).toBe(small.hgetall);
    // One summing script per key; keeping the report for its pages (3 batches, then its rename) and reading each
    // later page are a script each.
    expect(small.scripts).toBe(all.length + 4 + (small.pages - 1));
    expect(large.scripts).toBe(all.length + 4 + (large.pages - 1));
    expect(large.sscan).toBe(small.sscan);
  }, 120_000);

  it('pages come from the figures of the first page: counts that move meanwhile never show a key twice or leave one out', async () => {
    const ks = new Keyspace(prefix);
    // After the first page, the keys at the bottom of the order get the most calls: recomputed per page, they would
    // jump ahead of the pages already read and be seen twice, pushing others off the end.
    const e = await exportAll(`${period(Date.now())}&limit=100`, undefined, async () => {
      const p = client.pipeline();
      for (const id of all.slice(0, 300)) p.hincrby(ks.usageDay(keySubject(id), dayOf(Date.now())), 'a1', 1000);
      await p.exec();
    });
    expect(e.rows).toHaveLength(all.length);
    expect(new Set(e.rows.map((r) => r.id)).size).toBe(all.length);
  }, 120_000);

  it("a page asked of another instance (behind a load balancer) is answered from the cursor's query", async () => {
    const e = await exportAll(`${period(Date.now())}&limit=500`, (n) => (n % 2 ? other : gw));
    expect(e.pages).toBe(3);
    expect(e.rows.map((r) => r.id).sort()).toEqual([...all].sort());
  }, 120_000);

  it('refuses a cursor it did not give out, or given with another query, with 400 naming query.cursor', async () => {
    const to = Date.now();
    const first = await admin(gw, `/usage?${period(to)}&limit=100`);
    const cursor = first.body.nextCursor as string;
    const raw = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const bad = [
      'garbage',
      Buffer.from('100').toString('base64url'), // an offset, as cursors were before
      b64({ ...raw, n: 0 }),
      b64({ ...raw, n: -5 }),
      b64({ ...raw, n: 1.5 }),
      b64({ ...raw, s: 'hash' }),
      b64({ ...raw, r: '../../etc' }),
      b64({ ...raw, f: raw.f - 400 * DAY_MS }), // a period longer than the ledger keeps
      b64({ ...raw, f: raw.t }), // from not before to
      b64({ ...raw, x: 1 }),
      b64([raw]),
      `${cursor}=`,
    ];
    for (const c of bad) {
      const res = await admin(gw, `/usage?cursor=${encodeURIComponent(c)}`);
      expect(res.status, c).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect(res.text).toMatch(/query\.cursor/);
    }
    for (const q of ['sort=id', 'order=asc', `from=${new Date(to - DAY_MS).toISOString()}`]) {
      const res = await admin(gw, `/usage?cursor=${cursor}&${q}`);
      expect(res.status, q).toBe(400);
      expect(res.text).toMatch(/another from, to, sort, order or groupBy/);
    }
    // The first page's query repeated with the cursor, or left out: the next page.
    for (const q of [`${period(to)}&sort=admitted&order=desc&limit=100`, 'limit=100']) {
      const res = await admin(gw, `/usage?${q}&cursor=${cursor}`);
      expect(res.status, res.text).toBe(200);
      expect(res.body.keys[0].id).not.toBe(first.body.keys[0].id);
      expect(res.body.from).toBe(first.body.from);
    }
  }, 60_000);
});

describe('a report is complete or fails', () => {
  // The gateway's ACL user may read every key record but those of ids starting "key_z", and every key's ledger but
  // those of ids starting "key_y": their reads fail with NOPERM, a real Redis error on one key in the middle of a
  // report (a report that reads records meets the first, the overview's sums, which read ids and ledgers, the second).
  const prefix = 'acl:';
  const good = ids('a', 120);
  const broken = 'key_zz0000000000';
  const noLedger = 'key_yy0000000000';

  beforeAll(async () => {
    await seed(prefix, [...good, broken, noLedger], 2);
    await client.call(
      'ACL',
      'SETUSER',
      'reports',
      'on',
      `>${PASSWORD}`,
      'resetkeys',
      `~${prefix}keys*`,
      `~${prefix}keyhash:*`,
      `~${prefix}[^k]*`,
      `~${prefix}key:{key_[^z]*}`,
      `~${prefix}key:{key_[^y]*}:usage:*`,
      'resetchannels',
      '&*',
      '+@all',
    );
  });

  it('GET /usage, /usage/summary and /keys answer 503 saying the report could not be completed, never 200 without the key', async () => {
    const gw = await startTestGateway(config(prefix, { username: 'reports', password: PASSWORD }));
    try {
      for (const path of ['/usage?limit=1000', '/usage/summary?granularity=day', '/keys?limit=1000']) {
        const res = await admin(gw, path);
        expect(res.status, `${path}: ${res.text}`).toBe(503);
        expect(res.body.code).toBe('service_unavailable');
        expect(res.body.message).toMatch(/could not be completed/);
        expect(res.body.message).toMatch(/NOPERM/);
      }
    } finally {
      await gw.close();
    }
  }, 60_000);

  it('`tollgate usage --csv` exits 1 with one line on stderr and prints no partial CSV', async () => {
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        upstream: { url: 'http://127.0.0.1:9' },
        redis: { url: redis.url, prefix, username: 'reports', password: PASSWORD },
        plans: { metered: { perMinute: 40, perDay: 10_000 } },
      });
      const r = await runCli(['usage', '--csv', '--config', file]);
      expect(r.code, r.stdout).toBe(1);
      expect(r.stdout).toBe('');
      // The line naming the config and the Redis the command uses, then the error alone; never the password.
      const lines = r.stderr.trim().split('\n');
      expect(lines, r.stderr).toHaveLength(2);
      expect(lines[0]).toBe(`tollgate: config ${file} (from --config); Redis 127.0.0.1:${new URL(redis.url).port}/0, tls off (from the config)`);
      expect(lines[1]).toMatch(/^error: the usage report could not be completed .*NOPERM/);
      expect(r.stderr).not.toContain(PASSWORD);
    } finally {
      dir.remove();
    }
  }, 60_000);

  it('a record that is not a JSON key record fails the report too, naming the key to repair', async () => {
    const p = 'bad:';
    await seed(p, ids('c', 20), 1);
    await client.set(new Keyspace(p).keyRecord('key_c000007'), 'not json');
    const gw = await startTestGateway(config(p));
    try {
      const res = await admin(gw, '/usage');
      expect(res.status, res.text).toBe(503);
      expect(res.body.message).toMatch(/could not be completed.*key_c000007.*unreadable record/);
      // The key list still skips it (as documented): a list is not a report.
      const keys = await admin(gw, '/keys?limit=100');
      expect(keys.status).toBe(200);
      expect(keys.body.keys).toHaveLength(19);
    } finally {
      await gw.close();
    }
  }, 60_000);
});
