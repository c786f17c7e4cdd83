// Reading the usage ledger and the deprecated-route report: a key's usage by hour or day, every key's totals over a
// period (sortable, paged), and each deprecated route with the keys still calling it. The admin API and the
// `tollgate usage` / `tollgate routes deprecated` commands both answer from here.
import type { RouteConfig } from '../config/schema.js';
import { incomplete, KeyAdminError, type KeyAdmin } from '../keys/admin.js';
import type { KeyRecord } from '../keys/types.js';
import { deprecatedRouteName } from '../routes/policy.js';
import { DAY_MS, HOUR_MS, dayOf, type DayCounts, type UsageStore } from './store.js';

export interface UsageCounts {
  admitted: number;
  /** Refused by a window: the plan's minute or day, or a route's (429 rate_limit_exceeded). */
  rateLimited: number;
  /** Refused by a ban (429 api_key_banned). */
  banned: number;
  /** Admitted, then given no response by the upstream (the gateway answered 502 or 504): given back, not billed. */
  upstreamFailed: number;
  /**
   * Admitted (and counted in admitted) though a window in shadow mode had no room for it: what enforcing that window
   * would have refused.
   */
  shadowRefused: number;
}

export interface UsageBucket extends UsageCounts {
  /** The bucket's first instant (ISO-8601, UTC). */
  start: string;
}

export type Granularity = 'hour' | 'day';

export interface KeyTotals extends UsageCounts {
  id: string;
  name?: string;
  metadata?: Record<string, string>;
  plan: string;
}

/** A key as a report names it: its id, and its name and metadata where it has them (so a report needs no join). */
export interface NamedKey {
  id: string;
  name?: string;
  metadata?: Record<string, string>;
}

export type TotalsSort = 'admitted' | 'rateLimited' | 'banned' | 'upstreamFailed' | 'shadowRefused' | 'id';

export interface DeprecatedRouteReport {
  method: string;
  path: string;
  deprecation: string;
  sunset?: string;
  link?: string;
  afterSunset: 'gone' | 'pass';
  /** Keys that called it in the period, most calls first. */
  keys: Array<NamedKey & { calls: number; lastSeen: string | null }>;
}

/**
 * A report's period from what was asked (either end may be left out): to defaults to now, from to `defaultMs` before
 * it (no more than is kept); from must come before to, and the whole span within what the ledger keeps
 * (retentionDays + 1 days). The API and the CLI word the problems their own way.
 */
export function resolvePeriod(
  asked: { fromMs?: number | undefined; toMs?: number | undefined },
  defaultMs: number,
  retentionDays: number,
  nowMs: number,
): { fromMs: number; toMs: number } | { problem: 'order' | 'span'; maxDays: number } {
  const maxDays = retentionDays + 1;
  const toMs = asked.toMs ?? nowMs;
  const fromMs = asked.fromMs ?? toMs - Math.min(defaultMs, maxDays * DAY_MS);
  if (fromMs >= toMs) return { problem: 'order', maxDays };
  if (toMs - fromMs > maxDays * DAY_MS) return { problem: 'span', maxDays };
  return { fromMs, toMs };
}

const zero = (): UsageCounts => ({ admitted: 0, rateLimited: 0, banned: 0, upstreamFailed: 0, shadowRefused: 0 });

function add(to: UsageCounts, day: DayCounts, hour: number): void {
  to.admitted += day[`a${hour}`] ?? 0;
  to.rateLimited += day[`r${hour}`] ?? 0;
  to.banned += day[`b${hour}`] ?? 0;
  to.upstreamFailed += day[`f${hour}`] ?? 0;
  to.shadowRefused += day[`s${hour}`] ?? 0;
}

function addCounts(to: UsageCounts, from: UsageCounts): void {
  to.admitted += from.admitted;
  to.rateLimited += from.rateLimited;
  to.banned += from.banned;
  to.upstreamFailed += from.upstreamFailed;
  to.shadowRefused += from.shadowRefused;
}

/** Where the first bucket of a period starts: its first whole hour or UTC day. */
function bucketStart(fromMs: number, granularity: Granularity): number {
  const step = granularity === 'hour' ? HOUR_MS : DAY_MS;
  return Math.floor(fromMs / step) * step;
}

/** A period's buckets and totals from a key's counts by day (a day missing from `byDay` counts as empty). */
function bucketize(
  byDay: ReadonlyMap<number, DayCounts>,
  fromMs: number,
  toMs: number,
  granularity: Granularity,
): { buckets: UsageBucket[]; totals: UsageCounts } {
  const step = granularity === 'hour' ? HOUR_MS : DAY_MS;
  const buckets: UsageBucket[] = [];
  const totals = zero();
  for (let start = bucketStart(fromMs, granularity); start < toMs; start += step) {
    const b: UsageBucket = { start: new Date(start).toISOString(), ...zero() };
    for (let h = start; h < start + step; h += HOUR_MS) add(b, byDay.get(dayOf(h)) ?? {}, Math.floor((h % DAY_MS) / HOUR_MS));
    addCounts(totals, b);
    buckets.push(b);
  }
  return { buckets, totals };
}

/** A period's totals from a key's counts by day, whole hours (as bucketize's by hour), without making its buckets. */
function periodTotals(byDay: ReadonlyMap<number, DayCounts>, fromMs: number, toMs: number): UsageCounts {
  const totals = zero();
  const first = bucketStart(fromMs, 'hour');
  for (const [day, counts] of byDay) {
    const start = day * DAY_MS;
    if (start >= first && start + DAY_MS <= toMs) {
      // The whole day is in the period: every field counts.
      for (const [field, n] of Object.entries(counts)) {
        const kind = field[0];
        if (kind === 'a') totals.admitted += n;
        else if (kind === 'r') totals.rateLimited += n;
        else if (kind === 'b') totals.banned += n;
        else if (kind === 'f') totals.upstreamFailed += n;
        else if (kind === 's') totals.shadowRefused += n;
      }
      continue;
    }
    for (let h = Math.max(start, first); h < Math.min(start + DAY_MS, toMs); h += HOUR_MS) add(totals, counts, Math.floor((h % DAY_MS) / HOUR_MS));
  }
  return totals;
}

/** Adds one day's counts into another's, field by field. */
function addDay(to: DayCounts, from: DayCounts): void {
  for (const [field, n] of Object.entries(from)) to[field] = (to[field] ?? 0) + n;
}

/** The whole days a period touches, in order. */
function daysOf(fromMs: number, toMs: number): number[] {
  const out: number[] = [];
  for (let d = dayOf(fromMs); d <= dayOf(toMs - 1); d++) out.push(d);
  return out;
}

export class UsageReports {
  constructor(
    private readonly store: UsageStore,
    private readonly keys: KeyAdmin,
    private readonly routes: () => readonly RouteConfig[],
  ) {}

  /**
   * A key's counts in [fromMs, toMs), by hour or by UTC day. Hours are whole: the period is widened to the hours it
   * touches. Buckets without any request are included (zeros), so a chart has every point.
   */
  async keyUsage(id: string, fromMs: number, toMs: number, granularity: Granularity): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }> {
    const days = daysOf(bucketStart(fromMs, granularity), toMs);
    const counts = await this.store.days(id, days);
    return bucketize(new Map(days.map((d, i) => [d, counts[i]!])), fromMs, toMs, granularity);
  }

  /**
   * Every key's counts added up, by hour or day (the dashboard's overview charts): reads every key's ledger for every
   * day of the period, in one pass over the keys, then makes the buckets once. Complete or failing (KeyAdminError
   * 'incomplete'). The admin API answers it from a cache (overview.ts): it is not cheap.
   */
  async summary(fromMs: number, toMs: number, granularity: Granularity): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }> {
    const days = daysOf(bucketStart(fromMs, granularity), toMs);
    const sum = new Map<number, DayCounts>(days.map((d) => [d, {}]));
    const what = 'the usage summary';
    for await (const page of this.keys.all(what)) {
      const perKey = await Promise.all(page.map((k) => this.store.days(k.id, days))).catch((err: unknown) => {
        throw incomplete(what, err);
      });
      for (const counts of perKey) counts.forEach((c, i) => addDay(sum.get(days[i]!)!, c));
    }
    return bucketize(sum, fromMs, toMs, granularity);
  }

  /**
   * Every key's totals in [fromMs, toMs) (whole hours), sorted, one page at a time (`offset`, `limit`). Reads each
   * key's ledger for every day of the period, in one pass over the keys with bounded reads in flight (the store's):
   * a cost in proportion to keys x days, for billing runs, not for the request path. Complete or failing: a read
   * that fails fails the report (KeyAdminError 'incomplete'), never a report with keys left out.
   */
  async totals(
    fromMs: number,
    toMs: number,
    q: { sort: TotalsSort; order: 'asc' | 'desc'; offset: number; limit: number },
  ): Promise<{ keys: KeyTotals[]; total: number }> {
    const all: KeyTotals[] = [];
    const days = daysOf(bucketStart(fromMs, 'hour'), toMs);
    const what = 'the usage report';
    for await (const page of this.keys.all(what)) {
      const perKey = await Promise.all(page.map((k) => this.store.days(k.id, days))).catch((err: unknown) => {
        throw incomplete(what, err);
      });
      page.forEach((k, i) => {
        const byDay = new Map(days.map((d, j) => [d, perKey[i]![j]!]));
        all.push({ id: k.id, ...namesOf(k), plan: k.plan, ...periodTotals(byDay, fromMs, toMs) });
      });
    }
    const dir = q.order === 'asc' ? 1 : -1;
    const byId = (x: KeyTotals, y: KeyTotals): number => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0);
    // Ties in a count go by id, ascending, whatever the order: pages stay stable.
    all.sort((x, y) => (q.sort === 'id' ? dir * byId(x, y) : dir * (x[q.sort] - y[q.sort]) || byId(x, y)));
    return { keys: all.slice(q.offset, q.offset + q.limit), total: all.length };
  }

  /** Every configured route with a deprecation, and the keys that called it in [fromMs, toMs) (whole UTC days). */
  async deprecatedRoutes(fromMs: number, toMs: number): Promise<DeprecatedRouteReport[]> {
    const days = daysOf(fromMs, toMs);
    const routes = await Promise.all(
      this.routes()
        .filter((r) => r.deprecation !== undefined)
        .map(async (r) => {
          const callers = await this.store.deprecated(deprecatedRouteName(r), days);
          return {
            method: r.method,
            path: r.path,
            deprecation: r.deprecation!,
            ...(r.sunset !== undefined ? { sunset: r.sunset } : {}),
            ...(r.link !== undefined ? { link: r.link } : {}),
            afterSunset: r.afterSunset,
            keys: [...callers]
              .map(([id, c]) => ({ id, calls: c.calls, lastSeen: c.lastMs > 0 ? new Date(c.lastMs).toISOString() : null }))
              .sort((a, b) => b.calls - a.calls || (a.id < b.id ? -1 : 1)),
          };
        }),
    );
    const named = await this.namedKeys(new Set(routes.flatMap((r) => r.keys.map((k) => k.id))));
    for (const r of routes) r.keys = r.keys.map((k) => ({ ...named.get(k.id), ...k }));
    return routes;
  }

  /**
   * The name and metadata of each key id, read a batch at a time. A key since deleted, or whose record cannot be
   * read, is named by its id alone; any other read failure fails the report (it is complete or it fails).
   */
  private async namedKeys(ids: ReadonlySet<string>): Promise<Map<string, NamedKey>> {
    const all = [...ids];
    const out = new Map<string, NamedKey>();
    for (let i = 0; i < all.length; i += NAME_READ_BATCH) {
      const batch = all.slice(i, i + NAME_READ_BATCH);
      const records = await Promise.all(
        batch.map((id) =>
          this.keys.get(id).catch((err: unknown) => (err instanceof KeyAdminError && err.code === 'invalid_record' ? undefined : Promise.reject(err))),
        ),
      );
      records.forEach((k, j) => out.set(batch[j]!, { id: batch[j]!, ...(k ? namesOf(k) : {}) }));
    }
    return out;
  }
}

/** Key records read at once for a report's names: the key store's own page batch. */
const NAME_READ_BATCH = 100;

function namesOf(k: KeyRecord): Omit<NamedKey, 'id'> {
  return { ...(k.name !== undefined ? { name: k.name } : {}), ...(k.metadata !== undefined ? { metadata: k.metadata } : {}) };
}
