// Limits in process memory: the store for a Redis-less gateway (`tollgate dev`, static keys), and the
// per-instance fallback while Redis is unreachable with failMode: open. Same rules as the Lua script.
import { LRUCache } from 'lru-cache';
import type { Clock } from '../util/clock.js';
import {
  DAY_MS,
  MINUTE_MS,
  type BanPolicy,
  type BanState,
  type BanStore,
  type Decision,
  type KeyLimits,
  type LimiterStore,
  type LimitSnapshot,
  type Outcome,
  type Refund,
  type WindowState,
} from './types.js';

interface Counter {
  used: number;
  endsAt: number;
}

/** A key's two windows as the shared store last reported them: requests counted, and when each window ends. */
export interface SeenWindows {
  minuteUsed: number;
  minuteEndsAt: number;
  dayUsed: number;
  dayEndsAt: number;
}

interface StoredBan {
  until: number;
  level: number;
  lastEnd: number;
}

export class MemoryLimiterStore implements LimiterStore {
  // Bounded so a flood of ids cannot grow memory without limit; entries also lapse with their window. Made on first
  // use: an LRU this size preallocates about 10 MB, and with Redis this store only serves while Redis is down.
  private countersCache: LRUCache<string, Counter> | undefined;
  private get counters(): LRUCache<string, Counter> {
    return (this.countersCache ??= new LRUCache<string, Counter>({ max: 500_000 }));
  }
  private readonly bans = new Map<string, StoredBan>();

  constructor(private readonly clock: Clock) {}

  async check(id: string, limits: KeyLimits, ban: BanPolicy): Promise<Decision> {
    const now = this.clock.now();
    const minuteKey = `${id}:m`;
    const dayKey = `${id}:d`;
    const strikeKey = `${id}:s`;
    const m = this.window(minuteKey, MINUTE_MS, now);
    const d = this.window(dayKey, DAY_MS, now);

    const b = this.bans.get(id);
    let level = b?.level ?? 0;
    if (b && b.lastEnd > 0 && now >= b.lastEnd + ban.resetAfterSeconds * 1000) {
      level = 0;
      this.bans.delete(id);
    }
    if (b && b.until > now) return { outcome: 'banned', minute: m, day: d, retryMs: b.until - now, banLevel: level };

    const minuteFull = m.used >= limits.perMinute;
    const dayFull = d.used >= limits.perDay;
    if (minuteFull || dayFull) {
      const [outcome, retryMs]: [Outcome, number] =
        minuteFull && dayFull ? ['limited_both', Math.max(m.resetMs, d.resetMs)] : minuteFull ? ['limited_minute', m.resetMs] : ['limited_day', d.resetMs];
      const strikes = this.increment(strikeKey, ban.windowSeconds * 1000, now);
      if (strikes >= ban.threshold) {
        level += 1;
        const dur = (ban.durationsSeconds[Math.min(level, ban.durationsSeconds.length) - 1] ?? 60) * 1000;
        this.bans.set(id, { until: now + dur, level, lastEnd: now + dur });
        this.counters.delete(strikeKey);
        return { outcome: 'banned_now', minute: m, day: d, retryMs: dur, banLevel: level };
      }
      return { outcome, minute: m, day: d, retryMs, banLevel: level };
    }
    this.increment(minuteKey, MINUTE_MS, now);
    this.increment(dayKey, DAY_MS, now);
    return { outcome: 'admitted', minute: this.window(minuteKey, MINUTE_MS, now), day: this.window(dayKey, DAY_MS, now), retryMs: 0, banLevel: level };
  }

  /**
   * Makes this key's memory windows start from at least what the shared store last reported (`used` requests in a
   * window ending at `endsAt`), so falling back to memory continues a window instead of opening a fresh one. Of a
   * live memory window and the reported one, the one with the larger count stands, end time included: the reported
   * window is the fleet's, and an equal or larger count there already holds what this instance admitted from memory.
   */
  raiseTo(id: string, seen: SeenWindows, now: number): void {
    this.raise(`${id}:m`, seen.minuteUsed, seen.minuteEndsAt, now);
    this.raise(`${id}:d`, seen.dayUsed, seen.dayEndsAt, now);
  }

  /**
   * Gives one admitted request back to the windows it was counted in, by the same rule as the Redis store: only a
   * window that is still that one (it ends within half a window of where the check saw its end; one opened since ends
   * a whole window later), never below zero; bans and strikes are left alone.
   */
  async refund(id: string, r: Refund): Promise<void> {
    const now = this.clock.now();
    this.giveBack(`${id}:m`, now + r.minuteMs, MINUTE_MS, now);
    this.giveBack(`${id}:d`, now + r.dayMs, DAY_MS, now);
  }

  private giveBack(key: string, endsAt: number, len: number, now: number): void {
    const c = this.countersCache?.get(key);
    if (c && c.endsAt > now && c.endsAt < endsAt + len / 2 && c.used > 0) c.used -= 1;
  }

  /** `keys unban` for a Redis-less gateway. */
  unban(id: string): void {
    this.bans.delete(id);
    this.countersCache?.delete(`${id}:s`);
  }

  /** `keys reset` for a Redis-less gateway, and every instance's fallback windows after a reset anywhere in the fleet. */
  resetWindows(id: string): void {
    this.countersCache?.delete(`${id}:m`);
    this.countersCache?.delete(`${id}:d`);
    this.countersCache?.delete(`${id}:s`);
  }

  /** The key's windows and ban now, counting nothing (memory holds no key records: the key is not checked). */
  async snapshot(id: string, ban: BanPolicy): Promise<LimitSnapshot> {
    const now = this.clock.now();
    const b = this.banState(id, ban);
    return {
      key: 'ok',
      now,
      minute: this.window(`${id}:m`, MINUTE_MS, now),
      day: this.window(`${id}:d`, DAY_MS, now),
      banMs: b.bannedUntilMs === null ? 0 : b.bannedUntilMs - now,
      banLevel: b.level,
    };
  }

  /** The key's ban now, by the rules check() applies (the level is forgotten resetAfter after the last ban ended). */
  banState(id: string, ban: BanPolicy): BanState {
    const now = this.clock.now();
    const b = this.bans.get(id);
    if (!b) return { bannedUntilMs: null, level: 0 };
    const level = b.lastEnd > 0 && now >= b.lastEnd + ban.resetAfterSeconds * 1000 ? 0 : b.level;
    return { bannedUntilMs: b.until > now ? b.until : null, level };
  }

  private window(key: string, len: number, now: number): WindowState {
    const c = this.counters.get(key);
    if (!c || c.endsAt <= now) return { used: 0, resetMs: len };
    return { used: c.used, resetMs: c.endsAt - now };
  }

  private raise(key: string, used: number, endsAt: number, now: number): void {
    if (used <= 0 || endsAt <= now) return;
    const c = this.counters.get(key);
    if (!c || c.endsAt <= now) this.counters.set(key, { used, endsAt });
    else if (used >= c.used) {
      c.used = used;
      c.endsAt = endsAt;
    }
  }

  private increment(key: string, len: number, now: number): number {
    const c = this.counters.get(key);
    if (!c || c.endsAt <= now) {
      this.counters.set(key, { used: 1, endsAt: now + len });
      return 1;
    }
    c.used += 1;
    return c.used;
  }
}

/** The memory store's bans as a BanStore, for a Redis-less gateway's key administration (`tollgate dev`). */
export function memoryBanStore(store: MemoryLimiterStore): BanStore {
  return {
    snapshot: (id, ban) => store.snapshot(id, ban),
    unban: async (id) => store.unban(id),
    resetWindows: async (id) => store.resetWindows(id),
  };
}
