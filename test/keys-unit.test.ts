// Fast, in-process tests for API keys: the key format, KeyVerifier (cache, negative cache, stale-on-error,
// invalidation, rotation, expiry) on the memory store with a ManualClock, and the authentication stage in a
// real gateway (composeGateway + supertest) in front of a TestUpstream.
import type { KeyAdmin } from '../src/keys/admin.js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import request from 'supertest';
import { createHash, randomBytes } from 'node:crypto';
import { ManualClock, systemClock } from '../src/util/clock.js';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import { generateKey, generateKeyId, hashKey, hashesEqual, isWellFormedKey } from '../src/keys/format.js';
import { MemoryKeyStore } from '../src/keys/memory-store.js';
import { DEFAULT_KEY_CACHE, KeyVerifier, staticKeyMap } from '../src/keys/verifier.js';
import type { StoredKey } from '../src/keys/types.js';
import { KEY_PREFIX, parseBearer } from '../src/http/credentials.js';
import { leaksIn, silentLogger, testConfig } from './helpers/gateway.js';
import { SpyKeyStore, testKeyAdmin } from './helpers/key-stores.js';
import { TestUpstream } from './helpers/upstream.js';

// randomBytes is wrapped (still the real one) so the tests can see how much randomness a key draws.
vi.mock('node:crypto', async (importOriginal) => {
  const orig = await importOriginal<typeof import('node:crypto')>();
  return { ...orig, randomBytes: vi.fn(orig.randomBytes) };
});

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function fromBase62(s: string): bigint {
  let n = 0n;
  for (const ch of s) n = n * 62n + BigInt(BASE62.indexOf(ch));
  return n;
}

/** A copy of `key` with the character at index i replaced by a different base62 character. */
function substitute(key: string, i: number, shift = 1): string {
  const c = key[i]!;
  const next = BASE62[(BASE62.indexOf(c) + shift) % 62]!;
  return key.slice(0, i) + next + key.slice(i + 1);
}

describe('key format', () => {
  it('is the prefix, 43 base62 characters carrying 32 random bytes, and a 6-character checksum', () => {
    const calls = vi.mocked(randomBytes).mock.calls.length;
    const key = generateKey();
    expect(key.startsWith(KEY_PREFIX)).toBe(true);
    expect(KEY_PREFIX).toBe('tg_');
    expect(key).toMatch(/^tg_[0-9A-Za-z]{49}$/);
    // Exactly one draw of at least 32 bytes of randomness went into it.
    const drawn = vi.mocked(randomBytes).mock.calls.slice(calls);
    expect(drawn).toHaveLength(1);
    // A bound: what is required is at least 256 bits; a longer draw would do as well.
    expect(Number(drawn[0]![0])).toBeGreaterThanOrEqual(32);
    // 43 base62 digits hold 256 bits: 62^43 >= 2^256.
    expect(62n ** 43n >= 2n ** 256n).toBe(true);
  });

  it('embeds every bit of the random bytes (the body decodes back to them)', () => {
    const fixed = Buffer.from(Array.from({ length: 32 }, (_, i) => (i * 37 + 11) & 0xff));
    vi.mocked(randomBytes).mockImplementationOnce((() => fixed) as never);
    const key = generateKey();
    expect(fromBase62(key.slice(3, 46))).toBe(BigInt(`0x${fixed.toString('hex')}`));
    expect(isWellFormedKey(key)).toBe(true);
    // All ones (the largest value) fits as well.
    vi.mocked(randomBytes).mockImplementationOnce((() => Buffer.alloc(32, 0xff)) as never);
    const max = generateKey();
    expect(fromBase62(max.slice(3, 46))).toBe(2n ** 256n - 1n);
    expect(isWellFormedKey(max)).toBe(true);
  });

  it('never repeats a key or a key id', () => {
    const keys = new Set(Array.from({ length: 2000 }, () => generateKey()));
    expect(keys.size).toBe(2000);
    const ids = new Set(Array.from({ length: 2000 }, () => generateKeyId()));
    expect(ids.size).toBe(2000);
    for (const id of [...ids].slice(0, 50)) expect(id).toMatch(/^key_[0-9A-Za-z]{16}$/);
  });

  it('accepts every generated key', () => {
    for (let i = 0; i < 500; i++) expect(isWellFormedKey(generateKey())).toBe(true);
  });

  it('refuses every single-character typo, in the body and in the checksum', () => {
    const key = generateKey();
    for (let i = 3; i < key.length; i++) {
      for (const shift of [1, 17, 61]) expect(isWellFormedKey(substitute(key, i, shift)), `typo at ${i}`).toBe(false);
    }
  });

  it('refuses swapped neighbours', () => {
    const key = generateKey();
    for (let i = 3; i < key.length - 1; i++) {
      if (key[i] === key[i + 1]) continue;
      const swapped = key.slice(0, i) + key[i + 1] + key[i] + key.slice(i + 2);
      expect(isWellFormedKey(swapped), `swap at ${i}`).toBe(false);
    }
  });

  it('refuses made-up keys and other shapes', () => {
    const key = generateKey();
    const bad = [
      '',
      'tg_',
      key.slice(0, -1),
      `${key}a`,
      key.replace('tg_', 'TG_'),
      key.replace('tg_', 'tk_'),
      key.slice(3),
      ` ${key}`,
      `${key} `,
      `${key.slice(0, 10)}-${key.slice(11)}`,
      `${key.slice(0, 10)}é${key.slice(11)}`,
      `tg_${'A'.repeat(49)}`,
      `tg_${'0'.repeat(49)}`,
      `Bearer ${key}`,
    ];
    for (const b of bad) expect(isWellFormedKey(b), JSON.stringify(b)).toBe(false);
    // Random made-up keys of the right shape: the 6-character checksum refuses them (a pass has odds ~1e-11).
    for (let i = 0; i < 200; i++) {
      const made = `tg_${Array.from(randomBytes(49), (b) => BASE62[b % 62]).join('')}`;
      expect(isWellFormedKey(made)).toBe(false);
    }
  });

  it('hashes with SHA-256 hex and compares hashes safely', () => {
    const key = generateKey();
    const h = hashKey(key);
    expect(h).toBe(createHash('sha256').update(key).digest('hex'));
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(hashesEqual(h, hashKey(key))).toBe(true);
    expect(hashesEqual(h, hashKey(generateKey()))).toBe(false);
    expect(hashesEqual(h, 'abcd')).toBe(false);
    expect(hashesEqual('', '')).toBe(false);
  });
});

describe('parseBearer', () => {
  it('reads the bearer scheme case-insensitively and treats other schemes as no credentials', () => {
    const key = generateKey();
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) expect(parseBearer(`${scheme} ${key}`)).toEqual({ kind: 'token', token: key });
    expect(parseBearer(`Bearer   ${key}  `)).toEqual({ kind: 'token', token: key });
    expect(parseBearer(undefined)).toEqual({ kind: 'missing' });
    expect(parseBearer('')).toEqual({ kind: 'missing' });
    expect(parseBearer('Basic dXNlcjpwYXNz')).toEqual({ kind: 'missing' });
    expect(parseBearer(`Token ${key}`)).toEqual({ kind: 'missing' });
    expect(parseBearer(`Bearer${key}`)).toEqual({ kind: 'missing' });
    expect(parseBearer('Bearer')).toEqual({ kind: 'malformed' });
    expect(parseBearer('Bearer ')).toEqual({ kind: 'malformed' });
    expect(parseBearer(`Bearer ${key} extra`)).toEqual({ kind: 'malformed' });
    expect(parseBearer('Bearer a,b')).toEqual({ kind: 'malformed' });
  });
});

/** A KeyVerifier on a spied memory store, a KeyAdmin on the same store, and a ManualClock. */
function memoryService(opts: { pubsub?: boolean; cache?: Partial<typeof DEFAULT_KEY_CACHE>; staticKeys?: Map<string, StoredKey> } = {}) {
  const clock = new ManualClock();
  const mem = new MemoryKeyStore(() => clock.now());
  const spy = new SpyKeyStore(mem);
  spy.pubsub = opts.pubsub ?? true;
  const service = new KeyVerifier(spy, clock, opts.cache ?? {}, opts.staticKeys);
  const admin = testKeyAdmin(mem, clock);
  return { clock, mem, spy, service, admin };
}

describe('KeyVerifier and KeyAdmin (memory store, manual clock)', () => {
  it('stores only the hash: the plaintext is nowhere in the store, the record has no hash', async () => {
    const { mem, service, admin } = memoryService();
    await service.start();
    const { key, record } = await admin.issuer.create({ plan: 'pro', name: 'acme', perMinute: 5, perDay: 50, expiresAt: '2030-01-01T00:00:00.000Z' });
    expect(isWellFormedKey(key)).toBe(true);
    expect(record).toMatchObject({ plan: 'pro', name: 'acme', perMinute: 5, perDay: 50, status: 'active', expiresAt: '2030-01-01T00:00:00.000Z' });
    expect(record.id).toMatch(/^key_/);
    expect(JSON.stringify(record)).not.toContain(hashKey(key));
    expect(record).not.toHaveProperty('hash');
    const stored = await mem.get(record.id);
    expect(stored?.hash).toBe(hashKey(key));
    expect(JSON.stringify(await mem.list())).not.toContain(key);
    expect(JSON.stringify(await admin.listing.list())).not.toContain(hashKey(key));
    expect(await admin.listing.get(record.id)).toEqual(record);
    expect(await admin.listing.get('key_nope')).toBeUndefined();
  });

  it('refuses a malformed key without touching the store', async () => {
    const { spy, service, admin } = memoryService();
    const { key } = await admin.issuer.create({ plan: 'free' });
    for (let i = 0; i < 100; i++) {
      const typo = substitute(key, 3 + (i % 49), 1 + (i % 60));
      expect(await service.verify(typo)).toEqual({ ok: false, reason: 'malformed' });
    }
    expect(await service.verify('not-a-key')).toEqual({ ok: false, reason: 'malformed' });
    expect(spy.reads).toBe(0);
    expect(service.cacheSize).toBe(0);
  });

  it('serves steady traffic for one key from the cache: one store read per ttl', async () => {
    const { clock, spy, service, admin } = memoryService();
    const { key, record } = await admin.issuer.create({ plan: 'free' });
    for (let i = 0; i < 200; i++) {
      const r = await service.verify(key);
      expect(r.ok && r.key.id).toBe(record.id);
      clock.advance(10); // 2 s in all, well inside the 10 s ttl
    }
    expect(spy.calls.findByHash).toBe(1);
    expect(spy.reads).toBe(1);
    clock.advance(DEFAULT_KEY_CACHE.ttlMs);
    expect((await service.verify(key)).ok).toBe(true);
    expect(spy.calls.findByHash).toBe(2);
  });

  it('asks the store once for many concurrent requests with the same uncached key', async () => {
    const { spy, service, admin } = memoryService();
    const { key } = await admin.issuer.create({ plan: 'free' });
    const results = await Promise.all(Array.from({ length: 50 }, () => service.verify(key)));
    for (const r of results) expect(r.ok).toBe(true);
    expect(spy.calls.findByHash).toBe(1);
  });

  it('caches unknown keys negatively: N requests with one well-formed unknown key cost one store read', async () => {
    const { clock, spy, service } = memoryService();
    const unknown = generateKey();
    for (let i = 0; i < 25; i++) expect(await service.verify(unknown)).toMatchObject({ ok: false, reason: 'unknown' });
    expect(spy.calls.findByHash).toBe(1);
    const concurrent = await Promise.all(Array.from({ length: 25 }, () => service.verify(generateKey())));
    for (const r of concurrent) expect(r).toMatchObject({ ok: false, reason: 'unknown' });
    expect(spy.calls.findByHash).toBe(26); // 25 different keys: one read each
    const another = generateKey();
    await Promise.all(Array.from({ length: 25 }, () => service.verify(another)));
    expect(spy.calls.findByHash).toBe(27); // 25 concurrent requests with one key: one read
    // The negative entry expires after negativeTtlMs, so a key created meanwhile is found.
    clock.advance(DEFAULT_KEY_CACHE.negativeTtlMs);
    await service.verify(unknown);
    expect(spy.calls.findByHash).toBe(28);
  });

  it('a lookup gate is asked only when a store read is needed and the key filter is certain no key has the hash; declined, nothing is read', async () => {
    const { clock, spy, service, admin } = memoryService();
    const asked: string[] = [];
    const decline = (who: string) => {
      asked.push(who);
      return false;
    };
    // Before the filter is built nothing is certain: even a declined guess is read (a valid key is never refused).
    expect(await service.verify(generateKey(), decline, 'uncertain')).toEqual({ ok: false, reason: 'unknown', storeMs: 0 });
    expect(spy.calls.findByHash).toBe(1);
    expect(asked).toEqual([]);
    await service.start();
    await service.knownHashes.settled();
    expect(service.knownHashes.isCertain).toBe(true);
    spy.reset();
    // Created after start: the change feed put its hash in the filter, so it is read whatever the gate says.
    const { key } = await admin.issuer.create({ plan: 'free' });
    expect((await service.verify(key, decline, 'first')).ok).toBe(true);
    expect(spy.calls.findByHash).toBe(1);
    expect(asked).toEqual([]);
    // A made-up key: the gate is asked, declines, no store read, no negative entry.
    expect(await service.verify(generateKey(), decline, 'guess')).toEqual({ ok: false, reason: 'not_looked_up' });
    expect(spy.calls.findByHash).toBe(1);
    expect(asked).toEqual(['guess']);
    // Cached: from then on the gate is not asked.
    expect((await service.verify(key, decline, 'cached')).ok).toBe(true);
    // A known key whose copy is due to be read again is read, not declined: it was valid here before.
    clock.advance(DEFAULT_KEY_CACHE.ttlMs);
    expect((await service.verify(key, decline, 'stale')).ok).toBe(true);
    expect(spy.calls.findByHash).toBe(2);
    expect(asked).toEqual(['guess']);
    // Malformed keys never get as far as the gate.
    expect(await service.verify('tg_nope', decline, 'malformed')).toMatchObject({ ok: false, reason: 'malformed' });
    expect(asked).toEqual(['guess']);
    // The feed may have missed messages (a reconnect): uncertain again, so a guess is read until the next build.
    (service as unknown as { changesMayBeMissed(): void }).changesMayBeMissed();
    expect((await service.verify(generateKey(), decline, 'after reset')).ok).toBe(false);
    expect(spy.calls.findByHash).toBe(3);
    // And when that read fails (the outage that dropped the feed), the last filter's "no" stands for a declined
    // client (not_looked_up: 429 from the anonymous limit), while any other gets unavailable (503) as before.
    spy.mode = 'fail';
    expect(await service.verify(generateKey(), decline, 'outage')).toEqual({ ok: false, reason: 'not_looked_up' });
    expect(await service.verify(generateKey(), () => true, 'outage, admitted')).toEqual({ ok: false, reason: 'unavailable' });
    expect(asked).toEqual(['guess', 'outage']);
    spy.mode = 'ok';
    await service.close();
  });

  it('honours expiry', async () => {
    const { clock, service, admin } = memoryService();
    const { key } = await admin.issuer.create({ plan: 'free', expiresAt: new Date(clock.now() + 5_000).toISOString() });
    expect((await service.verify(key)).ok).toBe(true);
    clock.advance(4_999);
    expect((await service.verify(key)).ok).toBe(true);
    clock.advance(1);
    expect(await service.verify(key)).toEqual({ ok: false, reason: 'expired' });
  });

  it('revoke takes effect at once through the change feed, for every cached hash of the key', async () => {
    const { clock, spy, service, admin } = memoryService();
    await service.start();
    const { key: oldKey, record } = await admin.issuer.create({ plan: 'free' });
    const rotated = await admin.lifecycle.rotate(record.id, 60);
    expect(rotated?.record.id).toBe(record.id);
    expect((await service.verify(oldKey)).ok).toBe(true);
    expect((await service.verify(rotated!.key)).ok).toBe(true);
    expect(service.cacheSize).toBe(2);
    expect(await admin.lifecycle.revoke(record.id)).toEqual({ replication: { expected: 0, acked: 0 } });
    expect(service.cacheSize).toBe(0);
    expect((await service.verify(oldKey)).ok).toBe(false);
    expect((await service.verify(rotated!.key)).ok).toBe(false);
    expect(spy.calls.subscribe).toBe(1);
    const shown = await admin.listing.get(record.id);
    expect(shown).toMatchObject({ status: 'revoked' });
    expect(shown?.revokedAt).toBe(new Date(clock.now()).toISOString());
    expect(await admin.lifecycle.revoke('key_unknown')).toBeUndefined();
  });

  it("a change message drops that key's cached hashes by id, without walking the cache; evicted entries leave the index", async () => {
    const { service, admin } = memoryService({ cache: { maxEntries: 3 } });
    await service.start();
    const made = await Promise.all([0, 1, 2, 3].map(() => admin.issuer.create({ plan: 'free' })));
    for (const m of made) expect((await service.verify(m.key)).ok).toBe(true);
    // maxEntries 3: the first key was evicted; the other three are cached.
    expect(service.cacheSize).toBe(3);
    const cache = (service as unknown as { cache: { entries: () => never } }).cache;
    cache.entries = () => {
      throw new Error('forget() walked the whole cache');
    };
    await admin.lifecycle.revoke(made[2]!.record.id);
    expect(service.cacheSize).toBe(2);
    // An evicted key's message finds nothing to drop, and nothing breaks.
    await admin.lifecycle.revoke(made[0]!.record.id);
    expect(service.cacheSize).toBe(2);
    const index = (service as unknown as { hashesById: Map<string, Set<string>> }).hashesById;
    expect([...index.keys()].sort()).toEqual([made[1]!.record.id, made[3]!.record.id].sort());
  });

  it('a lookup answered after a revoke was announced does not cache the pre-revoke record', async () => {
    const { spy, service, admin } = memoryService();
    await service.start();
    const { key, record } = await admin.issuer.create({ plan: 'free' });
    let release!: () => void;
    spy.findGate = new Promise<void>((r) => (release = r));
    // The store read happens now (the key is active), its answer arrives only after the revoke below.
    const inFlight = service.verify(key);
    spy.findGate = undefined;
    await admin.lifecycle.revoke(record.id);
    release();
    await inFlight; // began before the revoke: either answer is fair for this one request
    expect((await service.verify(key)).ok).toBe(false);
  });

  it('rotate with grace: old and new both work until the grace ends, then only the new one', async () => {
    const { clock, service, admin } = memoryService();
    await service.start();
    const { key: oldKey, record } = await admin.issuer.create({ plan: 'pro', perMinute: 7 });
    expect((await service.verify(oldKey)).ok).toBe(true);
    const r = await admin.lifecycle.rotate(record.id, 30);
    expect(r).toBeDefined();
    expect(r!.key).not.toBe(oldKey);
    expect(isWellFormedKey(r!.key)).toBe(true);
    expect(r!.record).toMatchObject({ id: record.id, plan: 'pro', perMinute: 7, status: 'active' });
    expect(r!.record.rotatedAt).toBe(new Date(clock.now()).toISOString());
    expect(r!.record).not.toHaveProperty('prevHash');
    const newOk = await service.verify(r!.key);
    expect(newOk.ok && newOk.key.id).toBe(record.id);
    clock.advance(29_999);
    expect((await service.verify(oldKey)).ok).toBe(true);
    clock.advance(1);
    expect((await service.verify(oldKey)).ok).toBe(false);
    expect((await service.verify(r!.key)).ok).toBe(true);
  });

  it("a key cached under both hashes while a rotation's grace lasts loses both to one change message", async () => {
    const { service, admin } = memoryService();
    await service.start();
    const { key: oldKey, record } = await admin.issuer.create({ plan: 'pro' });
    const r = await admin.lifecycle.rotate(record.id, 30);
    expect((await service.verify(r!.key)).ok).toBe(true);
    expect((await service.verify(oldKey)).ok).toBe(true);
    expect(service.cacheSize).toBe(2);
    const index = (service as unknown as { hashesById: Map<string, string | Set<string>> }).hashesById;
    expect(index.get(record.id)).toEqual(new Set([hashKey(r!.key), hashKey(oldKey)]));
    await admin.lifecycle.revoke(record.id);
    expect(service.cacheSize).toBe(0);
    expect(index.size).toBe(0);
    expect((await service.verify(r!.key)).ok).toBe(false);
    expect((await service.verify(oldKey)).ok).toBe(false);
  });

  it('rotate without grace: the old key stops at once; rotating twice retires the first grace key', async () => {
    const { service, admin } = memoryService();
    await service.start();
    const { key: k1, record } = await admin.issuer.create({ plan: 'free' });
    expect((await service.verify(k1)).ok).toBe(true);
    const r2 = await admin.lifecycle.rotate(record.id, 0);
    expect((await service.verify(k1)).ok).toBe(false);
    expect((await service.verify(r2!.key)).ok).toBe(true);
    const r3 = await admin.lifecycle.rotate(record.id, 60);
    const r4 = await admin.lifecycle.rotate(record.id, 60);
    expect((await service.verify(r2!.key)).ok).toBe(false); // two rotations ago
    expect((await service.verify(r3!.key)).ok).toBe(true); // in grace
    expect((await service.verify(r4!.key)).ok).toBe(true);
    expect(await admin.lifecycle.rotate('key_unknown', 0)).toBeUndefined();
    await admin.lifecycle.revoke(record.id);
    await expect(admin.lifecycle.rotate(record.id, 0)).rejects.toThrow(/revoked/);
  });

  it('if pub/sub is down, the cache ttl still bounds staleness', async () => {
    const ttlMs = 1_000;
    const { clock, service, admin } = memoryService({ pubsub: false, cache: { ttlMs } });
    await service.start();
    const { key, record } = await admin.issuer.create({ plan: 'free' });
    expect((await service.verify(key)).ok).toBe(true);
    await admin.lifecycle.revoke(record.id);
    // No change message arrives: the cached record is used until the ttl runs out...
    clock.advance(ttlMs - 1);
    expect((await service.verify(key)).ok).toBe(true);
    // ...and not a moment longer.
    clock.advance(1);
    expect((await service.verify(key)).ok).toBe(false);
  });

  it('a cached copy sends its revision with every request (not the one that read it, not a key in its grace); a confirmation restarts its ttl, a change drops it, an older revision touches nothing', async () => {
    const ttlMs = 1_000;
    const clock = new ManualClock();
    // The memory store names no revision; this one names one per record content, as the Redis store does.
    class RevisionedStore extends MemoryKeyStore {
      override async findByHash(hash: string) {
        const found = await super.findByHash(hash);
        return found && { ...found, revision: hashKey(JSON.stringify(found.key)) };
      }
    }
    const store = new RevisionedStore(() => clock.now());
    const spy = new SpyKeyStore(store);
    const service = new KeyVerifier(spy, clock, { ttlMs });
    const admin = testKeyAdmin(store, clock);
    const created = await admin.issuer.create({ plan: 'free' });
    const { key } = created;
    const hash = hashKey(key);
    const verify = async (k = key) => {
      const r = await service.verify(k);
      if (!r.ok) throw new Error(`key refused: ${r.reason}`);
      return r;
    };

    // Just read: no revision, so the limit check judges the record itself. From the cache: the copy's revision.
    expect((await verify()).revision).toBeUndefined();
    const revision = (await verify()).revision;
    expect(revision).toMatch(/^[0-9a-f]{64}$/);
    expect(spy.calls.findByHash).toBe(1);
    // Confirmed every 0.6 ttl: three ttls go by with no further read.
    for (let i = 0; i < 5; i++) {
      service.recordChecked(hash, revision!, true);
      expect((await verify()).revision).toBe(revision);
      clock.advance(ttlMs * 0.6);
    }
    expect(spy.calls.findByHash).toBe(1);
    // Unconfirmed for a whole ttl: read again.
    clock.advance(ttlMs);
    await verify();
    expect(spy.calls.findByHash).toBe(2);

    // A check that compared another revision (a read this entry has replaced) changes nothing, either way.
    service.recordChecked(hash, 'older', false);
    service.recordChecked(hash, 'older', true);
    expect((await verify()).revision).toBe(revision);
    expect(spy.calls.findByHash).toBe(2);
    // The record changed since this entry was read: the next request reads it again.
    service.recordChecked(hash, revision!, false);
    await verify();
    expect(spy.calls.findByHash).toBe(3);

    // Rotated with a grace: the new key's copy sends its revision, the old key (its grace on Redis's clock) none.
    const rotated = (await admin.lifecycle.rotate(created.record.id, 60))!;
    service.forget(created.record.id);
    await verify();
    await verify(rotated.key);
    expect((await verify()).revision, 'the old key, in its grace').toBeUndefined();
    expect((await verify(rotated.key)).revision).toMatch(/^[0-9a-f]{64}$/);
  });

  it('a subscriber reconnect keeps the cache: known keys are still served without a store read, each confirmed by its next limit check; unknown hashes are read again', async () => {
    const clock = new ManualClock();
    let reconnected: (() => void) | undefined;
    // Names a revision per record content, as the Redis store does.
    class RevisionedStore extends MemoryKeyStore {
      override async findByHash(hash: string) {
        const found = await super.findByHash(hash);
        return found && { ...found, revision: hashKey(JSON.stringify(found.key)) };
      }
    }
    // Lets the test fire the subscriber's reset (a reconnect).
    class ReconnectingSpy extends SpyKeyStore {
      override subscribe(onChange: (id: string) => void, onReset: () => void) {
        reconnected = onReset;
        return super.subscribe(onChange, onReset);
      }
    }
    const store = new RevisionedStore(() => clock.now());
    const spy = new ReconnectingSpy(store);
    const service = new KeyVerifier(spy, clock, { ttlMs: 60_000 });
    const heard: Array<string | undefined> = [];
    service.onChange((id) => heard.push(id));
    await service.start();
    const admin = testKeyAdmin(store, clock);
    const { key } = await admin.issuer.create({ plan: 'free' });
    const unknown = generateKey();
    const verify = async (k = key) => {
      const r = await service.verify(k);
      if (!r.ok) throw new Error(`key refused: ${r.reason}`);
      return r;
    };

    expect((await verify()).revision).toBeUndefined();
    expect(await service.verify(unknown)).toEqual({ ok: false, reason: 'unknown', storeMs: 0 });
    expect(spy.calls.findByHash).toBe(2);

    clock.advance(1000);
    reconnected!();
    // Listeners still hear that changes may have been missed (the limiter drops its known bans)...
    expect(heard).toEqual([undefined]);
    // ...but the cache is kept: the known key is served from it, with its revision for the limit check to confirm.
    expect(service.cacheSize).toBe(2);
    const due = await verify();
    expect(due.revision).toMatch(/^[0-9a-f]{64}$/);
    expect((await verify()).revision, 'due until a check confirms it').toBe(due.revision);
    expect(spy.calls.findByHash).toBe(2);
    // An unknown hash has nothing a limit check could confirm: it is read again.
    expect((await service.verify(unknown)).ok).toBe(false);
    expect(spy.calls.findByHash).toBe(3);
    expect((await service.verify(unknown)).ok).toBe(false);
    expect(spy.calls.findByHash).toBe(3);

    // Confirmed by a limit check (its revision still goes along with every check, as for any cached copy).
    service.recordChecked(hashKey(key), due.revision!, true);
    expect((await verify()).revision).toBe(due.revision);
    expect(spy.calls.findByHash).toBe(3);

    // Another reconnect while the store is down: the known key keeps working, still due.
    reconnected!();
    spy.mode = 'fail';
    expect((await verify()).revision).toBe(due.revision);
    spy.mode = 'ok';

    // A read in flight across a reconnect is cached, but due: it may predate a missed change.
    const other = await admin.issuer.create({ plan: 'free' });
    let release!: () => void;
    spy.findGate = new Promise<void>((r) => (release = r));
    const pending = verify(other.key);
    reconnected!();
    release();
    spy.findGate = undefined;
    expect((await pending).revision).toBeUndefined();
    const reads = spy.calls.findByHash;
    expect((await verify(other.key)).revision).toMatch(/^[0-9a-f]{64}$/);
    expect(spy.calls.findByHash).toBe(reads);
  });

  it('store failing: a cached key keeps working (stale, up to maxStaleMs); anything uncached is unavailable, not invalid', async () => {
    const { clock, spy, service, admin } = memoryService({ cache: { ttlMs: 1_000, maxStaleMs: 60_000 } });
    const { key } = await admin.issuer.create({ plan: 'free' });
    const { key: uncached } = await admin.issuer.create({ plan: 'free' });
    const unknown = generateKey();
    expect((await service.verify(key)).ok).toBe(true);
    expect((await service.verify(unknown)).ok).toBe(false);
    spy.mode = 'fail';
    // Within the ttl: from the cache, no store call at all.
    const before = spy.calls.findByHash;
    expect((await service.verify(key)).ok).toBe(true);
    expect(spy.calls.findByHash).toBe(before);
    // Past the ttl: the re-read fails and the stale copy is used.
    clock.advance(5_000);
    expect((await service.verify(key)).ok).toBe(true);
    expect(await service.verify(uncached)).toEqual({ ok: false, reason: 'unavailable' });
    // A remembered unknown key cannot be confirmed unknown either once its negative entry is old.
    expect(await service.verify(unknown)).toEqual({ ok: false, reason: 'unavailable' });
    // Malformed keys still need no store.
    expect(await service.verify('tg_nope')).toEqual({ ok: false, reason: 'malformed' });
    clock.advance(60_000);
    expect(await service.verify(key)).toEqual({ ok: false, reason: 'unavailable' });
    // The store comes back: everything works again.
    spy.mode = 'ok';
    expect((await service.verify(key)).ok).toBe(true);
    expect((await service.verify(uncached)).ok).toBe(true);
  });

  it('a stale copy served after a failed re-read still reports the time the read took (it comes out of the Redis budget)', async () => {
    const clock = systemClock;
    const mem = new MemoryKeyStore();
    const spy = new SpyKeyStore(mem);
    const service = new KeyVerifier(spy, clock, { lookupTimeoutMs: 40, ttlMs: 1 });
    const { key } = await testKeyAdmin(mem, clock).issuer.create({ plan: 'free' });
    expect((await service.verify(key)).ok).toBe(true);
    // The 1 ms ttl must lapse on the real clock: this test measures real waits, so no manual clock.
    await new Promise((r) => setTimeout(r, 5));
    spy.mode = 'hang';
    const r = await service.verify(key);
    expect(r.ok).toBe(true);
    // A bound: timing (the 40 ms lookup timeout, fired late under load).
    expect(r.storeMs).toBeGreaterThanOrEqual(35);
  });

  it('store hanging: verification gives up after lookupTimeoutMs', async () => {
    const clock = systemClock;
    const mem = new MemoryKeyStore();
    const spy = new SpyKeyStore(mem);
    const service = new KeyVerifier(spy, clock, { lookupTimeoutMs: 50 });
    const admin = testKeyAdmin(mem, clock);
    const { key } = await admin.issuer.create({ plan: 'free' });
    spy.mode = 'hang';
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: 10 }, () => service.verify(key)));
    const elapsed = performance.now() - t0;
    for (const r of results) expect(r).toEqual({ ok: false, reason: 'unavailable' });
    // A bound: timing (the 50 ms lookup timeout, fired late under load).
    expect(elapsed).toBeGreaterThanOrEqual(45);
    expect(elapsed).toBeLessThan(1000);
    expect(spy.calls.findByHash).toBe(1);
    // Recovers once the store answers again (the timed-out lookup left no stuck in-flight entry).
    spy.mode = 'ok';
    expect((await service.verify(key)).ok).toBe(true);
  });

  it('static keys from the config need no store, and honour their expiry', async () => {
    const clock = new ManualClock();
    const k1 = generateKey();
    const k2 = generateKey();
    const statics = staticKeyMap(
      [
        { id: 'demo-free', plan: 'free', sha256: hashKey(k1) },
        { id: 'demo-old', plan: 'pro', sha256: hashKey(k2), expiresAt: new Date(clock.now() + 1000).toISOString(), perMinute: 3 },
      ],
      new Date(clock.now()).toISOString(),
    );
    const spy = new SpyKeyStore(new MemoryKeyStore());
    spy.mode = 'fail';
    const service = new KeyVerifier(spy, clock, {}, statics);
    const r1 = await service.verify(k1);
    // verify() hands out the key's identity (who, which plan, its own limits), never a hash or the rest of the record.
    expect(r1).toEqual({ ok: true, key: { id: 'demo-free', plan: 'free' } });
    expect(await service.verify(k2)).toMatchObject({ ok: true, key: { id: 'demo-old', perMinute: 3 } });
    clock.advance(1000);
    expect(await service.verify(k2)).toEqual({ ok: false, reason: 'expired' });
    expect(spy.reads).toBe(0);
  });
});

describe('authentication stages (composeGateway + supertest + TestUpstream)', () => {
  let upstream: TestUpstream;
  let mem: MemoryKeyStore;
  let spy: SpyKeyStore;
  let admin: KeyAdmin;
  const clock = new ManualClock(Date.now());
  const composed: ComposedGateway[] = [];

  /** The whole gateway on the spied memory store; limits high enough never to answer before authentication does. */
  async function app(opts: { hideCredentials?: boolean } = {}) {
    const config = testConfig({
      upstream: { url: upstream.url, hideCredentials: opts.hideCredentials ?? true },
      log: { level: 'silent' },
      anonymous: { perMinute: 100_000 },
      plans: { free: { perMinute: 100_000, perDay: 1_000_000 }, pro: { perMinute: 100_000, perDay: 1_000_000 } },
    });
    const gw = await composeGateway({ config, logger: silentLogger, clock, keyStore: spy });
    composed.push(gw);
    return gw.app;
  }

  beforeAll(async () => {
    upstream = await TestUpstream.start();
  });
  afterAll(async () => {
    await upstream.close();
  });
  beforeEach(async () => {
    upstream.seen.length = 0;
    mem = new MemoryKeyStore(() => clock.now());
    spy = new SpyKeyStore(mem);
    admin = testKeyAdmin(mem, clock);
  });
  afterEach(async () => {
    for (const gw of composed.splice(0)) await gw.close();
  });

  const INVALID = 'Bearer realm="tollgate", error="invalid_token"';

  function expectError(res: request.Response, status: number, code: string, secret?: string) {
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual({ code, message: expect.any(String), status });
    expect(leaksIn(res.text)).toEqual([]);
    if (secret) expect(res.text).not.toContain(secret);
  }

  it('no Authorization: 401 missing_api_key with a bare Bearer challenge, upstream not called', async () => {
    const res = await request(await app()).get('/v1/things');
    expectError(res, 401, 'missing_api_key');
    expect(res.headers['www-authenticate']).toBe('Bearer realm="tollgate"');
    expect(upstream.seen).toHaveLength(0);
  });

  it('a Basic (or other) scheme counts as missing', async () => {
    for (const h of ['Basic dXNlcjpwYXNz', 'Digest username="x"', 'Token abc', '']) {
      const res = await request(await app())
        .get('/v1/things')
        .set('Authorization', h);
      expectError(res, 401, 'missing_api_key');
      expect(res.headers['www-authenticate']).toBe('Bearer realm="tollgate"');
    }
    expect(upstream.seen).toHaveLength(0);
  });

  it('malformed, unknown, revoked and expired keys: 401 invalid_api_key with error="invalid_token", key never echoed', async () => {
    const { key: good, record } = await admin.issuer.create({ plan: 'free' });
    const { key: revoked, record: revokedRec } = await admin.issuer.create({ plan: 'free' });
    const { key: expired } = await admin.issuer.create({ plan: 'free', expiresAt: new Date(clock.now() - 1).toISOString() });
    await admin.lifecycle.revoke(revokedRec.id);
    const typo = substitute(good, 20);
    const cases: Array<[string, string]> = [
      ['Bearer', 'Bearer'],
      ['Bearer + space', 'Bearer '],
      ['bearer with spaces', `Bearer ${good} ${good}`],
      ['not a key', 'Bearer abc.def'],
      ['typo', `Bearer ${typo}`],
      ['unknown', `Bearer ${generateKey()}`],
      ['revoked', `Bearer ${revoked}`],
      ['expired', `Bearer ${expired}`],
    ];
    for (const [name, header] of cases) {
      const res = await request(await app())
        .get('/v1/things')
        .set('Authorization', header);
      expect(res.body.code, name).toBe('invalid_api_key');
      expectError(res, 401, 'invalid_api_key', header.split(' ')[1] || undefined);
      expect(res.headers['www-authenticate'], name).toBe(INVALID);
    }
    expect(upstream.seen).toHaveLength(0);
    expect(record.id).toMatch(/^key_[0-9A-Za-z]{16}$/);
  });

  it('accepts the Bearer scheme in any case and forwards X-Consumer-Id and X-Consumer-Plan, not the key', async () => {
    const { key, record } = await admin.issuer.create({ plan: 'pro', name: 'acme' });
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEArer']) {
      const res = await request(await app())
        .get('/v1/things?a=1')
        .set('Authorization', `${scheme} ${key}`)
        .set('X-Consumer-Id', 'spoofed')
        .set('X-Consumer-Plan', 'enterprise');
      expect(res.status, scheme).toBe(200);
      expect(res.text).not.toContain(key);
    }
    expect(upstream.seen).toHaveLength(4);
    for (const seen of upstream.seen) {
      expect(seen.url).toBe('/v1/things?a=1');
      expect(seen.headers['x-consumer-id']).toBe(record.id);
      expect(seen.headers['x-consumer-plan']).toBe('pro');
      expect(seen.headers.authorization).toBeUndefined();
      expect(JSON.stringify(seen.rawHeaders)).not.toContain(key);
    }
  });

  it('passes Authorization through when hideCredentials is false', async () => {
    const { key, record } = await admin.issuer.create({ plan: 'free' });
    const res = await request(await app({ hideCredentials: false }))
      .get('/v1/x')
      .set('Authorization', `Bearer ${key}`);
    expect(res.status).toBe(200);
    expect(upstream.seen[0]?.headers.authorization).toBe(`Bearer ${key}`);
    expect(upstream.seen[0]?.headers['x-consumer-id']).toBe(record.id);
  });

  it('100 requests with bad-checksum keys never reach the key store', async () => {
    const { key } = await admin.issuer.create({ plan: 'free' });
    const a = await app();
    for (let i = 0; i < 100; i++) {
      const bad = substitute(key, 3 + (i % 49), 1 + (i % 61));
      const res = await request(a).get('/v1/x').set('Authorization', `Bearer ${bad}`);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('invalid_api_key');
    }
    expect(spy.reads).toBe(0);
    expect(upstream.seen).toHaveLength(0);
  });

  it('steady traffic with one key costs one key-store read', async () => {
    const { key } = await admin.issuer.create({ plan: 'free' });
    const a = await app();
    for (let i = 0; i < 50; i++) expect((await request(a).get('/v1/x').set('Authorization', `Bearer ${key}`)).status).toBe(200);
    expect(spy.calls.findByHash).toBe(1);
    expect(upstream.seen).toHaveLength(50);
  });

  it('N requests with one unknown well-formed key cost one key-store read', async () => {
    const unknown = generateKey();
    const a = await app();
    for (let i = 0; i < 30; i++) expect((await request(a).get('/v1/x').set('Authorization', `Bearer ${unknown}`)).status).toBe(401);
    expect(spy.calls.findByHash).toBe(1);
  });

  it('key store down and key not cached: 503 service_unavailable, not 401', async () => {
    const { key: cached } = await admin.issuer.create({ plan: 'free' });
    const { key: uncached } = await admin.issuer.create({ plan: 'free' });
    const a = await app();
    expect((await request(a).get('/v1/x').set('Authorization', `Bearer ${cached}`)).status).toBe(200);
    spy.mode = 'fail';
    expect((await request(a).get('/v1/x').set('Authorization', `Bearer ${cached}`)).status).toBe(200);
    const res = await request(a).get('/v1/x').set('Authorization', `Bearer ${uncached}`);
    expectError(res, 503, 'service_unavailable', uncached);
    expect(res.headers['www-authenticate']).toBeUndefined();
    expect(upstream.seen).toHaveLength(2);
  });

  it('static keys from the config work through composeGateway with no Redis at all', async () => {
    const key = generateKey();
    const config = testConfig({
      upstream: { url: upstream.url },
      log: { level: 'silent' },
      anonymous: { perMinute: 100_000 },
      keys: [{ id: 'static-pro', plan: 'pro', sha256: hashKey(key) }],
    });
    const gw = await composeGateway({ config, logger: silentLogger });
    try {
      const ok = await request(gw.app).get('/v1/static').set('Authorization', `Bearer ${key}`);
      expect(ok.status).toBe(200);
      expect(upstream.seen.at(-1)?.headers['x-consumer-id']).toBe('static-pro');
      expect(upstream.seen.at(-1)?.headers['x-consumer-plan']).toBe('pro');
      const other = await request(gw.app).get('/v1/static').set('Authorization', `Bearer ${generateKey()}`);
      expect(other.status).toBe(401);
    } finally {
      await gw.close();
    }
  });
});
