// What the key limiter remembers of each key's windows for the moments Redis is out of reach: the counts and end times
// the last Redis decision reported (a fall-back to memory continues from them), and the requests admitted from memory
// since (owed to Redis, credited by the key's next Redis check). One small record per key, mutated in place, so a key
// in steady use costs no allocation per request; bounded in the number of keys.
import type { SeenWindows } from './memory-store.js';
import type { Decision, LimitRequest, WindowCredit } from './types.js';

export interface KeyWindows extends SeenWindows {
  /**
   * What memory admitted while Redis was out of reach; made the first time that happens to the key. Apart, so the
   * record of every other key (nearly all of them) is four numbers: it is kept per key in use, resident memory.
   */
  owed: Owed | undefined;
}

interface Owed {
  /** Points (request costs) admitted from the memory minute window and not yet counted in Redis; that window's end. */
  minute: number;
  minuteEndsAt: number;
  /** The same for the day window. */
  day: number;
  dayEndsAt: number;
  /** The requests those day points came from (the ledger counts requests). */
  requests: number;
}

export class LastCounts {
  private readonly byId = new Map<string, KeyWindows>();

  constructor(private readonly maxKeys = 100_000) {}

  get size(): number {
    return this.byId.size;
  }

  get(id: string): KeyWindows | undefined {
    return this.byId.get(id);
  }

  /**
   * The key's windows were reset in the shared store: what Redis last reported is stale, and what memory admitted
   * is not owed to windows that no longer hold it. The key's next Redis answer makes a new record.
   */
  drop(id: string): void {
    this.byId.delete(id);
  }

  /** `id`'s record, made on first use. When full, the oldest record goes: its key's next Redis answer makes a new one. */
  ensure(id: string): KeyWindows {
    let rec = this.byId.get(id);
    if (!rec) {
      if (this.byId.size >= this.maxKeys) this.byId.delete(this.byId.keys().next().value!);
      rec = { minuteUsed: 0, minuteEndsAt: 0, dayUsed: 0, dayEndsAt: 0, owed: undefined };
      this.byId.set(id, rec);
    }
    return rec;
  }

  /**
   * Redis decided: its plan windows (request.plan, as they stand after the decision) are the ones a fall-back
   * continues. (A route's windows are metered by each instance alone while Redis is away: see docs/reliability.md.)
   */
  seen(rec: KeyWindows, request: LimitRequest, d: Decision, now: number): void {
    const minute = d.windows[request.plan.minute];
    const day = d.windows[request.plan.day];
    rec.minuteUsed = minute!.used;
    rec.minuteEndsAt = now + minute!.resetMs;
    rec.dayUsed = day!.used;
    rec.dayEndsAt = now + day!.resetMs;
  }

  /**
   * Memory admitted a request of `cost` points while Redis was out of reach: Redis is owed them, in the memory plan
   * windows `d` reports. A plan window in shadow mode that had no room took nothing (bit set in d.short): owed nothing.
   */
  owe(rec: KeyWindows, request: LimitRequest, d: Decision, now: number): void {
    const o = (rec.owed ??= { minute: 0, minuteEndsAt: 0, day: 0, dayEndsAt: 0, requests: 0 });
    const { plan, cost } = request;
    const minute = d.windows[plan.minute];
    const day = d.windows[plan.day];
    const m = d.short & (1 << plan.minute) ? 0 : cost;
    const dd = d.short & (1 << plan.day) ? 0 : cost;
    o.minute = o.minuteEndsAt > now ? o.minute + m : m;
    o.minuteEndsAt = now + minute!.resetMs;
    o.requests = o.dayEndsAt > now ? o.requests + 1 : 1;
    o.day = o.dayEndsAt > now ? o.day + dd : dd;
    o.dayEndsAt = now + day!.resetMs;
  }

  /**
   * What is owed in windows still running, handed to the next Redis check and no longer owed; undefined when nothing
   * is (nearly always: a cheap test on the request path).
   */
  takeCredit(rec: KeyWindows, now: number): WindowCredit | undefined {
    const o = rec.owed;
    if (o === undefined || (o.minute === 0 && o.day === 0 && o.requests === 0)) return undefined;
    const minute = o.minuteEndsAt > now ? o.minute : 0;
    const live = o.dayEndsAt > now;
    const day = live ? o.day : 0;
    const requests = live ? o.requests : 0;
    o.minute = 0;
    o.day = 0;
    o.requests = 0;
    if (minute === 0 && day === 0 && requests === 0) return undefined;
    return { minute, minuteMs: minute > 0 ? o.minuteEndsAt - now : 0, day, dayMs: day > 0 || requests > 0 ? o.dayEndsAt - now : 0, requests };
  }

  /**
   * A request of `cost` points memory admitted (and Redis is owed) was given back: Redis is owed it no more, if it
   * still is (the credit not yet taken by a Redis check) and its windows still run. Whether it was still owed.
   */
  unowe(rec: KeyWindows, now: number, cost: number): boolean {
    const o = rec.owed;
    if (o === undefined || o.requests <= 0 || o.dayEndsAt <= now) return false;
    o.requests -= 1;
    o.day = Math.max(0, o.day - cost);
    if (o.minuteEndsAt > now) o.minute = Math.max(0, o.minute - cost);
    return true;
  }

  /**
   * The check that carried `credit` failed. It may still have run (a timeout), but the credit stays owed: counting a
   * request twice errs toward refusing, dropping it toward admitting past the limit.
   */
  restore(rec: KeyWindows, credit: WindowCredit): void {
    // A credit was taken from rec.owed, so it exists.
    rec.owed!.minute += credit.minute;
    rec.owed!.day += credit.day;
    rec.owed!.requests += credit.requests;
  }
}
