// Reports over every key on a thread of their own (report-worker.ts), for a gateway on Redis: an export of 20,000 keys
// reads 40,000 replies, parses every record and sorts the rows, seconds of CPU that on the request path's event loop
// would sit in front of every request arriving meanwhile. The thread holds its own Redis connection (same topology,
// credentials and TLS; the admin timeout; named tollgate-reports), keeps few reads in flight so that a limit check
// never queues behind many of its scripts in Redis, and runs at the lowest CPU priority. It starts with the first
// report and ends once idle for 5 minutes; a thread that dies fails the reports it was
// running (503, nothing partial) and the next report starts a new one. Its heap is bounded (usage.reportMemoryMb,
// resourceLimits): a report that needs more ends the thread alone, and fails with report_out_of_memory.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { incomplete, KeyAdminError, type KeyAdminErrorCode } from '../keys/admin-errors.js';
import type { Logger } from '../observability/logger.js';
import type { RedisTopology } from '../storage/redis.js';
import { type ConsumerReportPage, type ReportCursor, type ReportPage, type ReportQuery } from './report-pages.js';
import type { ReportRunner } from './report-runner.js';
import type {
  DeprecatableRoute,
  DeprecatedRouteReport,
  Granularity,
  GroupBy,
  InvalidRequestReport,
  UsageBucket,
  UsageCounts,
  ValidatedOperation,
} from './reports.js';
import { ReportError, type ReportErrorCode } from './kept-reports.js';
import type { SimulateInput } from './whatif.js';
import type { WhatIfCursor, WhatIfPage } from './whatif-pages.js';

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
  | { op: 'simulate'; first: SimulateInput | WhatIfCursor; limit: number }
  | { op: 'deprecatedRoutes'; fromMs: number; toMs: number; routes: DeprecatableRoute[]; groupBy: GroupBy }
  | { op: 'invalidRequests'; fromMs: number; toMs: number; operations: ValidatedOperation[]; groupBy: GroupBy };

export type ReportReply =
  { id: number; ok: true; value: unknown } | { id: number; ok: false; error: { message: string; code?: KeyAdminErrorCode; reportCode?: ReportErrorCode } };

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

/**
 * The thread's code: beside this file once built. Run from the sources (the test runner compiles .ts files in its
 * own process; a worker thread loads plain JavaScript), the build's copy: the test command builds first.
 */
function workerFile(): string {
  const here = fileURLToPath(import.meta.url);
  return here.endsWith('.ts')
    ? fileURLToPath(new URL('../../dist/usage/report-worker.js', import.meta.url))
    : fileURLToPath(new URL('./report-worker.js', import.meta.url));
}

interface Pending {
  what: string;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export class ReportThread implements ReportRunner {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private idle: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly data: ReportThreadData,
    private readonly logger?: Logger,
    private readonly idleMs: number = REPORT_THREAD_IDLE_MS,
  ) {}

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
    return this.worker !== undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idle);
    const w = this.worker;
    this.worker = undefined;
    this.failPending(new Error('the gateway is shutting down'));
    await w?.terminate();
  }

  private call<T>(what: string, call: ReportCall): Promise<T> {
    if (this.closed) return Promise.reject(incomplete(what, new Error('the gateway is shutting down')));
    clearTimeout(this.idle);
    let w: Worker;
    try {
      w = this.start();
    } catch (err) {
      return Promise.reject(incomplete(what, err));
    }
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { what, resolve: resolve as (v: unknown) => void, reject });
      w.postMessage({ id, call });
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const file = workerFile();
    if (!existsSync(file)) throw new Error(`the report thread's code is missing (${file}): build the gateway first`);
    const w = new Worker(file, {
      workerData: this.data,
      name: 'tollgate-reports',
      // V8 ends the thread (not the process) when its heap is full: see stopped().
      resourceLimits: { maxOldGenerationSizeMb: this.data.memoryMb, maxYoungGenerationSizeMb: REPORT_THREAD_YOUNG_MB },
    });
    // An idle thread does not keep the process alive; a report in flight keeps its admin request, and so the server.
    w.unref();
    w.on('message', (m: ReportReply | { ready: true; niced: boolean }) => {
      if ('ready' in m) return this.logger?.debug({ lowPriority: m.niced }, 'report thread started');
      this.settle(m);
    });
    w.on('error', (err) => this.stopped(w, err));
    w.on('exit', (code) => this.stopped(w, new Error(`the report thread stopped (exit code ${code})`)));
    this.worker = w;
    return w;
  }

  private settle(m: ReportReply): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.ok) p.resolve(m.value);
    else
      p.reject(
        m.error.reportCode !== undefined
          ? new ReportError(m.error.reportCode, m.error.message)
          : m.error.code !== undefined
            ? new KeyAdminError(m.error.code, m.error.message)
            : new Error(m.error.message),
      );
    if (this.pending.size === 0) {
      clearTimeout(this.idle);
      this.idle = setTimeout(() => this.stopIdle(), this.idleMs);
      this.idle.unref();
    }
  }

  /** The thread ended (an error, or it exited): the reports it was running fail, complete or not at all. */
  private stopped(w: Worker, err: Error): void {
    if (this.worker !== w) return;
    this.worker = undefined;
    const outOfMemory = (err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
    if (this.pending.size > 0)
      this.logger?.error({ err, outOfMemory, memoryMb: this.data.memoryMb }, 'report thread stopped while running reports: they fail (503)');
    if (!outOfMemory) return this.failPending(err);
    for (const p of this.pending.values())
      p.reject(
        new ReportError(
          'report_out_of_memory',
          `${p.what} needed more than the report thread's ${this.data.memoryMb} MB (usage.reportMemoryMb; reports running at once share it) and was stopped, nothing partial returned: ask for a shorter period, or raise usage.reportMemoryMb and the container's memory limit with it`,
        ),
      );
    this.pending.clear();
  }

  private failPending(err: Error): void {
    for (const p of this.pending.values()) p.reject(incomplete(p.what, err));
    this.pending.clear();
  }

  /** Idle for idleMs: the thread closes its Redis connection and ends (what it kept goes with it). */
  private stopIdle(): void {
    const w = this.worker;
    if (!w || this.pending.size > 0) return;
    this.worker = undefined;
    w.postMessage('close');
    // A connection that does not close within a few seconds does not keep the thread.
    setTimeout(() => void w.terminate(), 5000).unref();
  }
}

/** Every field of T, each given (undefined where T's is optional): a field added to T must be added where this is built. */
type EveryField<T> = { [K in keyof Required<T>]: T[K] };
