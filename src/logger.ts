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
