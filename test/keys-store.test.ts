// One behaviour suite run over both KeyStore implementations (memory, and Redis on a private redis-server):
// create, get, list, findByHash, update with link/unlink/expire, and the change feed (publish + subscribe).
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import type { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateKey, generateKeyId, hashKey } from '../src/keys/format.js';
import { MemoryKeyStore } from '../src/keys/memory-store.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import { KeyVerifier } from '../src/keys/verifier.js';
import { KeyStoreError, type KeyStore, type StoredKey } from '../src/keys/types.js';
import { systemClock } from '../src/util/clock.js';
import request from 'supertest';
import { composeGateway } from '../src/compose.js';
import { testKeyAdmin } from './helpers/key-stores.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { TestRedis } from './helpers/redis-server.js';
import { waitFor } from './helpers/wait.js';

const PREFIX = 'kstest:';
let redis: TestRedis;
const clients: RedisConnection[] = [];
const stores: KeyStore[] = [];

beforeAll(async () => {
  redis = await TestRedis.start();
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close().catch(() => {})));
  for (const c of clients) await c.close();
  await redis?.stop();
});

function redisClient(): RedisConnection {
  const c = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
  clients.push(c);
  return c;
}

interface Backend {
  name: string;
  /** Two handles on one shared store (two gateway instances); the memory store is one object. */
  pair(): { a: KeyStore; b: KeyStore };
  reset(): Promise<void>;
}

const backends: Backend[] = [
  {
    name: 'MemoryKeyStore',
    pair() {
      const s = new MemoryKeyStore();
      stores.push(s);
      return { a: s, b: s };
    },
    async reset() {},
  },
  {
    name: 'RedisKeyStore',
    pair() {
      const ks = new Keyspace(PREFIX);
      const a = new RedisKeyStore(redisClient(), ks);
      const b = new RedisKeyStore(redisClient(), ks);
      stores.push(a, b);
      return { a, b };
    },
    async reset() {
      await redis.flush();
    },
  },
];

function newKey(over: Partial<StoredKey> = {}): { plaintext: string; key: StoredKey } {
  const plaintext = generateKey();
  return {
    plaintext,
    key: { id: generateKeyId(), plan: 'free', createdAt: new Date().toISOString(), status: 'active', hash: hashKey(plaintext), ...over },
  };
}

/** Publishes until the subscriber has heard it (a fresh Redis subscription takes a moment), bounded to 3 s. */
async function publishUntilHeard(pub: KeyStore, heard: string[], id: string): Promise<void> {
  const deadline = Date.now() + 3000;
  while (!heard.includes(id)) {
    if (Date.now() > deadline) throw new Error(`change for ${id} never arrived`);
    await pub.publishChange(id);
    await sleep(25);
  }
}

describe.each(backends)('$name', (backend) => {
  let a: KeyStore;
  let b: KeyStore;

  beforeEach(async () => {
    await backend.reset();
    ({ a, b } = backend.pair());
  });

  it('create, then get by id and find by hash (from another handle too)', async () => {
    const { key } = newKey({ name: 'acme', perMinute: 5, perDay: 50, expiresAt: '2030-01-01T00:00:00.000Z' });
    await a.create(key);
    expect(await a.get(key.id)).toEqual(key);
    expect(await b.get(key.id)).toEqual(key);
    expect((await b.findByHash(key.hash))?.key).toEqual(key);
    expect(await a.findByHash(hashKey(generateKey()))).toBeUndefined();
    expect(await a.get('key_missing')).toBeUndefined();
  });

  it('hands out copies: changing a returned record changes nothing stored', async () => {
    const { key } = newKey();
    await a.create(key);
    const got = (await a.get(key.id))!;
    got.status = 'revoked';
    got.plan = 'enterprise';
    const found = (await a.findByHash(key.hash))!;
    found.key.hash = 'x';
    const listed = await a.list();
    listed[0]!.plan = 'enterprise';
    expect(await a.get(key.id)).toEqual(key);
  });

  it('refuses a duplicate id or a duplicate hash, leaving nothing half-made', async () => {
    const { key } = newKey();
    await a.create(key);
    const sameId = newKey({ id: key.id }).key;
    await expect(b.create(sameId)).rejects.toBeInstanceOf(KeyStoreError);
    expect(await a.get(key.id)).toEqual(key);
    const sameHash = newKey({ hash: key.hash }).key;
    await expect(b.create(sameHash)).rejects.toBeInstanceOf(KeyStoreError);
    expect(await a.get(sameHash.id)).toBeUndefined();
    expect((await a.findByHash(key.hash))?.key.id).toBe(key.id);
    expect((await a.list()).map((k) => k.id)).toEqual([key.id]);
  });

  it('lists every key', async () => {
    expect(await a.list()).toEqual([]);
    const made = Array.from({ length: 12 }, () => newKey().key);
    for (const k of made) await a.create(k);
    const listed = await b.list();
    const byId = (x: StoredKey, y: StoredKey) => x.id.localeCompare(y.id);
    expect([...listed].sort(byId)).toEqual([...made].sort(byId));
  });

  it('update replaces the record; linkHash opens it with a new hash, unlinkHashes closes the old one', async () => {
    const { key } = newKey();
    await a.create(key);
    const newHash = hashKey(generateKey());
    const next: StoredKey = { ...key, hash: newHash, rotatedAt: new Date().toISOString() };
    await a.update(next, { linkHash: newHash, unlinkHashes: [key.hash] });
    expect(await b.get(key.id)).toEqual(next);
    expect((await b.findByHash(newHash))?.key).toEqual(next);
    expect(await b.findByHash(key.hash)).toBeUndefined();
    // A plain update (no index change) keeps the link.
    const revoked: StoredKey = { ...next, status: 'revoked', revokedAt: new Date().toISOString() };
    await a.update(revoked);
    expect((await b.findByHash(newHash))?.key).toEqual(revoked);
    expect((await b.list()).map((k) => k.status)).toEqual(['revoked']);
  });

  it('update of an id that does not exist fails and links, unlinks and writes nothing', async () => {
    const { key } = newKey();
    const other = newKey().key;
    await a.create(other);
    const ghost: StoredKey = { ...key, hash: hashKey(generateKey()) };
    await expect(a.update(ghost, { linkHash: ghost.hash, unlinkHashes: [other.hash] })).rejects.toThrow(/no key/);
    expect(await b.get(key.id)).toBeUndefined();
    expect(await b.findByHash(ghost.hash)).toBeUndefined();
    expect((await b.findByHash(other.hash))?.key).toEqual(other);
  });

  it('expireHash keeps an old hash linked until the given instant, then drops it', async () => {
    const { key } = newKey();
    await a.create(key);
    const newHash = hashKey(generateKey());
    const atMs = Date.now() + 400;
    const next: StoredKey = { ...key, hash: newHash, prevHash: key.hash, prevHashUntil: atMs };
    await a.update(next, { linkHash: newHash, expireHash: { hash: key.hash, atMs } });
    expect((await b.findByHash(key.hash))?.key.id).toBe(key.id);
    expect((await b.findByHash(newHash))?.key.id).toBe(key.id);
    await sleep(atMs - Date.now() + 100);
    expect(await b.findByHash(key.hash)).toBeUndefined();
    expect((await b.findByHash(newHash))?.key.id).toBe(key.id);
    expect(await b.get(key.id)).toEqual(next);
  });

  it('a change published on one handle reaches subscribers, until they unsubscribe', async () => {
    const heard: string[] = [];
    const unsubscribe = await b.subscribe(
      (id) => heard.push(id),
      () => {},
    );
    await publishUntilHeard(a, heard, 'key_ready');
    heard.length = 0;
    await a.publishChange('key_one');
    await a.publishChange('key_two');
    const deadline = Date.now() + 2000;
    while (heard.length < 2 && Date.now() < deadline) await sleep(10);
    expect(heard).toEqual(['key_one', 'key_two']);
    await unsubscribe();
    heard.length = 0;
    // Another subscriber still listening marks when the message has been delivered: by then the first would have it.
    const marker: string[] = [];
    const unsubscribeMarker = await a.subscribe(
      (id) => marker.push(id),
      () => {},
    );
    try {
      await publishUntilHeard(a, marker, 'marker_ready');
      await a.publishChange('key_three');
      await waitFor(() => marker.includes('key_three'), 'the marker subscriber heard key_three', 30_000, 10);
      expect(heard).toEqual([]);
    } finally {
      await unsubscribeMarker();
    }
  });

  it('KeyAdmin on one instance, KeyVerifier on another, either store: a revoke drops the key from the other cache', async () => {
    const one = testKeyAdmin(a, systemClock);
    const two = new KeyVerifier(b, systemClock);
    const heard: string[] = [];
    two.onChange((id) => void (id && heard.push(id)));
    await two.start();
    await publishUntilHeard(a, heard, 'key_ready');
    const { key, record } = await one.issuer.create({ plan: 'free' });
    expect((await two.verify(key)).ok).toBe(true);
    const t0 = Date.now();
    await one.lifecycle.revoke(record.id);
    let ok = true;
    while (ok && Date.now() - t0 < 2000) {
      ok = (await two.verify(key)).ok;
      if (ok) await sleep(10);
    }
    expect(ok).toBe(false);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

describe('Redis commands spent on authentication (INFO stats on a private Redis)', () => {
  let upstream: TestUpstream;
  beforeAll(async () => {
    upstream = await TestUpstream.start();
  });
  afterAll(async () => {
    await upstream.close();
  });

  async function commandsProcessed(r: Redis): Promise<number> {
    const info = await r.info('stats');
    const m = /total_commands_processed:(\d+)/.exec(info);
    if (!m) throw new Error('no total_commands_processed in INFO stats');
    return Number(m[1]);
  }

  it('malformed keys cost no Redis command; a cached key costs none; an unknown key costs one lookup', async () => {
    await redis.flush();
    const ks = new Keyspace(PREFIX);
    const admin = testKeyAdmin(new RedisKeyStore(redisClient(), ks), systemClock);
    const { key } = await admin.issuer.create({ plan: 'free' });
    // Keys in Redis, limits in memory: the anonymous limit would (rightly) count refused requests in Redis.
    const config = testConfig({
      upstream: { url: upstream.url },
      log: { level: 'silent' },
      anonymous: { perMinute: 100_000 },
      plans: { free: { perMinute: 100_000, perDay: 1_000_000 } },
    });
    const gateway = await composeGateway({ config, logger: silentLogger, keyStore: new RedisKeyStore(redisClient(), ks) });
    onTestFinished(() => gateway.close());
    const app = gateway.app;
    expect((await request(app).get('/v1/x').set('Authorization', `Bearer ${key}`)).status).toBe(200);

    const probe = redis.client();
    try {
      // What two INFO calls in a row cost by themselves (the first INFO is counted by the second).
      const a0 = await commandsProcessed(probe);
      const baseline = (await commandsProcessed(probe)) - a0;

      const before = await commandsProcessed(probe);
      for (let i = 0; i < 100; i++) {
        const i3 = 3 + (i % 49);
        const c = key[i3]!;
        const bad = key.slice(0, i3) + (c === 'a' ? 'b' : 'a') + key.slice(i3 + 1);
        const res = await request(app).get('/v1/x').set('Authorization', `Bearer ${bad}`);
        expect(res.status).toBe(401);
        expect(res.body.code).toBe('invalid_api_key');
      }
      expect((await commandsProcessed(probe)) - before).toBe(baseline);

      const cachedBefore = await commandsProcessed(probe);
      for (let i = 0; i < 100; i++) expect((await request(app).get('/v1/x').set('Authorization', `Bearer ${key}`)).status).toBe(200);
      expect((await commandsProcessed(probe)) - cachedBefore).toBe(baseline);

      // The measurement does see lookups: 20 requests with one unknown well-formed key cost one GET.
      const unknown = generateKey();
      const unknownBefore = await commandsProcessed(probe);
      for (let i = 0; i < 20; i++) expect((await request(app).get('/v1/x').set('Authorization', `Bearer ${unknown}`)).status).toBe(401);
      expect((await commandsProcessed(probe)) - unknownBefore).toBe(baseline + 1);
    } finally {
      probe.disconnect();
    }
  });
});

describe('RedisKeyStore layout', () => {
  beforeEach(async () => {
    await redis.flush();
  });

  it('keeps a JSON record under a hash-tagged key, a hash -> id index and an id set; never a plaintext', async () => {
    const ks = new Keyspace(PREFIX);
    const store = new RedisKeyStore(redisClient(), ks);
    const admin = testKeyAdmin(store, systemClock);
    const { key, record } = await admin.issuer.create({ plan: 'pro', name: 'acme' });
    const r = redis.client();
    try {
      const names = (await r.keys('*')).sort();
      expect(names).toEqual([`${PREFIX}key:{${record.id}}`, `${PREFIX}keyhash:${hashKey(key)}`, `${PREFIX}keys`].sort());
      expect(JSON.parse((await r.get(`${PREFIX}key:{${record.id}}`))!)).toMatchObject({ id: record.id, plan: 'pro', hash: hashKey(key), status: 'active' });
      expect(await r.get(`${PREFIX}keyhash:${hashKey(key)}`)).toBe(record.id);
      expect(await r.smembers(`${PREFIX}keys`)).toEqual([record.id]);
      for (const name of names) {
        const type = await r.type(name);
        const value = type === 'string' ? await r.get(name) : type === 'set' ? (await r.smembers(name)).join(' ') : '';
        expect(name + value).not.toContain(key);
      }
      // Rotation with grace: the old hash link carries a TTL that ends with the grace period.
      await admin.lifecycle.rotate(record.id, 30);
      const ttl = await r.pttl(`${PREFIX}keyhash:${hashKey(key)}`);
      expect(ttl).toBeGreaterThan(25_000);
      expect(ttl).toBeLessThanOrEqual(30_000);
      // Revoke unlinks every hash of the key.
      await admin.lifecycle.revoke(record.id);
      expect((await r.keys(`${PREFIX}keyhash:*`)).length).toBe(0);
    } finally {
      r.disconnect();
    }
  });

  it("findByHash names the record's revision: the SHA-1 of its bytes as stored, new with every write; the memory store names none", async () => {
    const ks = new Keyspace(PREFIX);
    const store = new RedisKeyStore(redisClient(), ks);
    // Multi-byte text: the revision is over the stored bytes, as the limit script's redis.sha1hex() sees them.
    const { key } = newKey({ name: 'Zoë 🐾 — café' });
    await store.create(key);
    const r = redis.client();
    try {
      const raw = (await r.getBuffer(ks.keyRecord(key.id)))!;
      const found = (await store.findByHash(key.hash))!;
      expect(found.key).toEqual(key);
      expect(found.revision).toBe(createHash('sha1').update(raw).digest('hex'));
      expect(found.revision).toBe(await r.eval('return redis.sha1hex(redis.call("GET", KEYS[1]))', 1, ks.keyRecord(key.id)));
      await store.update({ ...key, plan: 'pro' });
      const after = (await store.findByHash(key.hash))!;
      expect(after.key.plan).toBe('pro');
      expect(after.revision).not.toBe(found.revision);
    } finally {
      r.disconnect();
    }
    const mem = new MemoryKeyStore();
    await mem.create(key);
    expect(await mem.findByHash(key.hash)).toEqual({ key });
  });

  it('tells subscribers to start over (onReset) after the connection to Redis comes back', async () => {
    const store = new RedisKeyStore(redisClient(), new Keyspace(PREFIX));
    stores.push(store);
    const heard: string[] = [];
    let resets = 0;
    await store.subscribe(
      (id) => heard.push(id),
      () => resets++,
    );
    const pub = new RedisKeyStore(redisClient(), new Keyspace(PREFIX));
    await publishUntilHeard(pub, heard, 'key_before');
    await redis.kill();
    await redis.startProcess();
    const deadline = Date.now() + 5000;
    while (resets === 0 && Date.now() < deadline) await sleep(25);
    // One reconnect, one reset.
    expect(resets).toBe(1);
    // And it is subscribed again: changes flow as before.
    await publishUntilHeard(pub, heard, 'key_after');
  });
});
