// Where the usage ledger and the deprecated-route report live: per key and UTC day, a hash of per-hour counts (a<h>
// admitted, r<h> refused by a window, b<h> refused by a ban, f<h> admitted but given no response by the upstream and
// refunded, s<h> admitted though a window in shadow mode would have refused it); per deprecated route and day, calls by key id, and when each key last called. Redis holds them for the
// fleet (the limit script itself counts what it decides, the refund script moves a<h> to f<h>; this file writes what
// instances count locally and reads everything back); memory holds them for a Redis-less gateway.
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';
import type { ReadLimit } from '../storage/read-limit.js';

export const DAY_MS = 86_400_000;
export const HOUR_MS = 3_600_000;

/** a admitted, r refused by a window, b refused by a ban, f upstream failed, s admitted though a shadow-mode window would have refused. */
export type UsageKind = 'a' | 'r' | 'b' | 'f' | 's';

/** Days since 1970-01-01 (UTC) of an instant. */
export function dayOf(ms: number): number {
  return Math.floor(ms / DAY_MS);
}

/** A key's counts over one UTC day: field `<kind><hour>` -> count. */
export type DayCounts = Record<string, number>;

export interface UsageStore {
  /** Adds counts made outside the limit script (one entry per key, kind and hour). */
  add(entries: ReadonlyArray<{ id: string; kind: UsageKind; atMs: number; n: number }>, ttlMs: number): Promise<void>;
  /** The key's counts for each day asked, in order (an empty object for a day without any). */
  days(id: string, days: readonly number[]): Promise<DayCounts[]>;
  /** Adds calls of deprecated routes by keys, and raises each key's last-seen time. */
  addDeprecated(entries: ReadonlyArray<{ route: string; id: string; day: number; n: number; lastMs: number }>, ttlMs: number): Promise<void>;
  /** Per key: calls of the route over the days asked, and when it last called (ever, within retention). */
  deprecated(route: string, days: readonly number[]): Promise<Map<string, { calls: number; lastMs: number }>>;
}

function toCounts(raw: Record<string, string>): DayCounts {
  const out: DayCounts = {};
  for (const [k, v] of Object.entries(raw)) out[k] = Number(v);
  return out;
}

/**
 * Raises hash fields to values only where they are larger (last-seen times from instances whose flushes interleave).
 * KEYS: 1 the hash. ARGV: 1 its time to live in ms, then field, value pairs.
 */
const RAISE_LAST_SEEN = `
for i = 2, #ARGV, 2 do
  local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
  if tonumber(ARGV[i + 1]) > cur then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
`;

export class RedisUsageStore implements UsageStore {
  /** `reads` bounds days()'s reads in flight (a report's thousands of them); writes are not bounded by it. */
  constructor(
    private readonly redis: RedisCommands,
    private readonly ks: Keyspace,
    private readonly reads: ReadLimit = (fn) => fn(),
  ) {}

  async add(entries: ReadonlyArray<{ id: string; kind: UsageKind; atMs: number; n: number }>, ttlMs: number): Promise<void> {
    // One command per entry, never a pipeline across keys: on a cluster each key's ledger lives in its own slot.
    await Promise.all(
      entries.map(async (e) => {
        const key = this.ks.usageDay(e.id, dayOf(e.atMs));
        await this.redis.hincrby(key, `${e.kind}${Math.floor((e.atMs % DAY_MS) / HOUR_MS)}`, e.n);
        await this.redis.pexpire(key, ttlMs);
      }),
    );
  }

  async days(id: string, days: readonly number[]): Promise<DayCounts[]> {
    return Promise.all(days.map(async (d) => toCounts(await this.reads(() => this.redis.hgetall(this.ks.usageDay(id, d))))));
  }

  async addDeprecated(entries: ReadonlyArray<{ route: string; id: string; day: number; n: number; lastMs: number }>, ttlMs: number): Promise<void> {
    const byRoute = new Map<string, typeof entries>();
    for (const e of entries) byRoute.set(e.route, [...(byRoute.get(e.route) ?? []), e]);
    await Promise.all(
      [...byRoute].map(async ([route, list]) => {
        for (const e of list) {
          const key = this.ks.deprecatedCalls(route, e.day);
          await this.redis.hincrby(key, e.id, e.n);
          await this.redis.pexpire(key, ttlMs);
        }
        const last = new Map<string, number>();
        for (const e of list) last.set(e.id, Math.max(last.get(e.id) ?? 0, e.lastMs));
        const pairs = [...last].flatMap(([id, ms]) => [id, String(ms)]);
        await this.redis.eval(RAISE_LAST_SEEN, 1, this.ks.deprecatedLastSeen(route), String(ttlMs), ...pairs);
      }),
    );
  }

  async deprecated(route: string, days: readonly number[]): Promise<Map<string, { calls: number; lastMs: number }>> {
    const [perDay, last] = await Promise.all([
      Promise.all(days.map((d) => this.redis.hgetall(this.ks.deprecatedCalls(route, d)))),
      this.redis.hgetall(this.ks.deprecatedLastSeen(route)),
    ]);
    const out = new Map<string, { calls: number; lastMs: number }>();
    for (const day of perDay) {
      for (const [id, n] of Object.entries(day)) {
        const e = out.get(id) ?? { calls: 0, lastMs: Number(last[id] ?? 0) };
        e.calls += Number(n);
        out.set(id, e);
      }
    }
    return out;
  }
}

/** The same data in process memory, for a Redis-less gateway (`tollgate dev`): one instance, lost on restart. */
export class MemoryUsageStore implements UsageStore {
  private readonly ledger = new Map<string, DayCounts>();
  private readonly calls = new Map<string, Map<string, number>>();
  private readonly last = new Map<string, Map<string, number>>();

  async add(entries: ReadonlyArray<{ id: string; kind: UsageKind; atMs: number; n: number }>): Promise<void> {
    for (const e of entries) {
      const key = `${e.id}:${dayOf(e.atMs)}`;
      const day = this.ledger.get(key) ?? {};
      const field = `${e.kind}${Math.floor((e.atMs % DAY_MS) / HOUR_MS)}`;
      day[field] = (day[field] ?? 0) + e.n;
      this.ledger.set(key, day);
    }
  }

  async days(id: string, days: readonly number[]): Promise<DayCounts[]> {
    return days.map((d) => ({ ...(this.ledger.get(`${id}:${d}`) ?? {}) }));
  }

  async addDeprecated(entries: ReadonlyArray<{ route: string; id: string; day: number; n: number; lastMs: number }>): Promise<void> {
    for (const e of entries) {
      const key = `${e.route}\u0000${e.day}`;
      const m = this.calls.get(key) ?? new Map<string, number>();
      m.set(e.id, (m.get(e.id) ?? 0) + e.n);
      this.calls.set(key, m);
      const l = this.last.get(e.route) ?? new Map<string, number>();
      l.set(e.id, Math.max(l.get(e.id) ?? 0, e.lastMs));
      this.last.set(e.route, l);
    }
  }

  async deprecated(route: string, days: readonly number[]): Promise<Map<string, { calls: number; lastMs: number }>> {
    const out = new Map<string, { calls: number; lastMs: number }>();
    for (const d of days) {
      for (const [id, n] of this.calls.get(`${route}\u0000${d}`) ?? []) {
        const e = out.get(id) ?? { calls: 0, lastMs: this.last.get(route)?.get(id) ?? 0 };
        e.calls += n;
        out.set(id, e);
      }
    }
    return out;
  }
}
