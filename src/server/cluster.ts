// server.workers > 1: a node:cluster primary that forks gateway workers sharing one port. Workers are separate
// gateway instances (they share limits through Redis exactly as separate hosts do); the primary only supervises:
// it forwards SIGHUP, drains all workers on SIGTERM/SIGINT, and replaces a worker that dies.
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Config } from '../config/schema.js';
import { closeLogs, type Logger } from '../observability/logger.js';

export function workerCount(setting: Config['server']['workers']): number {
  return setting === 'auto' ? availableParallelism() : setting;
}

export function runPrimary(config: Config, count: number, logger: Logger, validateReload: () => Promise<boolean>): void {
  // Workers accept from the shared listening socket themselves (SCHED_NONE) instead of the primary accepting and
  // handing each connection over IPC (Node's default round robin). With round robin a connection in flight to a
  // worker that dies is never closed or redistributed (the primary waits for a reply that never comes), so its
  // client hangs; with SCHED_NONE a dead worker loses only connections it had accepted (they are reset) and the
  // kernel's backlog is served by the others. It also saves an IPC hop per connection.
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  let stopping = false;
  const workers = new Set<Worker>();
  // Workers that said they are ready (WORKER_READY, sent once their own SIGHUP handler is installed): SIGHUP's
  // default action ends a process, so one sent to a worker still starting would kill it. A worker not yet ready reads
  // the file as it starts anyway.
  const listening = new Set<Worker>();
  const fork = () => {
    const w = cluster.fork();
    workers.add(w);
    w.on('message', (m: unknown) => {
      if (m === WORKER_READY) listening.add(w);
    });
    w.on('exit', (code, signal) => {
      workers.delete(w);
      listening.delete(w);
      if (stopping) return;
      logger.error({ workerPid: w.process.pid, code, signal }, 'gateway worker died; starting a new one');
      // A worker that dies at once (bad port, ...) must not become a fork storm.
      setTimeout(fork, 1000).unref();
    });
  };
  for (let i = 0; i < count; i++) fork();
  logger.info({ workers: count, port: config.server.port }, 'tollgate primary started workers');

  // Validated once here so a bad file is reported once; each worker then re-reads and applies it. One at a time, in
  // the order the signals came (reading the OpenAPI documents is asynchronous).
  let validating = Promise.resolve();
  process.on('SIGHUP', () => {
    validating = validating.then(async () => {
      if (!(await validateReload())) return;
      for (const w of listening) if (workers.has(w)) w.process.kill('SIGHUP');
    });
  });
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, workers: workers.size }, 'draining workers');
    for (const w of workers) w.process.kill('SIGTERM');
    const deadline = setTimeout(() => {
      for (const w of workers) w.process.kill('SIGKILL');
      process.exit(0);
    }, config.server.drainTimeoutMs + 2000);
    deadline.unref();
    const check = setInterval(() => {
      if (workers.size === 0) {
        clearInterval(check);
        logger.info('stopped');
        void closeLogs(logger).then(() => process.exit(0));
      }
    }, 50);
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

export const isPrimary = (): boolean => cluster.isPrimary;

/** What a worker sends its primary once it serves and handles its own signals. */
const WORKER_READY = 'tollgate:worker-ready';

/** In a worker: tells the primary it may now forward SIGHUP here. Outside a cluster: nothing. */
export function reportWorkerReady(): void {
  if (cluster.isWorker) process.send?.(WORKER_READY);
}
