// The anonymous limit under abuse: the client address it meters (validated, the peer's when X-Forwarded-For
// holds no IP, IPv6 by /64) so junk headers can neither dodge the limit nor fill Redis, and a client already
// refused by it costs no key lookup however many well-formed made-up keys it sends. Unit tests for the address
// function, then a real gateway on a private redis-server in front of a loopback upstream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import request from 'supertest';
import type { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { generateKey } from '../src/keys/format.js';
import { anonymousClientKey } from '../src/limits/client-address.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { testConfig } from './helpers/gateway.js';
import { clientAddresses, commandCalls, monitorRedis, startLimitsGateway, type LimitsGateway } from './helpers/limits.js';

const key = (ip: string | undefined, peer: string | undefined = '192.0.2.200') => anonymousClientKey({ ip, socket: { remoteAddress: peer } });

describe('anonymousClientKey', () => {
  it('keeps a valid IPv4 address as it is (the very same string)', () => {
    const ip = '198.51.100.7';
    expect(key(ip)).toBe(ip);
    expect(key('10.0.0.1', '10.0.0.2')).toBe('10.0.0.1');
  });

  it("falls back to the peer's address when the derived one is not an IP", () => {
    for (const junk of ['not-an-ip', '1.2.3.4.5', '01.2.3.4', 'a'.repeat(8192), '', ' 1.2.3.4', '1.2.3.4%eth0', 'fe80::1%', '[::1]', '::1/64']) {
      expect(key(junk, '192.0.2.9')).toBe('192.0.2.9');
    }
    expect(key(undefined, '192.0.2.9')).toBe('192.0.2.9');
  });

  it('counts an IPv4-mapped IPv6 address as the IPv4 address, in either spelling, also for the peer', () => {
    expect(key('::ffff:203.0.113.5')).toBe('203.0.113.5');
    expect(key('::FFFF:203.0.113.5')).toBe('203.0.113.5');
    expect(key('::ffff:cb00:7105')).toBe('203.0.113.5');
    expect(key('0:0:0:0:0:ffff:cb00:7105')).toBe('203.0.113.5');
    expect(key('junk', '::ffff:127.0.0.1')).toBe('127.0.0.1');
  });

  it('buckets IPv6 by /64 in one canonical spelling, whatever the zone id', () => {
    const bucket = key('2001:db8::1');
    expect(bucket).toBe('2001:db8:0:0::/64');
    for (const same of [
      '2001:0db8:0:0:ffff::2',
      '2001:DB8::',
      '2001:db8:0000:0000:1:2:3:4',
      '2001:db8::1%eth0',
      `2001:db8::1%${'z'.repeat(5000)}`,
      '2001:db8::1.2.3.4',
      '2001:db8:0:0:0:0:0:0',
    ]) {
      expect(key(same), same).toBe(bucket);
    }
    expect(key('2001:db8:0:1::1')).toBe('2001:db8:0:1::/64');
    expect(key('2001:db8:abcd:12::')).toBe('2001:db8:abcd:12::/64');
    expect(key('::1')).toBe('0:0:0:0::/64');
    expect(key('::')).toBe('0:0:0:0::/64');
    expect(key('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(key('1:2:3:4:5:6:7:8')).toBe('1:2:3:4::/64');
    expect(key('1:2:3::')).toBe('1:2:3:0::/64');
    expect(key('junk', '2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
  });

  it('is bounded in length whatever it is given', () => {
    for (const v of ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '255.255.255.255', `fe80::1%${'x'.repeat(10_000)}`, 'x'.repeat(10_000)]) {
      expect(key(v).length).toBeLessThanOrEqual(24);
    }
    expect(anonymousClientKey({ ip: 'junk', socket: {} })).toBe('unknown');
  });
});

const PER_MINUTE = 3;

describe('anonymous limit through the gateway (trustProxy: true, a private Redis)', () => {
  let up: TestUpstream;
  let redis: TestRedis;
  let admin: Redis;
  const gateways: LimitsGateway[] = [];
  let prefixSeq = 0;

  beforeAll(async () => {
    up = await TestUpstream.start();
    redis = await TestRedis.start();
    admin = redis.client();
  });
  afterAll(async () => {
    for (const gw of gateways) await gw.close();
    admin?.disconnect();
    await up?.close();
    await redis?.stop();
  });

  /** A gateway of its own (its own Redis prefix, so its anonymous counts start empty). */
  async function gateway(): Promise<{ gw: LimitsGateway; prefix: string }> {
    const prefix = `hanon${++prefixSeq}:`;
    const gw = await startLimitsGateway(
      testConfig({
        server: { trustProxy: true },
        upstream: { url: up.url, timeoutMs: 2000 },
        redis: { url: redis.url, prefix, commandTimeoutMs: 500 },
        anonymous: { perMinute: PER_MINUTE },
      }),
    );
    gateways.push(gw);
    return { gw, prefix };
  }

  async function anonymousKeys(prefix: string): Promise<string[]> {
    const found: string[] = [];
    let cursor = '0';
    for (let i = 0; i < 1000; i++) {
      const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}anon*`, 'COUNT', 1000);
      found.push(...keys);
      cursor = next;
      if (cursor === '0') return found;
    }
    throw new Error('SCAN did not finish');
  }

  const send = (gw: LimitsGateway, xff: string, bearer?: string) => {
    const r = request(gw.url).get('/v1/categories').set('x-forwarded-for', xff);
    return bearer ? r.set('authorization', `Bearer ${bearer}`) : r;
  };

  /** 8 KB of letters, different for each i. */
  const letters = (i: number) =>
    `${randomBytes(6144)
      .toString('base64')
      .replace(/[^A-Za-z]/g, 'q')
      .slice(0, 8180)}${String.fromCharCode(97 + (i % 26))}${'z'.repeat(11)}`;

  it('unique junk X-Forwarded-For values from one peer share its one bucket: exactly perMinute admitted, one key in Redis', async () => {
    const { gw, prefix } = await gateway();
    const values = Array.from(
      { length: PER_MINUTE + 9 },
      (_, i) => [letters(i), `not-an-ip-${i}`, `1.2.3.4.${5 + i}`, `junk${i}, 192.0.2.1`, `${i}.${i}`, `1.2.3.4%${i}`][i % 6]!,
    );
    expect(new Set(values).size).toBe(values.length);
    const statuses: number[] = [];
    for (const xff of values) statuses.push((await send(gw, xff)).status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(PER_MINUTE);
    expect(statuses.slice(0, PER_MINUTE)).toEqual(Array(PER_MINUTE).fill(401));
    expect(statuses.slice(PER_MINUTE)).toEqual(Array(values.length - PER_MINUTE).fill(429));
    const keys = await anonymousKeys(prefix);
    expect(keys).toHaveLength(1);
    expect(keys[0]!.length).toBeLessThan(prefix.length + 40);
  });

  it('valid distinct IPv4 X-Forwarded-For values still get a bucket each', async () => {
    const { gw, prefix } = await gateway();
    const ips = ['198.51.100.1', '198.51.100.2', '203.0.113.77'];
    for (const ip of ips) {
      for (let i = 0; i < PER_MINUTE; i++) expect((await send(gw, ip)).status).toBe(401);
    }
    for (const ip of ips) expect((await send(gw, ip)).status).toBe(429);
    // `::ffff:a.b.c.d` is the same client as a.b.c.d.
    expect((await send(gw, '::ffff:198.51.100.1')).status).toBe(429);
    expect((await anonymousKeys(prefix)).sort()).toEqual(ips.map((ip) => `${prefix}anon:${ip}`).sort());
  });

  it('IPv6 X-Forwarded-For values in one /64 share a bucket (any spelling, any zone id); another /64 has its own', async () => {
    const { gw, prefix } = await gateway();
    const sameNet = [
      '2001:db8:1:2::1',
      '2001:0db8:0001:0002:ffff::2',
      `2001:db8:1:2::3%${'e'.repeat(4000)}`,
      '2001:DB8:1:2:aaaa:bbbb:cccc:dddd',
      '2001:db8:1:2::5%eth0',
    ];
    const statuses: number[] = [];
    for (const ip of sameNet) statuses.push((await send(gw, ip)).status);
    expect(statuses).toEqual([...Array(PER_MINUTE).fill(401), ...Array(sameNet.length - PER_MINUTE).fill(429)]);
    expect((await send(gw, '2001:db8:1:3::1')).status).toBe(401);
    expect((await anonymousKeys(prefix)).sort()).toEqual([`${prefix}anon:2001:db8:1:2::/64`, `${prefix}anon:2001:db8:1:3::/64`]);
  });

  it('a client over its anonymous limit costs no Redis command for well-formed made-up keys (all 429); valid keys from it still get 200', async () => {
    const { gw } = await gateway();
    // The key filter is built in the background at start-up; until it is, unknown keys are looked up.
    for (let i = 0; i < 300 && !gw.gateway.keys.knownHashes?.isCertain; i++) await new Promise((r) => setTimeout(r, 10));
    const ip = '198.51.100.99';
    const known = await gw.createKey({ plan: 'free' });
    expect((await send(gw, ip, known.key)).status).toBe(200);
    const notYetSeen = await gw.createKey({ plan: 'free' });
    for (let i = 0; i < PER_MINUTE; i++) expect((await send(gw, ip)).status).toBe(401);
    expect((await send(gw, ip)).status).toBe(429);

    const gatewayAddrs = await clientAddresses(admin, 'tollgate-gateway');
    expect(gatewayAddrs.size).toBeGreaterThan(0);
    const N = 200;
    const before = await commandCalls(admin);
    const mon = await monitorRedis(admin);
    const statuses = new Map<number, number>();
    for (let i = 0; i < N; i++) {
      const res = await send(gw, ip, generateKey());
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      // A bound: the seconds left in the window depend on when in it the request came.
      if (res.status === 429) expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    const commands = await mon.stop();
    const after = await commandCalls(admin);
    expect(Object.fromEntries(statuses)).toEqual({ 429: N });
    const fromGateway = commands.filter((c) => gatewayAddrs.has(c.source) || c.source === 'lua');
    expect(
      fromGateway.map((c) => c.args[0]),
      'Redis commands the gateway sent for the made-up keys',
    ).toEqual([]);
    expect((after.get('get') ?? 0) - (before.get('get') ?? 0)).toBe(0);

    // A key this instance verified before keeps working from the refused address, from its cache.
    const ok = await send(gw, ip, known.key);
    expect(ok.status).toBe(200);
    // A valid key this instance has not seen yet is looked up (the key filter holds its hash) and admitted: other
    // traffic from its address never locks it out.
    expect((await send(gw, ip, notYetSeen.key)).status).toBe(200);
    // Another address is not affected either.
    expect((await send(gw, '198.51.100.100', notYetSeen.key)).status).toBe(200);
  });
});
