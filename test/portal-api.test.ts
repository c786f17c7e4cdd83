// The consumer portal's JSON API on real Redis, through the real listeners of a gateway composed as `tollgate serve`
// composes it: sessions from sign-in links the admin API issues (and a key sign-in), every answer checked against
// docs/portal.openapi.yaml. Keys (masked with their last 4), live windows, usage by hour and day with the month against
// perMonth (the same figure as the admin API's pool window), refusals with the plan's candidate limit, the deprecated
// operations (the same numbers as GET /routes/deprecated?groupBy=consumer), webhooks; a rotation's overlap on the
// gateway, a revocation, maxKeys; a plan whose keys the provider issues (no key created, rotation and revocation
// still allowed); hostile bodies, content types, origins and webhook targets refused with nothing stored. Isolation: a session of one consumer replays every request the portal's pages make with another consumer's
// key and endpoint ids, and nothing of the other changes in Redis or shows in any answer; a key session never writes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type request from 'supertest';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { Metrics } from '../src/observability/metrics.js';
import type { Lookup } from '../src/outbound/address-guard.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger } from './helpers/limits.js';
import { CheckedApi, OpenApiDocument } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

const TOKEN = generateAdminToken();
const PREFIX = 'papi:';
const ks = new Keyspace(PREFIX);
const log = captureLogger();
const portalDoc = new OpenApiDocument(new URL('../docs/portal.openapi.yaml', import.meta.url));

/** Host names resolved here (no DNS): a public one, and one an attacker points at loopback. */
const HOSTS: Record<string, string[]> = {
  'hooks.acme.example': ['93.184.216.34'],
  'hooks.globex.example': ['93.184.216.35'],
  'loopback.attacker.example': ['127.0.0.1'],
  'metadata.attacker.example': ['169.254.169.254'],
};
const lookup: Lookup = async (host) => {
  if (host === 'localhost') return [{ address: '127.0.0.1', family: 4 }];
  const found = HOSTS[host];
  if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

let redis: TestRedis;
let client: Redis;
let up: TestUpstream;
let composed: ComposedGateway;
let gw: RunningGateway;
const admin = new CheckedApi({ target: () => gw.adminUrl!, token: TOKEN });

interface Issued {
  id: string;
  key: string;
}
const keys: Record<'a1' | 'a2' | 'b1' | 'b2', Issued> = { a1: { id: '', key: '' }, a2: { id: '', key: '' }, b1: { id: '', key: '' }, b2: { id: '', key: '' } };
let globexEndpoint = '';

/** A portal answer: status, lower-case headers, text and its JSON. */
interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
  /** The body parsed as JSON ({} when it is not): supertest's loose type, so tests can reach into it. */
  body: request.Response['body'];
}

/** Portal calls with one session's cookie; every answer checked against docs/portal.openapi.yaml. */
class Portal {
  static readonly problems: string[] = [];
  calls = 0;
  constructor(readonly cookie: string | undefined) {}

  async call(
    method: string,
    path: string,
    opts: { body?: unknown; raw?: string | Buffer; type?: string | null; headers?: Record<string, string> } = {},
  ): Promise<Answer> {
    const headers: Record<string, string> = { ...(this.cookie ? { cookie: this.cookie } : {}), ...opts.headers };
    const change = method !== 'GET';
    if (opts.type !== null && (change || opts.type !== undefined)) headers['content-type'] = opts.type ?? 'application/json';
    const payload = opts.raw ?? (opts.body !== undefined ? JSON.stringify(opts.body) : change ? '{}' : undefined);
    const res = await fetch(`${gw.portalUrl!}${path}`, { method, headers, redirect: 'manual', ...(payload !== undefined ? { body: payload } : {}) });
    const text = await res.text();
    this.calls++;
    const out: Answer = { status: res.status, headers: Object.fromEntries(res.headers), text, body: {} };
    Portal.problems.push(...portalDoc.check(method, path, out.status, out.headers, text));
    try {
      out.body = JSON.parse(text) as request.Response['body'];
    } catch {}
    return out;
  }

  get(path: string, headers?: Record<string, string>): Promise<Answer> {
    return this.call('GET', path, headers ? { headers } : {});
  }
}

/** A session from a sign-in link the admin API issues, exchanged on the portal as a browser would. */
async function linkSession(consumer: string, actor: string, scopes: string[]): Promise<Portal> {
  const issued = await admin.call('POST', `/consumers/${consumer}/portal-links`, { body: { actor, scopes } });
  expect(issued.status, issued.text).toBe(201);
  const url = new URL(issued.body.url as string);
  // A HEAD first, as a link preview may: it spends nothing.
  const head = await fetch(url, { method: 'HEAD', redirect: 'manual' });
  Portal.problems.push(...portalDoc.check('HEAD', url.pathname, head.status, Object.fromEntries(head.headers), ''));
  const res = await fetch(url, { redirect: 'manual' });
  const text = await res.text();
  Portal.problems.push(...portalDoc.check('GET', url.pathname, res.status, Object.fromEntries(res.headers), text));
  expect(res.status).toBe(303);
  // Once: the same link again is refused, with no cookie.
  const again = await fetch(url, { redirect: 'manual' });
  Portal.problems.push(...portalDoc.check('GET', url.pathname, again.status, Object.fromEntries(again.headers), await again.text()));
  expect([again.status, again.headers.get('set-cookie')]).toEqual([410, null]);
  const cookie = /^(tollgate_portal=[A-Za-z0-9_-]{43});/.exec(res.headers.get('set-cookie') ?? '')?.[1];
  expect(cookie).toBeDefined();
  return new Portal(cookie);
}

/** A session from a key sign-in. */
async function keySession(key: string): Promise<Portal> {
  const p = new Portal(undefined);
  const r = await p.call('POST', '/api/session', { body: { key } });
  expect(r.status, r.text).toBe(200);
  const cookie = /^(tollgate_portal=[A-Za-z0-9_-]{43});/.exec(r.headers['set-cookie'] ?? '')?.[1];
  expect(cookie).toBeDefined();
  return new Portal(cookie);
}

/** One request through the gateway with a key: its status. */
async function through(key: string, path: string): Promise<number> {
  const res = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(10_000) });
  await res.arrayBuffer();
  return res.status;
}

/** The admin API's key creation into a consumer. */
async function adminKey(consumer: string, name: string): Promise<Issued> {
  const r = await admin.call('POST', '/keys', { body: { plan: 'gold', consumer, name } });
  expect(r.status, r.text).toBe(201);
  return { id: r.body.id as string, key: r.body.key as string };
}

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
  up = await TestUpstream.start();
  composed = await composeGateway({
    config: testConfig({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url },
      redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 2000 },
      admin: { port: 0, tokens: [{ id: 'platform', sha256: hashAdminToken(TOKEN) }] },
      portal: { port: 0, webhooks: true, signInsPerMinute: 100 },
      plans: {
        gold: { perMinute: 1000, perDay: 100_000, perMonth: 5000, shadow: { perMinute: 2, enforceFrom: '2099-01-15' } },
        // Keys of its consumers are issued by the provider (the admin API) only.
        issued: { perMinute: 1000, perDay: 100_000, selfServiceKeys: false },
      },
      usage: { flushIntervalMs: 60_000 },
      routes: [
        { path: '/v1/things' },
        {
          method: 'GET',
          path: '/v1/old',
          deprecation: '2026-01-01T00:00:00Z',
          sunset: '2099-06-01T00:00:00Z',
          successor: '/v1/things',
          link: 'https://docs.example.com/migrate-old',
          brownouts: ['2026-01-02T00:00:00Z/PT1H', '2099-03-01T14:00:00Z/PT2H'],
        },
      ],
    }),
    logger: log.logger,
    metrics: new Metrics(),
    env: {},
    upstreamCheckTimeoutMs: 500,
    webhookLookup: lookup,
    delivery: false,
  });
  gw = await startGateway({ gateway: composed, logger: log.logger });

  for (const [id, name] of [
    ['acme', 'Acme Corp'],
    ['globex', 'Globex Industries'],
  ] as const) {
    const r = await admin.call('POST', '/consumers', { body: { id, name, plan: 'gold', maxKeys: 3 } });
    expect(r.status, r.text).toBe(201);
  }
  keys.a1 = await adminKey('acme', 'acme-prod');
  keys.a2 = await adminKey('acme', 'acme-staging');
  keys.b1 = await adminKey('globex', 'globex-prod');
  keys.b2 = await adminKey('globex', 'globex-batch');
  const ep = await admin.call('POST', '/consumers/globex/webhooks', { body: { url: 'https://hooks.globex.example/tollgate' } });
  expect(ep.status, ep.text).toBe(201);
  globexEndpoint = ep.body.id as string;

  // Traffic: acme 5 + 2 + 1 (3 of the 5 past the candidate's 2 a minute), globex 3 + 4.
  for (let i = 0; i < 5; i++) expect(await through(keys.a1.key, '/v1/things')).toBe(200);
  for (let i = 0; i < 2; i++) expect(await through(keys.a1.key, '/v1/old')).toBe(200);
  expect(await through(keys.a2.key, '/v1/old')).toBe(200);
  for (let i = 0; i < 3; i++) expect(await through(keys.b1.key, '/v1/things')).toBe(200);
  for (let i = 0; i < 4; i++) expect(await through(keys.b2.key, '/v1/old')).toBe(200);
  await composed.flushUsage();
}, 120_000);

afterAll(async () => {
  await gw?.shutdown();
  client?.disconnect();
  await up?.close();
  await redis?.stop();
  expect(Portal.problems).toEqual([]);
  expect(admin.problems).toEqual([]);
  // Every operation of the document was tried and answered as it says, its success at least.
  const succeeded = new Set([...portalDoc.seen].filter((s) => /^\S+ [23]\d\d$/.test(s)).map((s) => s.split(' ')[0]));
  const documented = new Set(portalDoc.operations().map((s) => s.split(' ')[0]));
  expect([...documented].filter((op) => !succeeded.has(op))).toEqual([]);
});

describe('a link session (every scope)', () => {
  let alice: Portal;
  beforeAll(async () => {
    alice = await linkSession('acme', 'alice@acme.example', ['keys:read', 'keys:write', 'usage:read', 'webhooks:write']);
  });

  it("GET /api/keys: the consumer's keys, masked with their last 4, never a plaintext or hash", async () => {
    const r = await alice.get('/api/keys');
    expect(r.status, r.text).toBe(200);
    expect(r.headers['cache-control']).toBe('no-store');
    const byId = new Map((r.body.keys as Array<Record<string, string>>).map((k) => [k.id, k]));
    expect([...byId.keys()].sort()).toEqual([keys.a1.id, keys.a2.id].sort());
    expect(byId.get(keys.a1.id)).toMatchObject({ name: 'acme-prod', status: 'active', masked: `tg_…${keys.a1.key.slice(-4)}` });
    expect(r.text).not.toContain(keys.a1.key);
    expect(r.text).not.toMatch(/"hash"|prevHash|[0-9a-f]{64}/);
  });

  it('GET /api/windows: the pool (with the month and the candidate limit) as the admin API reads it; each key, no ban', async () => {
    const r = await alice.get('/api/windows');
    expect(r.status, r.text).toBe(200);
    const pool = r.body.pool as Array<{ name: string; used: number; limit: number; mode: string }>;
    expect(pool.map((w) => [w.name, w.mode])).toEqual([
      ['minute', 'enforce'],
      ['day', 'enforce'],
      ['month', 'enforce'],
      ['minute:shadow', 'shadow'],
    ]);
    const consumer = await admin.get('/consumers/acme');
    const adminMonth = (consumer.body.windows as Array<{ name: string; used: number }>).find((w) => w.name === 'month')!;
    expect(pool.find((w) => w.name === 'month')).toMatchObject({ used: 8, limit: 5000 });
    expect(adminMonth.used).toBe(8);
    expect((r.body.keys as Array<{ id: string; ban: unknown }>).map((k) => [k.id, k.ban])).toEqual(
      [
        [keys.a1.id, null],
        [keys.a2.id, null],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
  });

  it("GET /api/windows reads on the admin connection: nothing of it goes out on the request path's", async () => {
    const monitor = await client.monitor();
    const bySource = new Map<string, string[]>();
    monitor.on('monitor', (_time: string, args: string[], source: string) =>
      bySource.set(source, [...(bySource.get(source) ?? []), String(args[0]).toLowerCase()]),
    );
    // MONITOR names each command's sender by address: CLIENT LIST says which connection that is.
    const named = async () =>
      new Map(
        String(await client.call('CLIENT', 'LIST'))
          .trim()
          .split('\n')
          .map((line) => [/ addr=(\S+)/.exec(line)![1]!, / name=(\S*)/.exec(line)?.[1] ?? ''] as const),
      );
    const r = await alice.get('/api/windows');
    expect(r.status, r.text).toBe(200);
    await new Promise((done) => setTimeout(done, 100));
    await monitor.disconnect();
    const names = await named();
    const scripts = [...bySource].flatMap(([source, cmds]) => cmds.filter((c) => c.startsWith('eval')).map(() => names.get(source) ?? source));
    expect(scripts.length).toBeGreaterThan(0);
    expect(new Set(scripts)).toEqual(new Set(['tollgate-admin']));
  });

  it("GET /api/usage: 720 hours or 30 days, the admin API's figures for the consumer; the month against perMonth is the pool window", async () => {
    const hours = await alice.get('/api/usage?granularity=hour');
    expect(hours.status, hours.text).toBe(200);
    expect(hours.body.buckets).toHaveLength(720);
    const period = `from=${new Date(Date.now() - 86_400_000).toISOString()}&to=${new Date(Date.now() + 3_600_000).toISOString()}`;
    const rows = (await admin.get(`/usage?groupBy=consumer&sort=id&order=asc&${period}`)).body.consumers as Array<Record<string, unknown>>;
    const acme = rows.find((r) => r.consumer === 'acme')!;
    expect(acme).toMatchObject({ admitted: 8, rateLimited: 0 });
    // The pool's minute held 8 of acme's requests against a candidate of 2 a minute: some would have been refused.
    expect(acme.shadowRefused).toBeGreaterThan(0);
    expect(hours.body.totals).toEqual({
      admitted: acme.admitted,
      rateLimited: acme.rateLimited,
      banned: acme.banned,
      upstreamFailed: acme.upstreamFailed,
      shadowRefused: acme.shadowRefused,
    });
    expect(hours.body.month).toMatchObject({ used: 8, perMonth: 5000 });
    const days = await alice.get('/api/usage');
    expect(days.body.granularity).toBe('day');
    expect(days.body.buckets).toHaveLength(30);
    expect(days.body.totals).toEqual(hours.body.totals);
    expect(Date.parse(days.body.month.from)).toBeLessThanOrEqual(Date.now());
    expect(Date.parse(days.body.month.to)).toBeGreaterThan(Date.now());
  });

  it("GET /api/refusals: by day, no bans, the plan's candidate limit with what it would have refused and when it comes", async () => {
    const r = await alice.get('/api/refusals');
    expect(r.status, r.text).toBe(200);
    expect(r.body.days).toBe(30);
    expect(r.body.refusals).toMatchObject({ rateLimited: 0, banned: 0 });
    expect(r.body.refusals.byDay).toHaveLength(30);
    expect(r.body.bans).toEqual([]);
    const usage = await alice.get('/api/usage');
    // enforceFrom as the config gives it (plans.gold.shadow.enforceFrom): a date alone stays a date.
    expect(r.body.shadow).toEqual([
      { window: 'minute', limit: 2, wouldHaveRefused: usage.body.totals.shadowRefused, since: r.body.from, enforceFrom: '2099-01-15' },
    ]);
    expect(r.body.shadow[0].wouldHaveRefused).toBeGreaterThan(0);
  });

  it('GET /api/deprecated: the numbers of GET /routes/deprecated?groupBy=consumer, with successor, link and coming brownouts', async () => {
    const r = await alice.get('/api/deprecated');
    expect(r.status, r.text).toBe(200);
    const report = await admin.get('/routes/deprecated?groupBy=consumer');
    const route = (report.body.routes as Array<{ path: string; consumers: Array<{ consumer: string; calls: number; lastSeen: string }> }>).find(
      (x) => x.path === '/v1/old',
    )!;
    const acme = route.consumers.find((c) => c.consumer === 'acme')!;
    expect(acme.calls).toBe(3);
    expect(r.body.operations).toEqual([
      {
        method: 'GET',
        path: '/v1/old',
        calls7d: acme.calls,
        calls30d: acme.calls,
        lastCall: acme.lastSeen,
        deprecation: '2026-01-01T00:00:00Z',
        sunset: '2099-06-01T00:00:00Z',
        successor: '/v1/things',
        link: 'https://docs.example.com/migrate-old',
        brownouts: [{ start: '2099-03-01T14:00:00.000Z', end: '2099-03-01T16:00:00.000Z' }],
      },
    ]);
  });

  it('webhooks: registered with its secret once, listed without it, private targets refused, deleted', async () => {
    const created = await alice.call('POST', '/api/webhooks', { body: { url: 'https://hooks.acme.example/tollgate', types: ['quota.threshold'] } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.secret).toMatch(/^whsec_/);
    const list = await alice.get('/api/webhooks');
    expect((list.body.webhooks as Array<{ id: string }>).map((w) => w.id)).toEqual([created.body.id]);
    expect(list.text).not.toContain(created.body.secret);
    for (const url of [
      'http://127.0.0.1/hook',
      'http://localhost:8080/hook',
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.5/hook',
      'http://[::1]/hook',
      'http://2130706433/hook',
      'http://0x7f.1/hook',
      'http://loopback.attacker.example/hook',
      'http://metadata.attacker.example/hook',
      'ftp://hooks.acme.example/hook',
      'https://user:pw@hooks.acme.example/hook',
      `https://hooks.acme.example/${'a'.repeat(2100)}`,
    ]) {
      const r = await alice.call('POST', '/api/webhooks', { body: { url } });
      expect(r.status, `${url}: ${r.text}`).toBe(400);
      expect(r.body.code).toBe('webhook_url_refused');
    }
    expect((await alice.get('/api/webhooks')).body.webhooks).toHaveLength(1);
    const audit = log.lines.find((l) => l.msg === 'admin change' && l.action === 'webhook.create' && l.endpointId === created.body.id);
    expect(audit).toMatchObject({ by: 'portal:alice@acme.example', consumerId: 'acme' });
    const gone = await alice.call('DELETE', `/api/webhooks/${created.body.id}`);
    expect(gone.status, gone.text).toBe(204);
    expect((await alice.get('/api/webhooks')).body.webhooks).toEqual([]);
    const again = await alice.call('DELETE', `/api/webhooks/${created.body.id}`);
    expect(again.status).toBe(404);
  });

  it('hostile input: unknown fields, a consumer named, odd types, huge bodies, another origin, bad overlaps and names', async () => {
    const before = (await alice.get('/api/keys')).body.keys;
    const refused: Array<[string, string, Parameters<Portal['call']>[2], number, string]> = [
      ['POST', '/api/keys', { body: { consumer: 'globex' } }, 400, 'invalid_request'],
      ['POST', '/api/keys', { body: { name: 'x', plan: 'gold' } }, 400, 'invalid_request'],
      ['POST', '/api/keys', { body: { name: 'bell\u0007' } }, 400, 'invalid_request'],
      ['POST', '/api/keys', { body: { name: 'line\nbreak' } }, 400, 'invalid_request'],
      ['POST', '/api/keys', { body: { name: '\u001b[31mred' } }, 400, 'invalid_request'],
      ['POST', '/api/keys', { body: { name: 'n'.repeat(201) } }, 400, 'invalid_request'],
      ['POST', '/api/keys', { body: { name: '' } }, 400, 'invalid_request'],
      ['POST', '/api/keys', { body: [] }, 400, 'invalid_request'],
      ['POST', '/api/keys', { raw: '{"name":' }, 400, 'invalid_json'],
      ['POST', '/api/keys', { raw: JSON.stringify({ name: 'x'.repeat(20_000) }) }, 413, 'payload_too_large'],
      ['POST', '/api/keys', { raw: Buffer.alloc(200 * 1024, 0x61) }, 413, 'payload_too_large'],
      ['POST', '/api/keys', { raw: 'name=x', type: 'application/x-www-form-urlencoded' }, 403, 'forbidden'],
      ['POST', '/api/keys', { raw: '{"name":"x"}', type: 'text/plain' }, 403, 'forbidden'],
      ['POST', '/api/keys', { raw: '{"name":"x"}', type: null }, 403, 'forbidden'],
      ['POST', '/api/keys', { raw: '{"name":"x"}', type: 'application/json; charset=latin1' }, 415, 'unsupported_media_type'],
      ['POST', '/api/keys', { body: { name: 'x' }, headers: { origin: 'https://evil.example' } }, 403, 'forbidden'],
      ['POST', `/api/keys/${keys.a1.id}/rotate`, { body: { overlapSeconds: -1 } }, 400, 'invalid_request'],
      ['POST', `/api/keys/${keys.a1.id}/rotate`, { body: { overlapSeconds: 604_801 } }, 400, 'invalid_request'],
      ['POST', `/api/keys/${keys.a1.id}/rotate`, { body: { overlapSeconds: 1.5 } }, 400, 'invalid_request'],
      ['POST', `/api/keys/${keys.a1.id}/rotate`, { body: { overlapSeconds: '60' } }, 400, 'invalid_request'],
      ['POST', `/api/keys/${keys.a1.id}/rotate`, { body: { overlapSeconds: 60, graceSeconds: 60 } }, 400, 'invalid_request'],
      ['POST', `/api/keys/${keys.a1.id}/rotate`, { body: { overlapSeconds: 60, consumer: 'globex' } }, 400, 'invalid_request'],
      ['POST', `/api/keys/${keys.a1.id}/revoke`, { body: { consumer: 'acme' } }, 400, 'invalid_request'],
      ['POST', '/api/webhooks', { body: { url: 'https://hooks.acme.example/x', consumer: 'globex' } }, 400, 'invalid_request'],
      ['POST', '/api/webhooks', { body: { url: 'https://hooks.acme.example/x', types: ['nope'] } }, 400, 'invalid_request'],
      ['DELETE', `/api/webhooks/${globexEndpoint}`, { body: { consumer: 'globex' } }, 400, 'invalid_request'],
    ];
    for (const [method, path, opts, status, code] of refused) {
      const r = await alice.call(method, path, opts);
      expect(r.status, `${method} ${path} ${JSON.stringify(opts).slice(0, 120)}: ${r.text}`).toBe(status);
      expect(r.body.code).toBe(code);
      expect(r.text).not.toMatch(/\n\s+at |\.ts:\d+/);
    }
    for (const q of [
      '/api/keys?consumer=globex',
      '/api/usage?granularity=week',
      '/api/usage?granularity=day&granularity=hour',
      '/api/refusals?consumer=globex',
    ]) {
      const r = await alice.get(q);
      expect(r.status, `${q}: ${r.text}`).toBe(400);
    }
    expect((await alice.get('/api/keys')).body.keys).toEqual(before);
  });

  it('rotate with an overlap: both keys work on the gateway until it ends, then only the new one', async () => {
    const created = await alice.call('POST', '/api/keys', { body: { name: 'ci runner' } });
    expect(created.status, created.text).toBe(201);
    expect(created.headers['cache-control']).toBe('no-store');
    expect(created.body).toMatchObject({ name: 'ci runner', status: 'active', masked: `tg_…${String(created.body.key).slice(-4)}` });
    const old = created.body.key as string;
    expect(await through(old, '/v1/things')).toBe(200);
    const audit = log.lines.find((l) => l.msg === 'admin change' && l.action === 'create' && l.keyId === created.body.id);
    expect(audit).toMatchObject({ by: 'portal:alice@acme.example', consumerId: 'acme' });

    const rotated = await alice.call('POST', `/api/keys/${created.body.id}/rotate`, { body: { overlapSeconds: 2 } });
    expect(rotated.status, rotated.text).toBe(200);
    const fresh = rotated.body.key as string;
    expect(fresh).not.toBe(old);
    expect(rotated.body).toMatchObject({ status: 'grace', graceUntil: rotated.body.overlapUntil, masked: `tg_…${fresh.slice(-4)}` });
    expect(await through(fresh, '/v1/things')).toBe(200);
    expect(await through(old, '/v1/things')).toBe(200);
    const listed = (await alice.get('/api/keys')).body.keys.find((k: { id: string }) => k.id === created.body.id);
    expect(listed).toMatchObject({ status: 'grace', graceUntil: rotated.body.overlapUntil });
    const until = Date.parse(rotated.body.overlapUntil as string);
    await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now()) + 200));
    await waitFor(async () => (await through(old, '/v1/things')) === 401, 'the old key refused once the overlap ended', 10_000, 200);
    expect(await through(fresh, '/v1/things')).toBe(200);
    expect((await alice.get('/api/keys')).body.keys.find((k: { id: string }) => k.id === created.body.id).status).toBe('active');

    // Past maxKeys (3: a1, a2 and this one): 409 consumer_full, nothing made.
    const full = await alice.call('POST', '/api/keys', { body: { name: 'one too many' } });
    expect(full.status, full.text).toBe(409);
    expect(full.body.code).toBe('consumer_full');

    const revoked = await alice.call('POST', `/api/keys/${created.body.id}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body.status).toBe('revoked');
    await waitFor(async () => (await through(fresh, '/v1/things')) === 401, 'the revoked key refused', 10_000, 100);
    const twice = await alice.call('POST', `/api/keys/${created.body.id}/revoke`);
    expect(twice.body).toEqual(revoked.body);
    const rotateRevoked = await alice.call('POST', `/api/keys/${created.body.id}/rotate`, { body: {} });
    expect(rotateRevoked.status, rotateRevoked.text).toBe(409);
    expect(rotateRevoked.body.code).toBe('key_revoked');
    const list = (await alice.get('/api/keys')).body.keys as Array<{ id: string; status: string }>;
    expect(list[list.length - 1]).toMatchObject({ id: created.body.id, status: 'revoked' });
    // A revoked key makes room under maxKeys again.
    const room = await alice.call('POST', '/api/keys', { body: {} });
    expect(room.status, room.text).toBe(201);
    expect((await alice.call('POST', `/api/keys/${room.body.id}/revoke`)).status).toBe(200);
  }, 60_000);
});

describe('a key session', () => {
  it('sees its own key alone, and can never create, rotate, revoke or touch webhooks', async () => {
    const mine = await keySession(keys.a1.key);
    const ks1 = await mine.get('/api/keys');
    expect((ks1.body.keys as Array<{ id: string }>).map((k) => k.id)).toEqual([keys.a1.id]);
    const windows = await mine.get('/api/windows');
    expect((windows.body.keys as Array<{ id: string }>).map((k) => k.id)).toEqual([keys.a1.id]);
    const usage = await mine.get('/api/usage');
    // a1: its 7 requests, as the admin API splits its usage by consumer; its month from the ledger, no cap of its own.
    const period = `from=${new Date(Date.now() - 86_400_000).toISOString()}&to=${new Date(Date.now() + 3_600_000).toISOString()}`;
    const split = await admin.get(`/keys/${keys.a1.id}/usage?granularity=day&groupBy=consumer&${period}`);
    const underAcme = (split.body.consumers as Array<{ consumer: string | null; totals: Record<string, number> }>).find((c) => c.consumer === 'acme')!;
    expect(underAcme.totals.admitted).toBe(7);
    expect(usage.body.totals).toEqual({
      admitted: 7,
      rateLimited: underAcme.totals.rateLimited,
      banned: underAcme.totals.banned,
      upstreamFailed: underAcme.totals.upstreamFailed,
      shadowRefused: underAcme.totals.shadowRefused,
    });
    expect(usage.body.month).toMatchObject({ used: 7, perMonth: null });
    const deprecated = await mine.get('/api/deprecated');
    expect(deprecated.body.operations).toMatchObject([{ path: '/v1/old', calls30d: 2, calls7d: 2 }]);
    for (const text of [ks1.text, windows.text, usage.text, deprecated.text]) expect(text).not.toContain(keys.a2.id);

    const denied: Array<[string, string, unknown]> = [
      ['POST', '/api/keys', { name: 'mine now' }],
      ['POST', `/api/keys/${keys.a1.id}/rotate`, { overlapSeconds: 0 }],
      ['POST', `/api/keys/${keys.a1.id}/revoke`, {}],
      ['POST', `/api/keys/${keys.a2.id}/rotate`, {}],
      ['POST', `/api/keys/${keys.a2.id}/revoke`, {}],
      ['POST', `/api/keys/${keys.b1.id}/revoke`, {}],
      ['GET', '/api/webhooks', undefined],
      ['POST', '/api/webhooks', { url: 'https://hooks.acme.example/mine' }],
      ['DELETE', `/api/webhooks/${globexEndpoint}`, {}],
    ];
    for (const [method, path, body] of denied) {
      const r = await mine.call(method, path, body === undefined ? {} : { body });
      expect(r.status, `${method} ${path}: ${r.text}`).toBe(403);
      expect(r.body.code).toBe('portal_scope_denied');
    }
    expect(await through(keys.a1.key, '/v1/things')).toBe(200);
    const records = (await admin.get('/consumers/acme/keys')).body.keys as Array<{ id: string; status: string }>;
    expect(
      records
        .filter((k) => k.status === 'active')
        .map((k) => k.id)
        .sort(),
    ).toEqual([keys.a1.id, keys.a2.id].sort());

    // Signed out: the cookie names no session any more.
    const out = await mine.call('POST', '/api/session/end');
    expect(out.status, out.text).toBe(204);
    const after = await mine.get('/api/keys');
    expect(after.status).toBe(401);
    expect(after.body.code).toBe('portal_session_required');
  });

  it('a read-only link session holds no write scope either', async () => {
    const reader = await linkSession('acme', 'auditor@acme.example', ['keys:read', 'usage:read']);
    for (const [method, path] of [
      ['POST', '/api/keys'],
      ['POST', `/api/keys/${keys.a1.id}/rotate`],
      ['POST', `/api/keys/${keys.a1.id}/revoke`],
      ['GET', '/api/webhooks'],
    ] as const) {
      const r = await reader.call(method, path);
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.body.code).toBe('portal_scope_denied');
    }
    const noSession = await new Portal(undefined).get('/api/keys');
    expect(noSession.status).toBe(401);
    expect(noSession.body.code).toBe('portal_session_required');
  });
});

describe('a plan whose keys the provider issues (selfServiceKeys: false)', () => {
  let k1: Issued;
  let k2: Issued;
  beforeAll(async () => {
    const c = await admin.call('POST', '/consumers', { body: { id: 'initech', name: 'Initech', plan: 'issued', maxKeys: 5 } });
    expect(c.status, c.text).toBe(201);
    for (const name of ['initech-prod', 'initech-batch']) {
      const r = await admin.call('POST', '/keys', { body: { plan: 'issued', consumer: 'initech', name } });
      expect(r.status, r.text).toBe(201);
      if (name === 'initech-prod') k1 = { id: r.body.id as string, key: r.body.key as string };
      else k2 = { id: r.body.id as string, key: r.body.key as string };
    }
  });

  /** The consumer's key records as the admin API lists them. */
  const initechKeys = async (): Promise<Array<{ id: string; status: string }>> => {
    const r = await admin.get('/consumers/initech/keys');
    expect(r.status, r.text).toBe(200);
    return r.body.keys as Array<{ id: string; status: string }>;
  };

  it('GET /api/me: canCreateKeys is keys:write and a plan that allows it', async () => {
    const full = await linkSession('initech', 'ops@initech.example', ['keys:read', 'keys:write', 'usage:read']);
    const me = await full.get('/api/me');
    expect(me.status, me.text).toBe(200);
    expect(me.body).toMatchObject({ consumer: { id: 'initech', plan: 'issued' }, canCreateKeys: false });
    // On a plan that says nothing (gold): keys:write is enough; without it, never.
    const acmeWriter = await linkSession('acme', 'dev@acme.example', ['keys:read', 'keys:write']);
    expect((await acmeWriter.get('/api/me')).body.canCreateKeys).toBe(true);
    const acmeReader = await linkSession('acme', 'viewer@acme.example', ['keys:read']);
    expect((await acmeReader.get('/api/me')).body.canCreateKeys).toBe(false);
    const keyOnly = await keySession(k1.key);
    expect((await keyOnly.get('/api/me')).body.canCreateKeys).toBe(false);
  });

  it('POST /api/keys: 403 forbidden in words, and no key is made', async () => {
    const full = await linkSession('initech', 'ops@initech.example', ['keys:read', 'keys:write']);
    const before = await initechKeys();
    expect(before).toHaveLength(2);
    for (const body of [{ name: 'mine' }, {}]) {
      const r = await full.call('POST', '/api/keys', { body });
      expect(r.status, r.text).toBe(403);
      expect(r.body).toMatchObject({ code: 'forbidden', message: 'Your plan does not let you create keys here: ask your provider for one.' });
      expect(r.text).not.toMatch(/"key":/);
    }
    const after = await initechKeys();
    expect(after.map((k) => [k.id, k.status]).sort()).toEqual(before.map((k) => [k.id, k.status]).sort());
    // The provider still issues them through the admin API.
    const issued = await admin.call('POST', '/keys', { body: { plan: 'issued', consumer: 'initech', name: 'from-the-provider' } });
    expect(issued.status, issued.text).toBe(201);
    expect(await initechKeys()).toHaveLength(3);
    expect((await admin.call('POST', `/keys/${issued.body.id as string}/revoke`)).status).toBe(200);
  });

  it('rotating and revoking stay allowed: a leaked key is replaced and stopped from the portal', async () => {
    const full = await linkSession('initech', 'ops@initech.example', ['keys:read', 'keys:write']);
    const rotated = await full.call('POST', `/api/keys/${k1.id}/rotate`, { body: { overlapSeconds: 0 } });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body).toMatchObject({ id: k1.id, status: 'active' });
    const fresh = rotated.body.key as string;
    expect(fresh).not.toBe(k1.key);
    await waitFor(async () => (await through(k1.key, '/v1/things')) === 401, 'the rotated key refused', 10_000, 100);
    expect(await through(fresh, '/v1/things')).toBe(200);

    const revoked = await full.call('POST', `/api/keys/${k2.id}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body).toMatchObject({ id: k2.id, status: 'revoked' });
    await waitFor(async () => (await through(k2.key, '/v1/things')) === 401, 'the revoked key refused', 10_000, 100);
    // No key was added on the way: the rotated one is the only active key left.
    const records = await initechKeys();
    expect(records.filter((k) => k.status === 'active').map((k) => k.id)).toEqual([k1.id]);
  });
});

describe('isolation', () => {
  it("the change itself is judged on the record it writes over: rotate and revoke within acme never reach globex's key", async () => {
    // The portal looks the key up within its consumer first; a key moved between that look-up and the write is
    // refused by the compare-and-set's own check (what these calls exercise directly).
    const before = await client.get(ks.keyRecord(keys.b1.id));
    const actor = { by: 'portal:mallory@acme.example', consumer: 'acme' };
    await expect(composed.admin.lifecycle.rotate(keys.b1.id, 0, actor, { within: 'acme' })).rejects.toMatchObject({ code: 'not_found' });
    await expect(composed.admin.lifecycle.revoke(keys.b1.id, actor, { within: 'acme' })).rejects.toMatchObject({ code: 'not_found' });
    expect(await client.get(ks.keyRecord(keys.b1.id))).toBe(before);
    expect(await through(keys.b1.key, '/v1/things')).toBe(200);
  });

  /** What of globex is in Redis: every name holding its id or one of its key or endpoint ids, DUMPed; its endpoint's record. */
  async function globexState(): Promise<Record<string, string | null>> {
    const needles = ['globex', keys.b1.id, keys.b2.id, globexEndpoint];
    const out: Record<string, string | null> = {};
    for (const name of (await client.keys(`${PREFIX}*`)).sort()) {
      if (!needles.some((n) => name.includes(n))) continue;
      // A minute's or an hour's counter ends by itself while the test runs; the day's and month's stay and count alike.
      const ttl = await client.pttl(name);
      if (ttl >= 0 && ttl < 3_600_000) continue;
      const dumped = await client.dumpBuffer(name);
      out[name] = dumped ? dumped.toString('base64') : null;
    }
    out['endpoint record'] = await client.hget(ks.eventEndpoints(), globexEndpoint);
    return out;
  }

  /** What the admin API reads of globex: its record, its keys, each key, its endpoints. */
  async function globexViews(): Promise<unknown[]> {
    return Promise.all(
      ['/consumers/globex', '/consumers/globex/keys', `/keys/${keys.b1.id}`, `/keys/${keys.b2.id}`, '/consumers/globex/webhooks'].map(async (p) => {
        const r = await admin.get(p);
        expect(r.status, `${p}: ${r.text}`).toBe(200);
        // A pool window's resetAt moves with the clock once it has ended; its used is what would change.
        const { windows, ...rest } = r.body as Record<string, unknown>;
        return { ...rest, ...(Array.isArray(windows) ? { used: windows.map((w: { name: string; used: number }) => [w.name, w.used]) } : {}) };
      }),
    );
  }

  it("a session of acme replaying every page's requests with globex's ids: 403/404, nothing of globex changed or shown", async () => {
    const alice = await linkSession('acme', 'mallory@acme.example', ['keys:read', 'keys:write', 'usage:read', 'webhooks:write']);
    const keySide = await keySession(keys.a2.key);
    const secrets = [
      keys.b1.id,
      keys.b2.id,
      keys.b1.key,
      keys.b2.key,
      globexEndpoint,
      'globex',
      'Globex',
      'hooks.globex.example',
      'globex-prod',
      'globex-batch',
    ];
    const stateBefore = await globexState();
    const viewsBefore = await globexViews();
    expect(Object.keys(stateBefore).length).toBeGreaterThan(3);

    const missing = 'key_doesnotexist0000';
    const missingEp = 'ep_000000000000000000000000';
    const reads = [
      '/api/me',
      '/api/keys',
      '/api/windows',
      '/api/usage',
      '/api/usage?granularity=hour',
      '/api/usage?granularity=day',
      '/api/refusals',
      '/api/deprecated',
    ];
    /** Identity claimed by headers: never believed. */
    const claims = { 'x-consumer-id': 'globex', 'x-tollgate-consumer': 'globex', 'x-forwarded-user': 'globex', authorization: `Bearer ${keys.b1.key}` };
    const answers: Answer[] = [];
    let controls = 0;
    const expectRefused = (r: Answer, what: string, status: number, code: string): void => {
      expect(r.status, `${what}: ${r.text}`).toBe(status);
      expect(r.body.code, what).toBe(code);
    };

    for (const session of [alice, keySide]) {
      for (const path of reads) {
        const plain = await session.get(path);
        expect(plain.status, `${path}: ${plain.text}`).toBe(200);
        const claimed = await session.get(path, claims);
        expect(claimed.status, `${path} with claims`).toBe(200);
        answers.push(plain, claimed);
      }
    }
    const webhooks = await alice.get('/api/webhooks');
    expect(webhooks.status).toBe(200);
    answers.push(webhooks);

    // Every action of the pages, on globex's ids, answered exactly as on an id nobody has.
    for (const session of [alice, keySide]) {
      const notFoundCode = session === alice ? 404 : 403;
      const code = session === alice ? 'not_found' : 'portal_scope_denied';
      for (const [id, action, body] of [
        [keys.b1.id, 'rotate', { overlapSeconds: 0 }],
        [keys.b2.id, 'rotate', {}],
        [keys.b1.id, 'revoke', {}],
        [keys.b2.id, 'revoke', {}],
      ] as const) {
        const theirs = await session.call('POST', `/api/keys/${id}/${action}`, { body, headers: claims });
        const nobody = await session.call('POST', `/api/keys/${missing}/${action}`, { body });
        controls++;
        expectRefused(theirs, `${action} ${id}`, notFoundCode, code);
        // No oracle: another consumer's id is answered exactly as an id nobody has.
        expect(theirs.text).toBe(nobody.text);
        answers.push(theirs);
      }
      const del = await session.call('DELETE', `/api/webhooks/${globexEndpoint}`, { headers: claims });
      const delNobody = await session.call('DELETE', `/api/webhooks/${missingEp}`);
      controls++;
      expectRefused(del, 'delete their endpoint', session === alice ? 404 : 403, session === alice ? 'not_found' : 'portal_scope_denied');
      expect(del.text).toBe(delNobody.text);
      answers.push(del);
      for (const [path, body] of [
        ['/api/keys', { consumer: 'globex' }],
        ['/api/keys', { name: 'x', consumer: 'globex' }],
        ['/api/webhooks', { url: 'https://hooks.acme.example/x', consumer: 'globex' }],
      ] as const) {
        const r = await session.call('POST', path, { body, headers: claims });
        expect(r.status, `${path} ${JSON.stringify(body)}`).toBe(session === alice ? 400 : 403);
        answers.push(r);
      }
    }
    // acme's own key, through a key session of its other key: the same 403 (a key session writes nothing).
    const sibling = await keySide.call('POST', `/api/keys/${keys.a1.id}/revoke`);
    expectRefused(sibling, 'a key session revoking its sibling', 403, 'portal_scope_denied');
    controls++;

    for (const a of answers) for (const s of secrets) expect(a.text, `an answer holds "${s}"`).not.toContain(s);
    expect(await globexState()).toEqual(stateBefore);
    expect(await globexViews()).toEqual(viewsBefore);
    expect(await through(keys.b1.key, '/v1/things')).toBe(200);
    expect(await through(keys.b2.key, '/v1/things')).toBe(200);

    // Every request of the two sessions is one of those checked above: the replayed ones and the controls beside them.
    expect(alice.calls + keySide.calls).toBe(answers.length + controls);
    console.log(
      `portal isolation: ${answers.length} requests replayed by acme's link and key sessions with globex's ids or identity claims (+${controls} controls with ids nobody has or acme's own), all refused or showing nothing of globex`,
    );
    expect(answers.length).toBe(49);
  }, 60_000);
});
