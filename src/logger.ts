// Structured JSON logs (pino). Authorization and anything that may carry a key are redacted at the source.
import { pino, type Logger, type LevelWithSilent, type DestinationStream } from 'pino';

export type { Logger };

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
];

export function createLogger(level: LevelWithSilent, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    // Asynchronous writes: a slow stdout consumer must not stall the request path.
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
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
