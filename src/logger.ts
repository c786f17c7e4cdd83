// Structured JSON logs (pino). Authorization and anything that may carry a key are redacted at the source.
import { pino, type Logger, type LevelWithSilent, type DestinationStream } from 'pino';

export type { Logger };

// Top-level keys that may hold a key. (A path under `req` would make pino clone and re-parse the access log's `req`
// object on every line, about 2.5 KB of garbage and 3 µs per request, for headers that object never has: the `req`
// serializer below covers headers logged under `req` instead.)
export const REDACT_PATHS = ['headers.authorization', 'authorization'];

/** Request headers that carry credentials: replaced wherever a `req` with headers is logged. */
const SECRET_HEADERS = ['authorization', 'proxy-authorization', 'cookie'];

/** The `req` serializer: an object with headers is logged with its credential headers redacted; anything else as is. */
export function redactRequestHeaders(req: unknown): unknown {
  const headers = (req as { headers?: unknown } | null | undefined)?.headers;
  if (headers === null || typeof headers !== 'object') return req;
  const safe: Record<string, unknown> = { ...(headers as Record<string, unknown>) };
  for (const name of SECRET_HEADERS) if (safe[name] !== undefined) safe[name] = '[redacted]';
  return { ...(req as object), headers: safe };
}

export function createLogger(level: LevelWithSilent, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { req: redactRequestHeaders },
      timestamp: isoTime,
    },
    // Asynchronous writes: a slow stdout consumer must not stall the request path. While a write is in flight, lines
    // queue in chunks of up to maxWrite bytes, and each new line re-measures (so re-copies) the chunk it joins: 4 KB
    // chunks instead of the default 16 KB cut that copying, about 5 KB per logged request under load, by three
    // quarters, and still write a busy second's lines in a few hundred writes.
    destination ?? pino.destination({ dest: 1, sync: false, maxWrite: 4096 }),
  );
}

/**
 * pino's isoTime (`,"time":"2026-11-22T09:00:00.000Z"`), with the date and time up to the second formatted once per
 * second rather than once per line: every request writes a line, and `toISOString()` was most of the line's cost.
 */
let isoSecond = -1;
let isoHead = '';
export function isoTime(now = Date.now()): string {
  const second = Math.floor(now / 1000);
  if (second !== isoSecond) {
    isoSecond = second;
    isoHead = new Date(second * 1000).toISOString().slice(0, 19);
  }
  const ms = now - second * 1000;
  return `,"time":"${isoHead}.${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`;
}

/**
 * Writes out every buffered log line, in order, then closes the log stream; call it last, before process.exit.
 * (pino's flush() returns at once for an asynchronous destination, and the exit hook's synchronous flush can
 * overtake a write still in flight, so lines logged just before exit could come out cut, out of order or not at all.)
 */
export function closeLogs(logger: Logger, timeoutMs = 1000): Promise<void> {
  const stream = (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym] as
    | { end?: () => void; once?: (event: string, cb: () => void) => void; destroyed?: boolean }
    | undefined;
  if (!stream || stream.destroyed || typeof stream.end !== 'function' || typeof stream.once !== 'function') return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    timer.unref();
    stream.once!('close', () => {
      clearTimeout(timer);
      resolve();
    });
    stream.end!();
    // Anything logged from here on (a late socket or Redis event) is dropped rather than written to a closed stream.
    logger.level = 'silent';
  });
}
