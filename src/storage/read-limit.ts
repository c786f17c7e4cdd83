// The bound on reads in flight on a connection that serves reports (the admin connection, the CLI's): a report over
// every key and day is hundreds of thousands of reads, and fired at once they would queue ahead of every other
// command on the same Redis (the request path's included) and time out together. p-limit queues the rest in memory.
// The report thread's reads are also paced: a report may use only part of Redis's time, whatever its size.
import pLimit from 'p-limit';
import { setTimeout as sleep } from 'node:timers/promises';

/** Runs `fn` when fewer than the bound are in flight. */
export type ReadLimit = <T>(fn: () => Promise<T>) => Promise<T>;

/**
 * Reads one report keeps in flight at most: enough to keep a loopback or LAN round trip busy, few enough that a
 * request-path command queued behind them on Redis waits well under a millisecond (bench/README.md, "Reports").
 */
export const REPORT_READS_IN_FLIGHT = 32;

export function readLimit(n: number = REPORT_READS_IN_FLIGHT): ReadLimit {
  const limit = pLimit(n);
  return (fn) => limit(fn);
}

/**
 * Like readLimit, and each read keeps its place, once answered, for `rest` times as long as it took before the next
 * read takes it: the reads of a report then keep Redis busy for about 1 / (1 + rest) of the time at most, leaving the
 * rest to the request path's limit checks however long the report runs. The answer is given at once; only the next
 * read waits.
 */
export function pacedReadLimit(n: number, rest: number): ReadLimit {
  const limit = pLimit(n);
  return (fn) =>
    new Promise((resolve, reject) => {
      void limit(async () => {
        const t0 = performance.now();
        try {
          resolve(await fn());
        } catch (err) {
          reject(err);
        }
        await sleep((performance.now() - t0) * rest);
      });
    });
}
