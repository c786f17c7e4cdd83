// Bounds how long the caller waits on a promise: the shared guard behind "no request waits longer than X".

/** The deadline passed with no answer (the Redis breaker tells timeouts from other failures by it). */
export class DeadlineError extends Error {}

/** How late a deadline timer may fire before the event loop counts as having been behind. */
const LATE_MS = 2;

export function withDeadline<T>(p: Promise<T>, ms: number, what = 'operation'): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    const started = performance.now();
    timer = setTimeout(() => {
      const fail = () => reject(new DeadlineError(`${what}: no answer within ${ms} ms`));
      // Timers fire before the poll phase reads sockets. A timer that fired late means the event loop was behind,
      // and the answer may already be waiting unread: one setImmediate lets the poll phase deliver it first (the
      // race then resolves with it). An on-time timer rejects at once.
      if (performance.now() - started - ms > LATE_MS) setImmediate(fail);
      else fail();
    }, ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}
