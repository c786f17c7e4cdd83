// Redis KeyStore, shared by every gateway instance: records as JSON strings, a hash -> id index, and a
// pub/sub channel that tells every instance to drop a changed key from its cache, and which hashes now open a key
// (for each instance's key filter, known-hashes.ts).
import { createHash, randomUUID } from 'node:crypto';
import { ReplyError } from 'ioredis';
import type { Breaker } from '../storage/breaker.js';
import type { RedisConnection } from '../storage/redis.js';
import type { Keyspace } from '../storage/keyspace.js';
import { listenOn } from '../storage/change-feed.js';
import type { ChangeFeedListeners, FoundKey, ImportLock, KeyChange, KeyStore, StoredKey } from './types.js';
import { changeMessage, KeyStoreError, parseChangeMessage } from './types.js';
import { rememberKeyPrefix } from '../http/credentials.js';
import { recordKeyConsumer } from '../storage/key-consumer-sets.js';

/**
 * A record's revision: the SHA-1 hex of its bytes as Redis holds them, which is what the limit script's
 * redis.sha1hex() computes over the record it reads (src/limits/redis-store.ts). Hashing the bytes, not the parsed
 * JSON, makes the two agree whatever the record holds.
 */
export function recordRevision(raw: Buffer): string {
  return createHash('sha1').update(raw).digest('hex');
}

/** A stored record, or undefined when it is not a JSON object with the fields every check reads. */
function parseRecord(raw: Buffer): StoredKey | undefined {
  let v: unknown;
  try {
    v = JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const r = v as Partial<StoredKey>;
  // Every record this process reads teaches the logs its keys' prefix (the key filter reads them all at start-up).
  if (typeof r.prefix === 'string') rememberKeyPrefix(r.prefix);
  return typeof r.id === 'string' && typeof r.hash === 'string' && typeof r.status === 'string' && typeof r.plan === 'string' ? (r as StoredKey) : undefined;
}

/**
 * Replaces a key record only if it is still the revision the caller read (the SHA-1 of its bytes, as recordRevision
 * computes it). KEYS: 1 the record. ARGV: 1 the new record, 2 the revision. Reply: the record replaced (its bytes:
 * which consumer it named), 0 no record, -1 changed.
 */
const REPLACE_IF_REVISION = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
if redis.sha1hex(cur) ~= ARGV[2] then return -1 end
redis.call('SET', KEYS[1], ARGV[1])
return cur
`;

/** The consumer a stored record's bytes name, if any (read off a record being replaced: no other field matters). */
function consumerNamed(raw: string | Buffer | null): string | undefined {
  if (raw === null) return undefined;
  try {
    const v = JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8')) as { consumer?: unknown } | null;
    return typeof v?.consumer === 'string' ? v.consumer : undefined;
  } catch {
    return undefined;
  }
}

/** Renews the import lock if this holder still has it. KEYS: 1 the lock. ARGV: 1 the token, 2 the TTL in ms. Reply: 1 or 0. */
const RENEW_IF_HELD = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

/** Releases the import lock if this holder still has it. KEYS: 1 the lock. ARGV: 1 the token. */
const RELEASE_IF_HELD = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`;

/**
 * The import lock's TTL and how often its holder renews it: a holder that dies (a killed CLI, a crashed instance)
 * blocks imports for at most IMPORT_LOCK_TTL_MS; a live one renews well before that, through several slow replies.
 */
export const IMPORT_LOCK_TTL_MS = 30_000;
const IMPORT_LOCK_RENEW_MS = 5_000;

/** How many records list() reads at once (one GET each: records live in different hash slots on a cluster). */
const LIST_BATCH = 100;

/**
 * A change-feed message naming a hash that now opens a key: the hash after this mark. Key ids are letters, digits,
 * "_" and "-", so no id message starts with it; an instance that predates it reads it as an unknown id (a no-op).
 */
const HASH_MESSAGE = '+';

/** A record key holding another type (WRONGTYPE) is as unreadable as bad JSON: read as empty bytes; other errors stand. */
function unreadableIfWrongType(err: unknown): Buffer {
  if (err instanceof ReplyError && (err as Error).message.startsWith('WRONGTYPE ')) return Buffer.alloc(0);
  throw err;
}

export class RedisKeyStore implements KeyStore {
  private subscriber: ReturnType<RedisConnection['subscriber']> | undefined;
  private readonly client: RedisConnection['client'];
  /**
   * The consumers' mirrors this process last wrote for each key (attached to, detached from), until
   * confirmReplicated asks for them: a change's wait for a replica covers the consumers' slots too. Bounded.
   */
  private readonly mirrorsWritten = new Map<string, string[]>();

  /**
   * `breaker`, on the gateway's request path, makes lookups fail at once while Redis is known to be down;
   * `onInvalidRecord` hears of a key whose record is unreadable (the lookup then answers "no such key").
   */
  constructor(
    private readonly redis: Pick<RedisConnection, 'client' | 'subscriber' | 'waitForReplicas'>,
    private readonly ks: Keyspace,
    private readonly breaker?: Breaker,
    private readonly onInvalidRecord?: (id: string) => void,
  ) {
    this.client = redis.client;
  }

  async findByHash(hash: string): Promise<FoundKey | undefined> {
    // Each command through the breaker on its own, so a timeout is timed against its own commandTimeout (the
    // breaker tells a late-reading process from a silent Redis by how late the timeout fired).
    const id = await this.guarded(() => this.client.get(this.ks.keyByHash(hash)));
    if (!id) return undefined;
    let raw: Buffer | null;
    try {
      raw = await this.guarded(() => this.client.getBuffer(this.ks.keyRecord(id)));
    } catch (err) {
      // Not a string (WRONGTYPE): as unreadable as bad JSON; the breaker has already let this reply pass.
      if (!(err instanceof ReplyError && (err as Error).message.startsWith('WRONGTYPE '))) throw err;
      this.onInvalidRecord?.(id);
      return undefined;
    }
    if (!raw) return undefined;
    const key = parseRecord(raw);
    // An unreadable record is this key's problem, not the store's: the key is unusable (401), and every other key
    // goes on as before. Thrown, it would count as a failed lookup, and a cached copy would be served for hours.
    if (!key) {
      this.onInvalidRecord?.(id);
      return undefined;
    }
    return { key, revision: recordRevision(raw) };
  }

  private guarded<T>(call: () => Promise<T>): Promise<T> {
    return this.breaker ? this.breaker.run(call) : call();
  }

  async get(id: string): Promise<StoredKey | undefined> {
    return (await this.getVersioned(id))?.key;
  }

  async getVersioned(id: string): Promise<{ key: StoredKey; revision: string } | undefined> {
    const raw = await this.client.getBuffer(this.ks.keyRecord(id)).catch(unreadableIfWrongType);
    if (!raw) return undefined;
    const key = parseRecord(raw);
    if (!key)
      throw new KeyStoreError(
        `key ${id} has an unreadable record (not a JSON key record); gateways refuse the key (401) until it is repaired or deleted in Redis`,
        'invalid_record',
      );
    return { key, revision: recordRevision(raw) };
  }

  async ids(): Promise<string[]> {
    // SSCAN in pages, not one SMEMBERS reply of every id (a reply that size would stall Redis and the connection).
    const ids = new Set<string>();
    let cursor = '0';
    do {
      const [next, page] = await this.client.sscan(this.ks.keyIds(), cursor, 'COUNT', 1000);
      for (const id of page) ids.add(id);
      cursor = next;
    } while (cursor !== '0');
    return [...ids].sort();
  }

  async *idBatches(): AsyncGenerator<string[]> {
    // One SSCAN pass: an id the scan returns twice (it may, when the set grows meanwhile) is yielded once.
    const seen = new Set<string>();
    let cursor = '0';
    do {
      const [next, page] = await this.client.sscan(this.ks.keyIds(), cursor, 'COUNT', 1000);
      const fresh = page.filter((id) => !seen.has(id));
      for (const id of fresh) seen.add(id);
      if (fresh.length > 0) yield fresh;
      cursor = next;
    } while (cursor !== '0');
  }

  async keyCount(): Promise<number> {
    return this.client.scard(this.ks.keyIds());
  }

  async forEachHash(each: (hashes: readonly string[]) => void): Promise<void> {
    // SSCAN pages of ids, then their records LIST_BATCH at a time, one batch in flight: a bounded read beside the
    // request path's commands, never one reply of every record. Not through the breaker: a failure here is the
    // filter's (it stays uncertain and tries again), not the request path's.
    let cursor = '0';
    do {
      const [next, page] = await this.client.sscan(this.ks.keyIds(), cursor, 'COUNT', 1000);
      for (let i = 0; i < page.length; i += LIST_BATCH) {
        const raws = await Promise.all(page.slice(i, i + LIST_BATCH).map((id) => this.client.getBuffer(this.ks.keyRecord(id)).catch(unreadableIfWrongType)));
        const hashes: string[] = [];
        for (const raw of raws) {
          const key = raw && parseRecord(raw);
          if (!key) continue;
          hashes.push(key.hash);
          if (key.prevHash !== undefined) hashes.push(key.prevHash);
        }
        each(hashes);
      }
      cursor = next;
    } while (cursor !== '0');
  }

  async list(): Promise<StoredKey[]> {
    // One GET per record, in bounded batches, never one pipeline or MGET across them: records live in different hash
    // slots on a cluster.
    const sorted = await this.ids();
    const out: StoredKey[] = [];
    for (let i = 0; i < sorted.length; i += LIST_BATCH) {
      const batch = sorted.slice(i, i + LIST_BATCH);
      const raws = await Promise.all(batch.map((id) => this.client.getBuffer(this.ks.keyRecord(id)).catch(unreadableIfWrongType)));
      raws.forEach((raw, j) => {
        if (!raw) return; // listed but deleted meanwhile
        const key = parseRecord(raw);
        if (key) out.push(key);
        else this.onInvalidRecord?.(batch[j]!);
      });
    }
    return out;
  }

  async create(key: StoredKey): Promise<void> {
    rememberKeyPrefix(key.prefix);
    // The ledger's sets, then the record, then its consumer's mirror, then the hash link: a request can only find a
    // key whose record (and the copy its consumer's slot reads) is already complete, and is counted under its consumer
    // only once reports can find it there.
    await this.joinLedger(key);
    const raw = JSON.stringify(key);
    const created = await this.client.set(this.ks.keyRecord(key.id), raw, 'NX');
    if (created !== 'OK') throw new KeyStoreError(`key id ${key.id} already exists`);
    await this.mirror(key, raw, undefined);
    const linked = await this.client.set(this.ks.keyByHash(key.hash), key.id, 'NX');
    if (linked !== 'OK') {
      if (key.consumer !== undefined) await this.client.hdel(this.ks.consumerKeys(key.consumer), key.id);
      await this.client.del(this.ks.keyRecord(key.id));
      throw new KeyStoreError('key hash already exists');
    }
    await this.client.sadd(this.ks.keyIds(), key.id);
    await this.publishHash(key.hash);
  }

  /**
   * Before a record that names a consumer is written: the key goes into the usage ledger's two sets of it (the key's
   * set of consumers, the consumer's set of keys; storage/key-consumer-sets.ts), so that from its first request
   * counted under the consumer (by the limit script, in the consumer's slot, which writes no set) reports find its
   * days there. Every way of attaching a key passes here: created with a consumer, updated into one (one key, a bulk
   * attach), imported naming one. Written on every write of such a record (two idempotent SADDs: which consumer the
   * stored record named is only known once it is replaced); a write then refused leaves a set naming a consumer the
   * key never counted under, whose days read as empty. A failure here fails the write before anything of it is made.
   */
  private async joinLedger(key: StoredKey): Promise<void> {
    if (key.consumer !== undefined) await recordKeyConsumer(this.client, this.ks, key.id, key.consumer);
  }

  /**
   * The consumers' side of a record write, right after the record itself (never before: a compare-and-set may refuse
   * the record, and the mirror must never hold bytes the record never had): the consumer the record names gets its
   * bytes, byte for byte; the consumer it named before (`was`), if another, loses the key. Separate commands, as the record and each consumer may live in three slots. A write cut short
   * between them leaves the new consumer's copy one write behind (the key's next write sets it right; meanwhile its
   * revision is not the record's, which a reader comparing revisions can tell), or an entry
   * in the old consumer's mirror that no reader takes for its key: consumerKeys keeps an entry only while the key's
   * record names that consumer, and the limit script never looks for a key in a consumer its record does not name.
   */
  private async mirror(key: StoredKey, raw: string, was: string | undefined): Promise<void> {
    const now = key.consumer;
    if (now === undefined && was === undefined) return;
    if (now !== undefined) await this.client.hset(this.ks.consumerKeys(now), key.id, raw);
    if (was !== undefined && was !== now) await this.client.hdel(this.ks.consumerKeys(was), key.id);
    if (this.mirrorsWritten.size >= 10_000) this.mirrorsWritten.clear();
    this.mirrorsWritten.set(key.id, [...new Set([now, was].filter((c): c is string => c !== undefined))]);
  }

  async consumerKeys(consumerId: string): Promise<StoredKey[]> {
    // The mirror names the keys; each one's own record (in its own slot) says whether it is still this consumer's:
    // an entry a cut-short move left behind names a key whose record has moved on, and is not counted.
    const ids = (await this.client.hkeys(this.ks.consumerKeys(consumerId))).sort();
    const out: StoredKey[] = [];
    for (let i = 0; i < ids.length; i += LIST_BATCH) {
      const raws = await Promise.all(ids.slice(i, i + LIST_BATCH).map((id) => this.client.getBuffer(this.ks.keyRecord(id)).catch(unreadableIfWrongType)));
      for (const raw of raws) {
        const key = raw && parseRecord(raw);
        if (key && key.consumer === consumerId) out.push(key);
      }
    }
    return out;
  }

  /** Tells every instance's key filter that this hash opens a key now (after its link and record are written). */
  private async publishHash(hash: string): Promise<void> {
    await this.client.publish(this.ks.keyEvents(), HASH_MESSAGE + hash);
  }

  async update(key: StoredKey, opts: Parameters<KeyStore['update']>[1] = {}): Promise<void> {
    rememberKeyPrefix(key.prefix);
    // Three steps on up to three slots, ordered so that a crash between any two leaves every key as it was or as it
    // is meant to be, never half-changed: the record alone decides validity (status, current and grace hash).
    // 0. Hashes leaving the key are remembered for good before the record forgets them (a crash right after this
    // remembers them early: they were the key's already).
    if (opts.retireHashes?.length) await this.retire(key.id, opts.retireHashes);
    // 1. The new hash's link: it opens nothing until the record names that hash.
    if (opts.linkHash) await this.client.set(this.ks.keyByHash(opts.linkHash), key.id);
    // 2. The record (after the ledger's sets of the consumer it names: joinLedger). Never creates one: a missing record means the id is unknown (and the new link goes again). With
    // ifRevision, a compare-and-set in one script (one slot): replaced only if still the revision the caller read.
    // SET ... XX GET and the script both answer the record replaced: which consumer's mirror the key leaves.
    await this.joinLedger(key);
    const record = this.ks.keyRecord(key.id);
    const raw = JSON.stringify(key);
    const replaced: unknown =
      opts.ifRevision === undefined
        ? await this.client.set(record, raw, 'XX', 'GET')
        : await this.client.eval(REPLACE_IF_REVISION, 1, record, raw, opts.ifRevision);
    if (typeof replaced !== 'string') {
      if (opts.linkHash) await this.client.del(this.ks.keyByHash(opts.linkHash));
      if (replaced === null || Number(replaced) === 0) throw new KeyStoreError(`no key with id ${key.id}`, 'not_found');
      throw new KeyStoreError(`key ${key.id} changed meanwhile`, 'conflict');
    }
    // 2b. The consumers' mirrors: the one the record names now gets its bytes, the one it named before loses it.
    await this.mirror(key, raw, consumerNamed(replaced));
    // 3. Old links: they already open nothing (the record no longer names them); dropped or set to expire.
    const index: Array<Promise<unknown>> = [];
    for (const h of opts.unlinkHashes ?? []) index.push(this.client.del(this.ks.keyByHash(h)));
    if (opts.expireHash) index.push(this.client.pexpireat(this.ks.keyByHash(opts.expireHash.hash), opts.expireHash.atMs));
    if (opts.linkHash) index.push(this.publishHash(opts.linkHash));
    await Promise.all(index);
  }

  async retire(id: string, hashes: readonly string[]): Promise<void> {
    if (hashes.length === 0) return;
    // One key per hash (each in its own slot on a cluster: one SET each), NX so the first key a hash was retired from
    // stays named; and the key's own set, in its slot, for export.
    await Promise.all([...hashes.map((h) => this.client.set(this.ks.retiredHash(h), id, 'NX')), this.client.sadd(this.ks.keyRetiredHashes(id), ...hashes)]);
  }

  async retiredFrom(hash: string): Promise<string | undefined> {
    return (await this.client.get(this.ks.retiredHash(hash))) ?? undefined;
  }

  async retiredHashes(id: string): Promise<string[]> {
    return (await this.client.smembers(this.ks.keyRetiredHashes(id))).sort();
  }

  async lockImports(): Promise<ImportLock | undefined> {
    const lock = this.ks.importLock();
    const token = randomUUID();
    if ((await this.client.set(lock, token, 'PX', IMPORT_LOCK_TTL_MS, 'NX')) !== 'OK') return undefined;
    let held = true;
    // Renewed on a timer, not per batch: a check pass over a million records can run for minutes between writes.
    // A renewal that fails (Redis away for a moment) is tried again at the next tick; one that finds another
    // holder's token (ours expired) loses the lock for good.
    const timer = setInterval(() => {
      this.client.eval(RENEW_IF_HELD, 1, lock, token, IMPORT_LOCK_TTL_MS).then(
        (r) => {
          if (Number(r) !== 1) held = false;
        },
        () => {},
      );
    }, IMPORT_LOCK_RENEW_MS);
    timer.unref();
    return {
      held: () => held,
      release: async () => {
        clearInterval(timer);
        if (!held) return;
        held = false;
        await this.client.eval(RELEASE_IF_HELD, 1, lock, token);
      },
    };
  }

  async confirmReplicated(id: string, hashes: readonly string[], timeoutMs: number): Promise<{ expected: number; acked: number }> {
    const mirrors = this.mirrorsWritten.get(id) ?? [];
    this.mirrorsWritten.delete(id);
    const keys = [this.ks.keyRecord(id), this.ks.keyIds(), ...hashes.map((h) => this.ks.keyByHash(h)), ...mirrors.map((c) => this.ks.consumerKeys(c))];
    return this.redis.waitForReplicas(keys, timeoutMs);
  }

  async publishChange(id: string, change: KeyChange = 'record'): Promise<void> {
    await this.client.publish(this.ks.keyEvents(), changeMessage(id, change));
  }

  async subscribe(onChange: (id: string, change?: KeyChange) => void, onReset: () => void, more: ChangeFeedListeners = {}): Promise<() => Promise<void>> {
    const sub = listenOn(this.redis, this.ks.keyEvents(), {
      onMessage: (message) => {
        if (message.startsWith(HASH_MESSAGE)) return more.onKeyHash?.(message.slice(HASH_MESSAGE.length));
        const { id, change } = parseChangeMessage(message);
        onChange(id, change);
      },
      onReset,
      ...(more.onListening ? { onListening: more.onListening } : {}),
    });
    this.subscriber = sub;
    return async () => {
      sub.disconnect();
    };
  }

  async close(): Promise<void> {
    this.subscriber?.disconnect();
  }
}
