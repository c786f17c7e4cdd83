// Bounded waits on something a test can observe, instead of a fixed sleep that hopes it has happened by then.
import { setTimeout as sleep } from 'node:timers/promises';

/** Waits (bounded) until `cond` holds, checking every stepMs; throws naming `what` otherwise. */
export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000, stepMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await sleep(stepMs);
  }
}
