// The admin API's usage reports: one key's usage, every key's (paged, GET /usage), the overview's summary, and the
// deprecated-route report (JSON and CSV), and the invalid-request report (who sends requests that do not match
// their operation's OpenAPI description, to which operation). Periods are read per request against usage.retentionDays, so a reload
// applies at once. Each also groups by consumer (groupBy=consumer): the consumer each count was made under, as the
// ledger recorded it at the time.
import { Router, type Response } from 'express';
import type { KeyListing } from '../keys/listing.js';
import type { Runtime } from '../routing/runtime.js';
import { bucketRows, consumerBucketRows, consumerTotalsRows, csv, deprecatedConsumerRows, deprecatedRows, totalsRows } from '../usage/csv.js';
import type { OverviewCache } from '../usage/overview.js';
import { decodeCursor, type ReportCursor } from '../usage/report-pages.js';
import type { ReportRunner } from '../usage/report-runner.js';
import { consumerOf, invalidRequestsName, resolvePeriod, type UsageReports, type ValidatedOperation } from '../usage/reports.js';
import type { CompiledRoute } from '../routing/routes.js';
import { DAY_MS, HOUR_MS } from '../util/time.js';
import { keyIdParam, parse, periodOf, periodView, queryOf, sendProblems } from './requests.js';
import { deprecatedCsvQuery, deprecatedQuery, keyUsageQuery, summaryQuery, usageCsvQuery, usageQuery } from './schemas.js';

export interface UsageRoutesOptions {
  keys: KeyListing;
  runtime: Runtime;
  /** The usage ledger, read for one key. */
  usage: UsageReports;
  /** Reports over every key (usage/report-runner.ts). */
  reports: ReportRunner;
  /** The overview's summary, computed once and shared (usage/overview.ts). */
  overview: OverviewCache;
}

export function usageRoutes(o: UsageRoutesOptions): Router {
  const { runtime } = o;
  const router = Router();
  const retentionDays = () => runtime.config.usage.retentionDays;

  router.get('/keys/:id/usage', keyIdParam, async (req, res) => {
    const q = parse(keyUsageQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const p = periodOf(q, q.granularity === 'hour' ? 24 * HOUR_MS : 7 * DAY_MS, retentionDays(), res);
    if (!p) return;
    const k = await o.keys.require(String(req.params.id));
    const head = { id: k.id, plan: k.plan, consumer: consumerOf(k), granularity: q.granularity, ...periodView(p) };
    if (q.groupBy === 'consumer') {
      const u = await o.usage.keyUsageByConsumer(k.id, p.fromMs, p.toMs, q.granularity);
      return res.json({ ...head, totals: u.totals, buckets: u.buckets, consumers: u.consumers });
    }
    const u = await o.usage.keyUsage(k.id, p.fromMs, p.toMs, q.granularity);
    res.json({ ...head, totals: u.totals, buckets: u.buckets });
  });

  router.get('/usage', async (req, res) => {
    const raw = queryOf(req, res);
    const q = parse(usageQuery, raw, 'query', res);
    if (!q) return;
    let at: ReportCursor | undefined;
    if (q.cursor !== undefined) {
      at = decodeCursor(q.cursor);
      if (!at || 'problem' in resolvePeriod(at, 0, retentionDays(), Date.now()))
        return sendProblems(res, [{ path: 'query.cursor', message: 'not a cursor this API gave out (use nextCursor from a previous page)' }]);
      // The cursor's report decides the period and order; the same query repeated with it is welcome, another is not.
      const other =
        (q.from !== undefined && Date.parse(q.from) !== at.fromMs) ||
        (q.to !== undefined && Date.parse(q.to) !== at.toMs) ||
        (raw!.sort !== undefined && q.sort !== at.sort) ||
        (raw!.order !== undefined && q.order !== at.order) ||
        (q.groupBy !== undefined && (q.groupBy === 'consumer') !== (at.groupBy === 'consumer'));
      if (other)
        return sendProblems(res, [
          { path: 'query.cursor', message: "belongs to a report with another from, to, sort, order or groupBy: leave them out or give the first page's" },
        ]);
    }
    const byConsumer = at ? at.groupBy === 'consumer' : q.groupBy === 'consumer';
    const nonZero = q.nonzero === 'true';
    if (nonZero && q.sort === 'id') return sendProblems(res, [{ path: 'query.nonzero', message: 'only with a sort by a figure (admitted, rateLimited, ...)' }]);
    if (at && q.nonzero !== undefined && nonZero !== !!at.nonZero)
      return sendProblems(res, [{ path: 'query.cursor', message: "belongs to a report with another nonzero: leave it out or give the first page's" }]);
    const p = at ?? periodOf(q, 7 * DAY_MS, retentionDays(), res);
    if (!p) return;
    const first = at ?? { fromMs: p.fromMs, toMs: p.toMs, sort: q.sort, order: q.order, ...(nonZero ? { nonZero } : {}) };
    if (byConsumer) {
      const page = await o.reports.consumerPage(first, q.limit);
      return res.json({
        ...periodView(page.query),
        sort: page.query.sort,
        order: page.query.order,
        groupBy: 'consumer',
        consumers: page.consumers,
        total: page.total,
        nextCursor: page.next,
      });
    }
    const page = await o.reports.page(first, q.limit);
    res.json({
      ...periodView(page.query),
      sort: page.query.sort,
      order: page.query.order,
      keys: page.keys,
      total: page.total,
      nextCursor: page.next,
    });
  });

  // The CLI's `usage --csv`, byte for byte. The report is built whole before anything is sent: one that fails is the
  // JSON error (5xx), never a CSV cut short that looks complete.
  router.get('/usage.csv', async (req, res) => {
    const q = parse(usageCsvQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    if (q.key !== undefined) {
      const misplaced = (['sort', 'order', 'nonzero'] as const).filter((f) => q[f] !== undefined);
      if (misplaced.length > 0)
        return sendProblems(
          res,
          misplaced.map((f) => ({ path: `query.${f}`, message: "only without key (every key's totals)" })),
        );
      const granularity = q.granularity ?? 'hour';
      const p = periodOf(q, granularity === 'hour' ? 24 * HOUR_MS : 7 * DAY_MS, retentionDays(), res);
      if (!p) return;
      const k = await o.keys.require(q.key);
      if (q.groupBy === 'consumer') {
        const u = await o.usage.keyUsageByConsumer(k.id, p.fromMs, p.toMs, granularity);
        return sendCsv(res, `usage-${k.id}.csv`, csv(consumerBucketRows(u.consumers)));
      }
      const u = await o.usage.keyUsage(k.id, p.fromMs, p.toMs, granularity);
      return sendCsv(res, `usage-${k.id}.csv`, csv(bucketRows(u.buckets)));
    }
    if (q.granularity !== undefined) return sendProblems(res, [{ path: 'query.granularity', message: 'only with key (one key by hour or day)' }]);
    const sort = q.sort ?? 'admitted';
    const nonZero = q.nonzero === 'true';
    if (nonZero && sort === 'id') return sendProblems(res, [{ path: 'query.nonzero', message: 'only with a sort by a figure (admitted, rateLimited, ...)' }]);
    const p = periodOf(q, 7 * DAY_MS, retentionDays(), res);
    if (!p) return;
    const order = q.order ?? (sort === 'id' ? 'asc' : 'desc');
    const first = { fromMs: p.fromMs, toMs: p.toMs, sort, order, ...(nonZero ? { nonZero } : {}) } as const;
    if (q.groupBy === 'consumer') {
      const all = await o.reports.consumerPage(first, Number.MAX_SAFE_INTEGER);
      return sendCsv(res, 'usage-by-consumer.csv', csv(consumerTotalsRows(all.consumers)));
    }
    const all = await o.reports.page(first, Number.MAX_SAFE_INTEGER);
    sendCsv(res, 'usage.csv', csv(totalsRows(all.keys)));
  });

  router.get('/usage/summary', async (req, res) => {
    const q = parse(summaryQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const p = periodOf(q, q.granularity === 'hour' ? 24 * HOUR_MS : 7 * DAY_MS, retentionDays(), res);
    if (!p) return;
    const u = await o.overview.get(p.fromMs, p.toMs, q.granularity);
    res.json({ granularity: q.granularity, ...periodView(u), asOf: new Date(u.asOfMs).toISOString(), totals: u.totals, buckets: u.buckets });
  });

  router.get('/routes/deprecated.csv', async (req, res) => {
    const q = parse(deprecatedCsvQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const p = periodOf({}, retentionDays() * DAY_MS, retentionDays(), res)!;
    const list = await o.reports.deprecatedRoutes(p.fromMs, p.toMs, runtime.config.routes, q.groupBy);
    const rows = q.groupBy === 'consumer' ? deprecatedConsumerRows(list) : deprecatedRows(list);
    res.setHeader('content-disposition', 'attachment; filename="deprecated-routes.csv"');
    res.type('text/csv; charset=utf-8').send(csv(rows));
  });

  router.get('/routes/deprecated', async (req, res) => {
    const q = parse(deprecatedQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const p = periodOf(q, retentionDays() * DAY_MS, retentionDays(), res);
    if (!p) return;
    res.json({ ...periodView(p), routes: await o.reports.deprecatedRoutes(p.fromMs, p.toMs, runtime.config.routes, q.groupBy) });
  });

  router.get('/usage/invalid-requests', async (req, res) => {
    const q = parse(deprecatedQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const p = periodOf(q, retentionDays() * DAY_MS, retentionDays(), res);
    if (!p) return;
    res.json({ ...periodView(p), operations: await o.reports.invalidRequests(p.fromMs, p.toMs, validatedOperations(runtime.current.routes), q.groupBy) });
  });

  return router;
}

/** The routes in force that validate requests, one per operation (a document's operation is one route). */
function validatedOperations(routes: readonly CompiledRoute[]): ValidatedOperation[] {
  const seen = new Set<string>();
  const out: ValidatedOperation[] = [];
  for (const r of routes) {
    const v = r.validation;
    if (!v) continue;
    const op: ValidatedOperation = { operation: v.operation, service: r.service, method: r.method, path: r.pattern, mode: v.mode };
    if (seen.has(invalidRequestsName(op))) continue;
    seen.add(invalidRequestsName(op));
    out.push(op);
  }
  return out;
}

function sendCsv(res: Response, filename: string, body: string): void {
  res.setHeader('content-disposition', `attachment; filename="${filename}"`);
  res.type('text/csv; charset=utf-8').send(body);
}
