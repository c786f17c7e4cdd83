// The consumer room's store and cache: one behaviour suite over both ConsumerStore implementations (memory, and Redis
// on a private redis-server), the Redis layout (hash tag {c:<id>}), the change feed's reset after a reconnect, the
// record's field rules, and the gateway's ConsumerCache on two instances: a change made on one is seen by the other
// within a second, a copy serves while the store fails, and a read that races a change does not cache the old record.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConsumerAttach } from '../src/consumers/attach.js';
import { ConsumerCache } from '../src/consumers/cache.js';
import { KeyAdmin } from '../src/keys/admin.js';
import { RedisKeyStore } from '../src/keys/redis-store.js';
import { MemoryConsumerStore } from '../src/consumers/memory-store.js';
import { consumerRecordSchema } from '../src/consumers/record-schema.js';
import { RedisConsumerStore } from '../src/consumers/redis-store.js';
import { ConsumerStoreError, type ConsumerRecord, type ConsumerStore } from '../src/consumers/types.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { connectRedis, type RedisConnection } from '../src/storage/redis.js';
import { ManualClock, systemClock } from '../src/util/clock.js';
import { TestRedis } from './helpers/redis-server.js';
import { waitFor } from './helpers/wait.js';

const PREFIX = 'cstest:';
const ks = new Keyspace(PREFIX);
let redis: TestRedis;
const connections: RedisConnection[] = [];
const stores: ConsumerStore[] = [];

beforeAll(async () => {
  redis = await TestRedis.start();
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close().catch(() => {})));
  for (const c of connections) await c.close();
  await redis?.stop();
});

function connection(): RedisConnection {
  const c = connectRedis({ url: redis.url, commandTimeoutMs: 2000, purpose: 'cli' });
  connections.push(c);
  return c;
}

function redisStore(): RedisConsumerStore {
  const s = new RedisConsumerStore(connection(), ks);
  stores.push(s);
  return s;
}

function consumer(over: Partial<ConsumerRecord> = {}): ConsumerRecord {
  return { id: 'acme', name: 'Acme Corp', plan: 'pro', status: 'active', createdAt: '2026-11-01T00:00:00.000Z', ...over };
}

const backends = [
  {
    name: 'MemoryConsumerStore',
    pair: () => {
      const s = new MemoryConsumerStore();
      return { a: s as ConsumerStore, b: s as ConsumerStore };
    },
    reset: async () => {},
  },
  {
    name: 'RedisConsumerStore',
    pair: () => ({ a: redisStore() as ConsumerStore, b: redisStore() as ConsumerStore }),
    reset: () => redis.flush(),
  },
];

async function publishUntilHeard(pub: ConsumerStore, heard: string[], id: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!heard.includes(id)) {
    if (Date.now() > deadline) throw new Error(`change for ${id} never arrived`);
    await pub.publishChange(id);
    await sleep(25);
  }
}

describe.each(backends)('$name', (backend) => {
  let a: ConsumerStore;
  let b: ConsumerStore;
  beforeEach(async () => {
    await backend.reset();
    ({ a, b } = backend.pair());
  });

  it('create, then get (from another handle too) and list ids, sorted', async () => {
    await a.create(consumer({ id: 'zeta', metadata: { crm: 'z-1' } }));
    await a.create(consumer({ id: 'acme', scopes: ['service:orders'], allowedCidrs: ['203.0.113.0/24'] }));
    expect(await b.get('zeta')).toEqual(consumer({ id: 'zeta', metadata: { crm: 'z-1' } }));
    expect(await b.get('acme')).toEqual(consumer({ scopes: ['service:orders'], allowedCidrs: ['203.0.113.0/24'] }));
    expect(await b.get('nobody')).toBeUndefined();
    expect(await b.ids()).toEqual(['acme', 'zeta']);
  });

  it('refuses a second create of one id, leaving the first as it was', async () => {
    await a.create(consumer());
    await expect(b.create(consumer({ name: 'Impostor' }))).rejects.toMatchObject({ code: 'conflict' });
    expect((await a.get('acme'))?.name).toBe('Acme Corp');
  });

  it('update replaces the record; with ifRevision only if nothing changed since the read', async () => {
    await a.create(consumer());
    const read = (await b.getVersioned('acme'))!;
    await a.update(consumer({ plan: 'business' }));
    await expect(b.update(consumer({ status: 'suspended' }), { ifRevision: read.revision })).rejects.toMatchObject({ code: 'conflict' });
    expect(await a.get('acme')).toEqual(consumer({ plan: 'business' }));
    const again = (await b.getVersioned('acme'))!;
    await b.update(consumer({ plan: 'business', status: 'suspended' }), { ifRevision: again.revision });
    expect((await a.get('acme'))?.status).toBe('suspended');
    await expect(a.update(consumer({ id: 'nobody' }))).rejects.toMatchObject({ code: 'not_found' });
    expect(await a.ids()).toEqual(['acme']);
  });

  it('delete removes the record and its id; with a stale revision it changes nothing', async () => {
    await a.create(consumer());
    const read = (await a.getVersioned('acme'))!;
    await a.update(consumer({ name: 'Acme Inc' }));
    await expect(b.delete('acme', { ifRevision: read.revision })).rejects.toBeInstanceOf(ConsumerStoreError);
    expect(await a.ids()).toEqual(['acme']);
    expect(await b.delete('acme', { ifRevision: (await a.getVersioned('acme'))!.revision })).toBe(true);
    expect(await a.get('acme')).toBeUndefined();
    expect(await a.ids()).toEqual([]);
    expect(await a.delete('acme')).toBe(false);
  });

  it('the attach lock: one holder at a time, across handles, free again once released', async () => {
    const first = await a.lock('acme');
    expect(first).toBeDefined();
    expect(await b.lock('acme')).toBeUndefined();
    // Another consumer's lock is its own.
    const other = await b.lock('globex');
    expect(other).toBeDefined();
    await first!.release();
    const second = await b.lock('acme');
    expect(second).toBeDefined();
    await second!.release();
    await other!.release();
  });

  it('a change published on one handle reaches the other, until it unsubscribes', async () => {
    const heard: string[] = [];
    const unsubscribe = await b.subscribe(
      (id) => heard.push(id),
      () => {},
    );
    await publishUntilHeard(a, heard, 'ready');
    heard.length = 0;
    await a.publishChange('acme');
    await a.publishChange('globex');
    await waitFor(() => heard.length >= 2, 'two changes heard', 3000, 5);
    expect(heard).toEqual(['acme', 'globex']);
    await unsubscribe();
    await a.publishChange('after');
    await sleep(100);
    expect(heard).not.toContain('after');
  });
});

describe('RedisConsumerStore layout', () => {
  beforeEach(() => redis.flush());

  it("keeps the record as JSON in the consumer's slot {c:<id>}, an id set, and a revision that is the SHA-1 of the stored bytes", async () => {
    const store = redisStore();
    const c = consumer({ name: 'Zoë & Co — café', metadata: { crm: 'hub-42' } });
    await store.create(c);
    const r = redis.client();
    try {
      expect((await r.keys('*')).sort()).toEqual([`${PREFIX}consumer:{c:acme}`, `${PREFIX}consumers`]);
      const raw = (await r.getBuffer(`${PREFIX}consumer:{c:acme}`))!;
      expect(JSON.parse(raw.toString('utf8'))).toEqual(c);
      expect((await store.getVersioned('acme'))!.revision).toBe(createHash('sha1').update(raw).digest('hex'));
      // The lock shares the slot, and expires if its holder dies.
      await store.lock('acme');
      expect(await r.pttl(`${PREFIX}consumer:{c:acme}:lock`)).toBeGreaterThan(5000);
    } finally {
      r.disconnect();
    }
  });

  it('a record that is not a consumer record is an invalid_record error, not a crash or a silent miss', async () => {
    const store = redisStore();
    const r = redis.client();
    try {
      await r.set(`${PREFIX}consumer:{c:bad}`, '{"id":"bad","name":"x"');
      await r.set(`${PREFIX}consumer:{c:worse}`, JSON.stringify(consumer({ id: 'worse', billingDay: 32 as number })));
      await r.hset(`${PREFIX}consumer:{c:wrongtype}`, 'a', 'b');
      for (const id of ['bad', 'worse', 'wrongtype']) await expect(store.get(id)).rejects.toMatchObject({ code: 'invalid_record' });
      // A field a newer version added is read past (a rolling upgrade), every known field still by its rule.
      await r.set(`${PREFIX}consumer:{c:newer}`, JSON.stringify({ ...consumer({ id: 'newer' }), forwardMetadata: ['crm'] }));
      expect(await store.get('newer')).toMatchObject({ id: 'newer', plan: 'pro' });
    } finally {
      r.disconnect();
    }
  });

  it('tells subscribers to start over (onReset) after the connection to Redis comes back, and listens again', async () => {
    const store = redisStore();
    const pub = redisStore();
    const heard: string[] = [];
    let resets = 0;
    await store.subscribe(
      (id) => heard.push(id),
      () => resets++,
    );
    await publishUntilHeard(pub, heard, 'before');
    await redis.kill();
    await redis.startProcess();
    await waitFor(() => resets > 0, 'a reset after the reconnect', 10_000);
    expect(resets).toBe(1);
    await publishUntilHeard(pub, heard, 'after');
  });
});

describe('the consumer record rules', () => {
  const ok = consumer({
    metadata: { crm: 'c-1' },
    maxKeys: 3,
    billingDay: 31,
    perMinute: 100,
    perDay: 10_000,
    perMonth: 200_000,
    limitsExpiresAt: '2027-01-01T00:00:00Z',
    limitsReason: 'launch week',
    scopes: ['orders', 'service:billing', 'operation:listPets'],
    allowedCidrs: ['203.0.113.0/24', '2001:db8::/32', '198.51.100.7', '::ffff:192.0.2.1'],
  });

  it('takes a full record', () => {
    expect(consumerRecordSchema.safeParse(ok).success).toBe(true);
  });

  it.each([
    ['an id with braces (it would move the hash tag)', { id: 'a}b{' }],
    ['an id with a space', { id: 'a b' }],
    ['an empty id', { id: '' }],
    ['an id of 65 characters', { id: 'x'.repeat(65) }],
    ['a name of 201 characters', { name: 'n'.repeat(201) }],
    ['billingDay 0', { billingDay: 0 }],
    ['billingDay 32', { billingDay: 32 }],
    ['billingDay 1.5', { billingDay: 1.5 }],
    ['a negative perMinute', { perMinute: -1 }],
    ['perMonth as a string', { perMonth: '100' }],
    ['maxKeys 0', { maxKeys: 0 }],
    ['17 metadata entries', { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`m${i}`, 'v'])) }],
    ['a metadata value of 257 characters', { metadata: { crm: 'v'.repeat(257) } }],
    ['101 scopes', { scopes: Array.from({ length: 101 }, (_, i) => `r${i}`) }],
    ['a scope with a space', { scopes: ['service:a b'] }],
    ['the same scope twice', { scopes: ['orders', 'orders'] }],
    ['a scope of 221 characters', { scopes: [`operation:${'o'.repeat(211)}`] }],
    ['a CIDR with a prefix past 32', { allowedCidrs: ['10.0.0.0/33'] }],
    ['a host name as a CIDR', { allowedCidrs: ['example.com'] }],
    ['CIDRs as a string', { allowedCidrs: '10.0.0.0/8' }],
    ['an unknown status', { status: 'deleted' }],
    ['an unknown field', { colour: 'blue' }],
    ['a date without an offset', { limitsExpiresAt: '2027-01-01' }],
  ])('refuses %s', (_what, over) => {
    expect(consumerRecordSchema.safeParse({ ...ok, ...over }).success).toBe(false);
  });
});

describe('ConsumerCache', () => {
  beforeEach(() => redis.flush());

  it('two instances: a change made through one is seen by the other within a second, and read again in the background', async () => {
    const storeA = redisStore();
    const storeB = redisStore();
    const cacheA = new ConsumerCache(storeA, systemClock);
    const cacheB = new ConsumerCache(storeB, systemClock);
    const listening = new Set<ConsumerCache>();
    // Both subscribed and listening before the change, as a gateway is once started.
    for (const c of [cacheA, cacheB]) c.onChange((id) => id === 'warm-up' && listening.add(c));
    await cacheA.start();
    await cacheB.start();
    await storeA.create(consumer());
    expect((await cacheA.get('acme'))?.status).toBe('active');
    expect((await cacheB.get('acme'))?.status).toBe('active');
    await waitFor(
      async () => {
        await storeA.publishChange('warm-up');
        return listening.size === 2;
      },
      'both caches listening',
      5000,
      25,
    );
    // Instance A suspends the consumer; B learns of it from the change feed, not from its TTL (30 s).
    await storeA.update(consumer({ status: 'suspended', suspendedAt: '2026-11-02T00:00:00.000Z' }));
    const changedAt = Date.now();
    await storeA.publishChange('acme');
    await waitFor(() => cacheB.peek('acme')?.status === 'suspended', 'B sees the suspension without a request asking', 1000, 2);
    const seenAfterMs = Date.now() - changedAt;
    expect(seenAfterMs).toBeLessThan(1000);
    expect((await cacheB.get('acme'))?.status).toBe('suspended');
    await cacheA.close();
    await cacheB.close();
  });

  it('serves a copy while the store fails (up to maxStaleMs), remembers an unknown id briefly, and reads again after ttlMs', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 1));
    const inner = new MemoryConsumerStore();
    let reads = 0;
    let failing = false;
    const store: ConsumerStore = Object.assign(Object.create(inner) as ConsumerStore, {
      get: async (id: string) => {
        reads++;
        if (failing) throw new Error('store down (test)');
        return inner.get(id);
      },
    });
    const cache = new ConsumerCache(store, clock, { ttlMs: 1000, negativeTtlMs: 100, maxStaleMs: 5000 });
    await inner.create(consumer());
    expect((await cache.get('acme'))?.plan).toBe('pro');
    expect(await cache.get('acme')).toBeDefined();
    expect(reads).toBe(1);
    expect(await cache.get('nobody')).toBeUndefined();
    expect(await cache.get('nobody')).toBeUndefined();
    expect(reads).toBe(2);
    clock.advance(101);
    expect(await cache.get('nobody')).toBeUndefined();
    expect(reads).toBe(3);
    // Past its TTL the copy is read again: the store's new record comes in.
    await inner.update(consumer({ plan: 'business' }));
    clock.advance(1000);
    expect((await cache.get('acme'))?.plan).toBe('business');
    // The store fails: the copy serves, until it is maxStaleMs old.
    failing = true;
    clock.advance(1000);
    expect((await cache.get('acme'))?.plan).toBe('business');
    clock.advance(4000);
    await expect(cache.get('acme')).rejects.toThrow('store down');
  });

  it('a read in flight when a change arrives answers but is not cached; an unreadable record is unknown and reported', async () => {
    const inner = new MemoryConsumerStore();
    await inner.create(consumer());
    let release: () => void = () => {};
    let gate: Promise<void> | undefined;
    const store: ConsumerStore = Object.assign(Object.create(inner) as ConsumerStore, {
      get: async (id: string) => {
        const found = await inner.get(id);
        if (gate) await gate;
        return found;
      },
    });
    const invalid: string[] = [];
    const cache = new ConsumerCache(store, systemClock, {}, (id) => invalid.push(id));
    await cache.start();
    gate = new Promise((r) => (release = r));
    const racing = cache.get('acme');
    await inner.update(consumer({ status: 'suspended' }));
    await inner.publishChange('acme');
    gate = undefined;
    release();
    expect((await racing)?.status).toBe('active');
    expect(cache.peek('acme')).toBeUndefined();
    expect((await cache.get('acme'))?.status).toBe('suspended');

    const unreadable: ConsumerStore = Object.assign(Object.create(inner) as ConsumerStore, {
      get: async () => {
        throw new ConsumerStoreError('unreadable (test)', 'invalid_record');
      },
    });
    const other = new ConsumerCache(unreadable, systemClock, {}, (id) => invalid.push(id));
    expect(await other.get('acme')).toBeUndefined();
    expect(invalid).toEqual(['acme']);
  });
});

describe('ConsumerAttach: maxKeys under concurrency', () => {
  beforeEach(() => redis.flush());

  it('twelve keys created at once into a consumer with room for 3, from two instances: exactly 3 join, the rest are refused', async () => {
    const plans = { free: { perMinute: 60, perDay: 1000 } };
    const admins = [0, 1].map(() => {
      const c = connection();
      const keyStore = new RedisKeyStore(c, ks);
      return new KeyAdmin(keyStore, systemClock, { plans: () => plans, consumers: new ConsumerAttach(new RedisConsumerStore(c, ks), keyStore) });
    });
    await redisStore().create(consumer({ maxKeys: 3 }));
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => admins[i % 2]!.issuer.create({ plan: 'free', consumer: 'acme' })));
    const made = results.filter((r) => r.status === 'fulfilled');
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as { code?: string }).code] : []));
    expect(made).toHaveLength(3);
    expect(refused).toEqual(Array(9).fill('consumer_full'));
    const r = redis.client();
    try {
      expect(await r.hlen(ks.consumerKeys('acme'))).toBe(3);
      expect(await r.scard(ks.keyIds())).toBe(3);
      // The lock is released after each.
      expect(await r.exists(ks.consumerLock('acme'))).toBe(0);
    } finally {
      r.disconnect();
    }
  });
});
