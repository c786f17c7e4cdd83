// The consumer mirror the limit script reads in a consumer's slot: consumer:{c:<id>}:keys, key id -> the key's record
// byte for byte. Over both KeyStore implementations, after every kind of write (create, update, rotate with and
// without grace, revoke, import with a grace hash, move, detach) the mirror of the consumer the record names equals
// the stored record, and no other consumer's mirror holds the key; a refused compare-and-set leaves it alone; a stale
// entry (a write cut short) is never read as the consumer's key. And every way of attaching a key (created with a
// consumer, updated into one, imported naming one, a bulk attach) puts it in the usage ledger's two sets of that
// consumer before its record names the consumer.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConsumerAdmin } from '../src/consumers/admin.js';
import { ConsumerAttach } from '../src/consumers/attach.js';
import { RedisConsumerStore } from '../src/consumers/redis-store.js';
import { KeyAdmin } from '../src/keys/admin.js';
import type { KeyConsumers } from '../src/keys/admin-policy.js';
import { bufferSource } from '../src/keys/import-read.js';
import { generateKey, generateKeyId, hashKey } from '../src/keys/format.js';
import { MemoryKeyStore } from '../src/keys/memory-store.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import type { KeyStore, StoredKey } from '../src/keys/types.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { systemClock } from '../src/util/clock.js';
import { testKeyAdmin } from './helpers/key-stores.js';
import { monitorRedis } from './helpers/limits.js';
import { TestRedis } from './helpers/redis-server.js';

const PREFIX = 'mirror:';
const ks = new Keyspace(PREFIX);
let redis: TestRedis;
const connections: RedisConnection[] = [];

beforeAll(async () => {
  redis = await TestRedis.start();
});

afterAll(async () => {
  for (const c of connections) await c.close();
  await redis?.stop();
});

interface Backend {
  name: string;
  store(): KeyStore;
  /** The stored record's bytes, and every consumer mirror's entry for the key (consumer id -> bytes). */
  stored(store: KeyStore, id: string): Promise<{ record: string | undefined; mirrors: Record<string, string> }>;
  reset(): Promise<void>;
}

const CONSUMERS = ['acme', 'globex', 'initech'];

const backends: Backend[] = [
  {
    name: 'MemoryKeyStore',
    store: () => new MemoryKeyStore(),
    async stored(store, id) {
      const mem = store as MemoryKeyStore;
      const k = await mem.get(id);
      const mirrors: Record<string, string> = {};
      for (const c of CONSUMERS) {
        const entry = mem.mirrorOf(c).get(id);
        if (entry !== undefined) mirrors[c] = entry;
      }
      return { record: k && JSON.stringify(k), mirrors };
    },
    reset: async () => {},
  },
  {
    name: 'RedisKeyStore',
    store: () => {
      const c = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
      connections.push(c);
      return new RedisKeyStore(c, ks);
    },
    async stored(_store, id) {
      const r = redis.client();
      try {
        const record = await r.getBuffer(ks.keyRecord(id));
        const mirrors: Record<string, string> = {};
        for (const c of CONSUMERS) {
          const entry = await r.hgetBuffer(ks.consumerKeys(c), id);
          // Byte for byte: compared as the bytes' hex, not as parsed JSON.
          if (entry !== null) mirrors[c] = entry.toString('hex');
        }
        return { record: record?.toString('hex'), mirrors };
      } finally {
        r.disconnect();
      }
    },
    reset: () => redis.flush(),
  },
];

function newKey(over: Partial<StoredKey> = {}): StoredKey {
  return { id: generateKeyId(), plan: 'free', createdAt: new Date().toISOString(), status: 'active', hash: hashKey(generateKey()), ...over };
}

describe.each(backends)('$name', (backend) => {
  let store: KeyStore;
  /** The mirror holds the stored record under the consumer the record names, and nowhere else. */
  async function expectMirrored(id: string, consumer: string | undefined): Promise<void> {
    const { record, mirrors } = await backend.stored(store, id);
    expect(record).toBeDefined();
    expect(mirrors).toEqual(consumer === undefined ? {} : { [consumer]: record });
  }

  beforeEach(async () => {
    await backend.reset();
    store = backend.store();
  });

  it('create, update, rotate (with and without grace) and revoke each leave the mirror equal to the record', async () => {
    const admin = testKeyAdmin(store);
    const key = newKey({ consumer: 'acme', name: 'Zoë — prod 🔑', metadata: { crm: 'c-1' } });
    await store.create(key);
    await expectMirrored(key.id, 'acme');
    await admin.lifecycle.update(key.id, { name: 'acme staging', perMinute: 10, metadata: { crm: 'c-2', env: 'staging' } });
    await expectMirrored(key.id, 'acme');
    await admin.lifecycle.rotate(key.id, 60);
    await expectMirrored(key.id, 'acme');
    await admin.lifecycle.rotate(key.id, 0);
    await expectMirrored(key.id, 'acme');
    await admin.lifecycle.revoke(key.id);
    await expectMirrored(key.id, 'acme');
    expect((await store.consumerKeys('acme')).map((k) => [k.id, k.status])).toEqual([[key.id, 'revoked']]);
  });

  it('a move takes the key out of the old mirror into the new one; a detach out of both', async () => {
    const key = newKey({ consumer: 'acme' });
    const other = newKey({ consumer: 'acme' });
    await store.create(key);
    await store.create(other);
    await store.update({ ...key, consumer: 'globex' });
    await expectMirrored(key.id, 'globex');
    expect((await store.consumerKeys('acme')).map((k) => k.id)).toEqual([other.id]);
    expect((await store.consumerKeys('globex')).map((k) => k.id)).toEqual([key.id]);
    const { consumer: _c, ...detached } = key;
    await store.update(detached);
    await expectMirrored(key.id, undefined);
    expect(await store.consumerKeys('globex')).toEqual([]);
    // Attaching a key that had no consumer.
    await store.update({ ...detached, consumer: 'initech', plan: 'pro' });
    await expectMirrored(key.id, 'initech');
  });

  it('a compare-and-set that is refused (the record changed since it was read) writes no mirror', async () => {
    const key = newKey({ consumer: 'acme' });
    await store.create(key);
    const read = (await store.getVersioned(key.id))!;
    await store.update({ ...key, name: 'changed first' });
    await expect(store.update({ ...key, consumer: 'globex' }, { ifRevision: read.revision })).rejects.toMatchObject({ code: 'conflict' });
    await expectMirrored(key.id, 'acme');
    // An update of an id that is not there writes none either.
    const ghost = newKey({ consumer: 'globex' });
    await expect(store.update(ghost)).rejects.toMatchObject({ code: 'not_found' });
    expect(await store.consumerKeys('globex')).toEqual([]);
  });

  it('an import of export records naming a consumer (one in its rotation grace: create, then the grace link) mirrors them', async () => {
    // Every consumer a record names exists, without maxKeys: what the import asks of the consumers, answered here.
    const consumers: KeyConsumers = {
      attaching: (_c, _k, write) => write(),
      describe: async (ids) => new Map(ids.map((id) => [id, { inUse: 0, pool: { perMinute: null, perDay: null, perMonth: null } }])),
      create: async () => {},
    };
    const admin = new KeyAdmin(store, systemClock, { plans: () => ({ free: { perMinute: 60, perDay: 1000 } }), consumers });
    const plain = newKey({ consumer: 'acme', metadata: { crm: 'c-9' } });
    const grace = newKey({ consumer: 'globex', prevHash: hashKey(generateKey()), prevHashUntil: Date.now() + 3_600_000, rotatedAt: new Date().toISOString() });
    const lines = [plain, grace].map((k) => JSON.stringify(k)).join('\n');
    const r = await admin.importer.importKeys(bufferSource(Buffer.from(`${lines}\n`), 'jsonl'));
    expect(r.refusals).toEqual([]);
    expect(r.imported).toBe(2);
    await expectMirrored(plain.id, 'acme');
    await expectMirrored(grace.id, 'globex');
  });

  it('a key without a consumer writes no mirror at all', async () => {
    const admin = testKeyAdmin(store);
    const { record } = await admin.issuer.create({ plan: 'free' });
    await admin.lifecycle.update(record.id, { name: 'plain' });
    await expectMirrored(record.id, undefined);
  });
});

describe('RedisKeyStore: the mirror in Redis', () => {
  beforeEach(() => redis.flush());

  it("lives in the consumer's slot {c:<id>}; the key's set of consumers remembers every consumer it was attached to", async () => {
    const c = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
    connections.push(c);
    const store = new RedisKeyStore(c, ks);
    const key = newKey({ consumer: 'acme' });
    await store.create(key);
    await store.update({ ...key, consumer: 'globex' });
    const r = redis.client();
    try {
      expect(await r.hkeys(`${PREFIX}consumer:{c:acme}:keys`)).toEqual([]);
      expect(await r.hkeys(`${PREFIX}consumer:{c:globex}:keys`)).toEqual([key.id]);
      expect((await r.smembers(`${PREFIX}key:{${key.id}}:consumers`)).sort()).toEqual(['acme', 'globex']);
    } finally {
      r.disconnect();
    }
  });

  it('an entry left behind by a write cut short (the record names another consumer now) is not read as the consumer’s key', async () => {
    const c = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
    connections.push(c);
    const store = new RedisKeyStore(c, ks);
    const key = newKey({ consumer: 'acme' });
    await store.create(key);
    const r = redis.client();
    try {
      // As if a move to globex had written the record and globex's mirror, and died before taking the key out of acme's.
      const moved = JSON.stringify({ ...key, consumer: 'globex' });
      await r.set(ks.keyRecord(key.id), moved);
      await r.hset(ks.consumerKeys('globex'), key.id, moved);
      await r.hset(ks.consumerKeys('acme'), 'key_garbage', 'not json');
      expect(await store.consumerKeys('acme')).toEqual([]);
      expect((await store.consumerKeys('globex')).map((k) => k.id)).toEqual([key.id]);
      // Nor after the key's next write, nor is the key counted twice.
      await store.update({ ...key, consumer: 'globex', name: 'next write' });
      expect(await store.consumerKeys('acme')).toEqual([]);
      expect((await store.consumerKeys('globex')).map((k) => k.name)).toEqual(['next write']);
      // A write cut short before the new consumer's copy (record written, copy not): the next write sets it right.
      await r.set(ks.keyRecord(key.id), JSON.stringify({ ...key, consumer: 'globex', name: 'record only' }));
      await store.update({ ...key, consumer: 'globex', name: 'again' });
      expect((await r.hgetBuffer(ks.consumerKeys('globex'), key.id))!.equals((await r.getBuffer(ks.keyRecord(key.id)))!)).toBe(true);
    } finally {
      r.disconnect();
    }
  });

  it("every way of attaching a key puts it in the ledger's sets of the consumer (key:{<id>}:consumers, usage:{c:<id>}:keys) before its record names it", async () => {
    const c = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
    connections.push(c);
    const store = new RedisKeyStore(c, ks);
    const consumerStore = new RedisConsumerStore(c, ks);
    const plans = { free: { perMinute: 60, perDay: 1000 } };
    const policy = { plans: () => plans, consumers: new ConsumerAttach(consumerStore, store, { plans: () => plans }) };
    const admin = new KeyAdmin(store, systemClock, policy);
    const consumers = new ConsumerAdmin(consumerStore, store, admin, systemClock, policy);
    await consumers.create({ id: 'acme', name: 'Acme', plan: 'free' });
    const r = redis.client();
    try {
      const created = (await admin.issuer.create({ plan: 'free', consumer: 'acme' })).record.id;
      const updated = (await admin.issuer.create({ plan: 'free' })).record.id;
      const monitor = await monitorRedis(r);
      await admin.lifecycle.update(updated, { consumer: 'acme' });
      const commands = (await monitor.stop()).map((m) => m.args.map(String));
      const imported = newKey({ consumer: 'acme' });
      const outcome = await admin.importer.importKeys(bufferSource(Buffer.from(`${JSON.stringify(imported)}\n`), 'jsonl'));
      expect(outcome.imported, JSON.stringify(outcome.refusals)).toBe(1);
      const bulk = (await admin.issuer.create({ plan: 'free' })).record.id;
      const [applied] = await consumers.applyAttach(await consumers.previewKeys('acme', [bulk]));
      expect(applied!.attached).toEqual([bulk]);

      const all = [created, updated, imported.id, bulk].sort();
      expect((await r.smembers(ks.consumerUsageKeys('acme'))).sort()).toEqual(all);
      for (const id of all) expect(await r.smembers(ks.keyConsumers(id))).toEqual(['acme']);
      // The update: both sets first, then the record that names the consumer.
      const at = (pred: (a: string[]) => boolean) => commands.findIndex(pred);
      const keySet = at((a) => a[0]?.toLowerCase() === 'sadd' && a[1] === ks.keyConsumers(updated));
      const consumerSet = at((a) => a[0]?.toLowerCase() === 'sadd' && a[1] === ks.consumerUsageKeys('acme'));
      const record = at((a) => a[0]?.toLowerCase() === 'set' && a[1] === ks.keyRecord(updated) && a[2]!.includes('"consumer":"acme"'));
      expect(
        [keySet, consumerSet, record].every((i) => i >= 0),
        commands.map((a) => a.slice(0, 2).join(' ')).join('\n'),
      ).toBe(true);
      expect(keySet).toBeLessThan(consumerSet);
      expect(consumerSet).toBeLessThan(record);
    } finally {
      r.disconnect();
    }
  });
});
