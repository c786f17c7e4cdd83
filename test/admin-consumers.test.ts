// The admin API's /consumers on real Redis, through the real listeners of two gateway instances composed as
// `tollgate serve` composes them: create, cursor pages (as GET /keys pages), read, change, suspend, resume, delete (with
// and without revokeKeys), a consumer's keys; keys created into a consumer, moved and detached through /keys; every
// change audited and seen by the other instance's consumer cache within a second; hostile input on every endpoint
// answered 4xx (never 5xx) with nothing stored. Every answer is checked against docs/admin.openapi.yaml.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { Metrics } from '../src/observability/metrics.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger, metricValue } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

const PREFIX = 'admcons:';
const ks = new Keyspace(PREFIX);
const TOKEN = generateAdminToken();

let redis: TestRedis;
let client: Redis;
let up: TestUpstream;
const composed: ComposedGateway[] = [];
const running: RunningGateway[] = [];
const logA = captureLogger();
const logB = captureLogger();
const api = new CheckedApi({ target: () => running[0]!.adminUrl!, token: TOKEN });

async function start(logger: ReturnType<typeof captureLogger>): Promise<void> {
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 1000 },
    admin: { port: 0, tokens: [{ id: 'portal', sha256: hashAdminToken(TOKEN) }] },
    plans: { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 600, perDay: 100_000 } },
  });
  const gateway = await composeGateway({ config, logger: logger.logger, metrics: new Metrics(), env: {}, upstreamCheckTimeoutMs: 500 });
  composed.push(gateway);
  running.push(await startGateway({ gateway, logger: logger.logger }));
}

const audits = () => logA.lines.filter((l) => l.msg === 'admin change');

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
  up = await TestUpstream.start();
  await start(logA);
  await start(logB);
}, 120_000);

afterAll(async () => {
  for (const g of running) await g.shutdown();
  client?.disconnect();
  await up?.close();
  await redis?.stop();
});

describe('/consumers', () => {
  it('create: 201 with Location and the record; the id given or made; audited', async () => {
    const r = await api.call('POST', '/consumers', {
      body: {
        id: 'acme',
        name: 'Acme Corp',
        plan: 'pro',
        metadata: { crm: 'c-1', billing: 'b-9' },
        maxKeys: 2,
        billingDay: 31,
        perMinute: 100,
        perMonth: 50_000,
        limitsExpiresAt: '2099-01-01T00:00:00Z',
        limitsReason: 'launch week',
        scopes: ['orders', 'service:billing', 'operation:listPets'],
        allowedCidrs: ['203.0.113.0/24', '2001:db8::/32'],
      },
    });
    expect(r.status, r.text).toBe(201);
    expect(r.headers.location).toBe('/consumers/acme');
    expect(r.body).toMatchObject({ id: 'acme', status: 'active', maxKeys: 2, warnings: [] });
    // Metadata is stored with its names sorted, as a key's is.
    expect(Object.keys(r.body.metadata)).toEqual(['billing', 'crm']);
    expect(JSON.parse((await client.get(ks.consumerRecord('acme')))!)).toMatchObject({ id: 'acme', perMonth: 50_000 });
    const made = await api.call('POST', '/consumers', { body: { name: 'Globex', plan: 'free' } });
    expect(made.status).toBe(201);
    expect(made.body.id).toMatch(/^con_[0-9a-f]{24}$/);
    expect(
      audits()
        .filter((l) => l.action === 'consumer.create')
        .map((l) => [l.consumerId, l.by]),
    ).toEqual([
      ['acme', 'portal'],
      [made.body.id, 'portal'],
    ]);
    const again = await api.call('POST', '/consumers', { body: { id: 'acme', name: 'Impostor', plan: 'free' } });
    expect([again.status, again.body.code]).toEqual([409, 'consumer_exists']);
    const unknownPlan = await api.call('POST', '/consumers', { body: { id: 'x1', name: 'X', plan: 'gold' } });
    expect([unknownPlan.status, unknownPlan.body.code]).toEqual([400, 'unknown_plan']);
  });

  it('list: id order in cursor pages, as GET /keys; filters by status and plan; a made-up cursor is a 400', async () => {
    for (const id of ['c1', 'c2', 'c3']) expect((await api.call('POST', '/consumers', { body: { id, name: id, plan: 'free' } })).status).toBe(201);
    const all = await api.get('/consumers');
    const ids = (all.body.consumers as Array<{ id: string }>).map((c) => c.id);
    expect(ids).toEqual([...ids].sort());
    expect(ids).toEqual(expect.arrayContaining(['acme', 'c1', 'c2', 'c3']));
    expect(all.body.nextCursor).toBeNull();
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await api.get(`/consumers?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.consumers.length).toBeLessThanOrEqual(2);
      seen.push(...(page.body.consumers as Array<{ id: string }>).map((c) => c.id));
      cursor = page.body.nextCursor as string | null;
    } while (cursor);
    expect(seen).toEqual(ids);
    expect((await api.get('/consumers?plan=pro')).body.consumers.map((c: { id: string }) => c.id)).toEqual(['acme']);
    expect((await api.get('/consumers?status=suspended')).body.consumers).toEqual([]);
    const bad = await api.get(`/consumers?cursor=${Buffer.from('a{b}').toString('base64url')}`);
    expect([bad.status, bad.body.problems[0].path]).toEqual([400, 'query.cursor']);
  });

  it('read and change: GET with keyCount, PATCH changes what is given and removes what is null; 404 for an unknown id', async () => {
    const got = await api.get('/consumers/acme');
    expect(got.body).toMatchObject({ id: 'acme', keyCount: 0 });
    const patched = await api.call('PATCH', '/consumers/acme', { body: { perMinute: null, perDay: 5000, scopes: null, name: 'Acme Inc' } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Acme Inc', perDay: 5000, perMonth: 50_000, updatedAt: expect.any(String) });
    expect(patched.body).not.toHaveProperty('perMinute');
    expect(patched.body).not.toHaveProperty('scopes');
    expect((await api.call('PATCH', '/consumers/nobody', { body: { name: 'x' } })).status).toBe(404);
    expect((await api.get('/consumers/nobody')).status).toBe(404);
    expect((await api.call('PATCH', '/consumers/acme', { body: { plan: 'gold' } })).body.code).toBe('unknown_plan');
    expect(audits().filter((l) => l.action === 'consumer.update')).toHaveLength(1);
  });

  it("suspend and resume: the other instance's consumer cache sees each within a second; a repeat changes nothing", async () => {
    const other = composed[1]!.consumers!;
    expect((await other.get('acme'))?.status).toBe('active');
    const suspended = await api.call('POST', '/consumers/acme/suspend');
    expect(suspended.status).toBe(200);
    expect(suspended.body).toMatchObject({ status: 'suspended', suspendedAt: expect.any(String) });
    const at = Date.now();
    await waitFor(() => other.peek('acme')?.status === 'suspended', "instance B's copy suspended", 1000, 2);
    expect(Date.now() - at).toBeLessThan(1000);
    expect((await api.call('POST', '/consumers/acme/suspend')).body.suspendedAt).toBe(suspended.body.suspendedAt);
    expect((await api.get('/consumers?status=suspended')).body.consumers.map((c: { id: string }) => c.id)).toEqual(['acme']);
    expect((await api.call('POST', '/consumers/acme/resume')).body.status).toBe('active');
    await waitFor(() => other.peek('acme')?.status === 'active', "instance B's copy active again", 1000, 2);
    expect(
      audits()
        .filter((l) => l.action === 'consumer.suspend' || l.action === 'consumer.resume')
        .map((l) => l.action),
    ).toEqual(['consumer.suspend', 'consumer.resume']);
  });

  it('keys join through POST /keys and PATCH /keys/{id}, up to maxKeys; a move and a detach keep the own plan; GET /consumers/{id}/keys pages them', async () => {
    const k1 = await api.call('POST', '/keys', { body: { plan: 'free', consumer: 'acme' } });
    expect(k1.status, k1.text).toBe(201);
    expect(k1.body.consumer).toBe('acme');
    const k2 = await api.call('POST', '/keys', { body: { plan: 'free', consumer: 'acme', name: 'staging' } });
    expect(k2.status).toBe(201);
    const keysBefore = await client.scard(ks.keyIds());
    const full = await api.call('POST', '/keys', { body: { plan: 'free', consumer: 'acme' } });
    expect([full.status, full.body.code]).toEqual([409, 'consumer_full']);
    const unknown = await api.call('POST', '/keys', { body: { plan: 'free', consumer: 'nobody' } });
    expect([unknown.status, unknown.body.code]).toEqual([400, 'unknown_consumer']);
    expect(await client.scard(ks.keyIds())).toBe(keysBefore);
    expect((await api.get('/consumers/acme')).body.keyCount).toBe(2);

    const page1 = await api.get('/consumers/acme/keys?limit=1');
    expect(page1.body.keys).toHaveLength(1);
    const page2 = await api.get(`/consumers/acme/keys?limit=1&cursor=${page1.body.nextCursor}`);
    expect(page2.body.nextCursor).toBeNull();
    expect([...page1.body.keys, ...page2.body.keys].map((k: { id: string }) => k.id)).toEqual([k1.body.id, k2.body.id].sort());

    const moved = await api.call('PATCH', `/keys/${k1.body.id}`, { body: { consumer: 'c1' } });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body).toMatchObject({ consumer: 'c1', plan: 'free' });
    expect(await client.hkeys(ks.consumerKeys('acme'))).toEqual([k2.body.id]);
    expect(await client.hkeys(ks.consumerKeys('c1'))).toEqual([k1.body.id]);
    expect((await api.get(`/keys/${k1.body.id}`)).body.consumer).toBe('c1');
    const detached = await api.call('PATCH', `/keys/${k1.body.id}`, { body: { consumer: null } });
    expect(detached.body).not.toHaveProperty('consumer');
    expect(await client.hkeys(ks.consumerKeys('c1'))).toEqual([]);
    expect((await api.get('/consumers/nobody/keys')).status).toBe(404);
  });

  it('delete: 409 consumer_has_keys while keys are not revoked (nothing changed); revokeKeys=true revokes them, then deletes', async () => {
    const before = await client.get(ks.consumerRecord('acme'));
    const refused = await api.call('DELETE', '/consumers/acme');
    expect([refused.status, refused.body.code]).toEqual([409, 'consumer_has_keys']);
    expect(await client.get(ks.consumerRecord('acme'))).toBe(before);
    const keyId = (await client.hkeys(ks.consumerKeys('acme')))[0]!;
    const deleted = await api.call('DELETE', '/consumers/acme?revokeKeys=true');
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body).toEqual({ id: 'acme', deleted: true, revokedKeys: [keyId] });
    expect((await api.get(`/keys/${keyId}`)).body).toMatchObject({ status: 'revoked', consumer: 'acme' });
    expect((await api.get('/consumers/acme')).status).toBe(404);
    await waitFor(async () => (await composed[1]!.consumers!.get('acme')) === undefined, "instance B's copy gone", 1000, 5);
    expect((await api.call('DELETE', '/consumers/acme')).status).toBe(404);
    expect((await api.call('DELETE', '/consumers/c2?revokeKeys=false')).status).toBe(200);
    expect(
      audits()
        .filter((l) => l.action === 'consumer.delete')
        .map((l) => [l.consumerId, l.revokedKeys]),
    ).toEqual([
      ['acme', 1],
      ['c2', undefined],
    ]);
    const metrics = await running[0]!.metrics.registry.metrics();
    expect(metricValue(metrics, 'tollgate_admin_changes_total', { action: 'consumer.delete', source: 'api' })).toBe(2);
    expect(metricValue(metrics, 'tollgate_admin_changes_total', { action: 'consumer.create', source: 'api' })).toBe(5);
  });
});

describe("a consumer's pool windows, its keys counted in a list, and search", () => {
  it('GET /consumers/{id} shows the pool its keys share after real traffic (minute, day, month), read without counting', async () => {
    const made = await api.call('POST', '/consumers', {
      body: { id: 'pooled', name: 'Pooled Ltd', plan: 'free', perMonth: 1000, metadata: { crm: 'Zeta-42' } },
    });
    expect(made.status, made.text).toBe(201);
    const keys = [];
    for (let i = 0; i < 2; i++) keys.push((await api.call('POST', '/keys', { body: { plan: 'pro', consumer: 'pooled' } })).body as { id: string; key: string });
    for (const [key, n] of [
      [keys[0]!.key, 3],
      [keys[1]!.key, 2],
    ] as const) {
      for (let i = 0; i < n; i++) {
        const res = await fetch(`http://127.0.0.1:${running[i % 2]!.port}/v1/things`, { headers: { authorization: `Bearer ${key}` } });
        await res.arrayBuffer();
        expect(res.status).toBe(200);
      }
    }
    const got = await api.get('/consumers/pooled');
    expect(got.status, got.text).toBe(200);
    expect(got.body.keyCount).toBe(2);
    // The consumer's plan (free), not its keys' own (pro); its own perMonth over it.
    expect(got.body.windows.map((w: { name: string; used: number; limit: number; remaining: number }) => [w.name, w.used, w.limit, w.remaining])).toEqual([
      ['minute', 5, 60, 55],
      ['day', 5, 1000, 995],
      ['month', 5, 1000, 995],
    ]);
    const now = new Date();
    expect(got.body.windows[2].resetAt).toBe(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString());
    expect(Date.parse(got.body.windows[0].resetAt) - Date.now()).toBeLessThanOrEqual(60_000);
    // Reading counted nothing.
    expect((await api.get('/consumers/pooled')).body.windows[0].used).toBe(5);
  });

  it('GET /consumers: each item with its keyCount; q finds by id prefix, name or metadata value, as text', async () => {
    const all = await api.get('/consumers');
    const counts = Object.fromEntries((all.body.consumers as Array<{ id: string; keyCount: number }>).map((c) => [c.id, c.keyCount]));
    expect(counts).toMatchObject({ pooled: 2, c1: 0 });
    const ids = async (q: string) => ((await api.get(`/consumers?q=${encodeURIComponent(q)}`)).body.consumers as Array<{ id: string }>).map((c) => c.id);
    expect(await ids('pool')).toEqual(['pooled']);
    expect(await ids('LTD')).toEqual(['pooled']);
    expect(await ids('zeta-4')).toEqual(['pooled']);
    // An id is matched from its start only, and a pattern's characters mean themselves.
    expect(await ids('ooled')).toEqual(['pooled']); // by its name, "Pooled Ltd"
    expect(await ids('eta.42')).toEqual([]);
    expect(await ids('c')).toEqual(expect.arrayContaining(['c1', 'c3']));
    const tooLong = await api.get(`/consumers?q=${'x'.repeat(257)}`);
    expect([tooLong.status, tooLong.body.problems[0].path]).toEqual([400, 'query.q']);
  });
});

/** The ledger's estimate for a pool whose keys sent nothing in the last 7 days: nothing refused. */
const nothingRefused = (perMinute: number, perDay: number) => ({
  from: expect.any(String),
  to: expect.any(String),
  requests: 0,
  pointsRefused: 0,
  minute: { limit: perMinute, pointsRefused: 0 },
  day: { limit: perDay, pointsRefused: 0 },
  hoursAffected: 0,
  hours: [],
  keysAffected: 0,
  keys: [],
});

/** Groups without the estimate's period (whole hours of when it was asked: two asks may straddle an hour). */
const withoutPeriod = (groups: Array<{ estimatedRefusals?: object }>) =>
  groups.map((g) => (g.estimatedRefusals ? { ...g, estimatedRefusals: { ...g.estimatedRefusals, from: '', to: '' } } : g));

describe('POST /consumers/attach', () => {
  it('a preview by default (nothing changed); dryRun false makes exactly that happen', async () => {
    expect((await api.call('POST', '/consumers', { body: { id: 'bulk', name: 'Bulk', plan: 'pro', maxKeys: 3, perMinute: 100 } })).status).toBe(201);
    const ids: string[] = [];
    for (const perMinute of [10, 20]) ids.push((await api.call('POST', '/keys', { body: { plan: 'free', perMinute } })).body.id);
    const revoked = (await api.call('POST', '/keys', { body: { plan: 'free' } })).body.id as string;
    await api.call('POST', `/keys/${revoked}/revoke`);
    const body = { consumer: 'bulk', keys: [...ids, revoked, 'key_nothere'] };
    const preview = await api.call('POST', '/consumers/attach', { body });
    expect(preview.status, preview.text).toBe(200);
    expect(preview.body).toEqual({
      dryRun: true,
      groups: [
        {
          consumer: 'bulk',
          exists: true,
          name: 'Bulk',
          plan: 'pro',
          maxKeys: 3,
          keys: [...ids].sort(),
          keysAlready: 0,
          before: { perMinute: 30, perDay: 2000, perMonth: null },
          after: { perMinute: 100, perDay: 100_000, perMonth: null },
          estimatedRefusals: nothingRefused(100, 100_000),
        },
      ],
      skipped: [
        { key: 'key_nothere', reason: 'no such key' },
        { key: revoked, reason: 'revoked' },
      ].sort((a, b) => (a.key < b.key ? -1 : 1)),
    });
    expect(await client.hkeys(ks.consumerKeys('bulk'))).toEqual([]);
    const applied = await api.call('POST', '/consumers/attach', { body: { ...body, dryRun: false } });
    expect(withoutPeriod(applied.body.groups)).toEqual(withoutPeriod(preview.body.groups));
    expect(applied.body.applied).toEqual([{ consumer: 'bulk', created: false, attached: [...ids].sort(), failed: [] }]);
    expect((await client.hkeys(ks.consumerKeys('bulk'))).sort()).toEqual([...ids].sort());
    // Now past its room: the group is refused, and nothing of it is done.
    const more = (await api.call('POST', '/keys', { body: { plan: 'free' } })).body.id as string;
    const other = (await api.call('POST', '/keys', { body: { plan: 'free' } })).body.id as string;
    const full = await api.call('POST', '/consumers/attach', { body: { consumer: 'bulk', keys: [more, other], dryRun: false } });
    expect(full.body.groups[0].refused).toBe('it would have 4 keys, more than its maxKeys (3)');
    expect(full.body.applied).toEqual([]);
    expect((await api.call('POST', '/consumers/attach', { body: { consumer: 'nobody', keys: [more] } })).status).toBe(404);
    // By metadata: a consumer per value, created on the plan given.
    await api.call('POST', '/keys', { body: { plan: 'free', metadata: { tenant: 'tenant_x' } } });
    const byField = await api.call('POST', '/consumers/attach', { body: { fromMetadata: 'tenant', plan: 'free', dryRun: false } });
    expect(byField.body.applied).toEqual([{ consumer: 'tenant_x', created: true, attached: [expect.any(String)], failed: [] }]);
    expect((await api.get('/consumers/tenant_x')).body).toMatchObject({ plan: 'free', keyCount: 1 });
  });
});

describe('POST /keys/import with consumers', () => {
  it('a record naming an unknown consumer is refused; createConsumers=true creates it (a dry run only says so)', async () => {
    const records = [{ id: 'key_api_imp1', plan: 'free', sha256: 'b'.repeat(64), consumer: 'initrode' }];
    const refused = await api.call('POST', '/keys/import', { body: records });
    expect([refused.status, refused.body.code]).toEqual([422, 'import_refused']);
    expect(refused.body.refused[0].reason).toMatch(/^consumer: no consumer with id "initrode"/);
    const dry = await api.call('POST', '/keys/import?dryRun=true&createConsumers=true', { body: records });
    expect(dry.body).toMatchObject({ dryRun: true, imported: 1, consumersCreated: ['initrode'] });
    expect(dry.body.consumers).toEqual([
      {
        consumer: 'initrode',
        exists: false,
        keys: 1,
        keysAlready: 0,
        before: { perMinute: 60, perDay: 1000, perMonth: null },
        after: { perMinute: 60, perDay: 1000, perMonth: null },
        estimatedRefusals: nothingRefused(60, 1000),
      },
    ]);
    expect(await client.exists(ks.consumerRecord('initrode'))).toBe(0);
    const done = await api.call('POST', '/keys/import?createConsumers=true', { body: records });
    expect(done.status, done.text).toBe(200);
    expect(done.body).toMatchObject({ imported: 1, consumersCreated: ['initrode'] });
    expect(done.body).not.toHaveProperty('consumers');
    expect((await api.get('/consumers/initrode')).body).toMatchObject({ plan: 'free', keyCount: 1 });
    expect(audits().filter((l) => l.action === 'consumer.create' && l.consumerId === 'initrode')).toHaveLength(1);
    expect((await api.call('POST', '/keys/import?createConsumers=yes', { body: records })).status).toBe(400);
  });
});

describe('hostile input on every new endpoint: 4xx, never 5xx, nothing stored', () => {
  const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
  const deepObject = `{"name":"x","plan":"free","metadata":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
  const base = { name: 'Hostile', plan: 'free' };
  const bodies: Array<[string, unknown]> = [
    ['a name that is a number', { ...base, name: 5 }],
    ['a plan that is a list', { ...base, plan: ['free'] }],
    ['maxKeys as a string', { ...base, maxKeys: '3' }],
    ['a name of 201 characters', { ...base, name: 'n'.repeat(201) }],
    ['17 metadata entries', { ...base, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`m${i}`, 'v'])) }],
    ['a metadata value of 257 characters', { ...base, metadata: { crm: 'v'.repeat(257) } }],
    ['a metadata value that is an object', { ...base, metadata: { crm: { a: 1 } } }],
    ['101 scopes', { ...base, scopes: Array.from({ length: 101 }, (_, i) => `r${i}`) }],
    ['101 CIDRs', { ...base, allowedCidrs: Array.from({ length: 101 }, (_, i) => `10.${i}.0.0/24`) }],
    ['a scope with a space', { ...base, scopes: ['service:a b'] }],
    ['a CIDR that is not one', { ...base, allowedCidrs: ['10.0.0.0/99'] }],
    ['an id with braces', { ...base, id: 'a{b}' }],
    ['an id with a space', { ...base, id: 'a b' }],
    ['billingDay 0', { ...base, billingDay: 0 }],
    ['billingDay 32', { ...base, billingDay: 32 }],
    ['billingDay 1.5', { ...base, billingDay: 1.5 }],
    ['a negative perMinute', { ...base, perMinute: -1 }],
    ['perMonth past 10^12', { ...base, perMonth: 1e13 }],
    ['an unknown field', { ...base, colour: 'blue' }],
    ['a status given', { ...base, status: 'active' }],
    ['an array body', [base]],
    ['a string body', 'just text'],
    ['JSON too deep (arrays)', deep],
    ['JSON too deep (metadata)', deepObject],
    ['not JSON', '{"name":'],
  ];
  const requests: Array<[string, string, string, unknown?, string?]> = [];
  for (const [what, body] of bodies) {
    requests.push([`POST /consumers: ${what}`, 'POST', '/consumers', body]);
    if (typeof body === 'object' && !Array.isArray(body)) {
      const { name: _n, plan: _p, ...rest } = body as Record<string, unknown>;
      requests.push([`PATCH /consumers/hold: ${what}`, 'PATCH', '/consumers/hold', Object.keys(rest).length ? rest : body]);
    } else requests.push([`PATCH /consumers/hold: ${what}`, 'PATCH', '/consumers/hold', body]);
  }
  requests.push(
    ['PATCH with nothing to change', 'PATCH', '/consumers/hold', {}],
    ['PATCH of a name to null', 'PATCH', '/consumers/hold', { name: null }],
    ['a body of another type', 'POST', '/consumers', 'name=x', 'application/x-www-form-urlencoded'],
    ['a body over 64 KB', 'POST', '/consumers', { ...base, limitsReason: 'r'.repeat(70_000) }],
    ['GET limit 0', 'GET', '/consumers?limit=0'],
    ['GET limit 1001', 'GET', '/consumers?limit=1001'],
    ['GET limit abc', 'GET', '/consumers?limit=abc'],
    ['GET a made-up cursor', 'GET', '/consumers?cursor=%7B%7D'],
    ['GET an unknown status', 'GET', '/consumers?status=deleted'],
    ['GET an unknown parameter', 'GET', '/consumers?sort=id'],
    ['GET a parameter twice', 'GET', '/consumers?limit=1&limit=2'],
    ['GET keys limit 5000', 'GET', '/consumers/hold/keys?limit=5000'],
    ['GET keys of an id with braces', 'GET', '/consumers/a%7Bb%7D/keys'],
    ['GET an id with braces', 'GET', '/consumers/%7Bhold%7D'],
    ['GET an id with a space', 'GET', '/consumers/a%20b'],
    ['GET an id of 65 characters', 'GET', `/consumers/${'x'.repeat(65)}`],
    ['DELETE revokeKeys=yes', 'DELETE', '/consumers/hold?revokeKeys=yes'],
    ['DELETE an unknown parameter', 'DELETE', '/consumers/hold?force=true'],
    ['DELETE with a body', 'DELETE', '/consumers/hold', { revokeKeys: true }],
    ['DELETE an id with braces', 'DELETE', '/consumers/a%7Bb%7D'],
    ['suspend with a body', 'POST', '/consumers/hold/suspend', { reason: 'payment failed' }],
    ['resume with a body', 'POST', '/consumers/hold/resume', { now: true }],
    ['suspend an id with a space', 'POST', '/consumers/a%20b/suspend'],
    ['a key into a consumer with braces', 'POST', '/keys', { plan: 'free', consumer: 'a{b}' }],
    ['a key into a consumer that is a number', 'POST', '/keys', { plan: 'free', consumer: 5 }],
    ['a key moved to a consumer with a space', 'PATCH', '/keys/key_nothere', { consumer: 'a b' }],
    ['attach with neither form', 'POST', '/consumers/attach', { dryRun: false }],
    ['attach with both forms', 'POST', '/consumers/attach', { fromMetadata: 'crm', plan: 'free', consumer: 'hold', keys: ['key_x'], dryRun: false }],
    ['attach keys without a consumer', 'POST', '/consumers/attach', { keys: ['key_x'], dryRun: false }],
    ['attach fromMetadata without a plan', 'POST', '/consumers/attach', { fromMetadata: 'crm', dryRun: false }],
    ['attach fromMetadata with a bad field name', 'POST', '/consumers/attach', { fromMetadata: 'a b', plan: 'free', dryRun: false }],
    ['attach fromMetadata with an unknown plan', 'POST', '/consumers/attach', { fromMetadata: 'crm', plan: 'gold', dryRun: false }],
    ['attach with a plan beside keys', 'POST', '/consumers/attach', { consumer: 'hold', keys: ['key_x'], plan: 'free', dryRun: false }],
    ['attach 1001 keys', 'POST', '/consumers/attach', { consumer: 'hold', keys: Array.from({ length: 1001 }, (_, i) => `key_${i}`), dryRun: false }],
    ['attach a key id with braces', 'POST', '/consumers/attach', { consumer: 'hold', keys: ['key_{x}'], dryRun: false }],
    ['attach dryRun as a string', 'POST', '/consumers/attach', { consumer: 'hold', keys: ['key_x'], dryRun: 'no' }],
    ['attach to a consumer id with a space', 'POST', '/consumers/attach', { consumer: 'a b', keys: ['key_x'], dryRun: false }],
    ['attach maxKeys 0', 'POST', '/consumers/attach', { fromMetadata: 'crm', plan: 'free', maxKeys: 0, dryRun: false }],
  );

  let before: Record<string, string> = {};
  async function snapshot(): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const k of (await client.keys(`${PREFIX}*`)).sort()) {
      const type = await client.type(k);
      out[k] =
        type === 'string'
          ? (await client.get(k))!
          : type === 'set'
            ? (await client.smembers(k)).sort().join(',')
            : type === 'hash'
              ? JSON.stringify(await client.hgetall(k))
              : type;
    }
    return out;
  }

  beforeAll(async () => {
    expect((await api.call('POST', '/consumers', { body: { id: 'hold', name: 'Hold', plan: 'free' } })).status).toBe(201);
    before = await snapshot();
  });

  it.each(requests)('%s', async (_what, method, path, body, type) => {
    const r = await api.call(method, path, body === undefined ? {} : { body, ...(type ? { type } : {}) });
    expect(r.status, `${r.status} ${r.text.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
    expect(r.status).toBeLessThan(500);
    expect(r.body.code).toEqual(expect.any(String));
  });

  it('stored nothing and changed nothing', async () => {
    const after = await snapshot();
    // The readiness probe and the report's own keys are not the API's changes.
    const mine = (s: Record<string, string>) => Object.fromEntries(Object.entries(s).filter(([k]) => !k.includes('readyz')));
    expect(mine(after)).toEqual(mine(before));
  });
});

describe('the OpenAPI document', () => {
  it('every answer above matched docs/admin.openapi.yaml, and every consumer operation was tried', () => {
    expect(api.problems).toEqual([]);
    const ops = [
      'createConsumer',
      'listConsumers',
      'getConsumer',
      'updateConsumer',
      'deleteConsumer',
      'suspendConsumer',
      'resumeConsumer',
      'listConsumerKeys',
      'attachKeysToConsumers',
    ];
    for (const op of ops)
      expect(
        [...api.doc.seen].some((s) => s.startsWith(`${op} 2`)),
        op,
      ).toBe(true);
  });
});
