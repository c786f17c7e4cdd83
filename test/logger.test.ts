// The log stream at exit: lines logged just before process.exit come out complete and in order, even while the
// asynchronous destination still has a write in flight to a pipe that is full.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOG_MAX_WRITE } from '../src/observability/logger.js';
import { REPO, cleanEnv } from './helpers/cli.js';

const LOGGER = join(REPO, 'dist', 'observability', 'logger.js');

function runChild(script: string): Promise<{ code: number | null; lines: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'inherit'] });
    const chunks: Buffer[] = [];
    // Read slowly at first, so the pipe fills and the logger has writes in flight when the child exits.
    child.stdout.pause();
    setTimeout(() => child.stdout.resume(), 300);
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, lines: Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean) });
    });
  });
}

describe('closeLogs', () => {
  it('writes every buffered line, in order, before the process exits', async () => {
    const N = 20_000;
    const script = `
      import { createLogger, closeLogs } from ${JSON.stringify(LOGGER)};
      // The CLI touches process.stdout, which makes a piped fd 1 non-blocking: writes then meet EAGAIN when the
      // pipe is full, the case where an exit-time synchronous flush used to cut and interleave lines.
      void process.stdout.columns;
      const logger = createLogger('info');
      // Bursts with a turn of the event loop between them, so writes are in flight while lines keep coming.
      let i = 0;
      for (let burst = 0; burst < ${N / 500}; burst++) {
        for (let k = 0; k < 500; k++) logger.info({ i: i++, pad: 'x'.repeat(60) }, 'line');
        await new Promise((r) => setImmediate(r));
      }
      logger.info('stopped');
      await closeLogs(logger, 10_000);
      process.exit(0);
    `;
    const { code, lines } = await runChild(script);
    expect(code).toBe(0);
    const parsed = lines.map((l) => {
      try {
        return JSON.parse(l) as { i?: number; msg: string };
      } catch {
        return { msg: `not JSON: ${l.slice(0, 80)}` };
      }
    });
    expect(parsed).toHaveLength(N + 1);
    expect(parsed.at(-1)!.msg).toBe('stopped');
    const outOfOrder = parsed.slice(0, N).findIndex((l, i) => l.i !== i);
    expect(outOfOrder).toBe(-1);
  });
});

describe('isoTime', () => {
  it('writes the same timestamp as toISOString, across seconds, milliseconds and days', async () => {
    const { isoTime } = await import('../src/observability/logger.js');
    const base = Date.UTC(2026, 10, 22, 23, 59, 58, 0);
    // Each millisecond of three seconds (and the change of day between them), then some out of order.
    const times = [...Array.from({ length: 3000 }, (_, i) => base + i), base + 5, base + 2999, base - 86_400_000 + 7, base + 1_000_000_123];
    for (const t of times) expect(isoTime(t)).toBe(`,"time":"${new Date(t).toISOString()}"`);
  });
});

describe('redaction', () => {
  it('credential headers are redacted wherever they are logged; the access log shape passes unchanged', async () => {
    const { Writable } = await import('node:stream');
    const { createLogger } = await import('../src/observability/logger.js');
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    const logger = createLogger('info', sink);
    const key = 'tg_SECRETSECRETSECRETSECRETSECRET0000';
    logger.info(
      { req: { method: 'GET', headers: { authorization: `Bearer ${key}`, 'proxy-authorization': key, cookie: key, accept: 'application/json' } } },
      'raw request',
    );
    logger.info({ headers: { authorization: key, accept: 'x' } }, 'headers');
    logger.info({ authorization: key }, 'top level');
    logger.info({ req: { id: 'r1', method: 'GET', url: '/v1/x', remoteAddress: '127.0.0.1' }, res: { statusCode: 200 } }, 'request completed');
    await new Promise((r) => setImmediate(r));
    expect(JSON.stringify(lines)).not.toContain(key);
    expect(lines[0]!.req).toEqual({
      method: 'GET',
      headers: { authorization: '[redacted]', 'proxy-authorization': '[redacted]', cookie: '[redacted]', accept: 'application/json' },
    });
    expect(lines[1]!.headers).toEqual({ authorization: '[redacted]', accept: 'x' });
    expect(lines[2]!.authorization).toBe('[redacted]');
    expect(lines[3]!.req).toEqual({ id: 'r1', method: 'GET', url: '/v1/x', remoteAddress: '127.0.0.1' });
  });

  it('what else carries keys is what its builder hands it: key-source headers (also those named after it was built) and key-shaped text', async () => {
    const { Writable } = await import('node:stream');
    const { createLogger } = await import('../src/observability/logger.js');
    const { compileKeySources, logRedaction } = await import('../src/http/credentials.js');
    const { generateKey } = await import('../src/keys/format.js');
    const sink = (lines: Record<string, unknown>[]) =>
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          for (const l of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
          cb();
        },
      });
    const given: Record<string, unknown>[] = [];
    const bare: Record<string, unknown>[] = [];
    const withRedaction = createLogger('info', sink(given), logRedaction('acme_'));
    const without = createLogger('info', sink(bare));
    // A header source configured after the loggers were built (a reload): the one given the redaction follows it.
    compileKeySources(['bearer', 'header:X-Late-Key-Logger-Test']);
    const issued = generateKey('acme_');
    const req = { req: { headers: { 'x-late-key-logger-test': 'opaque-secret-value', authorization: 'Bearer x' } } };
    for (const logger of [withRedaction, without]) logger.info({ ...req, note: `saw ${issued}` }, 'line');
    await new Promise((r) => setImmediate(r));
    expect(given[0]!.req).toEqual({ headers: { 'x-late-key-logger-test': '[redacted]', authorization: '[redacted]' } });
    expect(given[0]!.note).toBe('saw acme_[redacted]');
    // Without it the logger knows only HTTP's own credential headers: nothing of key sources or issued prefixes.
    expect(bare[0]!.req).toEqual({ headers: { 'x-late-key-logger-test': 'opaque-secret-value', authorization: '[redacted]' } });
    expect(bare[0]!.note).toBe(`saw ${issued}`);
  });

  it('text shaped like a key is redacted in every field of every line, nested or not, and in the message', async () => {
    const { captureLogger } = await import('./helpers/limits.js');
    const { generateKey } = await import('../src/keys/format.js');
    const cap = captureLogger('info');
    const key = generateKey();
    cap.logger.warn({ err: { message: `bad ${key}`, nested: [{ deeper: `x${key}y` }] } }, 'failed');
    cap.logger.info({ [key]: 'as a name', other: 'tg_short stays' }, `a message with ${key} in it`);
    cap.logger.child({ id: key }).error('from a child');
    expect(JSON.stringify(cap.lines)).not.toContain(key);
    expect(cap.lines[0]!.err).toMatchObject({ message: 'bad tg_[redacted]', nested: [{ deeper: 'xtg_[redacted]' }] });
    expect(cap.lines[1]).toMatchObject({ 'tg_[redacted]': 'as a name', other: 'tg_short stays', msg: 'a message with tg_[redacted] in it' });
    expect(cap.lines[2]).toMatchObject({ id: 'tg_[redacted]', msg: 'from a child' });
  });
});

describe('logDestination', () => {
  it('writes what queued during a write in one large write: every line intact and in order, multi-byte text too', async () => {
    const fs = (await import('node:fs')).default;
    const { mkdtempSync, openSync, readFileSync, rmSync } = fs;
    const { tmpdir } = await import('node:os');
    const { vi } = await import('vitest');
    const { createLogger, closeLogs, logDestination, LOG_MAX_WRITE } = await import('../src/observability/logger.js');
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-log-'));
    const writes = vi.spyOn(fs, 'write');
    try {
      const file = join(dir, 'log.ndjson');
      const logger = createLogger('info', logDestination(openSync(file, 'w')));
      // A busy moment: 5,000 lines (about 2.5 MB) logged in one turn of the event loop.
      const N = 5_000;
      const name = 'Zoë 🐕 Ωmega';
      for (let i = 0; i < N; i++) logger.info({ i, name, pad: 'x'.repeat(400) }, 'request completed');
      await closeLogs(logger, 10_000);
      const lines = readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { i: number; name: string });
      expect(lines).toHaveLength(N);
      expect(lines.findIndex((l, i) => l.i !== i || l.name !== name)).toBe(-1);
      // Whole chunks of up to LOG_MAX_WRITE, not one line-sized or 4 KB piece per write: the queue drains about as
      // fast as the disk or pipe takes it, instead of a few KB per turn of the event loop.
      const bytes = Buffer.byteLength(readFileSync(file));
      expect(writes.mock.calls.length).toBeGreaterThan(0);
      expect(writes.mock.calls.length).toBeLessThanOrEqual(Math.ceil(bytes / LOG_MAX_WRITE) + 2);
    } finally {
      writes.mockRestore();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the log queue bound (log.maxBufferBytes)', () => {
  it('drops and counts lines while stdout takes nothing, then says how many were lost; what was kept is whole and in order', async () => {
    const BOUND = 1024 * 1024;
    const N = 20_000; // about 5 MB of lines, five times the bound
    const script = `
      import { createLogger, closeLogs, logDestination, reportLogDrops } from ${JSON.stringify(LOGGER)};
      void process.stdout.columns; // fd 1 non-blocking, as in the CLI: a full pipe answers EAGAIN
      const logger = createLogger('info', logDestination(1, ${BOUND}));
      let counted = 0;
      reportLogDrops(logger, () => counted++, 50);
      let i = 0;
      for (let burst = 0; burst < ${N / 500}; burst++) {
        for (let k = 0; k < 500; k++) logger.info({ i: i++, pad: 'x'.repeat(200) }, 'line');
        await new Promise((r) => setImmediate(r));
      }
      process.stderr.write(JSON.stringify({ counted }) + '\\n');
      // The parent starts reading now; the notice goes out once the queue has room.
      await new Promise((r) => setTimeout(r, 1500));
      logger.info('stopped');
      await closeLogs(logger, 10_000);
      process.exit(0);
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let report = '';
    // Nobody reads stdout until the child has logged everything: the pipe (64 KB) fills and the queue with it.
    child.stdout.pause();
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => {
      report += c.toString('utf8');
      if (report.includes('\n')) child.stdout.resume();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', resolve);
    });
    clearTimeout(timer);
    expect(code).toBe(0);
    const counted = (JSON.parse(report.split('\n')[0]!) as { counted: number }).counted;
    const lines = Buffer.concat(chunks)
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { i?: number; msg: string; droppedLines?: number });

    const kept = lines.filter((l) => l.msg === 'line');
    expect(counted).toBeGreaterThan(0);
    expect(kept.length + counted).toBe(N);
    // Bounded: what got through is at most the bound, the pipe and one write in flight, not the 5 MB logged.
    const keptBytes = kept.reduce((n, l) => n + Buffer.byteLength(JSON.stringify(l)) + 1, 0);
    expect(keptBytes).toBeLessThan(BOUND + 64 * 1024 + LOG_MAX_WRITE + 16 * 1024);
    // In order, each line whole (JSON.parse above would have thrown on a cut one).
    expect(kept.every((l, k) => k === 0 || l.i! > kept[k - 1]!.i!)).toBe(true);
    // The loss is reported once stdout takes lines again, with the exact count.
    const notices = lines.filter((l) => l.msg === 'log output fell behind: lines were dropped');
    expect(notices.length).toBeGreaterThan(0);
    expect(notices.reduce((n, l) => n + l.droppedLines!, 0)).toBe(counted);
    expect(lines.at(-1)!.msg).toBe('stopped');
  });
});
