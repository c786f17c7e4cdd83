// GET /usage's pages, the same whichever gateway instance answers each one. Sorted by id, a page is a keyset page:
// its cursor names the last key id it holds and the next page starts after it, so every key present for the whole
// export is on exactly one page, whatever the figures do meanwhile. Sorted by a figure (admitted, rateLimited, ...),
// an order that moves with traffic, the first page computes the whole report and keeps it in Redis for a bounded
// time (kept-reports.ts); its cursor names the kept report, which any instance reads: every page from the same figures.
// Grouped by consumer, the report is made whole from one pass over every key whatever the sort, so it pages the same
// way as a sort by a figure (kept when it has more rows than the page).
import { randomBytes } from 'node:crypto';
import { KEY_ID } from '../config/key-fields.js';
import type { ConsumerTotals, KeyTotals, TotalsSort, UsageReports } from './reports.js';
import { ReportError, type KeptReports } from './kept-reports.js';
import { decodeOpaque, encodeOpaque } from '../util/opaque.js';

export interface ReportQuery {
  fromMs: number;
  toMs: number;
  sort: TotalsSort;
  order: 'asc' | 'desc';
  /** Sorted by a figure: only the keys whose figure is above 0 (the dashboard's shadow refusals: few, one page). */
  nonZero?: boolean;
  /** 'consumer': a row per consumer (ConsumerTotals) instead of per key. */
  groupBy?: 'consumer';
}

/**
 * Where the next page starts. Sorted by id: after the key id `after`. Sorted by a figure: at `offset` in the kept
 * report named `report`.
 */
export type ReportCursor = ReportQuery & ({ after: string } | { report: string; offset: number });

/** How long a report sorted by a figure is kept after its last page was asked. */
export const REPORT_KEEP_MS = 5 * 60_000;
/**
 * Rows a report sorted by a figure may keep for its pages (a row is about 200 bytes: some 40 MB of Redis at most).
 * A larger export pages by id, which keeps nothing.
 */
export const REPORT_ROWS_KEPT = 200_000;

const SORTS: readonly string[] = ['admitted', 'rateLimited', 'banned', 'upstreamFailed', 'shadowRefused', 'id'];
export const KEPT_ID = /^[A-Za-z0-9_-]{22}$/;

export function encodeCursor(c: ReportCursor): string {
  const base = { f: c.fromMs, t: c.toMs, s: c.sort, o: c.order, ...(c.nonZero ? { z: 1 } : {}), ...(c.groupBy === 'consumer' ? { g: 1 } : {}) };
  const rest = 'after' in c ? { a: c.after } : { r: c.report, n: c.offset };
  return encodeOpaque({ ...base, ...rest });
}

/** The cursor a previous page gave out, or undefined for anything else (a cursor is opaque to clients). */
export function decodeCursor(text: string): ReportCursor | undefined {
  const v = decodeOpaque(text);
  if (!v) return undefined;
  const { f, t, s, o, a, r, n, z, g } = v;
  if (!Number.isSafeInteger(f) || !Number.isSafeInteger(t)) return undefined;
  if (typeof s !== 'string' || !SORTS.includes(s) || (o !== 'asc' && o !== 'desc')) return undefined;
  const query: ReportQuery = {
    fromMs: f as number,
    toMs: t as number,
    sort: s as TotalsSort,
    order: o,
    ...(z === 1 ? { nonZero: true } : {}),
    ...(g === 1 ? { groupBy: 'consumer' as const } : {}),
  };
  let c: ReportCursor;
  if (s === 'id' && g !== 1) {
    if (typeof a !== 'string' || !KEY_ID.test(a)) return undefined;
    c = { ...query, after: a };
  } else {
    if (typeof r !== 'string' || !KEPT_ID.test(r) || !Number.isSafeInteger(n) || (n as number) < 1) return undefined;
    c = { ...query, report: r, offset: n as number };
  }
  // Only the exact text this API writes: no second spelling of the same cursor.
  return encodeCursor(c) === text ? c : undefined;
}

/** A page of a report: the report's query, its rows from the cursor on, how many keys it has, the next page's cursor. */
export interface ReportPage {
  query: ReportQuery;
  keys: KeyTotals[];
  total: number;
  next: string | null;
}

/** A page of a report grouped by consumer: as ReportPage, its rows consumers. */
export interface ConsumerReportPage {
  query: ReportQuery;
  consumers: ConsumerTotals[];
  total: number;
  next: string | null;
}

export class ReportPages {
  constructor(
    private readonly reports: Pick<UsageReports, 'report' | 'idPage' | 'consumerReport'>,
    private readonly kept: KeptReports,
    private readonly keepMs: number = REPORT_KEEP_MS,
    private readonly rowsKept: number = REPORT_ROWS_KEPT,
  ) {}

  async page(first: ReportQuery | ReportCursor, limit: number): Promise<ReportPage> {
    const query: ReportQuery = {
      fromMs: first.fromMs,
      toMs: first.toMs,
      sort: first.sort,
      order: first.order,
      ...(first.nonZero && first.sort !== 'id' ? { nonZero: true } : {}),
    };
    if (query.sort === 'id') {
      const after = 'after' in first ? first.after : undefined;
      const p = await this.reports.idPage(query.fromMs, query.toMs, query.order, after, limit);
      const last = p.keys[p.keys.length - 1];
      return { query, keys: p.keys, total: p.total, next: p.more && last ? encodeCursor({ ...query, after: last.id }) : null };
    }
    if ('report' in first) {
      const got = await this.kept.read<ReportQuery, KeyTotals>(first.report, first.offset, limit, this.keepMs);
      if (!got || !sameQuery(got.head, query)) throw expired();
      const end = first.offset + got.rows.length;
      return { query, keys: got.rows, total: got.total, next: end < got.total ? encodeCursor({ ...query, report: first.report, offset: end }) : null };
    }
    const all = await this.reports.report(query.fromMs, query.toMs, query.sort, query.order);
    const sort = query.sort;
    const rows = query.nonZero ? all.filter((r) => r[sort] > 0) : all;
    if (rows.length <= limit) return { query, keys: rows, total: rows.length, next: null };
    if (rows.length > this.rowsKept)
      throw new ReportError(
        'report_too_large',
        `a report sorted by ${query.sort} is kept for its pages up to ${this.rowsKept} keys, and this one has ${rows.length}: page it by id (sort=id), which keeps nothing`,
      );
    const id = randomBytes(16).toString('base64url');
    await this.kept.save(id, query, rows, this.keepMs);
    return { query, keys: rows.slice(0, limit), total: rows.length, next: encodeCursor({ ...query, report: id, offset: limit }) };
  }

  /**
   * A page of the report grouped by consumer (the query's groupBy is taken as 'consumer'): the whole report made at
   * the first page, kept for the next ones when it has more rows than the page (by a figure or by id alike).
   */
  async consumerPage(first: ReportQuery | ReportCursor, limit: number): Promise<ConsumerReportPage> {
    const query: ReportQuery = {
      fromMs: first.fromMs,
      toMs: first.toMs,
      sort: first.sort,
      order: first.order,
      ...(first.nonZero && first.sort !== 'id' ? { nonZero: true } : {}),
      groupBy: 'consumer',
    };
    if ('report' in first) {
      const got = await this.kept.read<ReportQuery, ConsumerTotals>(first.report, first.offset, limit, this.keepMs);
      if (!got || !sameQuery(got.head, query)) throw expired();
      const end = first.offset + got.rows.length;
      return { query, consumers: got.rows, total: got.total, next: end < got.total ? encodeCursor({ ...query, report: first.report, offset: end }) : null };
    }
    const all = await this.reports.consumerReport(query.fromMs, query.toMs, query.sort, query.order);
    const sort = query.sort;
    const rows = query.nonZero && sort !== 'id' ? all.filter((r) => r[sort] > 0) : all;
    if (rows.length <= limit) return { query, consumers: rows, total: rows.length, next: null };
    if (rows.length > this.rowsKept)
      throw new ReportError('report_too_large', `a report by consumer is kept for its pages up to ${this.rowsKept} rows, and this one has ${rows.length}`);
    const id = randomBytes(16).toString('base64url');
    await this.kept.save(id, query, rows, this.keepMs);
    return { query, consumers: rows.slice(0, limit), total: rows.length, next: encodeCursor({ ...query, report: id, offset: limit }) };
  }
}

/** The error for a cursor whose kept report is gone (kept REPORT_KEEP_MS after its last page was asked). */
export function expired(): ReportError {
  return new ReportError(
    'report_expired',
    `the report this cursor names is no longer kept (reports sorted by a figure are kept ${REPORT_KEEP_MS / 60_000} minutes after their last page was asked): ask for the first page again`,
  );
}

function sameQuery(a: ReportQuery, b: ReportQuery): boolean {
  return a.fromMs === b.fromMs && a.toMs === b.toMs && a.sort === b.sort && a.order === b.order && !!a.nonZero === !!b.nonZero && a.groupBy === b.groupBy;
}
