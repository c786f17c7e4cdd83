// The admin HTTP API (docs: "Admin API") on real Redis, through the real listeners: two gateway instances composed
// as `tollgate serve` composes them (composeGateway + startGateway), one with admin tokens and one without, in front
// of one upstream. Every endpoint's success and failures; changes through the API reach the other instance within
// a second; every change is audited; and every answer the admin API gives here is checked against
// docs/admin.openapi.yaml, so the document cannot drift from the code.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { composeGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { hashAdminToken, generateAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { Metrics } from '../src/observability/metrics.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger, metricValue, waitFor } from './helpers/limits.js';
import { OpenApiDocument } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import type { Redis } from 'ioredis';
import { auditOf, runCli, tempDir, withoutAudit } from './helpers/cli.js';
import { keySubject } from '../src/limits/subject.js';

const doc = new OpenApiDocument(new URL('../docs/admin.openapi.yaml', import.meta.url));
const PREFIX = 'adm:';
const ks = new Keyspace(PREFIX);
const PORTAL_TOKEN = generateAdminToken();
const ENV_TOKEN = generateAdminToken();

let redis: TestRedis;
let client: Redis;
let up: TestUpstream;
let a: RunningGateway; // admin API on, tokens "portal" (config) and "env" (TOLLGATE_ADMIN_TOKEN)
let b: RunningGateway; // no admin token: its admin API is off
const logA = captureLogger();
const logB = captureLogger();
const problems: string[] = [];

function config(tokens: Array<{ id: string; sha256: string }>, maxFailuresPerMinute = 10) {
  return testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 1000 },
    admin: { port: 0, tokens, maxFailuresPerMinute },
    plans: { big: { perMinute: 100, perDay: 1000 }, small: { perMinute: 3, perDay: 1000 }, one: { perMinute: 1, perDay: 1000 } },
    anonymous: { perMinute: 1000 },
    ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [120], resetAfterSeconds: 3600 },
  });
}

async function start(cfg: ReturnType<typeof config>, logger: ReturnType<typeof captureLogger>, env: NodeJS.ProcessEnv = {}): Promise<RunningGateway> {
  const gateway = await composeGateway({ config: cfg, logger: logger.logger, metrics: new Metrics(), env, upstreamCheckTimeoutMs: 500 });
  return startGateway({ gateway, logger: logger.logger });
}

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  text: string;
}

/** One admin API call, checked against the OpenAPI document. */
async function admin(
  method: string,
  path: string,
  opts: { body?: unknown; raw?: string; type?: string; token?: string | null; base?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.token !== null) headers.authorization = `Bearer ${opts.token ?? PORTAL_TOKEN}`;
  let body: string | undefined;
  if (opts.raw !== undefined || opts.body !== undefined) {
    body = opts.raw ?? JSON.stringify(opts.body);
    headers['content-type'] = opts.type ?? 'application/json';
  }
  const res = await fetch(`${opts.base ?? a.adminUrl}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  problems.push(...doc.check(method, path, res.status, Object.fromEntries(res.headers), text));
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, headers: res.headers, body: parsed, text };
}

async function call(gw: RunningGateway, key: string | undefined, path = '/v1/things'): Promise<Answer> {
  const res = await fetch(`${gw.url}${path}`, { headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, headers: res.headers, body: parsed, text };
}

async function createKey(body: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const r = await admin('POST', '/keys', { body });
  expect(r.status, r.text).toBe(201);
  return { id: String(r.body.id), key: String(r.body.key) };
}

function audits(): Array<Record<string, unknown>> {
  return logA.lines.filter((l) => l.msg === 'admin change');
}

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
  up = await TestUpstream.start();
  a = await start(config([{ id: 'portal', sha256: hashAdminToken(PORTAL_TOKEN) }]), logA, { TOLLGATE_ADMIN_TOKEN: ENV_TOKEN });
  b = await start(config([]), logB);
}, 120_000);

afterAll(async () => {
  await a?.shutdown();
  await b?.shutdown();
  client?.disconnect();
  await up?.close();
  await redis?.stop();
});

describe('the admin listener', () => {
  it('runs only with a token, apart from the gateway port, and says so at start-up', async () => {
    expect(a.adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(a.adminUrl).not.toBe(a.url);
    expect(logA.lines.find((l) => l.msg === 'admin API listening')?.url).toBe(a.adminUrl);
    expect(b.adminUrl).toBeUndefined();
    expect(logB.messages()).toContain('admin API off: no admin token configured (admin.tokens in the config, or TOLLGATE_ADMIN_TOKEN)');
    // Admin routes never appear on the gateway port.
    for (const [method, path] of [
      ['GET', '/keys'],
      ['POST', '/keys'],
      ['GET', '/plans'],
      ['GET', '/openapi.json'],
    ] as const) {
      const r = await fetch(`${a.url}${path}`, { method, headers: { authorization: `Bearer ${PORTAL_TOKEN}` } });
      expect(r.status, `${method} ${path}`).toBe(404);
    }
  });

  it('serves its OpenAPI document, the one in the repository', async () => {
    const r = await admin('GET', '/openapi.json', { token: null });
    expect(r.status).toBe(200);
    expect(r.body).toEqual(parse(readFileSync(new URL('../docs/admin.openapi.yaml', import.meta.url), 'utf8')));
  });

  it('refuses a missing token, a wrong one and a gateway key; an admin token opens nothing on the gateway port', async () => {
    const missing = await admin('GET', '/plans', { token: null });
    expect(missing.status).toBe(401);
    expect(missing.body.code).toBe('missing_admin_token');
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="tollgate-admin"');
    const wrong = await admin('GET', '/plans', { token: generateAdminToken() });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe('invalid_admin_token');
    expect(wrong.headers.get('www-authenticate')).toBe('Bearer realm="tollgate-admin", error="invalid_token"');
    const { key } = await createKey({ plan: 'big' });
    const gatewayKey = await admin('GET', '/keys', { token: key });
    expect(gatewayKey.status).toBe(401);
    expect(gatewayKey.body.code).toBe('invalid_admin_token');
    const onGateway = await call(a, PORTAL_TOKEN);
    expect(onGateway.status).toBe(401);
    expect(onGateway.body.code).toBe('invalid_api_key');
    // Both configured tokens work: the file's and the environment's.
    expect((await admin('GET', '/plans', { token: ENV_TOKEN })).status).toBe(200);
  });

  it('throttles token guessing per address: wrong tokens get 429 past maxFailuresPerMinute, a right token and a live session never do', async () => {
    const log = captureLogger();
    const gw = await start(config([{ id: 'portal', sha256: hashAdminToken(PORTAL_TOKEN) }], 3), log);
    try {
      // An admin signed in to the dashboard before someone behind the same address (a TLS proxy) starts guessing.
      const signIn = (token: string) =>
        fetch(`${gw.adminUrl}/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
      const signedIn = await signIn(PORTAL_TOKEN);
      expect(signedIn.status).toBe(204);
      const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0]!;
      for (let i = 0; i < 3; i++) expect((await admin('GET', '/keys', { base: gw.adminUrl, token: `tga_guess${i}` })).status).toBe(401);
      const fourth = await admin('GET', '/keys', { base: gw.adminUrl, token: 'tga_guess3' });
      expect(fourth.status).toBe(429);
      expect(fourth.body.code).toBe('rate_limit_exceeded');
      expect(Number(fourth.headers.get('retry-after'))).toBeGreaterThan(0);
      // The right token reads and changes; the session reads; a new sign-in with the right token works.
      expect((await admin('GET', '/keys', { base: gw.adminUrl })).status).toBe(200);
      expect((await admin('POST', '/keys', { base: gw.adminUrl, body: { plan: 'big' } })).status).toBe(201);
      const bySession = await fetch(`${gw.adminUrl}/keys`, { headers: { cookie } });
      expect(bySession.status).toBe(200);
      expect((await signIn(PORTAL_TOKEN)).status).toBe(204);
      // Wrong guesses stay throttled, by bearer, by sign-in, and a request with no credential at all.
      expect((await admin('GET', '/keys', { base: gw.adminUrl, token: 'tga_guess4' })).status).toBe(429);
      expect((await admin('GET', '/keys', { base: gw.adminUrl, token: 'tga_guess5' })).status).toBe(429);
      expect((await signIn('tga_guess6')).status).toBe(429);
      expect((await admin('GET', '/keys', { base: gw.adminUrl, token: null })).status).toBe(429);
      // A forged or stale cookie is no credential: throttled like a guess.
      expect((await fetch(`${gw.adminUrl}/keys`, { headers: { cookie: 'tollgate_session=forged' } })).status).toBe(429);
      expect(metricValue(await gw.metrics.registry.metrics(), 'tollgate_admin_auth_failures_total', { reason: 'throttled' })).toBe(6);
    } finally {
      await gw.shutdown();
    }
  });
});

describe('keys through the admin API', () => {
  it('POST /keys issues a key that works on every instance, shown once, and audits it', async () => {
    const r = await admin('POST', '/keys', {
      body: { plan: 'big', name: 'acme-prod', perDay: 500, expiresAt: '2099-01-01T00:00:00Z', metadata: { customer: 'c_42', tier: 'gold' } },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ plan: 'big', name: 'acme-prod', perDay: 500, status: 'active', metadata: { customer: 'c_42', tier: 'gold' } });
    expect(r.headers.get('location')).toBe(`/keys/${r.body.id}`);
    expect((await call(b, String(r.body.key))).status).toBe(200);
    const read = await admin('GET', `/keys/${r.body.id}`);
    expect(read.text).not.toContain(String(r.body.key));
    expect(read.text).not.toContain('hash');
    const line = audits().find((l) => l.keyId === r.body.id);
    expect(line).toMatchObject({ action: 'create', by: 'portal', reqId: r.headers.get('x-request-id') });
    expect(JSON.stringify(logA.lines)).not.toContain(String(r.body.key));
    expect(JSON.stringify(logA.lines)).not.toContain(PORTAL_TOKEN);
  });

  it('answers that carry a plaintext key (POST /keys, rotate) are never stored by a cache; other key answers carry no such rule', async () => {
    const created = await admin('POST', '/keys', { body: { plan: 'big', name: 'no-store' } });
    expect(created.status).toBe(201);
    expect(created.headers.get('cache-control')).toBe('no-store');
    const rotated = await admin('POST', `/keys/${String(created.body.id)}/rotate`, { body: { graceSeconds: 0 } });
    expect(rotated.status).toBe(200);
    expect(String(rotated.body.key)).not.toBe(String(created.body.key));
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    // A read never shows the key: no reason to forbid caching it here (the header is for secrets only).
    const read = await admin('GET', `/keys/${String(created.body.id)}`);
    expect(read.status).toBe(200);
    expect(read.headers.get('cache-control')).toBeNull();
  });

  it('POST /keys refuses bad JSON, unknown fields, wrong types, an unknown plan, other media types and big bodies', async () => {
    const badJson = await admin('POST', '/keys', { raw: '{"plan": ' });
    expect([badJson.status, badJson.body.code]).toEqual([400, 'invalid_json']);
    const bad = await admin('POST', '/keys', { body: { plan: 7, perMinute: 0, expiresAt: 'tomorrow', colour: 'red', metadata: { 'bad name': 'x' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('invalid_request');
    const paths = (bad.body.problems as Array<{ path: string }>).map((p) => p.path).sort();
    expect(paths).toEqual(['body.colour', 'body.expiresAt', 'body.metadata.bad name', 'body.perMinute', 'body.plan']);
    const missing = await admin('POST', '/keys', { body: {} });
    expect((missing.body.problems as Array<{ path: string }>).map((p) => p.path)).toEqual(['body.plan']);
    const unknownPlan = await admin('POST', '/keys', { body: { plan: 'platinum' } });
    expect([unknownPlan.status, unknownPlan.body.code]).toEqual([400, 'unknown_plan']);
    const form = await admin('POST', '/keys', { raw: 'plan=big', type: 'application/x-www-form-urlencoded' });
    expect([form.status, form.body.code]).toEqual([415, 'unsupported_media_type']);
    const huge = await admin('POST', '/keys', { body: { plan: 'big', name: 'x'.repeat(70_000) } });
    expect([huge.status, huge.body.code]).toEqual([413, 'payload_too_large']);
    const notObject = await admin('POST', '/keys', { raw: '[1,2]' });
    expect(notObject.status).toBe(400);
  });

  it('GET /keys pages with a cursor and filters by plan, status and name prefix, never showing a key or hash', async () => {
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await createKey({ plan: i < 3 ? 'small' : 'one', name: `page-${i}` })).id);
    await admin('POST', `/keys/${made[4]}/revoke`);
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 20; pages++) {
      const r: Answer = await admin('GET', `/keys?limit=2&name=page-${cursor ? `&cursor=${cursor}` : ''}`);
      expect(r.status).toBe(200);
      const keys = r.body.keys as Array<Record<string, unknown>>;
      expect(keys.length).toBeLessThanOrEqual(2);
      seen.push(...keys.map((k) => String(k.id)));
      expect(r.text).not.toMatch(/"hash"|"key"|tg_/);
      cursor = r.body.nextCursor as string | null;
      if (cursor === null) break;
    }
    expect(seen).toEqual([...made].sort());
    const small = await admin('GET', '/keys?plan=small&name=page-&limit=1000');
    expect((small.body.keys as unknown[]).length).toBe(3);
    const revoked = await admin('GET', '/keys?status=revoked&name=page-');
    expect((revoked.body.keys as Array<{ id: string }>).map((k) => k.id)).toEqual([made[4]]);
    for (const q of ['limit=0', 'limit=1001', 'limit=abc', 'colour=red', 'status=lost', 'cursor=%%%', 'limit=1&limit=2']) {
      const r = await admin('GET', `/keys?${q}`);
      expect(r.status, q).toBe(400);
      expect((r.body.problems as Array<{ path: string }>)[0]!.path, q).toMatch(/^query\./);
    }
  });

  it('GET /keys/{id} shows both windows and the ban as they stand, and reading them counts nothing', async () => {
    const { id, key } = await createKey({ plan: 'small' });
    for (let i = 0; i < 2; i++) expect((await call(b, key)).status).toBe(200);
    const before = await client.get(ks.minuteWindow(keySubject(id)));
    const r = await admin('GET', `/keys/${id}`);
    expect(r.status).toBe(200);
    const windows = r.body.windows as Array<Record<string, unknown>>;
    expect(windows.map((w) => [w.name, w.used, w.limit, w.remaining])).toEqual([
      ['minute', 2, 3, 1],
      ['day', 2, 1000, 998],
    ]);
    expect(Date.parse(String(windows[0]!.resetAt)) - Date.now()).toBeGreaterThan(50_000);
    expect(r.body).toMatchObject({ ban: null, banLevel: 0 });
    await admin('GET', `/keys/${id}`);
    expect(await client.get(ks.minuteWindow(keySubject(id)))).toBe(before);
    expect((await admin('GET', '/keys/key_doesNotExist0000')).status).toBe(404);
    expect((await admin('GET', '/keys/not%20an%20id')).status).toBe(404);
  });

  it('PATCH lowers a plan and the other instance applies it within 1 s; bad patches are refused', async () => {
    const { id, key } = await createKey({ plan: 'big', perMinute: 50, name: 'patch-me', metadata: { customer: 'c_1' } });
    expect((await call(b, key)).headers.get('x-ratelimit-limit')).toBe('50');
    const r = await admin('PATCH', `/keys/${id}`, { body: { plan: 'small', perMinute: null, name: null, metadata: { customer: 'c_2' } } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id, plan: 'small', metadata: { customer: 'c_2' } });
    expect(r.body).not.toHaveProperty('perMinute');
    expect(r.body).not.toHaveProperty('name');
    const t0 = Date.now();
    await waitFor(async () => (await call(b, key)).headers.get('x-ratelimit-limit') === '3', 'gateway b applies the lowered plan', 1000, 20);
    expect(Date.now() - t0).toBeLessThan(1000);
    let refused = false;
    for (let i = 0; i < 4 && !refused; i++) refused = (await call(b, key)).status === 429;
    expect(refused).toBe(true);

    expect((await admin('PATCH', `/keys/${id}`, { body: {} })).status).toBe(400);
    const unknownField = await admin('PATCH', `/keys/${id}`, { body: { status: 'active' } });
    expect((unknownField.body.problems as Array<{ path: string }>)[0]!.path).toBe('body.status');
    expect((await admin('PATCH', `/keys/${id}`, { body: { plan: 'platinum' } })).body.code).toBe('unknown_plan');
    expect((await admin('PATCH', `/keys/${id}`, { body: { perDay: 'many' } })).status).toBe(400);
    expect((await admin('PATCH', '/keys/key_doesNotExist0000', { body: { plan: 'big' } })).status).toBe(404);
    await admin('POST', `/keys/${id}/revoke`);
    const onRevoked = await admin('PATCH', `/keys/${id}`, { body: { plan: 'big' } });
    expect([onRevoked.status, onRevoked.body.code]).toEqual([409, 'key_revoked']);
  });

  it('rotate and revoke through the API reach the other instance within 1 s, as through the CLI', async () => {
    const { id, key } = await createKey({ plan: 'big' });
    expect((await call(b, key)).status).toBe(200);
    const rotated = await admin('POST', `/keys/${id}/rotate`, { body: { graceSeconds: 0 } });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ id, graceSeconds: 0 });
    const fresh = String(rotated.body.key);
    await waitFor(async () => (await call(b, key)).status === 401, 'the old key refused on b', 1000, 20);
    expect((await call(b, fresh)).status).toBe(200);

    const graced = await admin('POST', `/keys/${id}/rotate`, { body: { graceSeconds: 60 } });
    expect((await call(b, fresh)).status).toBe(200);
    expect((await call(b, String(graced.body.key))).status).toBe(200);
    // An empty body is a rotation without grace.
    const again = await admin('POST', `/keys/${id}/rotate`);
    expect(again.body.graceSeconds).toBe(0);
    expect((await admin('POST', `/keys/${id}/rotate`, { body: { graceSeconds: -1 } })).status).toBe(400);

    const revoked = await admin('POST', `/keys/${id}/revoke`);
    expect(revoked.body.status).toBe('revoked');
    await waitFor(async () => (await call(b, String(again.body.key))).status === 401, 'the revoked key refused on b', 1000, 20);
    const twice = await admin('POST', `/keys/${id}/revoke`);
    expect(twice.status).toBe(200);
    expect(audits().filter((l) => l.keyId === id && l.action === 'revoke')).toHaveLength(1);
    expect((await admin('POST', `/keys/${id}/rotate`)).body.code).toBe('key_revoked');
    expect((await admin('POST', '/keys/key_doesNotExist0000/revoke')).status).toBe(404);
    expect((await admin('POST', '/keys/key_doesNotExist0000/rotate')).status).toBe(404);
    expect((await admin('POST', `/keys/${id}/revoke`, { body: { reason: 'x' } })).status).toBe(400);
  });

  it('unban lifts a ban on every instance, and GET shows the ban before', async () => {
    const { id, key } = await createKey({ plan: 'one' });
    let banned = false;
    for (let i = 0; i < 6 && !banned; i++) banned = (await call(b, key)).body.code === 'api_key_banned';
    expect(banned).toBe(true);
    const before = await admin('GET', `/keys/${id}`);
    expect(before.body.ban).toMatchObject({ level: 1 });
    expect(Date.parse(String((before.body.ban as { until: string }).until))).toBeGreaterThan(Date.now() + 100_000);
    const r = await admin('POST', `/keys/${id}/unban`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ ban: null, banLevel: 0 });
    await waitFor(async () => (await call(b, key)).body.code !== 'api_key_banned', 'b forgets the ban', 1000, 20);
    expect((await admin('POST', '/keys/key_doesNotExist0000/unban')).status).toBe(404);
  });

  it("reset empties a spent key's windows and strikes on every instance, leaves a ban, and is audited", async () => {
    const { id, key } = await createKey({ plan: 'small' });
    for (let i = 0; i < 3; i++) expect((await call(b, key)).status).toBe(200);
    // One strike of the two that ban (threshold 2).
    expect((await call(b, key)).body.code).toBe('rate_limit_exceeded');
    const r = await admin('POST', `/keys/${id}/reset`);
    expect(r.status, r.text).toBe(200);
    expect((r.body.windows as Array<{ name: string; used: number }>).map((w) => [w.name, w.used])).toEqual([
      ['minute', 0],
      ['day', 0],
    ]);
    expect(audits().at(-1)).toMatchObject({ action: 'reset', keyId: id, by: 'portal' });
    // The other instance admits the key again, a whole minute's worth.
    for (let i = 0; i < 3; i++) expect((await call(b, key)).status).toBe(200);
    // The strike went too: this refusal is the first again, not the second (which would ban).
    expect((await call(b, key)).body.code).toBe('rate_limit_exceeded');
    expect((await call(b, key)).body.code).toBe('api_key_banned');
    // A ban stays (unban lifts it); the windows are emptied all the same.
    const banned = await admin('POST', `/keys/${id}/reset`, { body: {} });
    expect(banned.body).toMatchObject({ ban: { level: 1 } });
    expect((await call(b, key)).body.code).toBe('api_key_banned');
    // Bad input: an unknown id, a body with fields, not JSON, another media type.
    const unknown = await admin('POST', '/keys/key_doesNotExist0000/reset');
    expect([unknown.status, unknown.body.code]).toEqual([404, 'not_found']);
    const fields = await admin('POST', `/keys/${id}/reset`, { body: { windows: ['minute'] } });
    expect([fields.status, fields.body.code]).toEqual([400, 'invalid_request']);
    expect((await admin('POST', `/keys/${id}/reset`, { raw: '{"', type: 'application/json' })).status).toBe(400);
    expect((await admin('POST', `/keys/${id}/reset`, { raw: 'x', type: 'text/plain' })).status).toBe(415);
    expect((await admin('POST', `/keys/${id}/reset`, { token: null })).status).toBe(401);
    // Nothing but a path segment reaches the store: an id with Redis syntax is just not found.
    expect((await admin('POST', `/keys/${encodeURIComponent('key_x} *')}/reset`)).status).toBe(404);
  });

  it('concurrent changes never overwrite each other: every PATCH lands, and a revoke stays a revoke', async () => {
    const { id, key } = await createKey({ plan: 'big' });
    const fields = [{ name: 'n1' }, { perDay: 900 }, { perMinute: 90 }, { metadata: { a: '1' } }, { expiresAt: '2099-01-01T00:00:00Z' }];
    const answers = await Promise.all(fields.map((body) => admin('PATCH', `/keys/${id}`, { body })));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect((await admin('GET', `/keys/${id}`)).body).toMatchObject({ name: 'n1', perDay: 900, perMinute: 90, metadata: { a: '1' } });
    const raced = await Promise.all([
      ...Array.from({ length: 6 }, (_, i) => admin('PATCH', `/keys/${id}`, { body: { name: `racer-${i}` } })),
      admin('POST', `/keys/${id}/revoke`),
      ...Array.from({ length: 6 }, (_, i) => admin('PATCH', `/keys/${id}`, { body: { perDay: 100 + i } })),
    ]);
    // A PATCH either landed before the revoke or found the key revoked (409): none wrote it back to active.
    for (const r of raced) expect([200, 409]).toContain(r.status);
    expect((await admin('GET', `/keys/${id}`)).body.status).toBe('revoked');
    await waitFor(async () => (await call(b, key)).status === 401, 'the revoked key refused on b', 1000, 20);
  });

  it('usage, deprecated-route and invalid-request reads answer here too (their content: test/usage.test.ts, test/validation-gateway.test.ts)', async () => {
    const { id, key } = await createKey({ plan: 'big' });
    expect((await call(b, key)).status).toBe(200);
    const u = await admin('GET', `/keys/${id}/usage`);
    expect(u.body.totals).toEqual({ admitted: 1, rateLimited: 0, banned: 0, upstreamFailed: 0, shadowRefused: 0, wouldBan: 0, validationFailed: 0 });
    expect((await admin('GET', '/usage?limit=5')).status).toBe(200);
    expect((await admin('GET', '/routes/deprecated')).body.routes).toEqual([]);
    expect((await admin('GET', '/routes/deprecated.csv')).status).toBe(200);
    expect((await admin('GET', '/usage/invalid-requests')).body.operations).toEqual([]);
    expect((await admin('GET', '/usage/invalid-requests?from=nope')).status).toBe(400);
    expect((await admin('GET', '/usage.csv')).status).toBe(200);
    expect((await admin('GET', '/usage.csv?limit=5')).status).toBe(400);
    expect(((await admin('GET', '/usage/summary?granularity=day')).body.totals as { admitted: number }).admitted).toBeGreaterThan(0);
    expect((await admin('GET', '/status')).body.redis).toBe('ok');
    expect((await admin('GET', '/keys/key_doesNotExist0000/usage')).status).toBe(404);
  });

  it('GET /services shows the upstream shorthand as the service "upstream" (the rest: test/admin-services.test.ts)', async () => {
    const all = await admin('GET', '/services');
    expect(all.status).toBe(200);
    expect(all.body.services).toEqual([
      {
        name: 'upstream',
        balance: 'round-robin',
        healthy: 1,
        total: 1,
        targets: [{ url: up.url, weight: 1, healthy: true, state: 'healthy', ejectedUntil: null, activeRequests: 0, consecutiveFailures: 0, recentErrors: [] }],
      },
    ]);
    expect((await admin('GET', '/services/upstream')).body).toMatchObject({ name: 'upstream', total: 1 });
    expect((await admin('GET', '/services/nope')).status).toBe(404);
  });

  it('GET /plans lists the plans in force', async () => {
    const r = await admin('GET', '/plans');
    expect(r.body).toEqual({
      plans: [
        { name: 'big', perMinute: 100, perDay: 1000, mode: 'enforce' },
        { name: 'small', perMinute: 3, perDay: 1000, mode: 'enforce' },
        { name: 'one', perMinute: 1, perDay: 1000, mode: 'enforce' },
      ],
    });
  });

  it('POST /plans/simulate answers from the ledger and changes nothing (no audit line); a bad body is a 400', async () => {
    const audited = logA.lines.filter((l) => l.msg === 'admin change').length;
    const r = await admin('POST', '/plans/simulate', { body: { plan: 'big', perMinute: 1, perDay: 1 } });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ plan: 'big', current: { perMinute: 100, perDay: 1000 }, simulated: { perMinute: 1, perDay: 1 } });
    expect(logA.lines.filter((l) => l.msg === 'admin change').length).toBe(audited);
    expect((await admin('POST', '/plans/simulate', { body: { plan: 'big' } })).status).toBe(400);
    expect((await admin('POST', '/plans/simulate', { body: { plan: 'gold', perDay: 5 } })).body.code).toBe('unknown_plan');
  });

  it('every change is counted by action; the CLI goes through the same rules (keys update) and audits as "cli"', async () => {
    const { id } = await createKey({ plan: 'big', name: 'cli-update' });
    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        upstream: { url: up.url },
        redis: { url: redis.url, prefix: PREFIX },
        plans: { big: { perMinute: 100, perDay: 1000 }, small: { perMinute: 3, perDay: 1000 } },
      });
      const updated = await runCli(['keys', 'update', id, '--plan', 'small', '--per-day', '7', '--metadata', '{"customer":"c_9"}', '--json', '--config', file]);
      expect(updated.code, updated.stderr).toBe(0);
      expect(JSON.parse(updated.stdout)).toMatchObject({ id, plan: 'small', perDay: 7, metadata: { customer: 'c_9' } });
      expect(withoutAudit(updated.stderr)).toBe('');
      expect(auditOf(updated.stderr)).toEqual([expect.objectContaining({ action: 'update', keyId: id, by: 'cli' })]);
      expect((await admin('GET', `/keys/${id}`)).body).toMatchObject({ plan: 'small', perDay: 7, metadata: { customer: 'c_9' } });
      // The same rules and errors as PATCH: an unknown plan, a revoked key, nothing to change.
      const unknownPlan = await runCli(['keys', 'update', id, '--plan', 'platinum', '--config', file]);
      expect([unknownPlan.code, withoutAudit(unknownPlan.stderr).split('\n').length]).toEqual([1, 1]);
      expect(unknownPlan.stderr).toContain('unknown plan "platinum"');
      expect((await runCli(['keys', 'update', id, '--config', file])).code).toBe(2);
      expect((await runCli(['keys', 'update', id, '--metadata', '{"bad name":1}', '--config', file])).code).toBe(2);
      const back = await runCli(['keys', 'update', id, '--per-day', 'none', '--expires', 'never', '--metadata', 'none', '--json', '--config', file]);
      expect(JSON.parse(back.stdout)).not.toHaveProperty('perDay');
      expect(JSON.parse(back.stdout)).not.toHaveProperty('metadata');
      await admin('POST', `/keys/${id}/revoke`);
      expect((await runCli(['keys', 'update', id, '--plan', 'big', '--config', file])).stderr).toContain('revoked');
    } finally {
      dir.remove();
    }
    const text = await a.metrics.registry.metrics();
    expect(metricValue(text, 'tollgate_admin_changes_total', { action: 'create', source: 'api' })).toBe(audits().filter((l) => l.action === 'create').length);
    expect(metricValue(text, 'tollgate_admin_changes_total', { action: 'revoke', source: 'api' })).toBe(audits().filter((l) => l.action === 'revoke').length);
    for (const line of audits()) expect(Object.keys(line).sort()).toEqual(['action', 'audit', 'by', 'keyId', 'level', 'msg', 'pid', 'reqId', 'time']);
  });

  it('tollgate admin token prints a token and the SHA-256 the config takes', async () => {
    const r = await runCli(['admin', 'token', '--id', 'billing', '--json']);
    expect(r.code).toBe(0);
    const { id, token, sha256 } = JSON.parse(r.stdout) as { id: string; token: string; sha256: string };
    expect(id).toBe('billing');
    expect(token).toMatch(/^tga_[A-Za-z0-9_-]{43}$/);
    expect(sha256).toBe(hashAdminToken(token));
    const text = await runCli(['admin', 'token']);
    expect(text.stdout).toMatch(/token: +tga_/);
    expect(text.stdout).toContain('admin: { tokens: [{ id: portal, sha256: "');
    const bad = await runCli(['admin', 'token', '--id', 'cli']);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('POST /keys/import is on the admin listener behind its token (its own cases: test/admin-import.test.ts)', async () => {
    expect((await admin('POST', '/keys/import?dryRun=true', { body: [{ plan: 'big', sha256: 'a'.repeat(64) }] })).body).toEqual({
      lines: [{ line: 1, action: 'import' }],
      imported: 1,
      unchanged: 0,
      refused: [],
      warnings: [],
      dryRun: true,
    });
    expect((await admin('POST', '/keys/import', { body: [], token: null })).status).toBe(401);
  });

  it('every answer above matches the OpenAPI document, and every operation in it was tried', () => {
    expect(problems).toEqual([]);
    // The consumers' operations are test/admin-consumers.test.ts's, and the webhook endpoints' and their delivery's
    // test/events-endpoints-admin.test.ts's: each insists on its own the same way.
    const operations = new Set(
      doc
        .operations()
        .map((o) => o.split(' ')[0])
        .filter(
          (o) =>
            !/Consumers?(Keys)?$|Webhooks?$|^(listEventEndpoints|listUndeliveredEvents|replayEndpointEvents|enableEndpoint|createPortalLink|endPortalSessions)$/.test(
              o!,
            ),
        ),
    );
    const tried = new Set([...doc.seen].map((o) => o.split(' ')[0]));
    expect([...operations].filter((o) => !tried.has(o))).toEqual([]);
  });
});
