// The portal's links, sessions and ended marks in memory, for a gateway without Redis (one instance): the Redis
// store's semantics in Maps, each entry expiring against the clock it is given (a link taken once is gone).
import type { Clock } from '../util/clock.js';
import { markField } from './redis-store.js';
import type { AccessStore, EndedMarks, PortalLink, StoredSession } from './types.js';

/**
 * Most links, and most sessions, held at once; past it the oldest goes (a flood of sign-ins cannot grow memory). Ended
 * marks are never dropped early (that would bring ended sessions back): there is one per consumer at most.
 */
const MAX_ENTRIES = 100_000;

interface Expiring<T> {
  value: T;
  until: number;
}

export class MemoryAccessStore implements AccessStore {
  private readonly links = new Map<string, Expiring<PortalLink>>();
  private readonly sessions = new Map<string, Expiring<StoredSession>>();
  private readonly marks = new Map<string, Expiring<Map<string, number>>>();

  constructor(private readonly clock: Clock) {}

  async putLink(codeHash: string, link: PortalLink, ttlMs: number): Promise<void> {
    this.put(this.links, codeHash, structuredClone(link), ttlMs);
  }

  async takeLink(codeHash: string): Promise<PortalLink | undefined> {
    const link = this.live(this.links, codeHash);
    this.links.delete(codeHash);
    return link;
  }

  async putSession(idHash: string, session: StoredSession, ttlMs: number): Promise<void> {
    this.put(this.sessions, idHash, structuredClone(session), ttlMs);
  }

  async getSession(idHash: string): Promise<StoredSession | undefined> {
    const s = this.live(this.sessions, idHash);
    return s && structuredClone(s);
  }

  async deleteSession(idHash: string): Promise<void> {
    this.sessions.delete(idHash);
  }

  async markEnded(consumer: string, actor: string | undefined, at: number, keepMs: number): Promise<void> {
    const fields = this.live(this.marks, consumer) ?? new Map<string, number>();
    fields.set(markField(actor), at);
    this.marks.set(consumer, { value: fields, until: this.clock.now() + keepMs });
  }

  async endedMarks(consumer: string, actor: string | undefined): Promise<EndedMarks> {
    const fields = this.live(this.marks, consumer);
    const all = fields?.get('*');
    const one = actor === undefined ? undefined : fields?.get(markField(actor));
    return { ...(all !== undefined ? { all } : {}), ...(one !== undefined ? { actor: one } : {}) };
  }

  private put<T>(map: Map<string, Expiring<T>>, name: string, value: T, ttlMs: number): void {
    map.delete(name);
    if (map.size >= MAX_ENTRIES) map.delete(map.keys().next().value!);
    map.set(name, { value, until: this.clock.now() + ttlMs });
  }

  private live<T>(map: Map<string, Expiring<T>>, name: string): T | undefined {
    const e = map.get(name);
    if (!e) return undefined;
    if (this.clock.now() >= e.until) {
      map.delete(name);
      return undefined;
    }
    return e.value;
  }
}
