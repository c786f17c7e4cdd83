// Scopes, address allow-lists and suspended consumers on the real request path: gateways composed as `tollgate serve`
// composes them, listening dual-stack ('::'), on a private redis-server and a real upstream on loopback; keys issued
// through the admin API; a key's consumer from an in-memory lookup (the consumers' store is not part of this gateway).
// Each refusal and their order (consumer_suspended, address_not_allowed, scope_denied, plan_not_allowed, then the
// windows); the scope and address refusals send Redis no command (INFO commandstats of this file's own redis-server)
// and take no quota; X-Forwarded-For believed only from a trusted proxy; IPv6 and IPv4-mapped clients; the headers the
// upstream gets; hostile lists refused by the admin API (400) and the CLI (one line, exit 2) with nothing stored.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import type { ConsumerView } from '../src/identity/consumer-lookup.js';
import { Metrics } from '../src/observability/metrics.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { assertBuilt, runCli } from './helpers/cli.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { commandCalls } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';

const TOKEN = generateAdminToken();
const stack = useStack({ redis: true, client: true });

/** The consumers this file's gateways know (what the consumers' cache would hold); a record is replaced whole. */
const consumers = new Map<string, ConsumerView>();
const lookup = {
  get(id: string): ConsumerView | undefined {
    if (id === 'unreadable') throw new Error('the consumers cannot be read');
    return consumers.get(id);
  },
};

interface Gateway {
  running: RunningGateway;
  composed: ComposedGateway;
  prefix: string;
}
const opened: Gateway[] = [];
let gw: Gateway;
let trusting: Gateway;
let prefixSeq = 0;
const dir = mkdtempSync(join(tmpdir(), 'tollgate-caller-refusals-'));

function rawConfig(trustProxy: boolean | string, prefix: string): Record<string, unknown> {
  return {
    server: { host: '::', port: 0, trustProxy },
    redis: { url: stack.redis.url, prefix, commandTimeoutMs: 1000 },
    plans: { free: { perMinute: 5, perDay: 100 }, business: { perMinute: 1000, perDay: 10_000 } },
    anonymous: { perMinute: 1000 },
    services: {
      orders: { targets: [stack.up.url], openapi: { stability: { experimental: ['business'] } } },
      billing: { targets: [stack.up.url] },
    },
    routes: [
      { path: '/v1/orders', name: 'listOrders', service: 'orders' },
      { path: '/v1/orders/:id', service: 'orders' },
      { path: '/v1/orders-next', name: 'ordersNext', service: 'orders', stability: 'experimental' },
      { path: '/v1/invoices', name: 'listInvoices', service: 'billing' },
    ],
    admin: { port: 0, tokens: [{ id: 'portal', sha256: hashAdminToken(TOKEN) }] },
  };
}

async function start(trustProxy: boolean | string): Promise<Gateway> {
  const prefix = `cr${++prefixSeq}:`;
  const composed = await composeGateway({
    config: testConfig(rawConfig(trustProxy, prefix)),
    logger: silentLogger,
    metrics: new Metrics(),
    env: {},
    upstreamCheckTimeoutMs: 500,
    consumers: lookup,
  });
  const running = await startGateway({ gateway: composed, logger: silentLogger });
  const g = { running, composed, prefix };
  opened.push(g);
  return g;
}

beforeAll(async () => {
  gw = await start(false);
  // Loopback is the trusted proxy: the X-Forwarded-For it sends names the client.
  trusting = await start('loopback');
});

afterAll(async () => {
  for (const g of opened) await g.running.shutdown().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

/** The gateway on the IPv4 loopback (the dual-stack listener sees ::ffff:127.0.0.1) or on ::1. */
const base = (g: Gateway, family: 4 | 6 = 4) => `http://${family === 4 ? '127.0.0.1' : '[::1]'}:${g.running.port}`;

interface Answer {
  status: number;
  code?: string;
  message?: string;
  headers: Headers;
}

async function call(g: Gateway, path: string, key: string | undefined, opts: { family?: 4 | 6; headers?: Record<string, string> } = {}): Promise<Answer> {
  const res = await fetch(`${base(g, opts.family)}${path}`, {
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...opts.headers },
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  const body = text.startsWith('{') ? (JSON.parse(text) as { code?: string; message?: string }) : {};
  return { status: res.status, ...(body.code !== undefined ? { code: body.code, message: body.message } : {}), headers: res.headers };
}

/** The status, or the error code of a refusal. */
const outcome = async (...args: Parameters<typeof call>): Promise<number | string> => {
  const a = await call(...args);
  return a.code ?? a.status;
};

async function admin(g: Gateway, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${g.running.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Issues a key through the admin API (201, or the test fails with the answer). */
async function issue(g: Gateway, fields: Record<string, unknown> = {}): Promise<{ id: string; key: string }> {
  const r = await admin(g, 'POST', '/keys', { plan: 'free', ...fields });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return { id: r.body.id as string, key: r.body.key as string };
}

/** Attaches the key to a consumer as attaching writes it: the record names the consumer, every instance is told. */
async function attach(g: Gateway, id: string, consumer: string): Promise<void> {
  const store = g.composed.keys.store;
  await store.update({ ...(await store.get(id))!, consumer });
  await store.publishChange(id);
  g.composed.keys.forget(id);
}

/** Changes a consumer: a new record object, as the consumers' cache hands out after a change. */
function setConsumer(c: ConsumerView): void {
  consumers.set(c.id, c);
}

/** Points taken from the key's minute window, read by the quota endpoint (which counts nothing). */
async function minuteUsed(g: Gateway, key: string): Promise<number> {
  const res = await fetch(`${base(g)}/ratelimit`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(10_000) });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { windows: Array<{ name: string; limit: number; remaining: number }> };
  const minute = body.windows.find((w) => w.name === 'minute')!;
  return minute.limit - minute.remaining;
}

/** The Redis commands (INFO commandstats, commands run inside scripts included) run while `work` ran, INFO left out. */
async function commandsDuring(work: () => Promise<void>): Promise<Record<string, number>> {
  const before = await commandCalls(stack.client);
  await work();
  const after = await commandCalls(stack.client);
  const delta: Record<string, number> = {};
  for (const [cmd, n] of after) if (cmd !== 'info' && n !== (before.get(cmd) ?? 0)) delta[cmd] = n - (before.get(cmd) ?? 0);
  return delta;
}

describe('scopes', () => {
  it('a key reaches the routes its scopes name (by route name or service) and gets 403 scope_denied elsewhere, the upstream never asked', async () => {
    const k = await issue(gw, { scopes: ['listOrders', 'service:billing'] });
    expect(await outcome(gw, '/v1/orders', k.key)).toBe(200);
    expect(await outcome(gw, '/v1/invoices', k.key)).toBe(200);
    const seen = stack.up.seen.length;
    const refused = await call(gw, '/v1/orders/42', k.key);
    expect([refused.status, refused.code, refused.message]).toEqual([
      403,
      'scope_denied',
      "This API key's scopes do not reach GET /v1/orders/:id: it answers to service:orders.",
    ]);
    expect(stack.up.seen.length).toBe(seen);
    // Removed (null): every route again, from the next request.
    expect((await admin(gw, 'PATCH', `/keys/${k.id}`, { scopes: null })).status).toBe(200);
    expect(await outcome(gw, '/v1/orders/42', k.key)).toBe(200);
  });

  it('a key of a consumer gets what both allow: it narrows the consumer, never widens it', async () => {
    setConsumer({ id: 'narrow', plan: 'free', status: 'active', scopes: ['service:orders'] });
    const k = await issue(gw, { scopes: ['listOrders', 'listInvoices'] });
    await attach(gw, k.id, 'narrow');
    const outcomes = [];
    for (const path of ['/v1/orders', '/v1/invoices', '/v1/orders/7']) outcomes.push(await outcome(gw, path, k.key));
    // listInvoices is the key's but not the consumer's; the unnamed orders route is the consumer's but not the key's.
    expect(outcomes).toEqual([200, 'scope_denied', 'scope_denied']);
  });
});

describe('scope and address refusals cost nothing', () => {
  it('send Redis no command and take no quota (INFO commandstats; the key window read back)', async () => {
    const scoped = await issue(gw, { plan: 'business', scopes: ['listOrders'] });
    const fenced = await issue(gw, { plan: 'business', allowedCidrs: ['203.0.113.0/24'] });
    // The first request of each reads its key from the store; the admitted one is counted by the limit script.
    expect(await outcome(gw, '/v1/orders', scoped.key)).toBe(200);
    expect(await outcome(gw, '/v1/orders', fenced.key)).toBe('address_not_allowed');
    const refusals = await commandsDuring(async () => {
      for (let i = 0; i < 25; i++) {
        expect(await outcome(gw, '/v1/invoices', scoped.key)).toBe('scope_denied');
        expect(await outcome(gw, '/v1/orders', fenced.key, { family: 6 })).toBe('address_not_allowed');
      }
    });
    expect(refusals).toEqual({});
    // An admitted request of the same key, for comparison: the limit script (its commands counted inside it).
    const admitted = await commandsDuring(async () => {
      expect(await outcome(gw, '/v1/orders', scoped.key)).toBe(200);
    });
    expect((admitted.evalsha ?? 0) + (admitted.eval ?? 0)).toBe(1);
    expect(await minuteUsed(gw, scoped.key)).toBe(2);
    expect(await minuteUsed(gw, fenced.key)).toBe(0);
  });
});

describe('the order of refusals for a valid key', () => {
  it('consumer_suspended, address_not_allowed, scope_denied, plan_not_allowed, then the windows; none of the first four takes quota', async () => {
    const k = await issue(gw);
    const co: ConsumerView = { id: 'order-co', plan: 'free', status: 'suspended', allowedCidrs: ['198.51.100.0/24'], scopes: ['listInvoices'] };
    setConsumer(co);
    await attach(gw, k.id, 'order-co');
    const path = '/v1/orders-next';
    const suspended = await call(gw, path, k.key);
    expect([suspended.status, suspended.code, suspended.message]).toEqual([
      403,
      'consumer_suspended',
      'The consumer order-co this API key belongs to is suspended.',
    ]);
    setConsumer({ ...co, status: 'active' });
    const elsewhere = await call(gw, path, k.key);
    expect([elsewhere.status, elsewhere.code, elsewhere.message]).toEqual([403, 'address_not_allowed', 'This API key may not be used from 127.0.0.1.']);
    setConsumer({ ...co, status: 'active', allowedCidrs: ['198.51.100.0/24', '127.0.0.0/8'] });
    expect(await outcome(gw, path, k.key)).toBe('scope_denied');
    setConsumer({ ...co, status: 'active', allowedCidrs: ['127.0.0.0/8'], scopes: ['service:orders'] });
    expect(await outcome(gw, path, k.key)).toBe('plan_not_allowed');
    expect(await minuteUsed(gw, k.key)).toBe(0);
    // The consumer's plan is the one in force: business may call the experimental route.
    setConsumer({ ...co, status: 'active', allowedCidrs: ['127.0.0.0/8'], scopes: ['service:orders'], plan: 'business' });
    expect(await outcome(gw, path, k.key)).toBe(200);
    // Back on free (5 a minute): the windows decide, after every check above has passed.
    setConsumer({ ...co, status: 'active', allowedCidrs: ['127.0.0.0/8'], scopes: ['service:orders'] });
    const outcomes = [];
    for (let i = 0; i < 6; i++) outcomes.push(await outcome(gw, '/v1/orders', k.key));
    expect(outcomes).toEqual([200, 200, 200, 200, 'rate_limit_exceeded', 'rate_limit_exceeded']);
  });

  it('a key naming a consumer that does not exist: 401 invalid_api_key; one whose consumer cannot be read: 503', async () => {
    const gone = await issue(gw);
    await attach(gw, gone.id, 'no-such-consumer');
    const refused = await call(gw, '/v1/orders', gone.key);
    expect([refused.status, refused.code]).toEqual([401, 'invalid_api_key']);
    const unreadable = await issue(gw);
    await attach(gw, unreadable.id, 'unreadable');
    const unavailable = await call(gw, '/v1/orders', unreadable.key);
    expect([unavailable.status, unavailable.code]).toEqual([503, 'service_unavailable']);
  });
});

describe('the client address', () => {
  it('without trustProxy a client cannot name its own address: X-Forwarded-For is not believed either way', async () => {
    const fenced = await issue(gw, { allowedCidrs: ['203.0.113.0/24'] });
    const spoofed = await call(gw, '/v1/orders', fenced.key, { headers: { 'x-forwarded-for': '203.0.113.5' } });
    expect([spoofed.code, spoofed.message]).toEqual(['address_not_allowed', 'This API key may not be used from 127.0.0.1.']);
    const local = await issue(gw, { allowedCidrs: ['127.0.0.1'] });
    expect(await outcome(gw, '/v1/orders', local.key, { headers: { 'x-forwarded-for': '198.51.100.1' } })).toBe(200);
  });

  it('behind a trusted proxy the address its X-Forwarded-For names is checked (only an IP address is believed)', async () => {
    const fenced = await issue(trusting, { allowedCidrs: ['203.0.113.0/24', '2001:db8::/32'] });
    const from = (xff: string) => outcome(trusting, '/v1/orders', fenced.key, { headers: { 'x-forwarded-for': xff } });
    expect(await from('203.0.113.5')).toBe(200);
    expect(await from('198.51.100.9, 203.0.113.5')).toBe(200);
    expect(await from('::ffff:203.0.113.9')).toBe(200);
    expect(await from('2001:db8::5')).toBe(200);
    const outside = await call(trusting, '/v1/orders', fenced.key, { headers: { 'x-forwarded-for': '198.51.100.9' } });
    expect([outside.code, outside.message]).toEqual(['address_not_allowed', 'This API key may not be used from 198.51.100.9.']);
    // Not an address: the peer (loopback) is checked, and it is not in the list.
    expect(await from('not-an-address')).toBe('address_not_allowed');
    expect(await outcome(trusting, '/v1/orders', fenced.key)).toBe('address_not_allowed');
  });

  it('IPv6 clients, and IPv4 clients on a dual-stack listener (::ffff:127.0.0.1) as the IPv4 address they are', async () => {
    const v6 = await issue(gw, { allowedCidrs: ['::1/128'] });
    expect(await outcome(gw, '/v1/orders', v6.key, { family: 6 })).toBe(200);
    expect(await outcome(gw, '/v1/orders', v6.key, { family: 4 })).toBe('address_not_allowed');
    const v4 = await issue(gw, { allowedCidrs: ['127.0.0.0/8'] });
    expect(await outcome(gw, '/v1/orders', v4.key, { family: 4 })).toBe(200);
    const refused = await call(gw, '/v1/orders', v4.key, { family: 6 });
    expect([refused.code, refused.message]).toEqual(['address_not_allowed', 'This API key may not be used from ::1.']);
    const mappedRule = await issue(gw, { allowedCidrs: ['::ffff:127.0.0.0/104'] });
    expect(await outcome(gw, '/v1/orders', mappedRule.key, { family: 4 })).toBe(200);
    expect(await outcome(gw, '/v1/orders', mappedRule.key, { family: 6 })).toBe('address_not_allowed');
  });
});

describe('the headers the upstream gets', () => {
  const lastSeen = () => stack.up.seen[stack.up.seen.length - 1]!;

  it("a key alone: X-Consumer-Id and X-Credential-Id are its id, X-Consumer-Plan its plan; a client's own X-Credential-Id never passes", async () => {
    const k = await issue(gw);
    const forged = { 'x-credential-id': 'key_forged', x_credential_id: 'key_forged', 'x-consumer-id': 'someone', 'x-consumer-plan': 'business' };
    expect(await outcome(gw, '/v1/orders', k.key, { headers: forged })).toBe(200);
    const h = lastSeen().headers;
    expect([h['x-consumer-id'], h['x-credential-id'], h['x-consumer-plan']]).toEqual([k.id, k.id, 'free']);
    expect(h.x_credential_id).toBeUndefined();
    expect(lastSeen().rawHeaders.filter((name) => /^x[-_]credential[-_]id$/i.test(name))).toEqual(['x-credential-id']);
  });

  it("a key of a consumer: X-Consumer-Id is the consumer's, X-Credential-Id the key's, X-Consumer-Plan the consumer's plan", async () => {
    setConsumer({ id: 'hdr-co', plan: 'business', status: 'active' });
    const k = await issue(gw);
    await attach(gw, k.id, 'hdr-co');
    expect(await outcome(gw, '/v1/orders', k.key)).toBe(200);
    const h = lastSeen().headers;
    expect([h['x-consumer-id'], h['x-credential-id'], h['x-consumer-plan']]).toEqual(['hdr-co', k.id, 'business']);
  });
});

describe('hostile lists are refused, nothing stored', () => {
  // Within the admin API's 64 KB body limit (a larger body is 413 before any field is read).
  const long = 'x'.repeat(20_000);
  const BAD: Array<[field: string, what: string, value: unknown]> = [
    ['scopes', 'an empty list', []],
    ['scopes', 'an empty string', ['']],
    ['scopes', 'a space', ['list orders']],
    ['scopes', '201 characters', ['x'.repeat(201)]],
    ['scopes', '20,000 characters', [long]],
    ['scopes', '101 entries', Array.from({ length: 101 }, (_, i) => `r${i}`)],
    ['scopes', 'a repeat', ['a', 'a']],
    ['scopes', 'a string, not a list', 'listOrders'],
    ['scopes', 'a number', [5]],
    ['scopes', 'an object', [{ $ne: 1 }]],
    ['allowedCidrs', '1.2.3.4/33', ['1.2.3.4/33']],
    ['allowedCidrs', '::/-1', ['::/-1']],
    ['allowedCidrs', 'an empty string', ['']],
    ['allowedCidrs', 'a blank entry', ['10.0.0.0/8', ' ']],
    ['allowedCidrs', 'a zone id', ['fe80::1%eth0']],
    ['allowedCidrs', '999.1.1.1', ['999.1.1.1']],
    ['allowedCidrs', '20,000 characters', [long]],
    ['allowedCidrs', '101 entries', Array.from({ length: 101 }, (_, i) => `10.0.0.${i}`)],
    ['allowedCidrs', 'null on create', null],
  ];

  it.each(BAD)('the admin API: %s, %s: 400 with its problems on POST /keys and PATCH /keys/{id}', async (field, _what, value) => {
    const k = await issue(gw, { scopes: ['listOrders'], allowedCidrs: ['127.0.0.1'] });
    const before = (await admin(gw, 'GET', `/keys/${k.id}`)).body;
    const ids = await gw.composed.keys.store.ids();
    const created = await admin(gw, 'POST', '/keys', { plan: 'free', [field]: value });
    expect(created.status).toBe(400);
    expect(created.body.code).toBe('invalid_request');
    expect((created.body.problems as Array<{ path: string }>).every((p) => p.path.startsWith(`body.${field}`))).toBe(true);
    expect(JSON.stringify(created.body).length).toBeLessThan(2000);
    expect(await gw.composed.keys.store.ids()).toEqual(ids);
    if (value === null) return; // null removes a list on PATCH: a change, not a refusal.
    const patched = await admin(gw, 'PATCH', `/keys/${k.id}`, { [field]: value });
    expect(patched.status).toBe(400);
    const after = (await admin(gw, 'GET', `/keys/${k.id}`)).body;
    expect([after.scopes, after.allowedCidrs]).toEqual([before.scopes, before.allowedCidrs]);
  });

  it('the built CLI: a bad --scopes or --allowed-cidrs is one line on stderr, exit 2, before Redis is asked; good ones are stored, "none" removes them', async () => {
    assertBuilt();
    const configFile = join(dir, 'gateway.yaml');
    writeFileSync(configFile, `redis:\n  url: ${stack.redis.url}\n  prefix: "${gw.prefix}"\nplans:\n  free: { perMinute: 5, perDay: 100 }\n`);
    const cli = (...argv: string[]) => runCli([...argv, '--config', configFile, '--quiet']);
    const ids = await gw.composed.keys.store.ids();
    for (const [flag, value] of [
      ['--scopes', ''],
      ['--scopes', 'listOrders,,service:billing'],
      ['--scopes', 'list orders'],
      ['--scopes', Array.from({ length: 101 }, (_, i) => `r${i}`).join(',')],
      ['--allowed-cidrs', '1.2.3.4/33'],
      ['--allowed-cidrs', '::/-1'],
      ['--allowed-cidrs', ''],
      ['--allowed-cidrs', `10.0.0.0/8,${'1'.repeat(10_000)}`],
    ] as const) {
      const r = await cli('keys', 'create', '--plan', 'free', flag, value);
      expect(r.code, `${flag} ${value.slice(0, 40)}: ${r.stderr}`).toBe(2);
      expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toContain(`${flag}: `);
      expect(r.stderr.length).toBeLessThan(600);
      expect(r.stdout).toBe('');
    }
    expect(await gw.composed.keys.store.ids()).toEqual(ids);

    const created = await cli(
      'keys',
      'create',
      '--plan',
      'free',
      '--scopes',
      'listOrders, service:billing',
      '--allowed-cidrs',
      '203.0.113.0/24,2001:db8::/32',
      '--json',
    );
    expect(created.code, created.stderr).toBe(0);
    const record = JSON.parse(created.stdout) as { id: string; key: string; scopes: string[]; allowedCidrs: string[] };
    expect([record.scopes, record.allowedCidrs]).toEqual([
      ['listOrders', 'service:billing'],
      ['203.0.113.0/24', '2001:db8::/32'],
    ]);
    // The gateway applies them: from loopback, outside the list.
    expect(await outcome(gw, '/v1/orders', record.key)).toBe('address_not_allowed');
    const updated = await cli('keys', 'update', record.id, '--scopes', 'none', '--allowed-cidrs', '::1', '--json');
    expect(updated.code, updated.stderr).toBe(0);
    const stored = await gw.composed.keys.store.get(record.id);
    expect([stored?.scopes, stored?.allowedCidrs]).toEqual([undefined, ['::1']]);
    const badUpdate = await cli('keys', 'update', record.id, '--allowed-cidrs', '::/129');
    expect([badUpdate.code, badUpdate.stderr.trimEnd().split('\n').length]).toEqual([2, 1]);
    expect((await gw.composed.keys.store.get(record.id))?.allowedCidrs).toEqual(['::1']);
  });
});
