// What the admin API asks of reports over every key (a usage export's pages, the overview's sums, the what-if, the
// deprecated-route report), and where they run: in this process (a Redis-less gateway, whose ledger is in its own
// memory), or on a thread of their own (workers/report-thread.ts) so that a report's CPU never runs on the event loop
// that serves the request path.
import type {
  ConsumerSeries,
  GroupBy,
  Granularity,
  DeprecatableRoute,
  DeprecatedRouteReport,
  InvalidRequestReport,
  UsageBucket,
  UsageCounts,
  UsageReports,
  ValidatedOperation,
} from './reports.js';
import { ReportPages, type ConsumerReportPage, type ReportCursor, type ReportPage, type ReportQuery } from './report-pages.js';
import { MemoryKeptReports, type KeptReports } from './kept-reports.js';
import type { SimulateInput } from './whatif.js';
import { WhatIfPages, type WhatIfCursor, type WhatIfPage } from './whatif-pages.js';

export interface ReportRunner {
  /** A page of GET /usage (report-pages.ts). */
  page(first: ReportQuery | ReportCursor, limit: number): Promise<ReportPage>;
  /** A page of GET /usage?groupBy=consumer (report-pages.ts). */
  consumerPage(first: ReportQuery | ReportCursor, limit: number): Promise<ConsumerReportPage>;
  /** Every key's counts added up, by hour or day (the overview; cached by overview.ts). */
  summary(fromMs: number, toMs: number, granularity: Granularity): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }>;
  /** A consumer's usage over time: what every key ever counted under it was counted there (a consumer's page). */
  consumerUsage(
    consumer: string,
    fromMs: number,
    toMs: number,
    granularity: Granularity,
  ): Promise<{ buckets: UsageBucket[]; totals: UsageCounts; keys: number }>;
  /**
   * One key's usage over time, split by the consumer each count was made under (the portal's key sessions: a key's
   * month of hours is a few hundred buckets to add up, off the request path's event loop like the other reports).
   */
  keyUsageByConsumer(
    id: string,
    fromMs: number,
    toMs: number,
    granularity: Granularity,
  ): Promise<{ buckets: UsageBucket[]; totals: UsageCounts; consumers: ConsumerSeries[] }>;
  /** A page of the what-if of a plan's new limits (whatif-pages.ts). */
  simulate(first: SimulateInput | WhatIfCursor, limit: number): Promise<WhatIfPage>;
  /** The routes given that have a deprecation, with the keys that called them (and their consumers, grouped by consumer). */
  deprecatedRoutes(fromMs: number, toMs: number, routes: readonly DeprecatableRoute[], groupBy?: GroupBy): Promise<DeprecatedRouteReport[]>;
  /** The validated operations given, with the keys that sent them invalid requests (and their consumers, grouped by consumer). */
  invalidRequests(fromMs: number, toMs: number, operations: readonly ValidatedOperation[], groupBy?: GroupBy): Promise<InvalidRequestReport[]>;
  /** Releases what it holds (the thread and its Redis connection). */
  close(): Promise<void>;
}

/** Reports on this process's event loop; reports kept for their pages in `kept` (Redis on the report thread). */
export class InProcessReports implements ReportRunner {
  private readonly pages: ReportPages;
  private readonly whatIf: WhatIfPages;

  constructor(
    private readonly reports: UsageReports,
    kept: KeptReports = new MemoryKeptReports(),
  ) {
    this.pages = new ReportPages(reports, kept);
    this.whatIf = new WhatIfPages((input) => reports.simulate(input), kept);
  }

  page(first: ReportQuery | ReportCursor, limit: number): Promise<ReportPage> {
    return this.pages.page(first, limit);
  }

  consumerPage(first: ReportQuery | ReportCursor, limit: number): Promise<ConsumerReportPage> {
    return this.pages.consumerPage(first, limit);
  }

  summary(fromMs: number, toMs: number, granularity: Granularity): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }> {
    return this.reports.summary(fromMs, toMs, granularity);
  }

  consumerUsage(
    consumer: string,
    fromMs: number,
    toMs: number,
    granularity: Granularity,
  ): Promise<{ buckets: UsageBucket[]; totals: UsageCounts; keys: number }> {
    return this.reports.consumerUsage(consumer, fromMs, toMs, granularity);
  }

  keyUsageByConsumer(
    id: string,
    fromMs: number,
    toMs: number,
    granularity: Granularity,
  ): Promise<{ buckets: UsageBucket[]; totals: UsageCounts; consumers: ConsumerSeries[] }> {
    return this.reports.keyUsageByConsumer(id, fromMs, toMs, granularity);
  }

  simulate(first: SimulateInput | WhatIfCursor, limit: number): Promise<WhatIfPage> {
    return this.whatIf.page(first, limit);
  }

  deprecatedRoutes(fromMs: number, toMs: number, routes: readonly DeprecatableRoute[], groupBy: GroupBy = 'key'): Promise<DeprecatedRouteReport[]> {
    return this.reports.deprecatedRoutes(fromMs, toMs, routes, groupBy);
  }

  invalidRequests(fromMs: number, toMs: number, operations: readonly ValidatedOperation[], groupBy: GroupBy = 'key'): Promise<InvalidRequestReport[]> {
    return this.reports.invalidRequests(fromMs, toMs, operations, groupBy);
  }

  async close(): Promise<void> {}
}
