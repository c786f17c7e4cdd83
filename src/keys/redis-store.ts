// Redis KeyStore, shared by every gateway instance: records as JSON strings, a hash -> id index, and a
// pub/sub channel that tells every instance to drop a changed key from its cache.
import { createHash } from 'node:crypto';
import { ReplyError, type Redis } from 'ioredis';
import type { Breaker } from '../storage/breaker.js';
import type { Keyspace } from '../storage/keyspace.js';
import type { FoundKey, KeyStore, StoredKey } from './types.js';
import { KeyStoreError } from './types.js';

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
  return typeof r.id === 'string' && typeof r.hash === 'string' && typeof r.status === 'string' && typeof r.plan === 'string' ? (r as StoredKey) : undefined;
}

export class RedisKeyStore implements KeyStore {
  private subscriber: Redis | undefined;

  /**
   * `breaker`, on the gateway's request path, makes lookups fail at once while Redis is known to be down;
   * `onInvalidRecord` hears of a key whose record is unreadable (the lookup then answers "no such key").
   */
  constructor(
    private readonly redis: Redis,
    private readonly ks: Keyspace,
    private readonly breaker?: Breaker,
    private readonly onInvalidRecord?: (id: string) => void,
  ) {}

  async findByHash(hash: string): Promise<FoundKey | undefined> {
    // Each command through the breaker on its own, so a timeout is timed against its own commandTimeout (the
    // breaker tells a late-reading process from a silent Redis by how late the timeout fired).
    const id = await this.guarded(() => this.redis.get(this.ks.keyByHash(hash)));
    if (!id) return undefined;
    let raw: Buffer | null;
    try {
      raw = await this.guarded(() => this.redis.getBuffer(this.ks.keyRecord(id)));
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
    const json = await this.redis.get(this.ks.keyRecord(id));
    return json ? (JSON.parse(json) as StoredKey) : undefined;
  }

  async list(): Promise<StoredKey[]> {
    const ids = (await this.redis.smembers(this.ks.keyIds())).sort();
    if (ids.length === 0) return [];
    // One GET per key (not MGET): records live in different hash slots on a cluster.
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.get(this.ks.keyRecord(id));
    const replies = (await pipe.exec()) ?? [];
    return replies.flatMap(([err, json]) => (err || typeof json !== 'string' ? [] : [JSON.parse(json) as StoredKey]));
  }

  async create(key: StoredKey): Promise<void> {
    // Record first, then the hash link: a request can only find a key whose record is already complete.
    const created = await this.redis.set(this.ks.keyRecord(key.id), JSON.stringify(key), 'NX');
    if (created !== 'OK') throw new KeyStoreError(`key id ${key.id} already exists`);
    const linked = await this.redis.set(this.ks.keyByHash(key.hash), key.id, 'NX');
    if (linked !== 'OK') {
      await this.redis.del(this.ks.keyRecord(key.id));
      throw new KeyStoreError('key hash already exists');
    }
    await this.redis.sadd(this.ks.keyIds(), key.id);
  }

  async update(key: StoredKey, opts: Parameters<KeyStore['update']>[1] = {}): Promise<void> {
    // The record is written first: it alone decides validity (status, current and grace hash), so an
    // index entry that outlives it for a moment opens nothing.
    const written = await this.redis.set(this.ks.keyRecord(key.id), JSON.stringify(key), 'XX');
    // XX: never creates a record; a missing one means the id is unknown, and no index entry may point at it.
    if (written !== 'OK') throw new KeyStoreError(`no key with id ${key.id}`);
    const pipe = this.redis.pipeline();
    if (opts.linkHash) pipe.set(this.ks.keyByHash(opts.linkHash), key.id);
    for (const h of opts.unlinkHashes ?? []) pipe.del(this.ks.keyByHash(h));
    if (opts.expireHash) pipe.pexpireat(this.ks.keyByHash(opts.expireHash.hash), opts.expireHash.atMs);
    await pipe.exec();
  }

  async publishChange(id: string): Promise<void> {
    await this.redis.publish(this.ks.keyEvents(), id);
  }

  async subscribe(onChange: (id: string) => void, onReset: () => void): Promise<() => Promise<void>> {
    // maxRetriesPerRequest: null keeps the SUBSCRIBE queued until a connection exists: with the request-path
    // client's 0 it was dropped at the first failed connect when Redis was down at start-up, and never resent.
    const sub = this.redis.duplicate({ enableOfflineQueue: true, commandTimeout: undefined, maxRetriesPerRequest: null });
    sub.on('error', () => {});
    this.subscriber = sub;
    let connectedOnce = false;
    // After any reconnect, messages sent while we were away are lost: the cache must start over.
    sub.on('ready', () => {
      if (connectedOnce) onReset();
      connectedOnce = true;
    });
    sub.on('message', (channel: string, message: string) => {
      if (channel === this.ks.keyEvents()) onChange(message);
    });
    // Not awaited: Redis may be down at start-up; ioredis subscribes once connected (and again after every
    // reconnect), and the cache TTL bounds staleness meanwhile.
    sub.subscribe(this.ks.keyEvents()).catch(() => {});
    return async () => {
      sub.disconnect();
    };
  }

  async close(): Promise<void> {
    this.subscriber?.disconnect();
  }
}
