// The report thread's own code (started by report-thread.ts through thread-host.ts): its own Redis connection and the
// reports over every key (those kept for their pages are kept in Redis, for any instance to read), so that none of a
// report's work (thousands of replies read, records parsed, rows sorted) runs on the event loop that serves the request
// path. The thread asks the kernel for the lowest CPU priority (thread-side.ts): on a busy machine the request path,
// and Redis answering it, go first.
import { consumerPlans } from '../consumers/limits-in-force.js';
import { RedisConsumerStore } from '../consumers/redis-store.js';
import { KeyAdminError } from '../keys/admin-errors.js';
import { KeyRecords } from '../keys/records.js';
import { RedisKeyStore } from '../keys/redis-store.js';
import { Keyspace } from '../storage/keyspace.js';
import { pacedReadLimit } from '../storage/read-limit.js';
import { connectRedis } from '../storage/redis.js';
import { systemClock } from '../util/clock.js';
import { RedisKeptReports, ReportError } from '../usage/kept-reports.js';
import { InProcessReports } from '../usage/report-runner.js';
import { UsageReports } from '../usage/reports.js';
import { RedisUsageStore } from '../usage/store.js';
import type { ReportCall, ReportThreadData } from './report-thread.js';
import { threadSide } from './thread-side.js';

// First: the thread's nice value (19, the lowest priority) before any of its work.
const thread = threadSide<ReportThreadData>();
const data = thread.data;
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
    case 'keyUsageByConsumer':
      return reports.keyUsageByConsumer(call.id, call.fromMs, call.toMs, call.granularity);
    case 'simulate':
      return reports.simulate(call.first, call.limit);
    case 'deprecatedRoutes':
      return reports.deprecatedRoutes(call.fromMs, call.toMs, call.routes, call.groupBy);
    case 'invalidRequests':
      return reports.invalidRequests(call.fromMs, call.toMs, call.operations, call.groupBy);
  }
}

thread.serve<ReportCall>({
  answer,
  // Idle (or the gateway closing): the connection closes, and the thread ends with it.
  close: () => connection.close(),
  errorFields: (err) => ({
    ...(err instanceof KeyAdminError ? { code: err.code } : {}),
    ...(err instanceof ReportError ? { reportCode: err.code } : {}),
  }),
});
