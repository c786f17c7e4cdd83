// GET /usage's pages: a report over every key is computed on its first page and kept, briefly and within a bound on
// memory, for the pages after it, so that an export of 20,000 keys reads every key's ledger once, not once per page,
// and every page comes from the same figures (no key twice or missed because counts moved between pages). The cursor
// names the kept report and carries its query, so a page asked of an instance that does not keep it (another
// instance behind a load balancer, or after the report was dropped) is still answered: from the report computed again.
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { KeyTotals, TotalsSort, UsageReports } from './reports.js';

export interface ReportQuery {
  fromMs: number;
  toMs: number;
  sort: TotalsSort;
  order: 'asc' | 'desc';
}

/** Where the next page starts: the report it belongs to (its id and query) and the offset in it. */
export interface ReportCursor extends ReportQuery {
  report: string;
  offset: number;
}

/** How long a report is kept after its last page was asked. */
export const REPORT_KEEP_MS = 5 * 60_000;
/** Rows kept over every report (a row is about 200 bytes: some 40 MB). A report larger than this is not kept. */
export const REPORT_ROWS_KEPT = 200_000;

const SORTS: readonly string[] = ['admitted', 'rateLimited', 'banned', 'id'];
const REPORT_ID = /^[A-Za-z0-9_-]{22}$/;

export function encodeCursor(c: ReportCursor): string {
  return Buffer.from(JSON.stringify({ r: c.report, f: c.fromMs, t: c.toMs, s: c.sort, o: c.order, n: c.offset })).toString('base64url');
}

/** The cursor a previous page gave out, or undefined for anything else (a cursor is opaque to clients). */
export function decodeCursor(text: string): ReportCursor | undefined {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const { r, f, t, s, o, n } = v as Record<string, unknown>;
  if (Object.keys(v).length !== 6 || typeof r !== 'string' || !REPORT_ID.test(r)) return undefined;
  if (!Number.isSafeInteger(f) || !Number.isSafeInteger(t) || !Number.isSafeInteger(n) || (n as number) < 1) return undefined;
  if (typeof s !== 'string' || !SORTS.includes(s) || (o !== 'asc' && o !== 'desc')) return undefined;
  const c: ReportCursor = { report: r, fromMs: f as number, toMs: t as number, sort: s as TotalsSort, order: o, offset: n as number };
  // Only the exact text this API writes: no second spelling of the same cursor.
  return encodeCursor(c) === text ? c : undefined;
}

/** A page of a report: the report's query, its rows from the offset asked, how many it has, the next page's cursor. */
export interface ReportPage {
  query: ReportQuery;
  keys: KeyTotals[];
  total: number;
  next: string | null;
}

interface Kept {
  query: ReportQuery;
  rows: KeyTotals[];
}

export class ReportPages {
  private readonly kept = new LRUCache<string, Kept>({
    maxSize: REPORT_ROWS_KEPT,
    sizeCalculation: (k) => Math.max(1, k.rows.length),
    ttl: REPORT_KEEP_MS,
    updateAgeOnGet: true,
  });

  constructor(private readonly reports: Pick<UsageReports, 'report'>) {}

  /**
   * A page of the report: the first (no cursor) computes it and keeps it; a cursor's page comes from the kept report,
   * or from the cursor's query computed again (and kept under the cursor's report id) where it is not kept here.
   */
  async page(first: ReportQuery | ReportCursor, limit: number): Promise<ReportPage> {
    const at = 'report' in first ? first : undefined;
    // A report too large for the bound is not kept: its pages are each computed again (still complete and in order).
    const id = at?.report ?? randomBytes(16).toString('base64url');
    let kept = this.kept.get(id);
    if (!kept || !sameQuery(kept.query, first)) {
      const query: ReportQuery = { fromMs: first.fromMs, toMs: first.toMs, sort: first.sort, order: first.order };
      kept = { query, rows: await this.reports.report(query.fromMs, query.toMs, query.sort, query.order) };
      this.kept.set(id, kept);
    }
    const offset = at?.offset ?? 0;
    const keys = kept.rows.slice(offset, offset + limit);
    const end = offset + keys.length;
    const next = end < kept.rows.length ? encodeCursor({ ...kept.query, report: id, offset: end }) : null;
    return { query: kept.query, keys, total: kept.rows.length, next };
  }
}

function sameQuery(a: ReportQuery, b: ReportQuery): boolean {
  return a.fromMs === b.fromMs && a.toMs === b.toMs && a.sort === b.sort && a.order === b.order;
}
