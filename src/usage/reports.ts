// Reading the usage ledger and the deprecated-route report: a key's usage by hour or day, every key's totals over a
// period (sortable, paged), and each deprecated route with the keys still calling it. The admin API and the
// `tollgate usage` / `tollgate routes deprecated` commands both answer from here.
import type { RouteConfig } from '../config/schema.js';
import type { KeyAdmin } from '../keys/admin.js';
import { deprecatedRouteName } from '../routes/policy.js';
import { DAY_MS, HOUR_MS, dayOf, type DayCounts, type UsageStore } from './store.js';

export interface UsageCounts {
  admitted: number;
  /** Refused by the minute or day window (429 rate_limit_exceeded). */
  rateLimited: number;
  /** Refused by a ban (429 api_key_banned). */
  banned: number;
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

export type TotalsSort = 'admitted' | 'rateLimited' | 'banned' | 'id';

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

const zero = (): UsageCounts => ({ admitted: 0, rateLimited: 0, banned: 0 });

function add(to: UsageCounts, day: DayCounts, hour: number): void {
  to.admitted += day[`a${hour}`] ?? 0;
  to.rateLimited += day[`r${hour}`] ?? 0;
  to.banned += day[`b${hour}`] ?? 0;
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
    const step = granularity === 'hour' ? HOUR_MS : DAY_MS;
    const first = Math.floor(fromMs / step) * step;
    const days = daysOf(first, toMs);
    const counts = await this.store.days(id, days);
    const byDay = new Map(days.map((d, i) => [d, counts[i]!]));
    const buckets: UsageBucket[] = [];
    const totals = zero();
    for (let start = first; start < toMs; start += step) {
      const b: UsageBucket = { start: new Date(start).toISOString(), ...zero() };
      for (let h = start; h < start + step; h += HOUR_MS) add(b, byDay.get(dayOf(h)) ?? {}, Math.floor((h % DAY_MS) / HOUR_MS));
      totals.admitted += b.admitted;
      totals.rateLimited += b.rateLimited;
      totals.banned += b.banned;
      buckets.push(b);
    }
    return { buckets, totals };
  }

  /**
   * Every key's counts added up, by hour or day (the dashboard's overview charts): reads every key's ledger for every
   * day of the period, like totals().
   */
  async summary(fromMs: number, toMs: number, granularity: Granularity): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }> {
    let sum: { buckets: UsageBucket[]; totals: UsageCounts } | undefined;
    let after: string | undefined;
    for (;;) {
      const page = await this.keys.page({ limit: 1000, ...(after !== undefined ? { after } : {}) });
      const each = await Promise.all(page.keys.map((k) => this.keyUsage(k.id, fromMs, toMs, granularity)));
      for (const u of each) {
        if (!sum) sum = u;
        else {
          u.buckets.forEach((b, i) => {
            const s = sum!.buckets[i]!;
            s.admitted += b.admitted;
            s.rateLimited += b.rateLimited;
            s.banned += b.banned;
          });
          sum.totals.admitted += u.totals.admitted;
          sum.totals.rateLimited += u.totals.rateLimited;
          sum.totals.banned += u.totals.banned;
        }
      }
      if (page.next === undefined) break;
      after = page.next;
    }
    return sum ?? (await this.keyUsage('', fromMs, toMs, granularity));
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
    const first = Math.floor(fromMs / HOUR_MS) * HOUR_MS;
    const days = daysOf(first, toMs);
    const all: KeyTotals[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.keys.page({ limit: 1000, ...(after !== undefined ? { after } : {}) });
      const rows = await Promise.all(
        page.keys.map(async (k) => {
          const counts = await this.store.days(k.id, days);
          const t: KeyTotals = { id: k.id, ...(k.name !== undefined ? { name: k.name } : {}), plan: k.plan, ...zero() };
          days.forEach((d, i) => {
            for (let h = 0; h < 24; h++) {
              const at = d * DAY_MS + h * HOUR_MS;
              if (at >= first && at < toMs) add(t, counts[i]!, h);
            }
          });
          return t;
        }),
      );
      all.push(...rows);
      if (page.next === undefined) break;
      after = page.next;
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
