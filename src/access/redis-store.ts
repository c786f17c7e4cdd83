// The portal's links, sessions and ended marks in Redis, I/O only. Each operation is one command on one key, so it
// works the same on Redis Cluster: a link is taken with GETDEL (read and removed at once, so of two instances
// exchanging the same code only one gets it), sessions and links carry their own expiry (PX), and a consumer's ended
// marks are one hash read with one HMGET.
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';
import { isPortalScope, type AccessStore, type EndedMarks, type PortalLink, type StoredSession } from './types.js';

export class RedisAccessStore implements AccessStore {
  constructor(
    private readonly client: Pick<RedisCommands, 'get' | 'getdel' | 'set' | 'del' | 'hset' | 'hmget' | 'pexpire'>,
    private readonly ks: Keyspace,
  ) {}

  async putLink(codeHash: string, link: PortalLink, ttlMs: number): Promise<void> {
    await this.client.set(this.ks.portalLink(codeHash), JSON.stringify(link), 'PX', Math.max(1, Math.ceil(ttlMs)));
  }

  async takeLink(codeHash: string): Promise<PortalLink | undefined> {
    return readLink(await this.client.getdel(this.ks.portalLink(codeHash)));
  }

  async putSession(idHash: string, session: StoredSession, ttlMs: number): Promise<void> {
    await this.client.set(this.ks.portalSession(idHash), JSON.stringify(session), 'PX', Math.max(1, Math.ceil(ttlMs)));
  }

  async getSession(idHash: string): Promise<StoredSession | undefined> {
    return readSession(await this.client.get(this.ks.portalSession(idHash)));
  }

  async deleteSession(idHash: string): Promise<void> {
    await this.client.del(this.ks.portalSession(idHash));
  }

  async markEnded(consumer: string, actor: string | undefined, at: number, keepMs: number): Promise<void> {
    const key = this.ks.portalEnded(consumer);
    // The hash lives as long as anything it could end: every write pushes its expiry out again. Two commands, not a
    // MULTI: the least-privilege ACL (docs/redis.md) grants no transactions, and a failure between them leaves one
    // small hash whose expiry the next mark sets.
    await this.client.hset(key, markField(actor), String(at));
    await this.client.pexpire(key, keepMs);
  }

  async endedMarks(consumer: string, actor: string | undefined): Promise<EndedMarks> {
    const fields = actor === undefined ? ['*'] : ['*', markField(actor)];
    const [all, one] = await this.client.hmget(this.ks.portalEnded(consumer), ...fields);
    return { ...numberOr(all, 'all'), ...numberOr(one, 'actor') };
  }
}

export function markField(actor: string | undefined): string {
  return actor === undefined ? '*' : `actor:${actor}`;
}

function numberOr(text: string | null | undefined, name: keyof EndedMarks): EndedMarks {
  const n = text === null || text === undefined ? NaN : Number(text);
  return Number.isFinite(n) ? { [name]: n } : {};
}

/** A stored link, or undefined when the text is none or not a link (a record nobody could have written is no link). */
export function readLink(text: string | null): PortalLink | undefined {
  const v = parseObject(text);
  if (!v || typeof v.consumer !== 'string' || typeof v.actor !== 'string' || !scopesOk(v.scopes)) return undefined;
  if (typeof v.createdAt !== 'number' || typeof v.expiresAt !== 'number') return undefined;
  if (v.sessionHours !== undefined && typeof v.sessionHours !== 'number') return undefined;
  return v as unknown as PortalLink;
}

export function readSession(text: string | null): StoredSession | undefined {
  const v = parseObject(text);
  if (!v || (v.kind !== 'key' && v.kind !== 'link') || typeof v.consumer !== 'string' || !scopesOk(v.scopes)) return undefined;
  if (typeof v.createdAt !== 'number' || typeof v.expiresAt !== 'number') return undefined;
  return v as unknown as StoredSession;
}

function scopesOk(scopes: unknown): boolean {
  return Array.isArray(scopes) && scopes.every(isPortalScope);
}

function parseObject(text: string | null): Record<string, unknown> | undefined {
  if (text === null) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
