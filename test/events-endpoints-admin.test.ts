// Webhook endpoints on the admin API, on real Redis through the admin listener of gateways composed as `tollgate serve`
// composes them: a consumer's endpoints registered (the secret once, never again: not in a list, a log line or an
// audit line), listed and deleted, never another consumer's; the bound of 10 per consumer; portal.webhooks false
// refusing registration; every URL that could reach what only the gateway can (loopback, private, link-local,
// metadata, numeric forms, a name resolving to loopback, other schemes, credentials, a 10 KB URL) refused 400
// webhook_url_refused with nothing stored, and loopback allowed once events.allowTargets opens it; a deleted consumer's
// endpoints gone with it. The operator's views over every endpoint's queue: its figures, its undelivered events a page
// at a time, replay (all, or named ids) and enable, each audited. Every answer is checked against
// docs/admin.openapi.yaml, and each of these operations must have been tried.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { hashAdminToken, generateAdminToken } from '../src/admin/tokens.js';
import { composeGateway } from '../src/compose.js';
import { EndpointQueue } from '../src/events/endpoint-queue.js';
import { Metrics } from '../src/observability/metrics.js';
import type { Lookup } from '../src/outbound/address-guard.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const PREFIX = 'epadm:';
const ks = new Keyspace(PREFIX);
const log = captureLogger();
const CONFIG_SECRET = `whsec_${randomBytes(32).toString('base64')}`;

/** Host names the tests resolve themselves (no DNS): a public one, one pointing at loopback, one that is half private. */
const HOSTS: Record<string, string[]> = {
  'hooks.acme.example': ['93.184.216.34'],
  'hooks.globex.example': ['93.184.216.35', '2606:2800:220:1:248:1893:25c8:1946'],
  'loopback.attacker.example': ['127.0.0.1'],
  'half.attacker.example': ['93.184.216.36', '10.1.2.3'],
};
const lookup: Lookup = async (host) => {
  if (host === 'localhost') return [{ address: '127.0.0.1', family: 4 }];
  const found = HOSTS[host];
  if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

async function start(redisUrl: string, extra: Record<string, unknown>): Promise<RunningGateway & { adminUrl: string }> {
  const gateway = await composeGateway({
    config: testConfig({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: 'http://127.0.0.1:9' },
      redis: { url: redisUrl, prefix: PREFIX, commandTimeoutMs: 2000 },
      admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
      ...extra,
    }),
    logger: log.logger,
    metrics: new Metrics(),
    upstreamCheckTimeoutMs: 200,
    webhookLookup: lookup,
    // No events thread: these tests set up endpoint queues by hand and read them back through the admin API, and a
    // dispatcher (which picks a registration up at once) would claim and attempt their events meanwhile.
    delivery: false,
  });
  const running = await startGateway({ gateway, logger: log.logger });
  return Object.assign(running, { adminUrl: running.adminUrl! });
}

const stack = useStack({
  redis: true,
  client: true,
  upstream: false,
  gateway: async (s) => ({
    on: await start(s.redis.url, {
      portal: { webhooks: true },
      events: { webhooks: [{ id: 'billing', url: 'https://billing.example.com/tollgate', secret: CONFIG_SECRET, types: ['quota.threshold'] }] },
    }),
    allow: await start(s.redis.url, { portal: { webhooks: true }, events: { allowTargets: ['127.0.0.0/8'] } }),
    off: await start(s.redis.url, {}),
  }),
});

const api = new CheckedApi({ target: () => stack.gw.on.adminUrl, token: TOKEN });
const audits = () => log.lines.filter((l) => l.msg === 'admin change');
const secrets: string[] = [];

beforeAll(async () => {
  for (const id of ['acme', 'globex', 'initech', 'full'])
    expect((await api.call('POST', '/consumers', { body: { id, name: id, plan: 'free' } })).status).toBe(201);
}, 60_000);

afterAll(() => {
  expect(api.problems).toEqual([]);
});

describe('a consumer’s webhook endpoints', () => {
  let acmeEp: string;

  it('register: 201, Location, the secret once (whsec_ + 32 bytes), no-store; every type by default; audited without the secret', async () => {
    const r = await api.call('POST', '/consumers/acme/webhooks', { body: { url: 'https://hooks.acme.example/tollgate', thresholds: [90, 50, 90] } });
    expect(r.status, r.text).toBe(201);
    expect(r.body.id).toMatch(/^ep_[0-9a-f]{24}$/);
    expect(r.headers.location).toBe(`/consumers/acme/webhooks/${r.body.id}`);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.body).toMatchObject({ consumer: 'acme', url: 'https://hooks.acme.example/tollgate', thresholds: [50, 90], createdBy: 'ops' });
    expect(r.body.types).toEqual(['quota.threshold', 'quota.shadow_threshold', 'key.banned', 'consumer.suspended', 'deprecated.called', 'key.expiring']);
    expect(r.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(r.body.secret.slice(6), 'base64')).toHaveLength(32);
    acmeEp = r.body.id;
    secrets.push(r.body.secret);
    const line = audits().find((l) => l.action === 'webhook.create' && l.endpointId === acmeEp);
    expect(line).toMatchObject({ consumerId: 'acme', by: 'ops' });
    // Stored for signing, in the consumer's set.
    expect(JSON.parse((await stack.client.hget(ks.eventEndpoints(), acmeEp))!).secret).toBe(r.body.secret);
    expect(await stack.client.smembers(ks.consumerEventEndpoints('acme'))).toEqual([acmeEp]);
  });

  it('types and thresholds are checked: unknown type, 0 or 101 percent, more than 5 distinct', async () => {
    const cases = [
      { types: ['quota.threshold', 'nope'] },
      { types: [] },
      { thresholds: [0] },
      { thresholds: [101] },
      { thresholds: [1.5] },
      { thresholds: [10, 20, 30, 40, 50, 60] },
      { url: 42 },
      { url: undefined },
      { secret: 'whsec_mine' },
    ];
    for (const c of cases) {
      const r = await api.call('POST', '/consumers/acme/webhooks', { body: { url: 'https://hooks.acme.example/x', ...c } });
      expect(r.status, JSON.stringify(c)).toBe(400);
      expect(r.body.code).toBe('invalid_request');
    }
    const five = await api.call('POST', '/consumers/acme/webhooks', {
      body: { url: 'https://hooks.acme.example/five', types: ['quota.threshold'], thresholds: [10, 20, 30, 40, 50, 50] },
    });
    expect(five.status).toBe(201);
    expect(five.body.thresholds).toEqual([10, 20, 30, 40, 50]);
    secrets.push(five.body.secret);
    expect((await api.call('DELETE', `/consumers/acme/webhooks/${five.body.id}`)).status).toBe(200);
  });

  it('list: the consumer’s endpoints without their secrets; another consumer sees none of them', async () => {
    const g = await api.call('POST', '/consumers/globex/webhooks', { body: { url: 'https://hooks.globex.example/in', types: ['key.banned'] } });
    expect(g.status).toBe(201);
    secrets.push(g.body.secret);
    const acme = await api.get('/consumers/acme/webhooks');
    expect(acme.status).toBe(200);
    expect(acme.body.webhooks.map((w: { id: string }) => w.id)).toEqual([acmeEp]);
    const globex = await api.get('/consumers/globex/webhooks');
    expect(globex.body.webhooks.map((w: { id: string }) => w.id)).toEqual([g.body.id]);
    for (const text of [acme.text, globex.text]) {
      expect(text).not.toContain('secret');
      expect(text).not.toContain('whsec_');
    }
    expect((await api.get('/consumers/nobody/webhooks')).status).toBe(404);
  });

  it('delete: only the consumer’s own endpoint; another consumer’s id is 404 and stays', async () => {
    const globexEp = (await api.get('/consumers/globex/webhooks')).body.webhooks[0].id as string;
    const wrong = await api.call('DELETE', `/consumers/acme/webhooks/${globexEp}`);
    expect(wrong.status).toBe(404);
    expect(wrong.body.code).toBe('not_found');
    expect((await api.get('/consumers/globex/webhooks')).body.webhooks).toHaveLength(1);
    expect((await api.call('DELETE', `/consumers/globex/webhooks/ep_${'0'.repeat(24)}`)).status).toBe(404);
    expect((await api.call('DELETE', '/consumers/globex/webhooks/..%2F..%2Fkeys')).status).toBe(404);
    const ok = await api.call('DELETE', `/consumers/globex/webhooks/${globexEp}`);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ id: globexEp, consumer: 'globex', deleted: true });
    expect((await api.get('/consumers/globex/webhooks')).body.webhooks).toEqual([]);
    expect(await stack.client.hget(ks.eventEndpoints(), globexEp)).toBeNull();
    expect(audits().some((l) => l.action === 'webhook.delete' && l.endpointId === globexEp && l.consumerId === 'globex')).toBe(true);
  });

  it('at most 10 per consumer: the 11th is 409 webhooks_full, nothing stored', async () => {
    const made = await Promise.all(
      Array.from({ length: 12 }, (_, i) => api.call('POST', '/consumers/full/webhooks', { body: { url: `https://hooks.acme.example/${i}` } })),
    );
    expect(made.filter((r) => r.status === 201)).toHaveLength(10);
    const refused = made.filter((r) => r.status === 409);
    expect(refused).toHaveLength(2);
    expect(refused[0]!.body.code).toBe('webhooks_full');
    expect(refused[0]!.body.message).toMatch(/consumer full has 10 webhook endpoints already/);
    for (const r of made) if (r.body.secret) secrets.push(r.body.secret);
    expect(await stack.client.scard(ks.consumerEventEndpoints('full'))).toBe(10);
  });

  it('portal.webhooks false: registration is 403 webhooks_disabled naming the setting; listing still works', async () => {
    const r = await api.call('POST', '/consumers/acme/webhooks', { at: stack.gw.off.adminUrl, body: { url: 'https://hooks.acme.example/x' } });
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('webhooks_disabled');
    expect(r.body.message).toContain('portal.webhooks: true');
    expect((await api.get('/consumers/acme/webhooks', { at: stack.gw.off.adminUrl })).body.webhooks).toHaveLength(1);
  });

  it('a deleted consumer’s endpoints are deleted with it, their queues too', async () => {
    const r = await api.call('POST', '/consumers/initech/webhooks', { body: { url: 'https://hooks.acme.example/initech' } });
    expect(r.status).toBe(201);
    secrets.push(r.body.secret);
    await new EndpointQueue(stack.client, ks, r.body.id).enqueue('key-expiring:key_9:1', '{}', Date.now());
    expect(await stack.client.exists(ks.endpointDue(r.body.id), ks.endpointState(r.body.id))).toBe(2);
    expect((await api.call('DELETE', '/consumers/initech')).status).toBe(200);
    expect(await stack.client.hget(ks.eventEndpoints(), r.body.id)).toBeNull();
    expect(await stack.client.exists(ks.consumerEventEndpoints('initech'))).toBe(0);
    expect(await stack.client.exists(ks.endpointDue(r.body.id), ks.endpointEvents(r.body.id), ks.endpointState(r.body.id))).toBe(0);
    const all = await api.get('/events/endpoints');
    expect(all.body.endpoints.some((e: { id: string }) => e.id === r.body.id)).toBe(false);
  });
});

describe('URLs that would reach what only the gateway can', () => {
  const refused = [
    'http://127.0.0.1/hook',
    'http://localhost:8079/keys',
    'http://[::1]/hook',
    'http://[::ffff:127.0.0.1]/hook',
    'http://169.254.169.254/latest/meta-data/',
    'http://10.0.0.1/hook',
    'http://192.168.1.10/hook',
    'http://0.0.0.0/',
    'http://2130706433/',
    'http://0x7f.1/',
    'http://loopback.attacker.example/hook',
    'http://half.attacker.example/hook',
    'http://nowhere.invalid/hook',
    'javascript:alert(1)',
    'file:///etc/passwd',
    'ftp://hooks.acme.example/x',
    'https://user:pass@hooks.acme.example/hook',
    'https://admin@hooks.acme.example/hook',
    `https://hooks.acme.example/${'a'.repeat(10 * 1024)}`,
    '/relative/path',
    '',
  ];

  it('each is 400 webhook_url_refused with its reason, and nothing is stored', async () => {
    const before = await stack.client.hlen(ks.eventEndpoints());
    for (const url of refused) {
      const r = await api.call('POST', '/consumers/globex/webhooks', { body: { url } });
      expect(r.status, url.slice(0, 80)).toBe(400);
      expect(r.body.code, url.slice(0, 80)).toBe('webhook_url_refused');
      expect(r.body.message).toMatch(/^webhook URL refused: /);
    }
    expect(await stack.client.hlen(ks.eventEndpoints())).toBe(before);
    const meta = await api.call('POST', '/consumers/globex/webhooks', { body: { url: 'http://169.254.169.254/' } });
    expect(meta.body.message).toContain('metadata');
    const named = await api.call('POST', '/consumers/globex/webhooks', { body: { url: 'http://loopback.attacker.example/' } });
    expect(named.body.message).toContain('loopback.attacker.example resolves to 127.0.0.1');
    const long = await api.call('POST', '/consumers/globex/webhooks', { body: { url: `https://hooks.acme.example/${'a'.repeat(10 * 1024)}` } });
    expect(long.body.message).toContain('longer than 2048 characters');
  });

  it('with events.allowTargets [127.0.0.0/8], loopback (and names resolving there) are allowed; other private ranges still are not', async () => {
    for (const url of ['http://127.0.0.1:9999/hook', 'http://localhost/hook', 'http://2130706433/', 'http://loopback.attacker.example/hook']) {
      const r = await api.call('POST', '/consumers/globex/webhooks', { at: stack.gw.allow.adminUrl, body: { url } });
      expect(r.status, url).toBe(201);
      secrets.push(r.body.secret);
      expect((await api.call('DELETE', `/consumers/globex/webhooks/${r.body.id}`, { at: stack.gw.allow.adminUrl })).status).toBe(200);
    }
    for (const url of ['http://[::1]/', 'http://10.0.0.1/', 'http://169.254.169.254/']) {
      const r = await api.call('POST', '/consumers/globex/webhooks', { at: stack.gw.allow.adminUrl, body: { url } });
      expect(r.status, url).toBe(400);
      expect(r.body.code).toBe('webhook_url_refused');
    }
  });
});

describe('the operator’s views of delivery', () => {
  let ep: string;

  beforeAll(async () => {
    const r = await api.call('POST', '/consumers/globex/webhooks', { body: { url: 'https://hooks.globex.example/dead' } });
    ep = r.body.id;
    secrets.push(r.body.secret);
    // Three events given up after their last attempt, one still queued.
    const queue = new EndpointQueue(stack.client, ks, ep);
    const t0 = Date.now() - 60_000;
    for (let i = 1; i <= 4; i++) {
      const ce = {
        specversion: '1.0',
        id: `key-banned:key_${i}:1:${i}`,
        type: 'key.banned',
        subject: 'consumer:globex',
        time: new Date(t0).toISOString(),
        data: {},
      };
      await queue.enqueue(ce.id, JSON.stringify(ce), t0 + i);
    }
    const claimed = await queue.claim(t0 + 10, 3);
    let n = 0;
    for (const e of claimed.events) await queue.dead(e, { now: t0 + 20 + n++, error: 'HTTP 500', status: 500 });
  });

  it('GET /events/endpoints: configured endpoints first, then registered ones, each with its delivery state; never a secret', async () => {
    const r = await api.get('/events/endpoints');
    expect(r.status).toBe(200);
    expect(r.body.endpoints[0]).toMatchObject({ id: 'billing', source: 'config', url: 'https://billing.example.com/tollgate', types: ['quota.threshold'] });
    expect(r.body.endpoints[0].delivery).toMatchObject({ queued: 0, undelivered: 0, disabled: false, lastError: null });
    const mine = r.body.endpoints.find((e: { id: string }) => e.id === ep);
    expect(mine).toMatchObject({ source: 'registered', consumer: 'globex', url: 'https://hooks.globex.example/dead' });
    expect(mine.delivery).toMatchObject({
      queued: 1,
      undelivered: 3,
      failed: 3,
      delivered: 0,
      dropped: 0,
      disabled: false,
      lastError: 'HTTP 500',
      lastStatus: 500,
    });
    expect(typeof mine.delivery.oldestDueAt).toBe('string');
    expect(r.text).not.toContain('whsec_');
    expect(r.text).not.toContain(CONFIG_SECRET);
  });

  it('undelivered: oldest first, a page at a time, with each event’s type, subject, attempts and last error', async () => {
    const p1 = await api.get(`/events/endpoints/${ep}/undelivered?limit=2`);
    expect(p1.status).toBe(200);
    expect(p1.body.events.map((e: { id: string }) => e.id)).toEqual(['key-banned:key_1:1:1', 'key-banned:key_2:1:2']);
    expect(p1.body.events[0]).toMatchObject({ type: 'key.banned', subject: 'consumer:globex', attempts: 1, lastError: 'HTTP 500' });
    expect(p1.body.nextCursor).toEqual(expect.any(String));
    const p2 = await api.get(`/events/endpoints/${ep}/undelivered?limit=2&cursor=${p1.body.nextCursor}`);
    expect(p2.body.events.map((e: { id: string }) => e.id)).toEqual(['key-banned:key_3:1:3']);
    expect(p2.body.nextCursor).toBeNull();
    expect((await api.get(`/events/endpoints/${ep}/undelivered?cursor=bogus`)).status).toBe(400);
    expect((await api.get(`/events/endpoints/${ep}/undelivered?limit=0`)).status).toBe(400);
    expect((await api.get('/events/endpoints/ep_nope/undelivered')).status).toBe(404);
    expect((await api.get('/events/endpoints/billing/undelivered')).body.events).toEqual([]);
  });

  it('replay: named ids (unknown ones listed), then the rest; each queued again, due now; audited', async () => {
    const one = await api.call('POST', `/events/endpoints/${ep}/replay`, { body: { ids: ['key-banned:key_2:1:2', 'no-such-event'] } });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ endpoint: ep, replayed: 1, notFound: ['no-such-event'] });
    expect(one.body.delivery).toMatchObject({ undelivered: 2, queued: 2 });
    const rest = await api.call('POST', `/events/endpoints/${ep}/replay`);
    expect(rest.body).toMatchObject({ replayed: 2, notFound: [] });
    expect(rest.body.delivery).toMatchObject({ undelivered: 0, queued: 4 });
    expect((await api.call('POST', `/events/endpoints/${ep}/replay`, { body: { ids: [] } })).status).toBe(400);
    expect((await api.call('POST', '/events/endpoints/ep_nope/replay')).status).toBe(404);
    const lines = audits().filter((l) => l.action === 'endpoint.replay' && l.endpointId === ep);
    expect(lines.map((l) => l.replayed)).toEqual([1, 2]);
  });

  it('enable: a disabled endpoint (its receiver said 410) is enabled; audited', async () => {
    await new EndpointQueue(stack.client, ks, ep).disable('the receiver answered 410 Gone', Date.now());
    const listed = (await api.get('/events/endpoints')).body.endpoints.find((e: { id: string }) => e.id === ep);
    expect(listed.delivery).toMatchObject({ disabled: true, disabledReason: 'the receiver answered 410 Gone' });
    const r = await api.call('POST', `/events/endpoints/${ep}/enable`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: ep, consumer: 'globex' });
    expect(r.body.delivery).toMatchObject({ disabled: false, disabledReason: null });
    expect((await api.call('POST', '/events/endpoints/billing/enable')).status).toBe(200);
    expect(
      audits()
        .filter((l) => l.action === 'endpoint.enable')
        .map((l) => l.endpointId),
    ).toEqual([ep, 'billing']);
  });
});

describe('the secrets', () => {
  it('never appear in a log line or an audit line, and every operation here was tried against the document', () => {
    expect(secrets.length).toBeGreaterThan(15);
    const text = JSON.stringify(log.lines);
    for (const s of [...secrets, CONFIG_SECRET]) expect(text).not.toContain(s);
    expect(text).not.toContain('whsec_');
    const ours = [
      'createConsumerWebhook',
      'listConsumerWebhooks',
      'deleteConsumerWebhook',
      'listEventEndpoints',
      'listUndeliveredEvents',
      'replayEndpointEvents',
      'enableEndpoint',
    ];
    for (const op of ours)
      expect(
        [...api.doc.seen].some((s) => s.startsWith(`${op} 2`)),
        op,
      ).toBe(true);
  });
});
