// Redis ConsumerStore, shared by every gateway instance: each record a JSON string in the consumer's own slot
// ({c:<id>}), a set of every id, and a pub/sub channel that tells every instance to drop a changed consumer from its
// cache. The change feed keeps the key feed's rules (src/keys/redis-store.ts): after any reconnect, messages sent
// meanwhile may be lost, so the listener is told to start over.
import { randomUUID } from 'node:crypto';
import { ReplyError } from 'ioredis';
import type { RedisConnection } from '../storage/redis.js';
import type { Breaker } from '../storage/breaker.js';
import type { Keyspace } from '../storage/keyspace.js';
import { listenOn } from '../storage/change-feed.js';
import { recordRevision } from '../keys/redis-store.js';
import { consumerRecordSchema } from './record-schema.js';
import { CONSUMER_LOCK_TTL_MS, ConsumerStoreError, type ConsumerRecord, type ConsumerStore } from './types.js';

/**
 * Replaces (or, with ARGV[1] empty, deletes) a consumer record only if it is still the revision the caller read.
 * KEYS: 1 the record. ARGV: 1 the new record or '', 2 the revision. Reply: 1 done, 0 no record, -1 changed.
 */
const REPLACE_IF_REVISION = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
if redis.sha1hex(cur) ~= ARGV[2] then return -1 end
if ARGV[1] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[1]) end
return 1
`;

/** Releases a lock if this holder still has it. KEYS: 1 the lock. ARGV: 1 the token. */
const RELEASE_IF_HELD = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`;

/**
 * Read leniently as to fields it does not know: a record a newer version wrote (with a field this one lacks) is still
 * this one's to read during a rolling upgrade. Every field it knows must keep its rule.
 */
const storedConsumer = consumerRecordSchema.loose();

/** A stored consumer record, or undefined when it is not one (bad JSON, a field out of its rule). */
export function parseConsumer(raw: Buffer | string): ConsumerRecord | undefined {
  let v: unknown;
  try {
    v = JSON.parse(typeof raw === 'string' ? raw : raw.toString('utf8'));
  } catch {
    return undefined;
  }
  const r = storedConsumer.safeParse(v);
  return r.success ? (r.data as ConsumerRecord) : undefined;
}

/** A record key holding another type (WRONGTYPE) is as unreadable as bad JSON; other errors stand. */
function unreadableIfWrongType(err: unknown): Buffer {
  if (err instanceof ReplyError && (err as Error).message.startsWith('WRONGTYPE ')) return Buffer.alloc(0);
  throw err;
}

export class RedisConsumerStore implements ConsumerStore {
  private readonly client: RedisConnection['client'];
  private readonly subscribers = new Set<ReturnType<RedisConnection['subscriber']>>();

  /**
   * `breaker`, on the gateway's request path, makes reads fail at once while Redis is known to be down, as the key
   * store's lookups do: a cached consumer is then served (ConsumerCache's maxStaleMs), an uncached one answers 503.
   */
  constructor(
    private readonly redis: Pick<RedisConnection, 'client' | 'subscriber'>,
    private readonly ks: Keyspace,
    private readonly breaker?: Breaker,
  ) {
    this.client = redis.client;
  }

  async get(id: string): Promise<ConsumerRecord | undefined> {
    return (await this.getVersioned(id))?.consumer;
  }

  async getVersioned(id: string): Promise<{ consumer: ConsumerRecord; revision: string } | undefined> {
    const read = (): Promise<Buffer | null> => this.client.getBuffer(this.ks.consumerRecord(id));
    // WRONGTYPE is an answer about this record, not an outage: the breaker lets it pass, and it is read as unreadable.
    const raw = await (this.breaker ? this.breaker.run(read) : read()).catch(unreadableIfWrongType);
    if (!raw) return undefined;
    const consumer = parseConsumer(raw);
    if (!consumer || consumer.id !== id)
      throw new ConsumerStoreError(`consumer ${id} has an unreadable record (not a JSON consumer record); repair or delete it in Redis`, 'invalid_record');
    return { consumer, revision: recordRevision(raw) };
  }

  async ids(): Promise<string[]> {
    // SSCAN in pages, not one SMEMBERS reply of every id.
    const ids = new Set<string>();
    let cursor = '0';
    do {
      const [next, page] = await this.client.sscan(this.ks.consumerIds(), cursor, 'COUNT', 1000);
      for (const id of page) ids.add(id);
      cursor = next;
    } while (cursor !== '0');
    return [...ids].sort();
  }

  async create(consumer: ConsumerRecord): Promise<void> {
    // Record first, then the id set: a listing can only name a consumer whose record is there.
    const created = await this.client.set(this.ks.consumerRecord(consumer.id), JSON.stringify(consumer), 'NX');
    if (created !== 'OK') throw new ConsumerStoreError(`consumer id ${consumer.id} already exists`);
    await this.client.sadd(this.ks.consumerIds(), consumer.id);
  }

  async update(consumer: ConsumerRecord, opts: { ifRevision?: string } = {}): Promise<void> {
    const record = this.ks.consumerRecord(consumer.id);
    const written =
      opts.ifRevision === undefined
        ? (await this.client.set(record, JSON.stringify(consumer), 'XX')) === 'OK'
          ? 1
          : 0
        : Number(await this.client.eval(REPLACE_IF_REVISION, 1, record, JSON.stringify(consumer), opts.ifRevision));
    if (written === 0) throw new ConsumerStoreError(`no consumer with id ${consumer.id}`, 'not_found');
    if (written !== 1) throw new ConsumerStoreError(`consumer ${consumer.id} changed meanwhile`, 'conflict');
  }

  async delete(id: string, opts: { ifRevision?: string } = {}): Promise<boolean> {
    const record = this.ks.consumerRecord(id);
    const done =
      opts.ifRevision === undefined ? await this.client.del(record) : Number(await this.client.eval(REPLACE_IF_REVISION, 1, record, '', opts.ifRevision));
    if (done === -1) throw new ConsumerStoreError(`consumer ${id} changed meanwhile`, 'conflict');
    // The id leaves the set after its record: a listing that races the delete reads a missing record and skips it.
    await this.client.srem(this.ks.consumerIds(), id);
    // The keys' mirror goes with the consumer: a consumer created again under this id starts with no keys.
    await this.client.del(this.ks.consumerKeys(id));
    return done === 1;
  }

  async lock(id: string): Promise<{ release(): Promise<void> } | undefined> {
    const lock = this.ks.consumerLock(id);
    const token = randomUUID();
    if ((await this.client.set(lock, token, 'PX', CONSUMER_LOCK_TTL_MS, 'NX')) !== 'OK') return undefined;
    return {
      release: async () => {
        await this.client.eval(RELEASE_IF_HELD, 1, lock, token);
      },
    };
  }

  async publishChange(id: string): Promise<void> {
    await this.client.publish(this.ks.consumerEvents(), id);
  }

  async subscribe(onChange: (id: string) => void, onReset: () => void, more: { onListening?(): void } = {}): Promise<() => Promise<void>> {
    const sub = listenOn(this.redis, this.ks.consumerEvents(), {
      onMessage: onChange,
      onReset,
      ...(more.onListening ? { onListening: more.onListening } : {}),
    });
    this.subscribers.add(sub);
    return async () => {
      this.subscribers.delete(sub);
      sub.disconnect();
    };
  }

  async close(): Promise<void> {
    for (const sub of this.subscribers) sub.disconnect();
    this.subscribers.clear();
  }
}
