// GET /usage.csv: the CLI's `tollgate usage --csv` over the admin API, byte for byte for the same ledger and period
// (every key's totals, sorted as asked; one key by hour or day), as an attachment; the admin token required; a bad
// parameter is GET /usage's JSON 400. The gateway composed as `serve` composes it, on a real Redis; the built CLI.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import request from 'supertest';
import { hashAdminToken } from '../src/admin/tokens.js';
import { assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

const PREFIX = 'usagecsv:';
const TOKEN = 'tga_usage-csv-token';
const HOUR = 3_600_000;

let redis: TestRedis;
let up: TestUpstream;
let gw: LimitsGateway;
let dir: ReturnType<typeof tempDir>;
let file: string;
const ids: string[] = [];
let from = '';
let to = '';

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  up = await TestUpstream.start();
  const plans = { metered: { perMinute: 1000, perDay: 100_000 }, small: { perMinute: 2, perDay: 100 } };
  gw = await startLimitsGateway(
    testConfig({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url },
      redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 2000 },
      admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
      plans,
      usage: { retentionDays: 2, flushIntervalMs: 60_000 },
    }),
  );
  // Keys with other figures (admitted, and 429s for the small plan), a name with a comma and a formula, metadata.
  const keys = [
    { plan: 'metered', name: 'Acme, Inc.', metadata: { customer: 'c_1' }, calls: 3 },
    { plan: 'small', name: '=1+1', calls: 4 },
    { plan: 'metered', calls: 1 },
    { plan: 'metered', name: 'idle', calls: 0 },
  ];
  for (const k of keys) {
    const { key, record } = await gw.gateway.admin.issuer.create({
      plan: k.plan,
      ...(k.name ? { name: k.name } : {}),
      ...(k.metadata ? { metadata: k.metadata } : {}),
    });
    ids.push(record.id);
    for (let i = 0; i < k.calls; i++) {
      const res = await fetch(`${gw.url}/v1/pets/1`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(10_000) });
      await res.arrayBuffer();
    }
  }
  await gw.gateway.flushUsage();
  const now = Date.now();
  from = new Date(Math.floor(now / HOUR) * HOUR - 3 * HOUR).toISOString();
  to = new Date(Math.floor(now / HOUR) * HOUR + HOUR).toISOString();
  dir = tempDir();
  file = dir.write('gateway.yaml', { upstream: { url: up.url }, redis: { url: redis.url, prefix: PREFIX }, plans, usage: { retentionDays: 2 } });
}, 60_000);

afterAll(async () => {
  dir?.remove();
  await gw?.close();
  await up?.close();
  await redis?.stop();
});

const admin = () => request(gw.gateway.adminApp!);
const get = (path: string) =>
  admin()
    .get(path)
    .set('authorization', `Bearer ${TOKEN}`)
    .buffer(true)
    .parse((res, cb) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => cb(null, text));
    });

async function cliCsv(...args: string[]): Promise<string> {
  const r = await runCli(['usage', '--csv', '--quiet', '--config', file, ...args]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

describe('GET /usage.csv', () => {
  it.each([
    ['every key by admitted', [] as string[], ''],
    ['by id', ['--sort', 'id'], '&sort=id'],
    ['by rate limited', ['--sort', 'rateLimited'], '&sort=rateLimited'],
  ])('%s: the same bytes as the CLI', async (_what, flags, query) => {
    const res = await get(`/usage.csv?from=${from}&to=${to}${query}`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(res.headers['content-disposition']).toBe('attachment; filename="usage.csv"');
    const fromCli = await cliCsv('--from', from, '--to', to, ...flags);
    expect(res.body).toBe(fromCli);
    // The data is there (not two empty reports agreeing): every key, the admitted figures, the guarded formula.
    expect(fromCli.split('\r\n')).toHaveLength(ids.length + 2);
    expect(fromCli).toContain('"Acme, Inc."');
    expect(fromCli).toContain("'=1+1");
  });

  it('one key by day: the same bytes as `usage --key ID --granularity day --csv`', async () => {
    const id = ids[0]!;
    const res = await get(`/usage.csv?key=${id}&granularity=day&from=${from}&to=${to}`);
    expect(res.status, String(res.body)).toBe(200);
    expect(res.headers['content-disposition']).toBe(`attachment; filename="usage-${id}.csv"`);
    expect(res.body).toBe(await cliCsv('--key', id, '--granularity', 'day', '--from', from, '--to', to));
    expect(res.body).toMatch(/^start,admitted,/);
  });

  it('refuses without the admin token, or with a wrong one', async () => {
    expect((await admin().get('/usage.csv')).status).toBe(401);
    const wrong = await admin().get('/usage.csv').set('authorization', 'Bearer tga_wrong');
    expect(wrong.status).toBe(401);
    expect(wrong.headers['content-type']).toMatch(/^application\/json/);
  });

  it.each([
    ['from=yesterday', 'query.from'],
    [`from=${to}&to=${from}`, 'query.from'],
    ['sort=name', 'query.sort'],
    ['order=sideways', 'query.order'],
    ['limit=10', 'query'],
    ['cursor=abc', 'query'],
    ['granularity=day', 'query.granularity'],
    ['key=k&sort=id', 'query.sort'],
    ['key=a%20b', 'query.key'],
    ['sort=id&nonzero=true', 'query.nonzero'],
    ['from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z', 'query'],
  ])('%s: 400 with the JSON error body', async (query, path) => {
    const res = await admin().get(`/usage.csv?${query}`).set('authorization', `Bearer ${TOKEN}`);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body.code).toBe('invalid_request');
    expect(JSON.stringify(res.body.problems)).toContain(path);
  });

  it('an unknown key is the JSON 404 GET /keys/:id/usage gives', async () => {
    const res = await admin().get('/usage.csv?key=key_nobody').set('authorization', `Bearer ${TOKEN}`);
    expect(res.status, JSON.stringify(res.body)).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
  });

  it('a report that cannot complete (Redis gone) is a JSON error, never a CSV', async () => {
    redis.pause();
    try {
      const res = await admin().get(`/usage.csv?from=${from}&to=${to}`).set('authorization', `Bearer ${TOKEN}`);
      // The report's reads time out: the whole report is refused as incomplete, to be retried.
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('service_unavailable');
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.headers['content-disposition']).toBeUndefined();
    } finally {
      redis.resume();
    }
  }, 120_000);
});
