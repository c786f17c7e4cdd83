// Structured JSON logs (pino). Authorization and anything that may carry a key are redacted at the source. Which
// headers and which text carry keys is not the logger's to know (auth.sources and the issued prefix are the
// config's, their shapes src/http/credentials.ts's): whoever builds a logger hands them over (LogRedaction). Only
// HTTP's own credential headers (Authorization, Proxy-Authorization, Cookie) are redacted by every logger.
import { pino, type Logger, type LevelWithSilent, type DestinationStream } from 'pino';

export type { Logger };

// Top-level keys that may hold a key. (A path under `req` would make pino clone and re-parse the access log's `req`
// object on every line, about 2.5 KB of garbage and 3 µs per request, for headers that object never has: the `req`
// serializer below covers headers logged under `req` instead.)
export const REDACT_PATHS = ['headers.authorization', 'authorization'];

/** Request headers that carry credentials in HTTP itself: replaced wherever a `req` with headers is logged. */
const SECRET_HEADERS = ['authorization', 'proxy-authorization', 'cookie'];

/** What else carries keys, as the composition root knows it (src/http/credentials.ts, logRedaction). */
export interface LogRedaction {
  /**
   * Lower-case names of more headers whose values are replaced wherever a `req` with headers is logged. Iterated at
   * every such line, so a set that grows as the config is reloaded is followed.
   */
  headers: Iterable<string>;
  /** The whole serialized line with every secret in it replaced; the same string when there is none. */
  line: (text: string) => string;
}

/**
 * The `req` serializer: an object with headers is logged with its credential headers redacted (HTTP's own, and every
 * header `extra` names: a key there may have any shape); anything else as is.
 */
function redactRequestHeaders(extra: Iterable<string>): (req: unknown) => unknown {
  return (req) => {
    const headers = (req as { headers?: unknown } | null | undefined)?.headers;
    if (headers === null || typeof headers !== 'object') return req;
    const safe: Record<string, unknown> = { ...(headers as Record<string, unknown>) };
    for (const name of SECRET_HEADERS) if (safe[name] !== undefined) safe[name] = '[redacted]';
    for (const name of extra) if (safe[name] !== undefined) safe[name] = '[redacted]';
    return { ...(req as object), headers: safe };
  };
}

/**
 * A logger at `level` on `destination` (stdout's logDestination when left out). `redaction`: the headers and text
 * that carry keys, besides HTTP's credential headers; the gateway's, the CLI's and the servers' loggers are given
 * src/http/credentials.ts's logRedaction (key-shaped text is redacted from every line, whatever field it came in; a
 * key of another shape is kept out by where it is read: the access log's URL has key parameters redacted,
 * pipeline/observers.ts, and no line carries request headers but through the `req` serializer).
 */
export function createLogger(level: LevelWithSilent, destination?: DestinationStream, redaction?: LogRedaction): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { req: redactRequestHeaders(redaction?.headers ?? []) },
      timestamp: isoTime,
      ...(redaction ? { hooks: { streamWrite: redaction.line } } : {}),
    },
    destination ?? logDestination(1),
  );
}

/** Largest single write of queued log lines. */
export const LOG_MAX_WRITE = 256 * 1024;

/** The default bound of the log queue (log.maxBufferBytes). */
export const DEFAULT_LOG_BUFFER_BYTES = 16 * 1024 * 1024;

/**
 * The log stream on `fd`: pino's sonic-boom, asynchronous, so a slow consumer of stdout does not stall the request
 * path. Lines are queued as Buffers (sonic-boom's buffer mode, which keeps each chunk's byte length as it goes) and
 * everything queued while a write was in flight goes out in the next one, up to LOG_MAX_WRITE bytes.
 *
 * Its default text mode writes one chunk of at most maxWrite bytes per write, and re-measures (so re-copies) that
 * chunk on every line it joins. Each write is a round trip through libuv's thread pool that completes only when the
 * event loop comes round, so under load the log drained a few KB per turn of the loop while a turn's requests logged
 * more: a 429 flood at 8,000 requests/s queued 15 MB of lines in 10 s (bench/history/2026-11.md, "RSS: the log backlog and
 * V8's heap growth").
 */
export function logDestination(fd: number, maxBufferBytes = DEFAULT_LOG_BUFFER_BYTES): DestinationStream {
  // maxLength: a line that would take the queue past maxBufferBytes is dropped (a 'drop' event; see reportLogDrops),
  // so a stdout nobody reads (a stalled log collector, a full pipe) costs a bounded amount of memory, not the process.
  const stream = pino.destination({
    dest: fd,
    sync: false,
    contentMode: 'buffer',
    maxWrite: LOG_MAX_WRITE,
    maxLength: maxBufferBytes,
  });
  // pino writes strings; buffer mode takes Buffers. sonic-boom sets write per instance, according to the mode.
  const writeBuffer = stream.write as unknown as (chunk: Buffer) => boolean;
  stream.write = (line: string): boolean => writeBuffer.call(stream, Buffer.from(line));
  return stream;
}

/**
 * Counts the lines the logger's stream drops (its queue was full: see logDestination), calling onDrop for each, and
 * once the stream takes lines again logs a warning with how many were lost since the last one. Tried every
 * intervalMs while lines are being lost; a notice that is itself dropped is not counted and is tried again.
 */
export function reportLogDrops(logger: Logger, onDrop: () => void = () => {}, intervalMs = 1000): void {
  const stream = streamOf(logger);
  if (typeof stream?.on !== 'function') return;
  let dropped = 0;
  let reported = 0;
  let noticing = false;
  let noticeDropped = false;
  let timer: NodeJS.Timeout | undefined;
  const notice = (): void => {
    const lost = dropped - reported;
    noticing = true;
    noticeDropped = false;
    // The stream drops synchronously, inside this call, when it is still full.
    logger.warn({ droppedLines: lost }, 'log output fell behind: lines were dropped');
    noticing = false;
    if (noticeDropped) return;
    reported += lost;
    clearInterval(timer);
    timer = undefined;
  };
  stream.on('drop', () => {
    if (noticing) {
      noticeDropped = true;
      return;
    }
    dropped++;
    onDrop();
    if (!timer) timer = setInterval(notice, intervalMs).unref();
  });
}

function streamOf(logger: Logger): { on?: (event: string, fn: () => void) => void } | undefined {
  return (logger as unknown as Record<symbol, { on?: (event: string, fn: () => void) => void } | undefined>)[pino.symbols.streamSym];
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
    { end?: () => void; once?: (event: string, cb: () => void) => void; destroyed?: boolean } | undefined;
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
