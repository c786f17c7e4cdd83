// Usage reports at scale and under failure, on a private redis-server: a 35-day report over thousands of keys answers
// 200 on the admin connection (not the request path's, nor its 100 ms timeout), the overview's summary is computed
// once for concurrent and repeated viewers, and a record that fails to read fails the report (admin API 503, CLI exit
// 1 with one line) instead of leaving the key out of a billing export.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import request from 'supertest';
import type { Redis } from 'ioredis';
import { hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { DAY_MS, dayOf } from '../src/usage/store.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { clientAddresses, commandCalls, monitorRedis } from './helpers/limits.js';
import { OpenApiDocument } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';

const doc = new OpenApiDocument(new URL('../docs/admin.openapi.yaml', import.meta.url));
const TOKEN = 'tga_reports-test-token';
const PASSWORD = 'reports-pw';
let redis: TestRedis;
let client: Redis;
const problems: string[] = [];

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
      for (let d = 0; d < days; d++) p.hset(ks.usageDay(id, today - d), perDay);
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

async function admin(gw: TestGateway, path: string) {
  const res = await request(gw.gateway.adminApp!).get(path).set('authorization', `Bearer ${TOKEN}`);
  problems.push(...doc.check('GET', path, res.status, res.headers as Record<string, string>, res.text));
  return res;
}

const ids = (tag: string, n: number): string[] => Array.from({ length: n }, (_, i) => `key_${tag}${String(i).padStart(6, '0')}`);

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
}, 30_000);

afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
  expect(problems).toEqual([]);
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

  it("runs its reads on the admin connection: the request path's connection sends none of them", async () => {
    const some = ids('m', 50);
    await seed('mon:', some, 3);
    const gw = await startTestGateway(config('mon:'));
    try {
      const gatewayAddrs = await clientAddresses(client, 'tollgate-gateway');
      // The admin connection is made at start-up, but not waited for: it may still be connecting (bounded wait).
      let adminAddrs = await clientAddresses(client, 'tollgate-admin');
      for (let i = 0; i < 100 && adminAddrs.size === 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
        adminAddrs = await clientAddresses(client, 'tollgate-admin');
      }
      expect(gatewayAddrs.size).toBe(1);
      expect(adminAddrs.size).toBe(1);
      const watcher = redis.client();
      const mon = await monitorRedis(watcher);
      const res = await admin(gw, '/usage?limit=100');
      expect(res.status, res.text).toBe(200);
      expect(res.body.total).toBe(50);
      const seen = await mon.stop();
      // What the clients sent (the script's own HGETALLs inside Redis show as source "lua").
      const sent = seen.filter((c) => c.source !== 'lua');
      const ledger = sent.filter((c) => ['evalsha', 'eval'].includes(c.args[0]!.toLowerCase()) && c.args[3]?.startsWith('mon:'));
      const reportReads = [...ledger, ...sent.filter((c) => ['get', 'sscan'].includes(c.args[0]!.toLowerCase()) && c.args[1]?.startsWith('mon:'))];
      // Every record, each key's ledger over the period in one call, and the id set.
      expect(new Set(ledger.map((c) => c.args[3]!.replace(/:usage:.*/, ''))).size).toBe(50);
      expect(reportReads.length).toBeGreaterThanOrEqual(50 + 50 + 1);
      expect(new Set(reportReads.map((c) => c.source))).toEqual(adminAddrs);
    } finally {
      await gw.close();
    }
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

describe('a report is complete or fails', () => {
  // The gateway's ACL user may read every key record but those of ids starting "key_z": their GET fails with NOPERM,
  // a real Redis error on one record in the middle of a report.
  const prefix = 'acl:';
  const good = ids('a', 120);
  const broken = 'key_zz0000000000';

  beforeAll(async () => {
    await seed(prefix, [...good, broken], 2);
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
      `~${prefix}key:{key_[^z]*`,
      `~${prefix}key:{key_z*}:usage:*`,
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
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^error: the usage report could not be completed .*NOPERM/);
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
