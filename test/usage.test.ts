// The usage ledger and the deprecated-route report (docs: "Usage and deprecated routes"), on real Redis with two
// gateway instances: admitted requests in the ledger are exactly those clients saw admitted (counted inside the limit
// script), refusals by window and by ban are counted (ban-cache refusals flushed in batches), a day of the ledger
// expires after the retention, the deprecated-route report names the keys still calling each route, and the admin
// API and the CLI (CSV for billing) read both. Every admin answer is checked against docs/admin.openapi.yaml.
import { describe, expect, it } from 'vitest';
import { hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { RedisUsageStore } from '../src/usage/store.js';
import { dayOf } from '../src/util/time.js';
import { csvField } from '../src/usage/csv.js';
import { runCli, tempDir } from './helpers/cli.js';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { useStack } from './helpers/stack.js';
import type { Config } from '../src/config/schema.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'use:';
const ks = new Keyspace(PREFIX);
const TOKEN = 'tga_usage-test-token';
const DEPRECATED = {
  method: 'GET',
  path: '/v1/pets/:petId',
  deprecation: '2026-01-01T00:00:00Z',
  sunset: '2099-01-01T00:00:00Z',
  link: 'https://example.com/m',
};
const s = useStack({
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
    admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
    plans: { metered: { perMinute: 40, perDay: 10_000 }, tiny: { perMinute: 1, perDay: 10_000 } },
    anonymous: { perMinute: 1000 },
    ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [600], resetAfterSeconds: 3600 },
    usage: { retentionDays: 2, flushIntervalMs: 60_000 },
    routes: [DEPRECATED, { method: 'GET', path: '/v1/categories' }],
  });
}

async function call(gw: LimitsGateway, key: string | undefined, path = '/v1/categories'): Promise<number> {
  const res = await fetch(`${gw.url}${path}`, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

const admin = (path: string) => api.get(path);

describe('the usage ledger', () => {
  it('is exact across two instances under concurrent load: admitted and refused as the clients saw them', async () => {
    const { id, key } = await s.gw.a.createKey({ plan: 'metered' });
    const statuses = await Promise.all(Array.from({ length: 120 }, (_, i) => call(i % 2 ? s.gw.a : s.gw.b, key)));
    const admitted = statuses.filter((s) => s === 200).length;
    const refused = statuses.filter((s) => s === 429).length;
    expect(admitted).toBe(40);
    expect(admitted + refused).toBe(120);
    await Promise.all([s.gw.a.gateway.flushUsage(), s.gw.b.gateway.flushUsage()]);
    const u = await s.gw.a.gateway.usage.keyUsage(id, Date.now() - 3_600_000, Date.now() + 1, 'hour');
    // Refusals: by the window until the third strike bans the key, by the ban after (the script's and the ban cache's).
    expect(u.totals).toEqual({ admitted: 40, rateLimited: 3 - 1, banned: refused - 2, upstreamFailed: 0, shadowRefused: 0, wouldBan: 0, validationFailed: 0 });

    const r = await admin(`/keys/${id}/usage?granularity=hour`);
    expect(r.status).toBe(200);
    expect(r.body.totals).toEqual(u.totals);
    expect(r.body.buckets).toHaveLength(25);
    expect(r.body.buckets.reduce((n: number, x: { admitted: number }) => n + x.admitted, 0)).toBe(40);
    // Two days to the millisecond touch three UTC days: the day of `from`, the day between, today.
    const to = Date.now();
    const days = await admin(`/keys/${id}/usage?granularity=day&from=${new Date(to - 2 * 86_400_000).toISOString()}&to=${new Date(to).toISOString()}`);
    expect(days.body.buckets).toHaveLength(3);
    expect(days.body.totals).toEqual(u.totals);
  });

  it("each day of it expires after usage.retentionDays (+ the day itself), in the key's own hash slot", async () => {
    const { id, key } = await s.gw.a.createKey({ plan: 'metered' });
    expect(await call(s.gw.a, key)).toBe(200);
    const day = ks.usageDay(keySubject(id), dayOf(Date.now()));
    expect(await s.client.hget(day, `a${new Date().getUTCHours()}`)).toBe('1');
    const ttl = await s.client.pttl(day);
    expect(ttl).toBeGreaterThan(2 * 86_400_000);
    expect(ttl).toBeLessThanOrEqual(3 * 86_400_000);
    expect(day).toContain(`{${id}}`);
    // Counts an instance writes itself carry the same expiry: here a short one, watched as it lapses.
    const store = new RedisUsageStore(s.gw.a.gateway.redis!.client, ks);
    await store.add([{ id: 'key_expiring', kind: 'b', atMs: Date.now(), n: 2 }], 300);
    expect((await store.days('key_expiring', [dayOf(Date.now())]))[0]).toEqual({ [`b${new Date().getUTCHours()}`]: 2 });
    await new Promise((r) => setTimeout(r, 400));
    expect((await store.days('key_expiring', [dayOf(Date.now())]))[0]).toEqual({});
    // A period longer than what is kept is refused, not answered with holes.
    const long = await admin(`/keys/${id}/usage?from=${new Date(Date.now() - 5 * 86_400_000).toISOString()}`);
    expect(long.status).toBe(400);
    expect(long.body.problems[0].path).toBe('query.from');
  });

  it('a Redis-less gateway keeps the same ledger in memory (every decision counted by the instance)', async () => {
    const memory = await startLimitsGateway(
      testConfig({
        upstream: { url: s.up.url },
        plans: { tiny: { perMinute: 2, perDay: 100 } },
        ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 },
      }),
    );
    try {
      const { id, key } = await memory.createKey({ plan: 'tiny' });
      const statuses = [];
      for (let i = 0; i < 6; i++) statuses.push(await call(memory, key));
      expect(statuses).toEqual([200, 200, 429, 429, 429, 429]);
      await memory.gateway.flushUsage();
      const u = await memory.gateway.usage.keyUsage(id, Date.now() - 3_600_000, Date.now() + 1, 'day');
      // Two admitted, one refused by the window, then the ban (the second strike) and what the ban cache refused.
      expect(u.totals).toEqual({ admitted: 2, rateLimited: 1, banned: 3, upstreamFailed: 0, shadowRefused: 0, wouldBan: 0, validationFailed: 0 });
    } finally {
      await memory.close();
    }
  });

  it("GET /usage: every key's totals, sorted and paged; bad queries are refused", async () => {
    const busy = await s.gw.a.createKey({ plan: 'metered' });
    for (let i = 0; i < 5; i++) expect(await call(s.gw.b, busy.key)).toBe(200);
    const all: Array<{ id: string; admitted: number }> = [];
    let cursor: string | null = null;
    for (let i = 0; i < 20; i++) {
      const r = await admin(`/usage?limit=2&sort=admitted${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      all.push(...r.body.keys);
      cursor = r.body.nextCursor;
      if (!cursor) break;
    }
    const counts = all.map((k) => k.admitted);
    expect(counts).toEqual([...counts].sort((x, y) => y - x));
    expect(all.find((k) => k.id === busy.id)?.admitted).toBe(5);
    expect(new Set(all.map((k) => k.id)).size).toBe(all.length);
    for (const q of [
      'sort=volume',
      'from=yesterday',
      'limit=0',
      'cursor=abc',
      `from=${new Date().toISOString()}&to=${new Date(Date.now() - 1000).toISOString()}`,
    ]) {
      expect((await admin(`/usage?${q}`)).status, q).toBe(400);
    }
  });
});

describe('deprecated routes', () => {
  it('names the keys still calling each deprecated route, with counts and when last seen; the CLI exports it as CSV', async () => {
    const k1 = await s.gw.a.createKey({ plan: 'metered' });
    const k2 = await s.gw.a.createKey({ plan: 'metered' });
    const k3 = await s.gw.a.createKey({ plan: 'metered' });
    for (let i = 0; i < 3; i++) expect(await call(i % 2 ? s.gw.a : s.gw.b, k1.key, `/v1/pets/${i}`)).toBe(200);
    expect(await call(s.gw.a, k2.key, '/v1/pets/7')).toBe(200);
    expect(await call(s.gw.a, k3.key, '/v1/categories')).toBe(200);
    expect(await call(s.gw.a, undefined, '/v1/pets/1')).toBe(401);
    const before = Date.now();
    await Promise.all([s.gw.a.gateway.flushUsage(), s.gw.b.gateway.flushUsage()]);

    const r = await admin('/routes/deprecated');
    expect(r.status).toBe(200);
    expect(r.body.routes).toHaveLength(1);
    const route = r.body.routes[0];
    expect(route).toMatchObject({
      method: 'GET',
      path: '/v1/pets/:petId',
      deprecation: DEPRECATED.deprecation,
      sunset: DEPRECATED.sunset,
      link: DEPRECATED.link,
    });
    expect(route.keys.map((k: { id: string; calls: number }) => [k.id, k.calls])).toEqual([
      [k1.id, 3],
      [k2.id, 1],
    ]);
    for (const k of route.keys) expect(Math.abs(Date.parse(k.lastSeen) - before)).toBeLessThan(10_000);

    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        upstream: { url: s.up.url },
        redis: { url: s.redis.url, prefix: PREFIX },
        plans: { metered: { perMinute: 40, perDay: 10_000 } },
        routes: [DEPRECATED],
      });
      const csv = await runCli(['routes', 'deprecated', '--csv', '--config', file]);
      expect(csv.code, csv.stderr).toBe(0);
      const lines = csv.stdout.trimEnd().split('\r\n');
      expect(lines[0]).toBe('method,path,deprecation,sunset,key_id,calls,last_seen,key_name,key_metadata,consumer');
      expect(lines.slice(1).map((l) => l.split(',').slice(4, 6))).toEqual([
        [k1.id, '3'],
        [k2.id, '1'],
      ]);
      const usage = await runCli(['usage', '--csv', '--sort', 'id', '--config', file]);
      expect(usage.code, usage.stderr).toBe(0);
      const rows = usage.stdout.trimEnd().split('\r\n');
      expect(rows[0]).toBe('id,name,plan,admitted,rate_limited,banned,upstream_failed,shadow_refused,would_ban,validation_failed,consumer,metadata');
      expect(rows.find((l) => l.startsWith(`${k1.id},`))).toBe(`${k1.id},,metered,3,0,0,0,0,0,0,,`);
      const one = await runCli(['usage', '--key', k2.id, '--granularity', 'day', '--json', '--config', file]);
      expect(JSON.parse(one.stdout).totals).toEqual({
        admitted: 1,
        rateLimited: 0,
        banned: 0,
        upstreamFailed: 0,
        shadowRefused: 0,
        wouldBan: 0,
        validationFailed: 0,
      });
      expect((await runCli(['usage', '--key', 'key_nope0000000000', '--config', file])).code).toBe(1);
      expect((await runCli(['usage', '--from', 'yesterday', '--config', file])).code).toBe(2);
    } finally {
      dir.remove();
    }
  });

  it('CSV fields are quoted when needed and never start a spreadsheet formula', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('=HYPERLINK("x")')).toBe(`"'=HYPERLINK(""x"")"`);
    expect(csvField('-1')).toBe("'-1");
    expect(csvField(-1)).toBe('-1');
    expect(csvField(null)).toBe('');
    // Every place a cell could start, whatever separator a spreadsheet splits on (a semicolon locale here).
    expect(csvField('x;=1+1')).toBe(`"x;'=1+1"`);
    expect(csvField('a, @b|-c\t+d')).toBe(`"a,' @b|'-c\t'+d"`);
    expect(csvField('\r=1')).toBe(`"'\r'=1"`);
    expect(csvField('x;"=1"')).toBe(`"x;'""=1"""`);
    expect(csvField('\u001b[2Jcleared\u009b')).toBe('\\x1b[2Jcleared\\x9b');
  });

  it('GET /usage/summary adds every key up; GET /status says Redis is answering; the CSV export', async () => {
    const summary = await admin('/usage/summary?granularity=hour');
    expect(summary.status).toBe(200);
    const all = (await admin('/usage?limit=1000')).body.keys as Array<{ admitted: number }>;
    expect(summary.body.totals.admitted).toBe(all.reduce((n, k) => n + k.admitted, 0));
    expect(summary.body.buckets).toHaveLength(25);
    const status = await admin('/status');
    expect(status.body).toMatchObject({ redis: 'ok', usageRetentionDays: 2 });
    expect(status.body.plans.map((p: { name: string }) => p.name)).toEqual(['metered', 'tiny']);
    const csv = await admin('/routes/deprecated.csv');
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    expect(csv.text.split('\r\n')[0]).toBe('method,path,deprecation,sunset,key_id,calls,last_seen,key_name,key_metadata,consumer');
  });

  it('every admin answer above matches the OpenAPI document', () => {
    expect(api.problems).toEqual([]);
  });
});
