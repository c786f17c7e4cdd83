// Category storage for the reference petstore upstream: an in-memory store and a Redis store.
// Ids come from one counter so they never repeat across restarts or several instances on one Redis.
import type { RedisConnection } from '../storage/redis.js';

export interface NewCategory {
  name: string;
  description?: string;
}

/**
 * The spec's id is int64; we hand it out as a JS number. A Redis INCR counter would need
 * 2^53 creations before it lost precision, which does not happen in practice.
 */
export interface Category extends NewCategory {
  id: number;
}

export interface CategoryStore {
  /** Every category, ordered by id. */
  list(): Promise<Category[]>;
  get(id: number): Promise<Category | undefined>;
  create(input: NewCategory): Promise<Category>;
  /** Resolves when the backing store answers (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The backing store could not be reached or did not answer; the app turns this into 503. */
export class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super('category store unavailable', { cause });
    this.name = 'StoreUnavailableError';
  }
}

function toCategory(id: number, input: NewCategory): Category {
  // Explicit field order keeps responses stable: id, name, then description only when given.
  return input.description === undefined ? { id, name: input.name } : { id, name: input.name, description: input.description };
}

export class MemoryCategoryStore implements CategoryStore {
  // A Map keeps insertion order, and ids are handed out increasing, so iteration is id order.
  private readonly items = new Map<number, Category>();
  private seq = 0;

  async list(): Promise<Category[]> {
    return [...this.items.values()].map((c) => ({ ...c }));
  }

  async get(id: number): Promise<Category | undefined> {
    const c = this.items.get(id);
    return c && { ...c };
  }

  async create(input: NewCategory): Promise<Category> {
    const c = toCategory(++this.seq, input);
    this.items.set(c.id, c);
    return { ...c };
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {}
}

/**
 * Keys: `${prefix}petstore:{categories}:seq` (INCR counter), `:data` (hash id -> JSON) and
 * `:ids` (sorted set scored by id, for ordered listing). The `{categories}` hash tag puts all
 * three in one Redis Cluster slot, so the MULTI stays valid there too.
 * The store owns the client: close() disconnects it.
 */
export class RedisCategoryStore implements CategoryStore {
  private readonly seqKey: string;
  private readonly dataKey: string;
  private readonly idsKey: string;

  constructor(
    private readonly connection: RedisConnection,
    prefix: string,
  ) {
    const base = `${prefix}petstore:{categories}:`;
    this.seqKey = `${base}seq`;
    this.dataKey = `${base}data`;
    this.idsKey = `${base}ids`;
  }

  async list(): Promise<Category[]> {
    return guard(async () => {
      const ids = await this.connection.client.zrange(this.idsKey, 0, '-1');
      if (ids.length === 0) return [];
      const values = await this.connection.client.hmget(this.dataKey, ...ids);
      const out: Category[] = [];
      for (const v of values) if (v !== null) out.push(JSON.parse(v) as Category);
      return out;
    });
  }

  async get(id: number): Promise<Category | undefined> {
    return guard(async () => {
      const v = await this.connection.client.hget(this.dataKey, String(id));
      return v === null ? undefined : (JSON.parse(v) as Category);
    });
  }

  async create(input: NewCategory): Promise<Category> {
    return guard(async () => {
      // An id burnt by a failed MULTI leaves a gap, never a duplicate.
      const id = await this.connection.client.incr(this.seqKey);
      const c = toCategory(id, input);
      const res = await this.connection.client.multi().hset(this.dataKey, String(id), JSON.stringify(c)).zadd(this.idsKey, id, String(id)).exec();
      if (!res) throw new Error('MULTI aborted');
      for (const [err] of res) if (err) throw err;
      return c;
    });
  }

  async ping(): Promise<void> {
    await guard(() => this.connection.client.ping());
  }

  async close(): Promise<void> {
    await this.connection.close();
  }
}

async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new StoreUnavailableError(err);
  }
}
