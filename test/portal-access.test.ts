// The consumer portal's access rules (src/access/portal-access.ts) on the stores the gateway composes them on: Redis
// (two gateway instances sharing one redis-server, as `tollgate serve` composes them) and memory. A sign-in link works
// once, across instances too, and for 15 minutes; ending sessions (all of a consumer's, or one actor's) ends unused
// links with them; suspending or deleting the consumer (through ConsumerAdmin, the admin API's and CLI's way) ends
// its sessions and they stay ended after a resume or a re-creation; a session lives sessionHours at most (≤ 24).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PortalAccess, type LinkRequest } from '../src/access/portal-access.js';
import { MemoryAccessStore } from '../src/access/memory-store.js';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import { validateConfig } from '../src/config/load.js';
import { Runtime } from '../src/routing/runtime.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { ManualClock } from '../src/util/clock.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { TestRedis } from './helpers/redis-server.js';

const PREFIX = 'portalacc:';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

let redis: TestRedis;

beforeAll(async () => {
  redis = await TestRedis.start();
}, 120_000);

afterAll(async () => {
  await redis?.stop();
});

interface Setup {
  clock: ManualClock;
  /** Instances sharing the stores (two on Redis, one in memory). */
  gateways: ComposedGateway[];
  access: PortalAccess;
  /** An active consumer with one key: a fresh id per test. */
  consumer: string;
  key: string;
  keyId: string;
  close(): Promise<void>;
}

let seq = 0;

async function setup(backend: 'redis' | 'memory', portal: Record<string, unknown> = {}): Promise<Setup> {
  const clock = new ManualClock(Date.UTC(2026, 10, 29, 10, 0, 0));
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: 'http://127.0.0.1:9' },
    ...(backend === 'redis' ? { redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 2000 } } : {}),
    plans: { free: { perMinute: 60, perDay: 1000 } },
    portal,
  });
  const count = backend === 'redis' ? 2 : 1;
  const gateways: ComposedGateway[] = [];
  for (let i = 0; i < count; i++)
    gateways.push(await composeGateway({ config, logger: silentLogger, clock, env: {}, upstreamCheckTimeoutMs: 200, healthChecks: false, delivery: false }));
  const g = gateways[0]!;
  const consumer = `c${++seq}`;
  await g.consumerAdmin.create({ id: consumer, name: 'Acme', plan: 'free' });
  const issued = await g.admin.issuer.create({ plan: 'free', consumer });
  return {
    clock,
    gateways,
    access: g.portalAccess,
    consumer,
    key: issued.key,
    keyId: issued.record.id,
    close: async () => {
      for (const gw of gateways) await gw.close();
    },
  };
}

const link = (consumer: string, actor = 'alice@acme.test', more: Partial<LinkRequest> = {}): LinkRequest => ({
  consumer,
  actor,
  scopes: ['keys:read', 'usage:read'],
  ...more,
});

describe.each(['redis', 'memory'] as const)('PortalAccess on %s', (backend) => {
  let s: Setup;
  beforeAll(async () => {
    s = await setup(backend);
  }, 60_000);
  afterAll(async () => {
    await s?.close();
  });

  it('a link is exchanged once: the session it gives is found by its id, and the code never works again', async () => {
    const { code, link: issued } = await s.access.issueLink(link(s.consumer));
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(issued.expiresAt - issued.createdAt).toBe(15 * MINUTE);
    const session = await s.access.exchange(code);
    expect(session).toMatchObject({ kind: 'link', consumer: s.consumer, actor: 'alice@acme.test', scopes: ['keys:read', 'usage:read'] });
    expect(session!.id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await s.access.find(session!.id)).toEqual(session);
    expect(await s.access.exchange(code)).toBeUndefined();
    // Not a code, and a code-shaped string never issued.
    expect(await s.access.exchange('nope')).toBeUndefined();
    expect(await s.access.exchange('A'.repeat(43))).toBeUndefined();
    expect(await s.access.find('A'.repeat(43))).toBeUndefined();
  });

  it('20 concurrent exchanges of one code give exactly one session (on Redis: spread over two instances)', async () => {
    const { code } = await s.access.issueLink(link(s.consumer));
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => s.gateways[i % s.gateways.length]!.portalAccess.exchange(code)));
    const sessions = results.filter((r) => r !== undefined);
    expect(sessions).toHaveLength(1);
    // The session is good on every instance.
    for (const g of s.gateways) expect((await g.portalAccess.find(sessions[0]!.id))?.consumer).toBe(s.consumer);
  });

  it('a link expires 15 minutes after it is issued (the clock the gateway is given)', async () => {
    const early = await s.access.issueLink(link(s.consumer));
    const late = await s.access.issueLink(link(s.consumer));
    s.clock.advance(15 * MINUTE - 1);
    expect(await s.access.exchange(early.code)).toBeDefined();
    s.clock.advance(1);
    expect(await s.access.exchange(late.code)).toBeUndefined();
  });

  it("a session lives sessionHours (8 by default), a link's shorter sessionHours, and never past the config's", async () => {
    const plain = await s.access.exchange((await s.access.issueLink(link(s.consumer))).code);
    expect(plain!.expiresAt - plain!.createdAt).toBe(8 * HOUR);
    const short = await s.access.exchange((await s.access.issueLink(link(s.consumer, 'bob', { sessionHours: 2 }))).code);
    expect(short!.expiresAt - short!.createdAt).toBe(2 * HOUR);
    const long = await s.access.exchange((await s.access.issueLink(link(s.consumer, 'bob', { sessionHours: 24 }))).code);
    expect(long!.expiresAt - long!.createdAt).toBe(8 * HOUR);
    const signedIn = await s.access.signIn(s.key);
    expect(signedIn.ok && signedIn.session.expiresAt - signedIn.session.createdAt).toBe(8 * HOUR);
    s.clock.advance(2 * HOUR - 1);
    expect(await s.access.find(short!.id)).toBeDefined();
    s.clock.advance(1);
    expect(await s.access.find(short!.id)).toBeUndefined();
    s.clock.advance(6 * HOUR);
    for (const x of [plain!, long!, signedIn.ok ? signedIn.session : plain!]) expect(await s.access.find(x.id)).toBeUndefined();
  });

  it('a key sign-in reads only (keys:read, usage:read) and names its key; it ends when the key is revoked', async () => {
    const issued = await s.gateways[0]!.admin.issuer.create({ plan: 'free', consumer: s.consumer });
    const r = await s.access.signIn(issued.key);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.session).toMatchObject({ kind: 'key', consumer: s.consumer, keyId: issued.record.id, scopes: ['keys:read', 'usage:read'] });
    expect(r.session.actor).toBeUndefined();
    expect(await s.access.find(r.session.id)).toBeDefined();
    await s.gateways[0]!.admin.lifecycle.revoke(issued.record.id);
    expect(await s.access.find(r.session.id)).toBeUndefined();
    expect(await s.access.signIn(issued.key)).toEqual({ ok: false, code: 'invalid_api_key' });
    expect(await s.access.signIn('tg_not_a_key_at_all_really')).toEqual({ ok: false, code: 'invalid_api_key' });
  });

  it('a key without a consumer cannot sign in (403 forbidden)', async () => {
    const loose = await s.gateways[0]!.admin.issuer.create({ plan: 'free' });
    expect(await s.access.signIn(loose.key)).toMatchObject({ ok: false, code: 'forbidden' });
  });

  it("ending one actor's sessions ends theirs and their unused links, on every instance; others' stay", async () => {
    s.clock.advance(1);
    const alice = await s.access.exchange((await s.access.issueLink(link(s.consumer, 'alice'))).code);
    const bob = await s.access.exchange((await s.access.issueLink(link(s.consumer, 'bob'))).code);
    const key = await s.access.signIn(s.key);
    const aliceUnused = await s.access.issueLink(link(s.consumer, 'alice'));
    const bobUnused = await s.access.issueLink(link(s.consumer, 'bob'));
    const other = s.gateways[s.gateways.length - 1]!.portalAccess;
    const endedAt = await other.endSessions(s.consumer, 'alice');
    expect(endedAt).toBe(s.clock.now());
    for (const g of s.gateways) {
      expect(await g.portalAccess.find(alice!.id)).toBeUndefined();
      expect(await g.portalAccess.find(bob!.id)).toBeDefined();
      expect(await g.portalAccess.find(key.ok ? key.session.id : '')).toBeDefined();
    }
    expect(await s.access.exchange(aliceUnused.code)).toBeUndefined();
    expect(await s.access.exchange(bobUnused.code)).toBeDefined();
    // Alice signs in again after it: that session is not ended.
    s.clock.advance(1);
    const again = await s.access.exchange((await s.access.issueLink(link(s.consumer, 'alice'))).code);
    expect(await s.access.find(again!.id)).toBeDefined();
  });

  it("ending all of a consumer's sessions ends link and key sessions and unused links; later ones live", async () => {
    s.clock.advance(1);
    const alice = await s.access.exchange((await s.access.issueLink(link(s.consumer, 'alice'))).code);
    const key = await s.access.signIn(s.key);
    const unused = await s.access.issueLink(link(s.consumer, 'carol'));
    await s.access.endSessions(s.consumer);
    for (const g of s.gateways) {
      expect(await g.portalAccess.find(alice!.id)).toBeUndefined();
      expect(await g.portalAccess.find(key.ok ? key.session.id : '')).toBeUndefined();
    }
    expect(await s.access.exchange(unused.code)).toBeUndefined();
    s.clock.advance(1);
    const later = await s.access.signIn(s.key);
    expect(later.ok && (await s.access.find(later.session.id))?.kind).toBe('key');
  });

  it('suspending the consumer ends its sessions; they stay ended after a resume, and new sign-ins work again', async () => {
    const t = await setup(backend);
    try {
      const alice = await t.access.exchange((await t.access.issueLink(link(t.consumer, 'alice'))).code);
      const key = await t.access.signIn(t.key);
      const unused = await t.access.issueLink(link(t.consumer, 'alice'));
      await t.gateways[0]!.consumerAdmin.suspend(t.consumer);
      expect(await t.access.find(alice!.id)).toBeUndefined();
      expect(await t.access.signIn(t.key)).toMatchObject({ ok: false, code: 'consumer_suspended' });
      await expect(t.access.issueLink(link(t.consumer))).rejects.toMatchObject({ code: 'consumer_suspended' });
      t.clock.advance(MINUTE);
      await t.gateways[0]!.consumerAdmin.resume(t.consumer);
      for (const g of t.gateways) {
        expect(await g.portalAccess.find(alice!.id)).toBeUndefined();
        expect(await g.portalAccess.find(key.ok ? key.session.id : '')).toBeUndefined();
      }
      expect(await t.access.exchange(unused.code)).toBeUndefined();
      t.clock.advance(1);
      const back = await t.access.signIn(t.key);
      expect(back.ok).toBe(true);
    } finally {
      await t.close();
    }
  });

  it('deleting the consumer ends its sessions: a consumer re-created with the same id does not inherit them', async () => {
    const t = await setup(backend);
    try {
      const g = t.gateways[0]!;
      const alice = await t.access.exchange((await t.access.issueLink(link(t.consumer, 'alice'))).code);
      const unused = await t.access.issueLink(link(t.consumer, 'alice'));
      await g.consumerAdmin.delete(t.consumer, { revokeKeys: true });
      expect(await t.access.find(alice!.id)).toBeUndefined();
      await expect(t.access.issueLink(link(t.consumer))).rejects.toMatchObject({ code: 'not_found' });
      t.clock.advance(MINUTE);
      await g.consumerAdmin.create({ id: t.consumer, name: 'Acme again', plan: 'free' });
      for (const x of t.gateways) expect(await x.portalAccess.find(alice!.id)).toBeUndefined();
      expect(await t.access.exchange(unused.code)).toBeUndefined();
    } finally {
      await t.close();
    }
  });

  it('bad link requests are refused before anything is stored', async () => {
    await expect(s.access.issueLink(link(s.consumer, 'bad\u0007actor'))).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.access.issueLink(link(s.consumer, ''))).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.access.issueLink(link(s.consumer, 'x'.repeat(201)))).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.access.issueLink(link(s.consumer, 'alice', { scopes: [] }))).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.access.issueLink(link(s.consumer, 'alice', { scopes: ['keys:read', 'keys:read'] }))).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.access.issueLink(link(s.consumer, 'alice', { sessionHours: 25 }))).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(s.access.issueLink(link('nobody'))).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('the stores', () => {
  it('Redis keeps no secret: links and sessions are named by the SHA-256 of their code or id, with their TTL', async () => {
    const s = await setup('redis');
    try {
      const client = redis.client();
      const { code } = await s.access.issueLink(link(s.consumer));
      const session = await s.access.exchange((await s.access.issueLink(link(s.consumer))).code);
      const keys = await client.keys(`${PREFIX}portal:*`);
      for (const k of keys) expect(k.includes(code) || k.includes(session!.id)).toBe(false);
      const ks = new Keyspace(PREFIX);
      const { createHash } = await import('node:crypto');
      const sha = (t: string) => createHash('sha256').update(t).digest('hex');
      const linkTtl = await client.pttl(ks.portalLink(sha(code)));
      expect(linkTtl).toBeGreaterThan(14 * MINUTE);
      expect(linkTtl).toBeLessThanOrEqual(15 * MINUTE);
      const sessionTtl = await client.pttl(ks.portalSession(sha(session!.id)));
      expect(sessionTtl).toBeGreaterThan(7.9 * HOUR);
      expect(sessionTtl).toBeLessThanOrEqual(8 * HOUR);
      const stored = JSON.parse((await client.get(ks.portalSession(sha(session!.id))))!) as Record<string, unknown>;
      expect(stored.id).toBeUndefined();
      await s.access.endSessions(s.consumer, 'alice');
      expect(await client.hgetall(ks.portalEnded(s.consumer))).toEqual({ 'actor:alice': String(s.clock.now()) });
      expect(await client.pttl(ks.portalEnded(s.consumer))).toBeGreaterThan(24 * HOUR);
      client.disconnect();
    } finally {
      await s.close();
    }
  });

  it('memory: entries expire on the clock, and a link is taken once', async () => {
    const clock = new ManualClock();
    const store = new MemoryAccessStore(clock);
    const l = { consumer: 'c', actor: 'a', scopes: ['keys:read' as const], createdAt: clock.now(), expiresAt: clock.now() + 1000 };
    await store.putLink('h', l, 1000);
    expect(await store.takeLink('h')).toEqual(l);
    expect(await store.takeLink('h')).toBeUndefined();
    await store.putSession('s', { kind: 'key', consumer: 'c', keyId: 'k', scopes: ['keys:read'], createdAt: 0, expiresAt: 1 }, 500);
    clock.advance(499);
    expect(await store.getSession('s')).toBeDefined();
    clock.advance(1);
    expect(await store.getSession('s')).toBeUndefined();
    await store.markEnded('c', undefined, 7, 100);
    await store.markEnded('c', 'a', 9, 100);
    expect(await store.endedMarks('c', 'a')).toEqual({ all: 7, actor: 9 });
    expect(await store.endedMarks('c', 'b')).toEqual({ all: 7 });
  });
});

describe('the config', () => {
  it('sessionHours is 1..24; signInsPerMinute positive; the portal port its own', () => {
    const base = { upstream: { url: 'http://127.0.0.1:9' } };
    expect(validateConfig({ ...base, portal: { sessionHours: 24 } }).ok).toBe(true);
    expect(validateConfig({ ...base, portal: { sessionHours: 25 } }).ok).toBe(false);
    expect(validateConfig({ ...base, portal: { sessionHours: 0 } }).ok).toBe(false);
    expect(validateConfig({ ...base, portal: { signInsPerMinute: 0 } }).ok).toBe(false);
    expect(validateConfig({ ...base, portal: { publicUrl: 'ftp://portal.example.com' } }).ok).toBe(false);
    expect(validateConfig({ ...base, portal: { publicUrl: 'https://portal.example.com' } }).ok).toBe(true);
    for (const taken of [{ server: { port: 9000 } }, { admin: { port: 9000 } }, { ops: { port: 9000 } }]) {
      const r = validateConfig({ ...base, ...taken, portal: { port: 9000 } });
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.errors.join('\n')).toMatch(/portal\.port.*a port of its own/);
    }
    expect(validateConfig({ ...base, portal: { port: 0 }, admin: { port: 0 } }).ok).toBe(true);
  });

  it("a reload keeps the listener's fields (and says they need a restart) and applies sessionHours and signInsPerMinute", () => {
    const base = { upstream: { url: 'http://127.0.0.1:9' } };
    const runtime = new Runtime(testConfig({ ...base, portal: { port: 9100, host: '127.0.0.1', sessionHours: 8 } }));
    const ignored = runtime.apply(
      testConfig({ ...base, portal: { port: 9200, host: '0.0.0.0', publicUrl: 'https://p.example.test', sessionHours: 2, signInsPerMinute: 3 } }),
    );
    expect(ignored.sort()).toEqual(['portal.host', 'portal.port', 'portal.publicUrl']);
    expect(runtime.config.portal).toMatchObject({ port: 9100, host: '127.0.0.1', sessionHours: 2, signInsPerMinute: 3 });
    expect(runtime.config.portal.publicUrl).toBeUndefined();
  });
});
