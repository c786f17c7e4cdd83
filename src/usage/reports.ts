// Reading the usage ledger and the deprecated-route report: a key's usage by hour or day, every key's totals over a
// period (sortable, paged), and each deprecated route with the keys still calling it. The admin API and the
// `tollgate usage` / `tollgate routes deprecated` commands both answer from here.
import type { RouteConfig } from '../config/schema.js';
import type { KeyAdmin } from '../keys/admin.js';
import type { KeyRecord } from '../keys/types.js';
import { deprecatedRouteName } from '../routes/policy.js';
import { DAY_MS, HOUR_MS, dayOf, type DayCounts, type UsageStore } from './store.js';

export interface UsageCounts {
  admitted: number;
  /** Refused by the minute or day window (429 rate_limit_exceeded). */
  rateLimited: number;
  /** Refused by a ban (429 api_key_banned). */
  banned: number;
  /** Admitted, then given no response by the upstream (the gateway answered 502 or 504): given back, not billed. */
  upstreamFailed: number;
}

export interface UsageBucket extends UsageCounts {
  /** The bucket's first instant (ISO-8601, UTC). */
  start: string;
}

export type Granularity = 'hour' | 'day';

export interface KeyTotals extends UsageCounts {
  id: string;
  name?: string;
  plan: string;
}

export type TotalsSort = 'admitted' | 'rateLimited' | 'banned' | 'upstreamFailed' | 'id';

export interface DeprecatedRouteReport {
  method: string;
  path: string;
  deprecation: string;
  sunset?: string;
  link?: string;
  afterSunset: 'gone' | 'pass';
  /** Keys that called it in the period, most calls first. */
  keys: Array<{ id: string; calls: number; lastSeen: string | null }>;
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

const zero = (): UsageCounts => ({ admitted: 0, rateLimited: 0, banned: 0, upstreamFailed: 0 });

function add(to: UsageCounts, day: DayCounts, hour: number): void {
  to.admitted += day[`a${hour}`] ?? 0;
  to.rateLimited += day[`r${hour}`] ?? 0;
  to.banned += day[`b${hour}`] ?? 0;
  to.upstreamFailed += day[`f${hour}`] ?? 0;
}

function addCounts(to: UsageCounts, from: UsageCounts): void {
  to.admitted += from.admitted;
  to.rateLimited += from.rateLimited;
  to.banned += from.banned;
  to.upstreamFailed += from.upstreamFailed;
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
   * day of the period, like totals().
   */
  async summary(fromMs: number, toMs: number, granularity: Granularity): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }> {
    const sum = bucketize(new Map(), fromMs, toMs, granularity);
    for await (const page of this.keyPages()) {
      for (const u of await Promise.all(page.map((k) => this.keyUsage(k.id, fromMs, toMs, granularity)))) {
        u.buckets.forEach((b, i) => addCounts(sum.buckets[i]!, b));
        addCounts(sum.totals, u.totals);
      }
    }
    return sum;
  }

  /**
   * Every key's totals in [fromMs, toMs) (whole hours), sorted, one page at a time (`offset`, `limit`). Reads each
   * key's ledger for every day of the period: a cost in proportion to keys x days, for billing runs, not for the
   * request path.
   */
  async totals(
    fromMs: number,
    toMs: number,
    q: { sort: TotalsSort; order: 'asc' | 'desc'; offset: number; limit: number },
  ): Promise<{ keys: KeyTotals[]; total: number }> {
    const all: KeyTotals[] = [];
    for await (const page of this.keyPages()) {
      all.push(
        ...(await Promise.all(
          page.map(async (k) => ({
            id: k.id,
            ...(k.name !== undefined ? { name: k.name } : {}),
            plan: k.plan,
            ...(await this.keyUsage(k.id, fromMs, toMs, 'hour')).totals,
          })),
        )),
      );
    }
    const dir = q.order === 'asc' ? 1 : -1;
    const byId = (x: KeyTotals, y: KeyTotals): number => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0);
    // Ties in a count go by id, ascending, whatever the order: pages stay stable.
    all.sort((x, y) => (q.sort === 'id' ? dir * byId(x, y) : dir * (x[q.sort] - y[q.sort]) || byId(x, y)));
    return { keys: all.slice(q.offset, q.offset + q.limit), total: all.length };
  }

  /** Every key, a page (of the key store's, in id order) at a time. */
  private async *keyPages(): AsyncGenerator<KeyRecord[]> {
    let after: string | undefined;
    for (;;) {
      const page = await this.keys.page({ limit: 1000, ...(after !== undefined ? { after } : {}) });
      yield page.keys;
      if (page.next === undefined) return;
      after = page.next;
    }
  }

  /** Every configured route with a deprecation, and the keys that called it in [fromMs, toMs) (whole UTC days). */
  async deprecatedRoutes(fromMs: number, toMs: number): Promise<DeprecatedRouteReport[]> {
    const days = daysOf(fromMs, toMs);
    return Promise.all(
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
  }
}
