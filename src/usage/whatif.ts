// The what-if of a plan's limits from real usage: which keys of the plan new perMinute/perDay/perMonth values would have
// refused over a past period, in which hours, and at least how many points (a request takes its route's cost from a
// window: 1 by default). Read from the usage ledger only (per key and hour: admitted, upstreamFailed, peakMinute), so
// every figure is a lower bound that holds whatever happened inside an hour; docs/keys-and-limits.md ("What if")
// explains each bound and why it never overstates. The answer is bounded: totals, then the keys most refused, each
// with its most refused hours (TOP_HOURS), the rest of the keys paged (whatif-pages.ts).
import type { KeyRecord } from '../keys/types.js';
import { monthPeriod } from '../limits/months.js';
import { type DayCounts, type UsageStore } from './store.js';
import { DAY_MS, HOUR_MS, dayOf } from '../util/time.js';

export interface SimulateInput {
  plan: string;
  /** The plan's values in force (a window not simulated keeps its own). */
  current: { perMinute: number; perDay: number; perMonth?: number | undefined };
  perMinute?: number | undefined;
  perDay?: number | undefined;
  /** A monthly limit, over calendar months in UTC (the months the period touches, each counted from its own demand). */
  perMonth?: number | undefined;
  /** Whole hours: [fromMs, toMs) is widened to the hours it touches. */
  fromMs: number;
  toMs: number;
}

/** One window's answer for a key: the limit it would have had, and whether the key's own override keeps it. */
export interface WindowOutcome {
  limit: number;
  /** The key has its own value for this window: the plan's new value does not apply to it (nothing refused). */
  override: boolean;
  /** Points: what the window would have refused at least (a request refused takes back its cost in points). */
  pointsRefusedAtLeast: number;
}

export interface SimulatedHour {
  start: string;
  /** Requests that went through in the hour (admitted, which counts those a target then failed): a count of requests. */
  requests: number;
  /** Points: the highest count the key's minute window reached in the hour (a request counts its route's cost). */
  peakMinute: number;
  /** Points: at least this many refused by the new minute limit in the hour's busiest minute window. */
  pointsRefusedAtLeast: number;
}

/** Hours listed per key: its most refused (a key refused all week would otherwise list 168). */
export const TOP_HOURS = 10;

export interface SimulatedKey {
  id: string;
  name?: string;
  metadata?: Record<string, string>;
  /** null: the window was not simulated. */
  minute: WindowOutcome | null;
  day: WindowOutcome | null;
  /** Only when perMonth is simulated. */
  month?: WindowOutcome;
  /** Points: at least this many of the key's refused under the new values (the largest of the windows'). */
  pointsRefusedAtLeast: number;
  /** How many hours the new minute limit would have refused in (all of them, listed or not). */
  hoursAffected: number;
  /** The TOP_HOURS of them with the most points refused, most first (oldest first on a tie). */
  hours: SimulatedHour[];
}

export interface SimulationTotals {
  keysInPlan: number;
  keysAffected: number;
  /** Hours refused in, over every key. */
  hours: number;
  pointsRefusedAtLeast: number;
}

export interface Simulation {
  /** Keys affected (pointsRefusedAtLeast > 0), most refused first, then keys an override kept out, by id. */
  keys: SimulatedKey[];
  totals: SimulationTotals;
}

/**
 * Requests offered in an hour: every request that reached the windows and went through (admitted, which counts those a
 * shadow window let through too, and those a target then failed: upstreamFailed is a part of admitted, not added to
 * it; a request that reached no target was given back and is in neither). Requests refused (r) or banned (b) are
 * left out: they may be retries that only the current refusals provoked, and leaving requests out can only lower a
 * lower bound.
 */
export function demandOf(day: DayCounts, hour: number): number {
  return day[`a${hour}`] ?? 0;
}

/**
 * The least the minute limit must have refused over a run of hours, from each hour's bound x (peakMinute − L). A minute
 * window lasts 60 s, so the busiest windows of two neighbouring hours may be one window that crossed the hour's end
 * (counted once, as the larger), never of hours further apart. The least total any such pairing allows: each hour
 * alone or paired with its neighbour, the pairing that counts least (x[i] is hour first + i).
 */
export function minuteTotal(x: readonly number[]): number {
  let prev2 = 0;
  let prev1 = 0;
  for (let i = 0; i < x.length; i++) {
    const alone = prev1 + x[i]!;
    const paired = i > 0 ? prev2 + Math.max(x[i - 1]!, x[i]!) : alone;
    [prev2, prev1] = [prev1, Math.min(alone, paired)];
  }
  return prev1;
}

/**
 * The most a day limit D could have admitted of hourly demand d (d[i]: hour first + i). A day window starts at a
 * request and lasts 24 h, so one started in hour s holds requests of hours s..s+24 only, admits at most D of them, and
 * the next starts in hour s+24 or later; one may have started up to 24 hours before the period. The largest sum over
 * every such placement (starts in any hour, demand before the period counted as none) bounds what was admitted.
 */
export function dayAdmittedAtMost(d: readonly number[], D: number): number {
  const n = d.length;
  const prefix = [0];
  for (const v of d) prefix.push(prefix[prefix.length - 1]! + v);
  const covered = (s: number): number => prefix[Math.min(n, s + 25)]! - prefix[Math.max(0, s)]!;
  // best[s + 24]: the most windows starting in hour s or later can admit (s from -24 to n - 1).
  const best = new Array<number>(n + 48).fill(0);
  for (let s = n - 1; s >= -24; s--) best[s + 24] = Math.max(best[s + 25]!, Math.min(D, covered(s)) + (best[s + 48] ?? 0));
  return best[0]!;
}

/**
 * The least a monthly limit M must have refused of hourly demand d (d[i]: hour first + i): a monthly window is a fixed
 * period (a calendar month in UTC; its counter starts at 0 with the period), so each period admits at most M of the
 * demand the ledger has of it, whatever came before the simulated hours (more demand can only refuse more). The sum
 * over the periods the hours touch.
 */
export function monthRefusedAtLeast(d: readonly number[], first: number, M: number, billingDay?: number): number {
  const byPeriod = new Map<string, number>();
  d.forEach((v, i) => {
    if (v === 0) return;
    const name = monthPeriod((first + i) * HOUR_MS, billingDay).name;
    byPeriod.set(name, (byPeriod.get(name) ?? 0) + v);
  });
  let refused = 0;
  for (const demand of byPeriod.values()) refused += Math.max(0, demand - M);
  return refused;
}

/** A key as the what-if reads it: its own monthly limit too, when it has one. */
type SimulatedRecord = KeyRecord & { perMonth?: number | undefined };

/** The what-if for one key from its ledger days (`byDay`), for the period's hours. */
export function simulateKey(k: SimulatedRecord, byDay: ReadonlyMap<number, DayCounts>, input: SimulateInput): SimulatedKey {
  const first = Math.floor(input.fromMs / HOUR_MS);
  const end = Math.ceil(input.toMs / HOUR_MS);
  const demand: number[] = [];
  const peaks: number[] = [];
  for (let h = first; h < end; h++) {
    const day = byDay.get(dayOf(h * HOUR_MS)) ?? {};
    const hour = Math.floor(((h * HOUR_MS) % DAY_MS) / HOUR_MS);
    demand.push(demandOf(day, hour));
    peaks.push(day[`m${hour}`] ?? 0);
  }
  let minute: WindowOutcome | null = null;
  const hours: SimulatedHour[] = [];
  if (input.perMinute !== undefined) {
    if (k.perMinute !== undefined) minute = { limit: k.perMinute, override: true, pointsRefusedAtLeast: 0 };
    else {
      const L = input.perMinute;
      const x = peaks.map((m) => Math.max(0, m - L));
      x.forEach((v, i) => {
        if (v > 0) hours.push({ start: new Date((first + i) * HOUR_MS).toISOString(), requests: demand[i]!, peakMinute: peaks[i]!, pointsRefusedAtLeast: v });
      });
      minute = { limit: L, override: false, pointsRefusedAtLeast: minuteTotal(x) };
    }
  }
  let day: WindowOutcome | null = null;
  if (input.perDay !== undefined) {
    if (k.perDay !== undefined) day = { limit: k.perDay, override: true, pointsRefusedAtLeast: 0 };
    else {
      // Demand in requests against a limit in points: each request takes at least 1 point, so a window of D points
      // admits at most D requests, and each request refused is at least 1 point refused: a lower bound in both units.
      const total = demand.reduce((s, v) => s + v, 0);
      day = { limit: input.perDay, override: false, pointsRefusedAtLeast: Math.max(0, total - dayAdmittedAtMost(demand, input.perDay)) };
    }
  }
  let month: WindowOutcome | undefined;
  if (input.perMonth !== undefined) {
    if (k.perMonth !== undefined) month = { limit: k.perMonth, override: true, pointsRefusedAtLeast: 0 };
    // Requests against points, as the day window's: a lower bound in both units.
    else month = { limit: input.perMonth, override: false, pointsRefusedAtLeast: monthRefusedAtLeast(demand, first, input.perMonth) };
  }
  return {
    id: k.id,
    ...(k.name !== undefined ? { name: k.name } : {}),
    ...(k.metadata !== undefined ? { metadata: k.metadata } : {}),
    minute,
    day,
    ...(month ? { month } : {}),
    // One request may be refused by several windows: the bounds are not added.
    pointsRefusedAtLeast: Math.max(minute?.pointsRefusedAtLeast ?? 0, day?.pointsRefusedAtLeast ?? 0, month?.pointsRefusedAtLeast ?? 0),
    hoursAffected: hours.length,
    hours: topHours(hours),
  };
}

/** The TOP_HOURS hours with the most points refused, most first, the earlier first on a tie. */
function topHours(hours: SimulatedHour[]): SimulatedHour[] {
  return hours
    .map((h, i) => ({ h, i }))
    .sort((a, b) => b.h.pointsRefusedAtLeast - a.h.pointsRefusedAtLeast || a.i - b.i)
    .slice(0, TOP_HOURS)
    .map((x) => x.h);
}

/**
 * Every key of the plan, read one page at a time (`keys`) with its ledger days through `store` (the reports' store:
 * the admin connection, reads in flight bounded). Complete or failing, as every report.
 */
export async function simulate(store: UsageStore, keys: AsyncIterable<KeyRecord[]>, input: SimulateInput): Promise<Simulation> {
  const days: number[] = [];
  for (let d = dayOf(Math.floor(input.fromMs / HOUR_MS) * HOUR_MS); d <= dayOf(input.toMs - 1); d++) days.push(d);
  const listed: SimulatedKey[] = [];
  let inPlan = 0;
  for await (const page of keys) {
    const mine = page.filter((k) => k.plan === input.plan);
    inPlan += mine.length;
    const perKey = await Promise.all(mine.map((k) => store.days(k.id, days)));
    mine.forEach((k, i) => {
      const s = simulateKey(k, new Map(days.map((d, j) => [d, perKey[i]![j]!])), input);
      if (s.pointsRefusedAtLeast > 0 || s.minute?.override || s.day?.override || s.month?.override) listed.push(s);
    });
  }
  listed.sort((x, y) => y.pointsRefusedAtLeast - x.pointsRefusedAtLeast || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  const affected = listed.filter((s) => s.pointsRefusedAtLeast > 0);
  return {
    keys: listed,
    totals: {
      keysInPlan: inPlan,
      keysAffected: affected.length,
      hours: affected.reduce((n, s) => n + s.hoursAffected, 0),
      pointsRefusedAtLeast: affected.reduce((n, s) => n + s.pointsRefusedAtLeast, 0),
    },
  };
}
