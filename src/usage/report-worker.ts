// The report thread's own code (started by report-thread.ts): its own Redis connection and the reports over every key
// (those kept for their pages are kept in Redis, for any instance to read), so that none of a report's work
// (thousands of replies read, records parsed, rows sorted) runs on the event loop that serves the request path. The thread asks the kernel for the lowest CPU
// priority: on a busy machine the request path, and Redis answering it, go first.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { consumerPlans } from '../consumers/limits-in-force.js';
import { RedisConsumerStore } from '../consumers/redis-store.js';
import { KeyAdminError } from '../keys/admin-errors.js';
import { KeyRecords } from '../keys/records.js';
import { RedisKeyStore } from '../keys/redis-store.js';
import { Keyspace } from '../storage/keyspace.js';
import { pacedReadLimit } from '../storage/read-limit.js';
import { connectRedis } from '../storage/redis.js';
import { systemClock } from '../util/clock.js';
import { RedisKeptReports, ReportError } from './kept-reports.js';
import { InProcessReports } from './report-runner.js';
import { UsageReports } from './reports.js';
import { RedisUsageStore } from './store.js';
import type { ReportCall, ReportReply, ReportThreadData } from './report-thread.js';

/** This thread's nice value (19: the lowest priority), on Linux, where a thread's priority is its own. */
function lowerPriority(nice: number): boolean {
  try {
    // /proc/thread-self -> "<pid>/task/<tid>": setpriority() on a thread id changes that thread alone.
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return false;
    setPriority(tid, nice);
    return true;
  } catch {
    return false;
  }
}

const data = workerData as ReportThreadData;
const port = parentPort!;
const niced = lowerPriority(data.nice);
const connection = connectRedis({ redis: data.redis, commandTimeoutMs: data.commandTimeoutMs, purpose: 'reports' });
const keyspace = new Keyspace(data.prefix);
const reads = pacedReadLimit(data.readsInFlight, data.readRest);
const reports = new InProcessReports(
  new UsageReports(
    new RedisUsageStore(connection.client, keyspace, reads),
    new KeyRecords(new RedisKeyStore(connection, keyspace), reads),
    // The what-if grouped by consumer: each pool under its consumer's plan and own limits, read when it runs.
    consumerPlans(new RedisConsumerStore(connection, keyspace), systemClock),
  ),
  // Reports kept for their pages live in Redis: the next page may be asked of another instance.
  new RedisKeptReports(connection.client, keyspace),
);

async function answer(call: ReportCall): Promise<unknown> {
  switch (call.op) {
    case 'page':
      return reports.page(call.first, call.limit);
    case 'consumerPage':
      return reports.consumerPage(call.first, call.limit);
    case 'summary':
      return reports.summary(call.fromMs, call.toMs, call.granularity);
    case 'consumerUsage':
      return reports.consumerUsage(call.consumer, call.fromMs, call.toMs, call.granularity);
    case 'simulate':
      return reports.simulate(call.first, call.limit);
    case 'deprecatedRoutes':
      return reports.deprecatedRoutes(call.fromMs, call.toMs, call.routes, call.groupBy);
    case 'invalidRequests':
      return reports.invalidRequests(call.fromMs, call.toMs, call.operations, call.groupBy);
  }
}

port.on('message', (msg: { id: number; call: ReportCall } | 'close') => {
  if (msg === 'close') {
    void connection.close().finally(() => port.close());
    return;
  }
  answer(msg.call).then(
    (value) => port.postMessage({ id: msg.id, ok: true, value } satisfies ReportReply),
    (err: unknown) =>
      port.postMessage({
        id: msg.id,
        ok: false,
        error: {
          message: err instanceof Error ? err.message : String(err),
          ...(err instanceof KeyAdminError ? { code: err.code } : {}),
          ...(err instanceof ReportError ? { reportCode: err.code } : {}),
        },
      } satisfies ReportReply),
  );
});
port.postMessage({ ready: true, niced });
