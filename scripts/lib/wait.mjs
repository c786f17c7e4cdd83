// Small helpers shared by the bench and the soak: free loopback ports, sleeping, bounded polling.
import { createServer } from 'node:net';

/** A TCP port free on 127.0.0.1 right now (never 6379: that one belongs to a shared Redis). */
export async function freePort() {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await new Promise((resolve, reject) => {
      const s = createServer();
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => {
        const p = s.address().port;
        s.close(() => resolve(p));
      });
    });
    if (port !== 6379) return port;
  }
  throw new Error('could not find a free port on 127.0.0.1');
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn until it returns a truthy value; throws after timeoutMs naming what it waited for. */
export async function waitFor(fn, timeoutMs, what, intervalMs = 100) {
  const deadline = Date.now() + timeoutMs;
  let lastErr;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? `: ${lastErr.message}` : ''}`);
    await sleep(intervalMs);
  }
}
