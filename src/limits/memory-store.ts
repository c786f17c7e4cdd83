// Limits in process memory: the store for a Redis-less gateway (`tollgate dev`, static keys), and the
// per-instance fallback while Redis is unreachable with failMode: open. Same rules as the Lua script.
import { LRUCache } from 'lru-cache';
import { subjectPart } from '../storage/keyspace.js';
import type { Clock } from '../util/clock.js';
import { banHolder, poolOf, type QuotaSubject } from './subject.js';
import {
  banModeOf,
  type BanPolicy,
  type BanState,
  type BanStore,
  type Decision,
  type LimiterStore,
  type LimitRequest,
  type LimitSnapshot,
  type Refund,
  type WindowSpec,
  type WindowState,
} from './types.js';

interface Counter {
  used: number;
  endsAt: number;
}

/** A key's plan windows (minute, day) as the shared store last reported them: requests counted, and when each window ends. */
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

/** The memory counter of each window: `<subject part>:<suffix>`, a cap under the key, any other under the pool. */
function counterNames(subject: QuotaSubject, windows: readonly WindowSpec[]): string[] {
  const own = subjectPart(subject);
  const pool = subject.pool ? subjectPart(subject.pool) : own;
  return windows.map((w) => `${w.cap ? own : pool}:${w.suffix}`);
}

export class MemoryLimiterStore implements LimiterStore {
  // Bounded so a flood of ids cannot grow memory without limit; entries also lapse with their window. Made on first
  // use: an LRU this size preallocates about 10 MB, and with Redis this store only serves while Redis is down.
  private countersCache: LRUCache<string, Counter> | undefined;
  private get counters(): LRUCache<string, Counter> {
    return (this.countersCache ??= new LRUCache<string, Counter>({ max: 500_000 }));
  }
  private readonly bans = new Map<string, StoredBan>();
  /** Would-be bans (bans in shadow mode), apart from the enforced ones as in Redis. */
  private readonly shadowBans = new Map<string, StoredBan>();

  constructor(private readonly clock: Clock) {}

  async check(subject: QuotaSubject, request: LimitRequest, ban: BanPolicy): Promise<Decision> {
    const now = this.clock.now();
    const { windows, candidates, cost } = request;
    // Each window's counter: a key of a consumer counts its caps under itself, every other window under the pool.
    const names = counterNames(subject, windows);
    const states = windows.map((w, i) => this.window(names[i]!, w.lengthMs, now));

    // The script's ban rules: off reads and writes nothing; shadow keeps its own bans and strikes and never refuses.
    const id = subjectPart(banHolder(subject, ban.scope));
    const mode = banModeOf(ban);
    const bans = mode === 'shadow' ? this.shadowBans : this.bans;
    const strikesKey = mode === 'shadow' ? `${id}:ws` : `${id}:s`;
    let level = 0;
    let wouldBan = 0;
    if (mode !== 'off') {
      const b = bans.get(id);
      level = b?.level ?? 0;
      if (b && b.lastEnd > 0 && now >= b.lastEnd + ban.resetAfterSeconds * 1000) {
        level = 0;
        bans.delete(id);
      }
      if (b && b.until > now) {
        if (mode === 'enforce') return { outcome: 'banned', windows: states, short: 0, retryMs: b.until - now, banLevel: level };
        wouldBan = -1;
      }
    }

    // A window a refund emptied holds no admitted request, so it has not started: the next admitted request opens a
    // window from now, and a refusal leaves none (the script: an INCR that lands on the cost runs PEXPIRE of a whole
    // window, and a refusal's give-back that reaches zero is a DEL). A ban or a snapshot still sees it as it stands,
    // as Redis does (the key is there, at zero, with its old expiry).
    for (let i = 0; i < windows.length; i++) {
      if (states[i]!.used === 0 && this.counters.delete(names[i]!)) states[i] = { used: 0, resetMs: windows[i]!.lengthMs };
    }

    // The same rule as the script: every enforced window needs `cost` points left; a shadow one without them is only
    // reported (bit i of short) and takes nothing.
    let short = 0;
    let refused = false;
    let retryMs = 0;
    for (let i = 0; i < windows.length; i++) {
      const w = windows[i]!;
      if (states[i]!.used + cost <= w.limit) continue;
      short |= 1 << i;
      if (w.mode === 'enforce') {
        refused = true;
        retryMs = Math.max(retryMs, states[i]!.resetMs);
      }
    }
    // Candidate limits, on their window's count as the request brings it (the script's rule); they take nothing.
    for (let j = 0; j < candidates.length; j++) {
      const c = candidates[j]!;
      if (states[c.of]!.used + cost > c.limit) short |= 1 << (windows.length + j);
    }
    const would = (d: Decision): Decision => (wouldBan === 0 ? d : { ...d, wouldBan });
    if (refused) {
      if (mode !== 'off' && wouldBan === 0) {
        const strikes = this.increment(strikesKey, ban.windowSeconds * 1000, now, 1);
        if (strikes >= ban.threshold) {
          level += 1;
          const dur = (ban.durationsSeconds[Math.min(level, ban.durationsSeconds.length) - 1] ?? 60) * 1000;
          bans.set(id, { until: now + dur, level, lastEnd: now + dur });
          this.counters.delete(strikesKey);
          if (mode === 'enforce') return { outcome: 'banned_now', windows: states, short, retryMs: dur, banLevel: level };
          wouldBan = dur;
        }
      }
      return would({ outcome: 'limited', windows: states, short, retryMs, banLevel: level });
    }
    for (let i = 0; i < windows.length; i++) {
      if (short & (1 << i)) continue;
      const w = windows[i]!;
      this.increment(names[i]!, w.lengthMs, now, cost);
      states[i] = this.window(names[i]!, w.lengthMs, now);
    }
    return would({ outcome: 'admitted', windows: states, short, retryMs: 0, banLevel: level });
  }

  /**
   * Makes this key's memory windows start from at least what the shared store last reported (`used` requests in a
   * window ending at `endsAt`), so falling back to memory continues a window instead of opening a fresh one. Of a
   * live memory window and the reported one, the one with the larger count stands, end time included: the reported
   * window is the fleet's, and an equal or larger count there already holds what this instance admitted from memory.
   */
  raiseTo(subject: QuotaSubject, seen: SeenWindows, now: number): void {
    const id = subjectPart(poolOf(subject));
    this.raise(`${id}:minute`, seen.minuteUsed, seen.minuteEndsAt, now);
    this.raise(`${id}:day`, seen.dayUsed, seen.dayEndsAt, now);
  }

  /**
   * Gives one admitted request's cost back to the windows it was counted in, by the same rule as the Redis store:
   * only a window that is still that one (it ends within half a window of where the check saw its end; one opened
   * since ends a whole window later), never below zero; bans and strikes are left alone.
   */
  async refund(subject: QuotaSubject, r: Refund): Promise<void> {
    const own = subjectPart(subject);
    const pool = subjectPart(poolOf(subject));
    const now = this.clock.now();
    for (const w of r.windows) {
      const c = this.countersCache?.get(`${w.cap ? own : pool}:${w.suffix}`);
      if (c && c.endsAt > now && c.endsAt < now + w.remainingMs + w.lengthMs / 2 && c.used > 0) c.used -= Math.min(r.cost, c.used);
    }
  }

  /**
   * `keys unban` for a Redis-less gateway, and every instance's memory of a ban lifted anywhere in the fleet. A key's
   * subject lifts its ban wherever it is kept: its own, and its own in any consumer's slot (ban.scope key).
   */
  unban(subject: QuotaSubject): void {
    const ids = [subjectPart(subject)];
    if (subject.kind === 'key') {
      const inConsumer = `}:key:${subject.id}`;
      for (const id of [...this.bans.keys(), ...this.shadowBans.keys()]) if (id.endsWith(inConsumer)) ids.push(id);
    }
    for (const id of ids) {
      this.bans.delete(id);
      this.shadowBans.delete(id);
      this.countersCache?.delete(`${id}:s`);
      this.countersCache?.delete(`${id}:ws`);
    }
  }

  /** `keys reset` for a Redis-less gateway, and every instance's fallback windows after a reset anywhere in the fleet. */
  resetWindows(subject: QuotaSubject): void {
    const cache = this.countersCache;
    if (!cache) return;
    // Every counter of the subject (plan and route windows, strikes): an administrator's reset, rare enough to scan
    // for. The prefix is the subject's hash tag in braces, which no other subject's counters begin with (a consumer's
    // takes its keys' caps with it); a key's reset takes its caps in any consumer's pool too.
    const prefix = `${subjectPart(subject)}:`;
    const inConsumer = subject.kind === 'key' ? `}:key:${subject.id}:` : undefined;
    for (const key of [...cache.keys()]) if (key.startsWith(prefix) || (inConsumer !== undefined && key.includes(inConsumer))) cache.delete(key);
  }

  /** The subject's windows and ban now, counting nothing (memory holds no key records: the key is not checked). */
  async snapshot(subject: QuotaSubject, windows: readonly WindowSpec[], ban: BanPolicy): Promise<LimitSnapshot> {
    const now = this.clock.now();
    const b = this.banState(banHolder(subject, ban.scope), ban);
    const names = counterNames(subject, windows);
    return {
      key: 'ok',
      now,
      windows: windows.map((w, i) => this.window(names[i]!, w.lengthMs, now)),
      banMs: b.bannedUntilMs === null ? 0 : b.bannedUntilMs - now,
      banLevel: b.level,
    };
  }

  /** The key's ban now, by the rules check() applies (the level is forgotten resetAfter after the last ban ended). */
  banState(subject: QuotaSubject, ban: BanPolicy): BanState {
    const now = this.clock.now();
    const b = this.bans.get(subjectPart(subject));
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

  private increment(key: string, len: number, now: number, by: number): number {
    const c = this.counters.get(key);
    if (!c || c.endsAt <= now) {
      this.counters.set(key, { used: by, endsAt: now + len });
      return by;
    }
    c.used += by;
    return c.used;
  }
}

/** The memory store's bans as a BanStore, for a Redis-less gateway's key administration (`tollgate dev`). */
export function memoryBanStore(store: MemoryLimiterStore): BanStore {
  return {
    snapshot: (subject, windows, ban) => store.snapshot(subject, windows, ban),
    unban: async (subject) => store.unban(subject),
    resetWindows: async (subject) => store.resetWindows(subject),
  };
}
