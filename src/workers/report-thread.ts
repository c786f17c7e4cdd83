// Reports over every key on a thread of their own (report-worker.ts, on thread-host.ts), for a gateway on Redis: an
// export of 20,000 keys reads 40,000 replies, parses every record and sorts the rows, seconds of CPU that on the
// request path's event loop would sit in front of every request arriving meanwhile. The thread holds its own Redis
// connection (same topology, credentials and TLS; the admin timeout; named tollgate-reports), keeps few reads in
// flight so that a limit check never queues behind many of its scripts in Redis, and runs at the lowest CPU priority.
// It starts with the first report and ends once idle for 5 minutes; a thread that dies fails the reports it was
// running (503, nothing partial) and the next report starts a new one. Its heap is bounded (usage.reportMemoryMb,
// resourceLimits): a report that needs more ends the thread alone, and fails with report_out_of_memory.
import { incomplete, KeyAdminError, type KeyAdminErrorCode } from '../keys/admin-errors.js';
import type { Logger } from '../observability/logger.js';
import type { RedisTopology } from '../storage/redis.js';
import { ReportError, type ReportErrorCode } from '../usage/kept-reports.js';
import { type ConsumerReportPage, type ReportCursor, type ReportPage, type ReportQuery } from '../usage/report-pages.js';
import type { ReportRunner } from '../usage/report-runner.js';
import type {
  ConsumerSeries,
  DeprecatableRoute,
  DeprecatedRouteReport,
  Granularity,
  GroupBy,
  InvalidRequestReport,
  UsageBucket,
  UsageCounts,
  ValidatedOperation,
} from '../usage/reports.js';
import type { SimulateInput } from '../usage/whatif.js';
import type { WhatIfCursor, WhatIfPage } from '../usage/whatif-pages.js';
import { ThreadHost, threadEntry, type ThreadStopped } from './thread-host.js';

/** What the thread is started with. */
export interface ReportThreadData {
  redis: RedisTopology;
  prefix: string;
  commandTimeoutMs: number;
  readsInFlight: number;
  /** How long each read keeps its place once answered, in times its own duration (pacedReadLimit). */
  readRest: number;
  nice: number;
  /**
   * The thread's heap (V8's old generation), in MB: a report that needs more fails alone (503 report_out_of_memory),
   * never the gateway. Reports running at once share it.
   */
  memoryMb: number;
}

export type ReportCall =
  | { op: 'page'; first: ReportQuery | ReportCursor; limit: number }
  | { op: 'consumerPage'; first: ReportQuery | ReportCursor; limit: number }
  | { op: 'summary'; fromMs: number; toMs: number; granularity: Granularity }
  | { op: 'consumerUsage'; consumer: string; fromMs: number; toMs: number; granularity: Granularity }
  | { op: 'keyUsageByConsumer'; id: string; fromMs: number; toMs: number; granularity: Granularity }
  | { op: 'simulate'; first: SimulateInput | WhatIfCursor; limit: number }
  | { op: 'deprecatedRoutes'; fromMs: number; toMs: number; routes: DeprecatableRoute[]; groupBy: GroupBy }
  | { op: 'invalidRequests'; fromMs: number; toMs: number; operations: ValidatedOperation[]; groupBy: GroupBy };

/**
 * Reads the thread keeps in flight: a limit check arriving at Redis waits behind at most this many summing scripts
 * (each well under a millisecond), and a report still keeps a loopback or LAN round trip busy (bench/README.md,
 * "Reports").
 */
export const REPORT_THREAD_READS_IN_FLIGHT = 8;
/**
 * Each of the thread's reads keeps its place for as long again once answered: a report keeps Redis busy half the time
 * at most, and takes about twice as long as it would unpaced (bench/README.md, "Reports").
 */
export const REPORT_THREAD_READ_REST = 1;
/** The thread's nice value: the lowest CPU priority. */
export const REPORT_THREAD_NICE = 19;
/** The thread's young generation, in MB: its heap is at most usage.reportMemoryMb plus this. */
export const REPORT_THREAD_YOUNG_MB = 16;
/** How long the thread stays once idle (its Redis connection with it): an export's next page is usually asked sooner. */
export const REPORT_THREAD_IDLE_MS = 5 * 60_000;

/** The thread's Worker name; its Redis connection is named tollgate-reports too (connectRedis, purpose 'reports'). */
const REPORT_THREAD_NAME = 'tollgate-reports';

export class ReportThread implements ReportRunner {
  private readonly host: ThreadHost<ReportCall, ReportThreadData>;

  constructor(
    private readonly data: ReportThreadData,
    logger?: Logger,
    idleMs: number = REPORT_THREAD_IDLE_MS,
  ) {
    this.host = new ThreadHost({
      name: REPORT_THREAD_NAME,
      label: 'report thread',
      entry: threadEntry(import.meta.url, './report-worker.js'),
      data,
      mode: 'on-demand',
      idleMs,
      nice: data.nice,
      // V8 ends the thread (not the process) when its heap is full: see failure().
      resourceLimits: { maxOldGenerationSizeMb: data.memoryMb, maxYoungGenerationSizeMb: REPORT_THREAD_YOUNG_MB },
      logger,
      logFields: { memoryMb: data.memoryMb },
      failure: (what, err) => this.failure(what, err),
      reviveError: (error) =>
        typeof error.reportCode === 'string'
          ? new ReportError(error.reportCode as ReportErrorCode, error.message)
          : typeof error.code === 'string'
            ? new KeyAdminError(error.code as KeyAdminErrorCode, error.message)
            : new Error(error.message),
    });
  }

  page(first: ReportQuery | ReportCursor, limit: number): Promise<ReportPage> {
    return this.call('the usage report', { op: 'page', first, limit });
  }

  consumerPage(first: ReportQuery | ReportCursor, limit: number): Promise<ConsumerReportPage> {
    return this.call('the usage report', { op: 'consumerPage', first, limit });
  }

  summary(fromMs: number, toMs: number, granularity: Granularity): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }> {
    return this.call('the usage summary', { op: 'summary', fromMs, toMs, granularity });
  }

  consumerUsage(
    consumer: string,
    fromMs: number,
    toMs: number,
    granularity: Granularity,
  ): Promise<{ buckets: UsageBucket[]; totals: UsageCounts; keys: number }> {
    return this.call(`the usage of consumer ${consumer}`, { op: 'consumerUsage', consumer, fromMs, toMs, granularity });
  }

  keyUsageByConsumer(
    id: string,
    fromMs: number,
    toMs: number,
    granularity: Granularity,
  ): Promise<{ buckets: UsageBucket[]; totals: UsageCounts; consumers: ConsumerSeries[] }> {
    return this.call(`the usage of key ${id}`, { op: 'keyUsageByConsumer', id, fromMs, toMs, granularity });
  }

  simulate(first: SimulateInput | WhatIfCursor, limit: number): Promise<WhatIfPage> {
    return this.call('the what-if', { op: 'simulate', first, limit });
  }

  deprecatedRoutes(fromMs: number, toMs: number, routes: readonly DeprecatableRoute[], groupBy: GroupBy = 'key'): Promise<DeprecatedRouteReport[]> {
    // Only what the report reads of each route crosses to the thread (DeprecatableRoute, every field of it: a route
    // deprecated without a date is known by `deprecated`, an operation's by its operationId).
    const plain = routes.map(({ method, path, deprecation, deprecated, sunset, link, afterSunset, operationId }): EveryField<DeprecatableRoute> => ({
      method,
      path,
      deprecation,
      deprecated,
      sunset,
      link,
      afterSunset,
      operationId,
    }));
    return this.call('the deprecated-route report', { op: 'deprecatedRoutes', fromMs, toMs, routes: plain, groupBy });
  }

  invalidRequests(fromMs: number, toMs: number, operations: readonly ValidatedOperation[], groupBy: GroupBy = 'key'): Promise<InvalidRequestReport[]> {
    const plain = operations.map(({ operation, service, method, path, mode }) => ({ operation, service, method, path, mode }));
    return this.call('the invalid-request report', { op: 'invalidRequests', fromMs, toMs, operations: plain, groupBy });
  }

  /** Whether the thread is running now (tests: it starts with a report and ends once idle). */
  get running(): boolean {
    return this.host.running;
  }

  /** Ends the thread at once: the reports it was running fail as incomplete (503), and so does every later one. */
  close(): Promise<void> {
    return this.host.stop(0);
  }

  private call<T>(what: string, call: ReportCall): Promise<T> {
    return this.host.call<T>(what, call);
  }

  /**
   * A report the thread could not answer: one that needed more than the thread's heap fails with report_out_of_memory
   * (the thread ended alone; the next report starts a new one), any other as incomplete (503, nothing partial).
   */
  private failure(what: string, err: ThreadStopped): Error {
    if (err.reason !== 'out_of_memory') return incomplete(what, err);
    return new ReportError(
      'report_out_of_memory',
      `${what} needed more than the report thread's ${this.data.memoryMb} MB (usage.reportMemoryMb; reports running at once share it) and was stopped, nothing partial returned: ask for a shorter period, or raise usage.reportMemoryMb and the container's memory limit with it`,
    );
  }
}

/** Every field of T, each given (undefined where T's is optional): a field added to T must be added where this is built. */
type EveryField<T> = { [K in keyof Required<T>]: T[K] };
