// The bound on reads in flight on a connection that serves reports (the admin connection, the CLI's): a report over
// every key and day is hundreds of thousands of reads, and fired at once they would queue ahead of every other
// command on the same Redis (the request path's included) and time out together. p-limit queues the rest in memory.
import pLimit from 'p-limit';

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
