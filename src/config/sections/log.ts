// log: the level, and a bound on the log lines queued for stdout: a stalled stdout drops (and counts) new lines rather
// than grow the heap until the process dies.
import { z } from 'zod';

export const log = z.strictObject({
  level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('Log level (LOG_LEVEL overrides it; a reload applies it).'),
  maxBufferBytes: z.number().int().min(1_048_576).max(1_073_741_824).default(16_777_216).describe('Most bytes of log lines queued for stdout; past it new lines are dropped and counted (read at start-up).'),
});
