// Reading the usage ledger and the deprecated-route report: a key's usage by hour or day, every key's totals over a
// period (sortable, paged), each deprecated route with the keys still calling it, and each validated operation with
// the keys sending it requests that do not match its description (the invalid-request report). The admin API and the
// `tollgate usage` / `tollgate routes deprecated` commands both answer from here.
// Each report groups by key (a row per key, with the consumer it belongs to now) or by consumer (a row per consumer,
// adding up what its keys were counted while they were in it, as the ledger recorded it at the time: a key moved to
// another consumer leaves its earlier days under the earlier one; usage counted under no consumer is one row of its
// own, consumer null).
import type { RouteConfig } from '../config/schema.js';
import { incomplete, KeyAdminError } from '../keys/admin-errors.js';
import type { KeyRecords } from '../keys/records.js';
import type { KeyRecord } from '../keys/types.js';
import { deprecatedRouteName } from '../routing/routes.js';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { simulate, type ConsumerPlans, type SimulateInput, type Simulation } from './whatif.js';
import { mergeDays, spanOf, type DayCounts, type LedgerSpan, type LedgerSums, type SumBy, type UsageCounts, type UsageStore } from './store.js';
import { DAY_MS, HOUR_MS, dayOf } from '../util/time.js';

export type { UsageCounts } from './store.js';

export interface UsageBucket extends UsageCounts {
  /** The bucket's first instant (ISO-8601, UTC). */
  start: string;
  /** The highest count any check reported of the key's minute window in the bucket's hours (0: none recorded). */
  peakMinute: number;
}

export type Granularity = 'hour' | 'day';

/** How a report's rows are made: one per key (the default), or one per consumer the usage was counted under. */
export type GroupBy = 'key' | 'consumer';

export interface KeyTotals extends UsageCounts {
  id: string;
  name?: string;
  metadata?: Record<string, string>;
  plan: string;
  /** The consumer the key belongs to now (null: none); its figures are every count of the key, under any consumer. */
  consumer: string | null;
}

/** A consumer's figures: what its keys were counted while they were in it. */
export interface ConsumerTotals extends UsageCounts {
  /** null: the usage counted under no consumer (keys without one, and keys before they joined one), as one row. */
  consumer: string | null;
  /** Keys with a count under it in the period, or in it now (null row: keys without a consumer now, or with counts under none). */
  keys: number;
}

/** One consumer's (or no consumer's: null) share of a key's usage over time. */
export interface ConsumerSeries {
  consumer: string | null;
  totals: UsageCounts;
  buckets: UsageBucket[];
}

/**
 * The consumer a key record names, where it names one: declared here (a record's optional `consumer`) so that reports
 * read it from whatever record the key store gives.
 */
export type WithConsumer = { consumer?: string | undefined };

/** The consumer of a key record now, or null. */
export function consumerOf(k: object): string | null {
  const c = (k as WithConsumer).consumer;
  return typeof c === 'string' && c !== '' ? c : null;
}

/** A key as a report names it: its id, and its name and metadata where it has them (so a report needs no join). */
export interface NamedKey {
  id: string;
  name?: string;
  metadata?: Record<string, string>;
  /** The consumer the key belongs to now (null: none, or the key is gone). */
  consumer?: string | null;
}

/** What the deprecated-route report needs of a configured route. */
export type DeprecatableRoute = Pick<RouteConfig, 'method' | 'path' | 'deprecation' | 'deprecated' | 'sunset' | 'link' | 'afterSunset' | 'operationId'>;

/** What the invalid-request report needs of a validated operation (a route made from it: CompiledRoute.validation). */
export interface ValidatedOperation {
  /** Its name in metrics and the report: operationId, else "<METHOD> <path template>". */
  operation: string;
  service: string;
  method: string;
  /** Its route's path pattern. */
  path: string;
  mode: 'shadow' | 'enforce';
}

/**
 * An operation's name in the invalid-request report's Redis keys: its service's name and its own (two services'
 * documents may both have a `listItems`).
 */
export function invalidRequestsName(op: Pick<ValidatedOperation, 'service' | 'operation'>): string {
  return `${op.service} ${op.operation}`;
}

export interface InvalidRequestReport extends ValidatedOperation {
  /** Keys that sent it invalid requests in the period, most first; pointer: where the last one first failed. */
  keys: Array<NamedKey & { calls: number; lastSeen: string | null; pointer: string | null }>;
  /** With groupBy consumer: the consumers they were counted under instead (null: none), most first. */
  consumers?: Array<{ consumer: string | null; keys: number; calls: number; lastSeen: string | null; pointer: string | null }>;
}

export type TotalsSort = 'admitted' | 'rateLimited' | 'banned' | 'upstreamFailed' | 'shadowRefused' | 'id';

export interface DeprecatedRouteReport {
  method: string;
  path: string;
  /** The OpenAPI operation the route was made from, when it was. */
  operationId?: string;
  /** Absent for a route deprecated without a date (an OpenAPI operation's `deprecated: true`). */
  deprecation?: string;
  sunset?: string;
  link?: string;
  afterSunset: 'gone' | 'pass';
  /** Keys that called it in the period, most calls first. */
  keys: Array<NamedKey & { calls: number; lastSeen: string | null }>;
  /** With groupBy consumer: the consumers the calls were counted under instead (null: none), most calls first. */
  consumers?: Array<{ consumer: string | null; keys: number; calls: number; lastSeen: string | null }>;
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

const zero = (): UsageCounts => ({ admitted: 0, rateLimited: 0, banned: 0, upstreamFailed: 0, shadowRefused: 0, wouldBan: 0, validationFailed: 0 });

function add(to: UsageCounts, day: DayCounts, hour: number): void {
  to.admitted += day[`a${hour}`] ?? 0;
  to.rateLimited += day[`r${hour}`] ?? 0;
  to.banned += day[`b${hour}`] ?? 0;
  to.upstreamFailed += day[`f${hour}`] ?? 0;
  to.shadowRefused += day[`s${hour}`] ?? 0;
  to.wouldBan += day[`w${hour}`] ?? 0;
  to.validationFailed += day[`v${hour}`] ?? 0;
}

function addCounts(to: UsageCounts, from: UsageCounts): void {
  to.admitted += from.admitted;
  to.rateLimited += from.rateLimited;
  to.banned += from.banned;
  to.upstreamFailed += from.upstreamFailed;
  to.shadowRefused += from.shadowRefused;
  to.wouldBan += from.wouldBan;
  to.validationFailed += from.validationFailed;
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
    const b: UsageBucket = { start: new Date(start).toISOString(), ...zero(), peakMinute: 0 };
    for (let h = start; h < start + step; h += HOUR_MS) {
      const day = byDay.get(dayOf(h)) ?? {};
      const hour = Math.floor((h % DAY_MS) / HOUR_MS);
      add(b, day, hour);
      // A maximum, not a sum: a day's bucket shows its busiest hour's busiest minute.
      b.peakMinute = Math.max(b.peakMinute, day[`m${hour}`] ?? 0);
    }
    addCounts(totals, b);
    buckets.push(b);
  }
  return { buckets, totals };
}

/**
 * A period's buckets from figures summed by day or hour over `span` (sums[i], peak[i]: its i-th day or hour), starting
 * at `first` (the first bucket's instant).
 */
function bucketsFrom(
  sum: readonly UsageCounts[],
  peak: readonly number[],
  span: LedgerSpan,
  first: number,
  toMs: number,
  granularity: Granularity,
): { buckets: UsageBucket[]; totals: UsageCounts } {
  const step = granularity === 'hour' ? HOUR_MS : DAY_MS;
  // The first figure's instant: the span's first day (by day) or its first hour (by hour).
  const origin = span.days[0]! * DAY_MS + (granularity === 'hour' ? span.firstHour * HOUR_MS : 0);
  const buckets: UsageBucket[] = [];
  const totals = zero();
  for (let start = first; start < toMs; start += step) {
    const at = Math.round((start - origin) / step);
    const b: UsageBucket = { start: new Date(start).toISOString(), ...zero(), peakMinute: peak[at] ?? 0 };
    addCounts(b, sum[at] ?? zero());
    addCounts(totals, b);
    buckets.push(b);
  }
  return { buckets, totals };
}

/** Whether any count is above 0 (or below: a refund flushed before its count). */
function figuresOf(c: UsageCounts): boolean {
  return (
    c.admitted !== 0 || c.rateLimited !== 0 || c.banned !== 0 || c.upstreamFailed !== 0 || c.shadowRefused !== 0 || c.wouldBan !== 0 || c.validationFailed !== 0
  );
}

/** Sorts totals rows by a figure (ties by `idOf`, ascending whatever the order, so pages are stable) or by id. */
function sortRows<T extends UsageCounts>(rows: T[], sort: TotalsSort, order: 'asc' | 'desc', idOf: (r: T) => string): T[] {
  const dir = order === 'asc' ? 1 : -1;
  const byId = (x: T, y: T): number => (idOf(x) < idOf(y) ? -1 : idOf(x) > idOf(y) ? 1 : 0);
  return rows.sort((x, y) => (sort === 'id' ? dir * byId(x, y) : dir * (x[sort] - y[sort]) || byId(x, y)));
}

/** The whole days a period touches, in order. */
function daysOf(fromMs: number, toMs: number): number[] {
  const out: number[] = [];
  for (let d = dayOf(fromMs); d <= dayOf(toMs - 1); d++) out.push(d);
  return out;
}

export class UsageReports {
  /** `consumers`: the consumers' plans, for the what-if grouped by consumer (without it, no pool is of any plan). */
  constructor(
    private readonly store: UsageStore,
    private readonly keys: Pick<KeyRecords, 'all' | 'get' | 'ids'>,
    private readonly consumers?: ConsumerPlans,
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
   * keyUsage, and the same split by the consumer each count was made under: one series per consumer the key was
   * counted under in the period (null: under none; always there), by consumer id. Buckets and totals are the sums of
   * the series'.
   */
  async keyUsageByConsumer(
    id: string,
    fromMs: number,
    toMs: number,
    granularity: Granularity,
  ): Promise<{ buckets: UsageBucket[]; totals: UsageCounts; consumers: ConsumerSeries[] }> {
    const days = daysOf(bucketStart(fromMs, granularity), toMs);
    const parts = await this.store.daysByConsumer(id, days);
    const consumers: ConsumerSeries[] = [];
    for (const [c, counts] of parts) {
      const u = bucketize(new Map(days.map((d, i) => [d, counts[i]!])), fromMs, toMs, granularity);
      // A consumer whose days hold counts only outside the period has nothing to show here.
      if (c !== '' && !figuresOf(u.totals)) continue;
      consumers.push({ consumer: c === '' ? null : c, ...u });
    }
    const all = mergeDays(parts.values(), days.length);
    return { ...bucketize(new Map(days.map((d, i) => [d, all[i]!])), fromMs, toMs, granularity), consumers };
  }

  /**
   * A consumer's usage over time: every key ever counted under it, its counts under this consumer alone (what it used
   * while in it), added up by hour or UTC day; `keys`: how many keys have counts under it in the period. Complete or
   * failing.
   */
  async consumerUsage(
    consumer: string,
    fromMs: number,
    toMs: number,
    granularity: Granularity,
  ): Promise<{ buckets: UsageBucket[]; totals: UsageCounts; keys: number }> {
    const what = `the usage of consumer ${consumer}`;
    const first = bucketStart(fromMs, granularity);
    const span = granularity === 'day' ? { days: daysOf(first, toMs), firstHour: 0, endHour: 24 } : spanOf(first, toMs);
    const ids = await this.store.consumerKeys(consumer).catch((err: unknown) => {
      throw incomplete(what, err);
    });
    const sum: UsageCounts[] = [];
    const peak: number[] = [];
    let keys = 0;
    for (let i = 0; i < ids.length; i += NAME_READ_BATCH) {
      const perKey = await Promise.all(ids.slice(i, i + NAME_READ_BATCH).map((id) => this.store.sumsUnder(id, consumer, span, granularity))).catch(
        (err: unknown) => {
          throw incomplete(what, err);
        },
      );
      for (const counts of perKey) {
        if (counts.some((c) => figuresOf(c))) keys++;
        counts.forEach((c, j) => {
          addCounts((sum[j] ??= zero()), c);
          peak[j] = Math.max(peak[j] ?? 0, c.peakMinute);
        });
      }
      await nextTurn();
    }
    return { ...bucketsFrom(sum, peak, span, first, toMs, granularity), keys };
  }

  /**
   * Every key's counts added up, by hour or day (the dashboard's overview charts): each key's ledger over the period
   * added up in Redis by hour or day (one call per key), in one pass over the key ids (no record is read: the sums need
   * none), then the buckets made once. Complete or failing (KeyAdminError 'incomplete'). The admin API answers it from
   * a cache (overview.ts).
   */
  async summary(fromMs: number, toMs: number, granularity: Granularity): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }> {
    const what = 'the usage summary';
    const first = bucketStart(fromMs, granularity);
    // Day buckets are whole days (as bucketize makes them); hour buckets the whole hours of the period.
    const span = granularity === 'day' ? { days: daysOf(first, toMs), firstHour: 0, endHour: 24 } : spanOf(first, toMs);
    const sum: UsageCounts[] = [];
    // peakMinute: the busiest key's busiest minute window in the bucket (a maximum over keys, not a sum).
    const peak: number[] = [];
    for await (const batch of this.keys.ids(what)) {
      const perKey = await Promise.all(batch.map((id) => this.store.sums(id, span, granularity))).catch((err: unknown) => {
        throw incomplete(what, err);
      });
      for (const counts of perKey)
        counts.forEach((c, i) => {
          addCounts((sum[i] ??= zero()), c);
          peak[i] = Math.max(peak[i] ?? 0, c.peakMinute);
        });
      await nextTurn();
    }
    return bucketsFrom(sum, peak, span, first, toMs, granularity);
  }

  /**
   * Every key's totals in [fromMs, toMs) (whole hours), sorted: ties in a count go by id, ascending, whatever the
   * order, so pages cut from it are stable. One pass over the keys, each key's ledger added up in Redis (one call per
   * key, bounded in flight by the store): a cost in proportion to keys, for billing runs, not for the request path.
   * Complete or failing: a read that fails fails the report (KeyAdminError 'incomplete'), never a report with keys
   * left out. The admin API keeps it for its pages (report-pages.ts).
   */
  async report(fromMs: number, toMs: number, sort: TotalsSort, order: 'asc' | 'desc'): Promise<KeyTotals[]> {
    const all: KeyTotals[] = [];
    await this.eachKey('the usage report', spanOf(bucketStart(fromMs, 'hour'), toMs), 'total', (k, [t]) => {
      // A key's totals are counts; its busiest minute is in its hourly view (keyUsage), not in the billing report.
      const { peakMinute: _peak, ...counts } = t!;
      all.push({ id: k.id, ...namesOf(k), plan: k.plan, ...counts, consumer: consumerOf(k) });
    });
    return sortRows(all, sort, order, (r) => r.id);
  }

  /**
   * Every consumer's totals in [fromMs, toMs) (whole hours): each key's ledger split by the consumer it was counted
   * under, added up per consumer; what was counted under no consumer is the row whose consumer is null. A consumer
   * that a key belongs to now is listed even without counts (zeros), as the key report lists every key. Sorted as
   * report() (sort id: by consumer id, the null row first ascending). Complete or failing, one pass over the keys.
   */
  async consumerReport(fromMs: number, toMs: number, sort: TotalsSort, order: 'asc' | 'desc'): Promise<ConsumerTotals[]> {
    const rows = new Map<string, ConsumerTotals & { ids: Set<string> }>();
    const row = (c: string): ConsumerTotals & { ids: Set<string> } => {
      let r = rows.get(c);
      if (!r) rows.set(c, (r = { consumer: c === '' ? null : c, keys: 0, ...zero(), ids: new Set() }));
      return r;
    };
    await this.eachKeyByConsumer('the usage report', spanOf(bucketStart(fromMs, 'hour'), toMs), 'total', (k, parts) => {
      // The key's consumer now has a row (so a consumer shows up with zeros), as does no consumer for a key without one.
      row(consumerOf(k) ?? '').ids.add(k.id);
      for (const [c, [t]] of parts) {
        if (!figuresOf(t!)) continue;
        const r = row(c);
        addCounts(r, t!);
        r.ids.add(k.id);
      }
    });
    const all = [...rows.values()].map(({ ids, ...r }) => ({ ...r, keys: ids.size }));
    return sortRows(all, sort, order, (r) => r.consumer ?? '');
  }

  /**
   * A page of every key's totals in [fromMs, toMs) in key id order: the first `limit` keys after the id `after` (before
   * it, descending), each key's ledger read for this page only. A keyset page: a key present for the whole export is
   * on exactly one page, whatever the figures or the other keys do meanwhile, and whichever instance answers. `total`
   * is how many keys there are now; `more` whether keys follow the page's last. Complete or failing.
   */
  async idPage(
    fromMs: number,
    toMs: number,
    order: 'asc' | 'desc',
    after: string | undefined,
    limit: number,
  ): Promise<{ keys: KeyTotals[]; total: number; more: boolean }> {
    const what = 'the usage report';
    const ids: string[] = [];
    for await (const batch of this.keys.ids(what)) ids.push(...batch);
    ids.sort();
    if (order === 'desc') ids.reverse();
    const beyond = (id: string): boolean => after === undefined || (order === 'asc' ? id > after : id < after);
    let i = ids.findIndex(beyond);
    if (i < 0) i = ids.length;
    const span = spanOf(bucketStart(fromMs, 'hour'), toMs);
    const keys: KeyTotals[] = [];
    // A key deleted since the id set was read is skipped, and the page filled from the ids after it.
    while (i < ids.length && keys.length < limit) {
      const batch = ids.slice(i, i + (limit - keys.length));
      i += batch.length;
      const rows = await Promise.all(
        batch.map(async (id) => {
          const [k, sums] = await Promise.all([this.keys.get(id), this.store.sums(id, span, 'total')]);
          if (!k) return undefined;
          const { peakMinute: _peak, ...counts } = sums[0]!;
          return { id: k.id, ...namesOf(k), plan: k.plan, ...counts, consumer: consumerOf(k) } satisfies KeyTotals;
        }),
      ).catch((err: unknown) => {
        throw incomplete(what, err);
      });
      for (const r of rows) if (r) keys.push(r);
    }
    return { keys, total: ids.length, more: i < ids.length };
  }

  /** One page of report() (the CLI asks for all of it). */
  async totals(
    fromMs: number,
    toMs: number,
    q: { sort: TotalsSort; order: 'asc' | 'desc'; offset: number; limit: number },
  ): Promise<{ keys: KeyTotals[]; total: number }> {
    const all = await this.report(fromMs, toMs, q.sort, q.order);
    return { keys: all.slice(q.offset, q.offset + q.limit), total: all.length };
  }

  /**
   * Every key with its ledger over the span added up as asked, a batch of keys at a time. Between batches the event
   * loop gets a turn of its own (setImmediate), so the request path's I/O on the same process runs between them
   * rather than after the whole report.
   */
  private async eachKey(what: string, span: LedgerSpan, by: SumBy, fn: (k: KeyRecord, counts: LedgerSums[]) => void): Promise<void> {
    for await (const page of this.keys.all(what)) {
      const perKey = await Promise.all(page.map((k) => this.store.sums(k.id, span, by))).catch((err: unknown) => {
        throw incomplete(what, err);
      });
      page.forEach((k, i) => fn(k, perKey[i]!));
      await nextTurn();
    }
  }

  /** eachKey, each key's ledger split by the consumer it was counted under ('' none), as sumsByConsumer reads it. */
  private async eachKeyByConsumer(
    what: string,
    span: LedgerSpan,
    by: SumBy,
    fn: (k: KeyRecord, parts: ReadonlyMap<string, LedgerSums[]>) => void,
  ): Promise<void> {
    for await (const page of this.keys.all(what)) {
      const perKey = await Promise.all(page.map((k) => this.store.sumsByConsumer(k.id, span, by))).catch((err: unknown) => {
        throw incomplete(what, err);
      });
      page.forEach((k, i) => fn(k, perKey[i]!));
      await nextTurn();
    }
  }

  /** The what-if of a plan's new limits over [fromMs, toMs) (whole hours): see whatif.ts. Complete or failing. */
  async simulate(input: SimulateInput): Promise<Simulation> {
    const what = 'the what-if';
    return simulate(this.store, this.keys.all(what), input, this.consumers).catch((err: unknown) => {
      throw err instanceof KeyAdminError ? err : incomplete(what, err);
    });
  }

  /**
   * Every route given with a deprecation, and the keys that called it in [fromMs, toMs) (whole UTC days); with
   * groupBy consumer also the consumers those calls were counted under (null: none).
   */
  async deprecatedRoutes(fromMs: number, toMs: number, configured: readonly DeprecatableRoute[], groupBy: GroupBy = 'key'): Promise<DeprecatedRouteReport[]> {
    const days = daysOf(fromMs, toMs);
    const routes = await Promise.all(
      configured
        .filter((r) => r.deprecation !== undefined || r.deprecated === true)
        .map(async (r) => {
          const callers = [...(await this.store.deprecated(deprecatedRouteName(r), days)).values()];
          return {
            method: r.method,
            path: r.path,
            ...(r.operationId !== undefined ? { operationId: r.operationId } : {}),
            ...(r.deprecation !== undefined ? { deprecation: r.deprecation } : {}),
            ...(r.sunset !== undefined ? { sunset: r.sunset } : {}),
            ...(r.link !== undefined ? { link: r.link } : {}),
            afterSunset: r.afterSunset,
            keys: byCaller(callers, (c) => c.id).map(({ key: id, calls, lastMs }) => ({ id, calls, lastSeen: isoOrNull(lastMs) })),
            ...(groupBy === 'consumer'
              ? {
                  consumers: byCaller(callers, (c) => c.consumer).map(({ key, keys, calls, lastMs }) => ({
                    consumer: key || null,
                    keys,
                    calls,
                    lastSeen: isoOrNull(lastMs),
                  })),
                }
              : {}),
          };
        }),
    );
    const named = await this.namedKeys(new Set(routes.flatMap((r) => r.keys.map((k) => k.id))));
    for (const r of routes) r.keys = r.keys.map((k) => ({ ...named.get(k.id), ...k }));
    return routes;
  }

  /**
   * Every validated operation given, and the keys that sent it invalid requests in [fromMs, toMs) (whole UTC days);
   * with groupBy consumer also the consumers those requests were counted under (null: none).
   */
  async invalidRequests(fromMs: number, toMs: number, operations: readonly ValidatedOperation[], groupBy: GroupBy = 'key'): Promise<InvalidRequestReport[]> {
    const days = daysOf(fromMs, toMs);
    const report = await Promise.all(
      operations.map(async (op) => {
        const callers = [...(await this.store.invalid(invalidRequestsName(op), days)).values()];
        return {
          operation: op.operation,
          service: op.service,
          method: op.method,
          path: op.path,
          mode: op.mode,
          keys: byCaller(callers, (c) => c.id).map(({ key: id, calls, lastMs, pointer }) => ({
            id,
            calls,
            lastSeen: isoOrNull(lastMs),
            pointer: pointer ?? null,
          })),
          ...(groupBy === 'consumer'
            ? {
                consumers: byCaller(callers, (c) => c.consumer).map(({ key, keys, calls, lastMs, pointer }) => ({
                  consumer: key || null,
                  keys,
                  calls,
                  lastSeen: isoOrNull(lastMs),
                  pointer: pointer ?? null,
                })),
              }
            : {}),
        };
      }),
    );
    const named = await this.namedKeys(new Set(report.flatMap((r) => r.keys.map((k) => k.id))));
    for (const r of report) r.keys = r.keys.map((k) => ({ ...named.get(k.id), ...k }));
    return report;
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
      records.forEach((k, j) => out.set(batch[j]!, { id: batch[j]!, ...(k ? namesOf(k) : {}), consumer: k ? consumerOf(k) : null }));
    }
    return out;
  }
}

/** Key records read at once for a report's names: the key store's own page batch. */
const NAME_READ_BATCH = 100;

/** An instant as ISO-8601, or null for none (0). */
const isoOrNull = (ms: number): string | null => (ms > 0 ? new Date(ms).toISOString() : null);

/**
 * Callers of a report's hash (a key under a consumer) added up by `keyOf` (the key id, or the consumer: '' none): calls
 * added, the last time the latest, the pointer of the latest; `keys`, how many keys. Most calls first, then by name.
 */
function byCaller<C extends { id: string; consumer: string; calls: number; lastMs: number; pointer?: string | undefined }>(
  callers: readonly C[],
  keyOf: (c: C) => string,
): Array<{ key: string; keys: number; calls: number; lastMs: number; pointer: string | undefined }> {
  const out = new Map<string, { key: string; ids: Set<string>; calls: number; lastMs: number; pointer: string | undefined }>();
  for (const c of callers) {
    const key = keyOf(c);
    let g = out.get(key);
    if (!g) out.set(key, (g = { key, ids: new Set(), calls: 0, lastMs: 0, pointer: undefined }));
    g.ids.add(c.id);
    g.calls += c.calls;
    if (c.lastMs >= g.lastMs) {
      g.lastMs = c.lastMs;
      if (c.pointer !== undefined) g.pointer = c.pointer;
    }
  }
  return [...out.values()].map(({ ids, ...g }) => ({ ...g, keys: ids.size })).sort((a, b) => b.calls - a.calls || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

function namesOf(k: KeyRecord): Omit<NamedKey, 'id'> {
  return { ...(k.name !== undefined ? { name: k.name } : {}), ...(k.metadata !== undefined ? { metadata: k.metadata } : {}) };
}
