// The what-if of a plan's limits from real usage: which keys of the plan new perMinute/perDay/perMonth values would have
// refused over a past period, in which hours, and at least how many points (a request takes its route's cost from a
// window: 1 by default). Read from the usage ledger only (per key and hour: admitted, upstreamFailed, peakMinute), so
// every figure is a lower bound that holds whatever happened inside an hour; docs/keys-and-limits.md ("What if")
// explains each bound and why it never overstates. The answer is bounded: totals, then the keys most refused, each
// with its most refused hours (TOP_HOURS), the rest of the keys paged (whatif-pages.ts).
// Grouped by key, a key's hours are those it was counted under no consumer (its own windows applied); the hours a key
// spent in a consumer were its consumer's pool's, and grouped by consumer each pool of the plan is simulated from
// what its keys were counted under it: per hour the requests of all of them, and the highest minute count any check
// reported there (the pool's window, which the plan's perMinute applies to).
import type { KeyRecord } from '../keys/types.js';
import { monthPeriod } from '../limits/months.js';
import { mergeDays, type DayCounts, type UsageStore } from './store.js';
import { DAY_MS, HOUR_MS, dayOf } from '../util/time.js';

/** What the what-if reads of a consumer: its plan in force and its own limits (absent: the plan's apply). */
export interface ConsumerLimits {
  plan: string;
  perMinute?: number | undefined;
  perDay?: number | undefined;
  perMonth?: number | undefined;
  /** Its pool's monthly windows run from this day of the month (absent: calendar months in UTC). */
  billingDay?: number | undefined;
}

/**
 * The consumers' limits as the consumer store has them now, for the ids asked (an id it does not know is left out:
 * its keys' usage is then in no pool of the plan). Declared here so the what-if needs nothing of the consumers room.
 */
export type ConsumerPlans = (ids: readonly string[]) => Promise<Map<string, ConsumerLimits>>;

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
  /** 'consumer': the plan's consumers' pools instead of its keys. */
  groupBy?: 'key' | 'consumer' | undefined;
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

/** A key's or a pool's answer: each window's, the points refused at least, the hours refused in. */
export interface SimulatedSeries {
  /** null: the window was not simulated. */
  minute: WindowOutcome | null;
  day: WindowOutcome | null;
  /** Only when perMonth is simulated. */
  month?: WindowOutcome;
  /** Points: at least this many refused under the new values (the largest of the windows'). */
  pointsRefusedAtLeast: number;
  /** How many hours the new minute limit would have refused in (all of them, listed or not). */
  hoursAffected: number;
  /** The TOP_HOURS of them with the most points refused, most first (oldest first on a tie). */
  hours: SimulatedHour[];
}

export interface SimulatedKey extends SimulatedSeries {
  id: string;
  name?: string;
  metadata?: Record<string, string>;
  /** The consumer the key belongs to now (null: none). Its hours are those it was counted under no consumer. */
  consumer: string | null;
}

/** A consumer's pool: what its keys were counted under it, simulated as one set of windows. */
export interface SimulatedConsumer extends SimulatedSeries {
  consumer: string;
  /** Keys counted under it in the period. */
  keys: number;
}

export interface SimulationTotals {
  keysInPlan: number;
  keysAffected: number;
  /** Hours refused in, over every key. */
  hours: number;
  pointsRefusedAtLeast: number;
}

/** The totals grouped by consumer: consumers whose plan in force is the plan, and those affected; over every pool. */
export interface PoolTotals {
  consumersInPlan: number;
  consumersAffected: number;
  hours: number;
  pointsRefusedAtLeast: number;
}

export interface Simulation {
  /** Keys affected (pointsRefusedAtLeast > 0), most refused first, then keys an override kept out, by id. Grouped by consumer: none. */
  keys: SimulatedKey[];
  /** Grouped by consumer: the pools, in the same order as keys would be. */
  consumers?: SimulatedConsumer[];
  totals: SimulationTotals | PoolTotals;
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

/** Per hour of the period (from its first whole hour): the requests admitted and the peakMinute, from ledger days. */
export function hourlyOf(byDay: ReadonlyMap<number, DayCounts>, input: Pick<SimulateInput, 'fromMs' | 'toMs'>): { demand: number[]; peaks: number[] } {
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
  return { demand, peaks };
}

/**
 * The what-if for one set of windows (a key's, or a consumer's pool) from its hourly requests and peakMinute over the
 * period (hour 0: the period's first whole hour); `own`: its own values, which the plan's new ones do not replace.
 */
export function simulateSeries(
  hourly: { demand: readonly number[]; peaks: readonly number[] },
  own: { perMinute?: number | undefined; perDay?: number | undefined; perMonth?: number | undefined; billingDay?: number | undefined },
  input: SimulateInput,
): SimulatedSeries {
  const first = Math.floor(input.fromMs / HOUR_MS);
  const { demand, peaks } = hourly;
  let minute: WindowOutcome | null = null;
  const hours: SimulatedHour[] = [];
  if (input.perMinute !== undefined) {
    if (own.perMinute !== undefined) minute = { limit: own.perMinute, override: true, pointsRefusedAtLeast: 0 };
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
    if (own.perDay !== undefined) day = { limit: own.perDay, override: true, pointsRefusedAtLeast: 0 };
    else {
      // Demand in requests against a limit in points: each request takes at least 1 point, so a window of D points
      // admits at most D requests, and each request refused is at least 1 point refused: a lower bound in both units.
      const total = demand.reduce((s, v) => s + v, 0);
      day = { limit: input.perDay, override: false, pointsRefusedAtLeast: Math.max(0, total - dayAdmittedAtMost(demand, input.perDay)) };
    }
  }
  let month: WindowOutcome | undefined;
  if (input.perMonth !== undefined) {
    if (own.perMonth !== undefined) month = { limit: own.perMonth, override: true, pointsRefusedAtLeast: 0 };
    // Requests against points, as the day window's: a lower bound in both units.
    // A consumer's pool counts its months from its billing day, as the limit check does.
    else month = { limit: input.perMonth, override: false, pointsRefusedAtLeast: monthRefusedAtLeast(demand, first, input.perMonth, own.billingDay) };
  }
  return {
    minute,
    day,
    ...(month ? { month } : {}),
    // One request may be refused by several windows: the bounds are not added.
    pointsRefusedAtLeast: Math.max(minute?.pointsRefusedAtLeast ?? 0, day?.pointsRefusedAtLeast ?? 0, month?.pointsRefusedAtLeast ?? 0),
    hoursAffected: hours.length,
    hours: topHours(hours),
  };
}

/** The what-if for one key from its ledger days (`byDay`: those it was counted under no consumer), for the period's hours. */
export function simulateKey(k: KeyRecord, byDay: ReadonlyMap<number, DayCounts>, input: SimulateInput): SimulatedKey {
  const consumer = (k as { consumer?: string }).consumer;
  return {
    id: k.id,
    ...(k.name !== undefined ? { name: k.name } : {}),
    ...(k.metadata !== undefined ? { metadata: k.metadata } : {}),
    consumer: consumer ? consumer : null,
    ...simulateSeries(hourlyOf(byDay, input), k, input),
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
 * the admin connection, reads in flight bounded), each key's hours those it was counted under no consumer. Grouped by
 * consumer: every key's days under each consumer added up per consumer, and the consumers whose plan in force is the
 * plan (`consumers`) simulated as pools. Complete or failing, as every report.
 */
export async function simulate(store: UsageStore, keys: AsyncIterable<KeyRecord[]>, input: SimulateInput, consumers?: ConsumerPlans): Promise<Simulation> {
  const days: number[] = [];
  for (let d = dayOf(Math.floor(input.fromMs / HOUR_MS) * HOUR_MS); d <= dayOf(input.toMs - 1); d++) days.push(d);
  if (input.groupBy === 'consumer') return simulatePools(store, keys, input, days, consumers);
  const listed: SimulatedKey[] = [];
  let inPlan = 0;
  for await (const page of keys) {
    const mine = page.filter((k) => k.plan === input.plan);
    inPlan += mine.length;
    const perKey = await Promise.all(mine.map((k) => store.daysByConsumer(k.id, days)));
    mine.forEach((k, i) => {
      const own = perKey[i]!.get('') ?? [];
      const s = simulateKey(k, new Map(days.map((d, j) => [d, own[j] ?? {}])), input);
      if (s.pointsRefusedAtLeast > 0 || s.minute?.override || s.day?.override || s.month?.override) listed.push(s);
    });
  }
  const byId = (x: SimulatedKey, y: SimulatedKey): number => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0);
  return { keys: ranked(listed, byId), totals: totalsOf(listed, inPlan) };
}

/** Most refused first, then the rest (an override kept them out) by name. */
function ranked<T extends SimulatedSeries>(listed: T[], byName: (x: T, y: T) => number): T[] {
  return listed.sort((x, y) => y.pointsRefusedAtLeast - x.pointsRefusedAtLeast || byName(x, y));
}

function totalsOf(listed: readonly SimulatedSeries[], inPlan: number): SimulationTotals {
  const affected = listed.filter((s) => s.pointsRefusedAtLeast > 0);
  return {
    keysInPlan: inPlan,
    keysAffected: affected.length,
    hours: affected.reduce((n, s) => n + s.hoursAffected, 0),
    pointsRefusedAtLeast: affected.reduce((n, s) => n + s.pointsRefusedAtLeast, 0),
  };
}

/** The what-if grouped by consumer: see simulate(). */
async function simulatePools(
  store: UsageStore,
  keys: AsyncIterable<KeyRecord[]>,
  input: SimulateInput,
  days: readonly number[],
  consumers: ConsumerPlans | undefined,
): Promise<Simulation> {
  // Per consumer: its keys' days under it, added up (requests summed, peakMinute the largest), and how many keys.
  const pools = new Map<string, { days: DayCounts[]; keys: number }>();
  for await (const page of keys) {
    const perKey = await Promise.all(page.map((k) => store.daysByConsumer(k.id, days)));
    for (const parts of perKey)
      for (const [c, list] of parts) {
        if (c === '') continue;
        const pool = pools.get(c);
        if (pool) pool.days = mergeDays([pool.days, list], days.length);
        else pools.set(c, { days: list.map((d) => ({ ...d })), keys: 0 });
        pools.get(c)!.keys++;
      }
  }
  const limits = consumers && pools.size > 0 ? await consumers([...pools.keys()]) : new Map<string, ConsumerLimits>();
  const listed: SimulatedConsumer[] = [];
  let inPlan = 0;
  for (const [c, pool] of pools) {
    const own = limits.get(c);
    if (!own || own.plan !== input.plan) continue;
    inPlan++;
    const s = simulateSeries(hourlyOf(new Map(days.map((d, j) => [d, pool.days[j] ?? {}])), input), own, input);
    if (s.pointsRefusedAtLeast > 0 || s.minute?.override || s.day?.override || s.month?.override) listed.push({ consumer: c, keys: pool.keys, ...s });
  }
  const byName = (x: SimulatedConsumer, y: SimulatedConsumer): number => (x.consumer < y.consumer ? -1 : x.consumer > y.consumer ? 1 : 0);
  const { keysInPlan: consumersInPlan, keysAffected: consumersAffected, ...rest } = totalsOf(listed, inPlan);
  return { keys: [], consumers: ranked(listed, byName), totals: { consumersInPlan, consumersAffected, ...rest } };
}
