// Who may call what from where, without HTTP: the rules for scopes and allowed CIDRs (config/key-fields.ts), the
// client address by the trustProxy rules (limits/client-address.ts), the compiled access of a key and its consumer
// (identity/access.ts: a key narrows, never widens; IPv4-mapped IPv6 is IPv4), and the API key scheme answering a
// key of a consumer with the consumer's record and plan (identity/api-key-scheme.ts, on an in-memory lookup).
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { allowedCidrsSchema, cidrProblem, scopesSchema } from '../src/config/key-fields.js';
import { parseBearer } from '../src/http/credentials.js';
import { accessFor } from '../src/identity/access.js';
import { ApiKeyScheme } from '../src/identity/api-key-scheme.js';
import type { ConsumerView } from '../src/identity/consumer-lookup.js';
import { MemoryKeyStore } from '../src/keys/memory-store.js';
import { KeyVerifier } from '../src/keys/verifier.js';
import { clientAddress } from '../src/limits/client-address.js';
import { RequestContext } from '../src/pipeline/context.js';
import { compileRoutes } from '../src/routing/routes.js';
import { ManualClock } from '../src/util/clock.js';
import { testKeyAdmin } from './helpers/key-stores.js';

const problems = (r: { success: boolean; error?: { issues: Array<{ path: PropertyKey[]; message: string }> } }) =>
  r.success ? [] : r.error!.issues.map((i) => `${i.path.map(String).join('.')}: ${i.message}`);

describe('the rules for scopes and allowed CIDRs', () => {
  it('takes route names, service:<name>, operation:<operationId>, and addresses and networks of either family', () => {
    expect(problems(scopesSchema.safeParse(['listOrders', 'service:orders', 'operation:getOrder', 'v2.orders_list-all']))).toEqual([]);
    expect(
      problems(allowedCidrsSchema.safeParse(['203.0.113.7', '203.0.113.0/24', '0.0.0.0/0', '2001:db8::/32', '::1', '::/0', '::ffff:10.0.0.0/104'])),
    ).toEqual([]);
    expect(problems(scopesSchema.safeParse(Array.from({ length: 100 }, (_, i) => `r${i}`)))).toEqual([]);
    expect(problems(scopesSchema.safeParse([`operation:${'o'.repeat(190)}`]))).toEqual([]);
  });

  it.each([
    ['1.2.3.4/33', 'the prefix after "/" must be a whole number from 0 to 32'],
    ['::/-1', 'the prefix after "/" must be a whole number from 0 to 128'],
    ['::/129', 'the prefix after "/" must be a whole number from 0 to 128'],
    ['10.0.0.0/08', 'the prefix after "/" must be a whole number from 0 to 32'],
    ['10.0.0.0/', 'the prefix after "/" must be a whole number from 0 to 32'],
    ['', 'expected an IPv4 or IPv6 address'],
    [' 10.0.0.1', 'expected an IPv4 or IPv6 address'],
    ['10.0.0.01', 'expected an IPv4 or IPv6 address'],
    ['1.2.3', 'expected an IPv4 or IPv6 address'],
    ['fe80::1%eth0', 'expected an IPv4 or IPv6 address'],
    ['example.com', 'expected an IPv4 or IPv6 address'],
    ['1'.repeat(10_000), 'expected an IPv4 or IPv6 address'],
  ])('refuses the address %j', (text, why) => {
    expect(cidrProblem(text)).toContain(why);
    expect(problems(allowedCidrsSchema.safeParse(['10.0.0.0/8', text]))).toEqual([expect.stringMatching(/^1: /)]);
  });

  it('refuses empty, oversized and repeated lists, and scopes of any other shape, one problem per bad entry', () => {
    expect(problems(scopesSchema.safeParse([]))).toEqual([': expected a list of 1-100 scopes']);
    expect(problems(allowedCidrsSchema.safeParse([]))).toEqual([': expected a list of 1-100 addresses or CIDRs']);
    // A list past the bound is one problem, its entries not read one by one.
    expect(problems(scopesSchema.safeParse(Array.from({ length: 10_000 }, () => '')))).toEqual([': expected a list of 1-100 scopes']);
    expect(problems(allowedCidrsSchema.safeParse(Array.from({ length: 101 }, (_, i) => `10.0.0.${i}`)))).toEqual([
      ': expected a list of 1-100 addresses or CIDRs',
    ]);
    expect(problems(scopesSchema.safeParse('listOrders'))).toEqual([': expected a list of 1-100 scopes']);
    const bad = problems(scopesSchema.safeParse(['', 'a b', 'x'.repeat(201), 'tenant:acme', 'service:', 'operation:', '-lead', 5]));
    expect(bad.map((p) => p.slice(0, p.indexOf(':')))).toEqual(['0', '1', '2', '3', '4', '5', '6', '7']);
    expect(bad[0]).toContain('expected a route name, service:<name> or operation:<operationId>');
    expect(problems(scopesSchema.safeParse(['a', 'b', 'a']))).toEqual(['2: "a": this scope is listed twice']);
    expect(problems(allowedCidrsSchema.safeParse(['::1', '::1']))).toEqual(['1: "::1": this address is listed twice']);
  });
});

describe('the client address an allow-list checks', () => {
  const req = (peer: string | undefined, ip?: string) => ({ ...(ip !== undefined ? { ip } : {}), socket: { remoteAddress: peer } });

  it("is req.ip (what trustProxy lets Express believe) when it is an IP address, else the connection's peer", () => {
    expect(clientAddress(req('10.0.0.1', '203.0.113.9'))).toBe('203.0.113.9');
    expect(clientAddress(req('10.0.0.1', 'not-an-address'))).toBe('10.0.0.1');
    expect(clientAddress(req('10.0.0.1', '2001:db8::5'))).toBe('2001:db8::5');
    expect(clientAddress(req('2001:db8::1'))).toBe('2001:db8::1');
    expect(clientAddress(req(undefined))).toBeUndefined();
  });

  it('an IPv4-mapped IPv6 address in any spelling is its IPv4 address; a zone id is dropped', () => {
    for (const mapped of ['::ffff:127.0.0.1', '::FFFF:127.0.0.1', '::ffff:7f00:1', '0:0:0:0:0:ffff:7f00:1'])
      expect(clientAddress(req(mapped))).toBe('127.0.0.1');
    expect(clientAddress(req('10.0.0.1', '::ffff:203.0.113.9'))).toBe('203.0.113.9');
    expect(clientAddress(req('fe80::1%eth0'))).toBe('fe80::1');
    // Not mapped: ::ffff as the last group, an IPv4-compatible address.
    expect(clientAddress(req('2001:db8::ffff:1'))).toBe('2001:db8::ffff:1');
    expect(clientAddress(req('::10.0.0.1'))).toBe('::10.0.0.1');
  });
});

describe("a caller's compiled access", () => {
  const [named, unnamed, billing, operation] = compileRoutes([
    { method: 'GET', path: '/v1/orders', name: 'listOrders', service: 'orders', cost: 1, afterSunset: 'pass' },
    { method: 'GET', path: '/v1/orders/:id', service: 'orders', cost: 1, afterSunset: 'pass' },
    { method: 'GET', path: '/v1/invoices', name: 'listInvoices', service: 'billing', cost: 1, afterSunset: 'pass' },
    { method: 'GET', path: '/v1/reports', service: 'billing', operationId: 'getReport', cost: 1, afterSunset: 'pass' },
  ] as Parameters<typeof compileRoutes>[0]);

  it('a route answers to its name, its service and its operationId', () => {
    expect(named!.scopeNames).toEqual(['listOrders', 'service:orders']);
    expect(unnamed!.scopeNames).toEqual(['service:orders']);
    expect(operation!.scopeNames).toEqual(['service:billing', 'operation:getReport']);
  });

  it('nothing to restrict: no access at all (the stages pass at once)', () => {
    expect(accessFor({})).toBeUndefined();
    expect(accessFor({}, { id: 'c', plan: 'p', status: 'active' } as ConsumerView)).toBeUndefined();
  });

  it("a key's scopes: any name of the route reaches it", () => {
    const access = accessFor({ scopes: ['listOrders', 'operation:getReport'] })!;
    expect([named, unnamed, billing, operation].map((r) => access.allowsRoute(r!.scopeNames))).toEqual([true, false, false, true]);
    expect(access.limitsScopes).toBe(true);
    expect(access.limitsAddresses).toBe(false);
    expect(access.allowsAddress('198.51.100.1')).toBe(true);
  });

  it('a key of a consumer gets what both allow: the key narrows the consumer, never widens it', () => {
    const consumer = { id: 'acme', plan: 'pro', status: 'active', scopes: ['service:orders'], allowedCidrs: ['203.0.113.0/24'] } as const;
    const narrower = accessFor({ scopes: ['listOrders', 'listInvoices'], allowedCidrs: ['203.0.113.128/25', '198.51.100.0/24'] }, consumer)!;
    // listInvoices is the key's, not the consumer's; the unnamed orders route is the consumer's, not the key's.
    expect([named, unnamed, billing].map((r) => narrower.allowsRoute(r!.scopeNames))).toEqual([true, false, false]);
    expect(['203.0.113.200', '203.0.113.7', '198.51.100.7'].map((a) => narrower.allowsAddress(a))).toEqual([true, false, false]);
    // A key without lists of its own gets its consumer's.
    const plain = accessFor({}, consumer)!;
    expect([named, unnamed, billing].map((r) => plain.allowsRoute(r!.scopeNames))).toEqual([true, true, false]);
    expect(plain.allowsAddress('203.0.113.7')).toBe(true);
  });

  it('addresses: IPv4 and IPv6 networks, mapped addresses against IPv4 rules and mapped rules, nothing for no address', () => {
    const v4 = accessFor({ allowedCidrs: ['127.0.0.0/8', '203.0.113.7'] })!;
    expect(['127.0.0.1', '::ffff:127.0.0.1', '::ffff:7f00:1', '203.0.113.7', '203.0.113.8', '::1'].map((a) => v4.allowsAddress(a))).toEqual([
      true,
      true,
      true,
      true,
      false,
      false,
    ]);
    const v6 = accessFor({ allowedCidrs: ['2001:db8::/32', '::ffff:10.0.0.0/104'] })!;
    expect(['2001:db8:1::5', '2001:db9::5', '10.1.2.3', '::ffff:10.1.2.3', '11.0.0.1'].map((a) => v6.allowsAddress(a))).toEqual([
      true,
      false,
      true,
      true,
      false,
    ]);
    expect(v6.allowsAddress(undefined)).toBe(false);
    expect(v6.allowsAddress('not-an-address')).toBe(false);
    // The prefix names a network whatever host bits the address carries.
    expect(accessFor({ allowedCidrs: ['10.1.2.3/8'] })!.allowsAddress('10.200.0.1')).toBe(true);
    // A record written by hand with an entry that is no network: it allows nothing, and breaks nothing.
    expect(accessFor({ allowedCidrs: ['nonsense', '1.2.3.4/99'] })!.allowsAddress('1.2.3.4')).toBe(false);
  });

  it('is compiled once per key record and consumer record (the objects the caches hand out)', () => {
    const key = { scopes: ['listOrders'] };
    const consumer = { id: 'acme', plan: 'pro', status: 'active', scopes: ['service:orders'] } as const;
    const first = accessFor(key, consumer);
    expect(accessFor(key, consumer)).toBe(first);
    // The consumer's record changed (a new object from its cache): compiled again, the new lists in force.
    const changed = { ...consumer, scopes: ['service:billing'] };
    const second = accessFor(key, changed)!;
    expect(second).not.toBe(first);
    expect(second.allowsRoute(named!.scopeNames)).toBe(false);
  });
});

describe('the API key scheme with consumers', () => {
  async function setup(lookup: (id: string) => ConsumerView | undefined | Promise<ConsumerView | undefined>) {
    const clock = new ManualClock(Date.UTC(2026, 10, 29));
    const store = new MemoryKeyStore(() => clock.now());
    const keys = testKeyAdmin(store, clock);
    const verifier = new KeyVerifier(store, clock);
    await verifier.start();
    const scheme = new ApiKeyScheme(verifier, { consumers: { get: lookup } });
    /** A key in the store, its record naming `consumer` (what attaching a key writes). */
    const keyOf = async (consumer: string | undefined, extra: { scopes?: string[]; allowedCidrs?: string[] } = {}) => {
      const { key, record } = await keys.issuer.create({ plan: 'free', ...extra });
      if (consumer !== undefined) await store.update({ ...(await store.get(record.id))!, consumer });
      return { key, id: record.id };
    };
    const verify = (key: string) =>
      scheme.verify(
        parseBearer(`Bearer ${key}`),
        new RequestContext('req', 0, { socket: { remoteAddress: '192.0.2.1' }, headers: {} } as unknown as IncomingMessage),
      );
    return { keyOf, verify };
  }

  const acme: ConsumerView = { id: 'acme', plan: 'business', status: 'active', scopes: ['service:orders'] };

  it("answers a key of a consumer with the consumer's record and plan, its own id, and the lists of both compiled", async () => {
    const { keyOf, verify } = await setup((id) => (id === 'acme' ? acme : undefined));
    const k = await keyOf('acme', { allowedCidrs: ['203.0.113.0/24'] });
    const caller = await verify(k.key);
    expect(caller).toMatchObject({ id: k.id, plan: 'business', consumer: acme });
    const access = typeof caller === 'object' ? caller.access : undefined;
    expect([access?.limitsScopes, access?.limitsAddresses]).toEqual([true, true]);
    // A key without a consumer: its own plan, no consumer, no access to check.
    const alone = await verify((await keyOf(undefined)).key);
    expect(alone).toMatchObject({ plan: 'free' });
    expect(typeof alone === 'object' && [alone.consumer, alone.access]).toEqual([undefined, undefined]);
  });

  it('a lookup that answers later (a read) is awaited; one that fails is unavailable (503); no such consumer is an invalid key', async () => {
    let fail = false;
    const { keyOf, verify } = await setup(async (id) => {
      await new Promise((r) => setTimeout(r, 5));
      if (fail) throw new Error('consumers unreadable');
      return id === 'acme' ? acme : undefined;
    });
    const k = await keyOf('acme');
    expect(await verify(k.key)).toMatchObject({ consumer: { id: 'acme' } });
    fail = true;
    expect(await verify(k.key)).toBe('unavailable');
    expect(await verify((await keyOf('gone')).key)).toBe('unavailable');
    fail = false;
    expect(await verify((await keyOf('gone')).key)).toBe('invalid_api_key');
  });

  it('without a lookup (no consumers store in this gateway) the key stands alone', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 29));
    const store = new MemoryKeyStore(() => clock.now());
    const keys = testKeyAdmin(store, clock);
    const verifier = new KeyVerifier(store, clock);
    await verifier.start();
    const { key, record } = await keys.issuer.create({ plan: 'free' });
    await store.update({ ...(await store.get(record.id))!, consumer: 'acme' });
    const caller = await new ApiKeyScheme(verifier).verify(
      parseBearer(`Bearer ${key}`),
      new RequestContext('r', 0, { socket: {}, headers: {} } as unknown as IncomingMessage),
    );
    expect(caller).toMatchObject({ id: record.id, plan: 'free' });
    expect(typeof caller === 'object' && caller.consumer).toBeUndefined();
  });
});
