// The generic host of background threads (src/workers/thread-host.ts), with a tiny long-running thread of the tests'
// own (test/fixtures/threads/echo-worker.mjs, on the built thread-side.ts): it answers calls by id (errors with their
// fields), runs at the nice value asked for, is started again at once when it dies (process.exit inside the thread)
// and answers again, ends alone past its heap bound while this process goes on and says so, and stops gracefully.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../src/observability/logger.js';
import { ThreadHost, ThreadStopped, threadEntry, type ThreadDeath, type ThreadHostOptions } from '../src/workers/thread-host.js';
import { waitFor } from './helpers/wait.js';

type Call =
  | { op: 'echo'; value: string }
  | { op: 'nice' }
  | { op: 'fail'; value: string }
  | { op: 'emit'; value: string }
  | { op: 'exit'; code: number }
  | { op: 'allocate' }
  | { op: 'slow'; ms: number };

const ENTRY = threadEntry(import.meta.url, './fixtures/threads/echo-worker.mjs');

/** Log lines as parsed objects. */
function capturedLogger(): { lines: Array<Record<string, unknown>>; logger: ReturnType<typeof createLogger> } {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, logger: createLogger('debug', { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) }) };
}

/** The calling thread's nice value (/proc/thread-self/stat, field 19). */
function ownNice(): number {
  const stat = readFileSync('/proc/thread-self/stat', 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

const hosts: Array<ThreadHost<Call, unknown>> = [];
function host(opts: Partial<ThreadHostOptions<{ n: number }>> = {}): ThreadHost<Call, { n: number }> {
  const h = new ThreadHost<Call, { n: number }>({ name: 'tollgate-test', label: 'test thread', entry: ENTRY, data: { n: 7 }, mode: 'long-running', ...opts });
  hosts.push(h as ThreadHost<Call, unknown>);
  return h;
}

afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.stop(0)));
});

describe('threadEntry', () => {
  it('names the build copy in dist/ for an entry under src/ run from the sources, a file outside src/ as it is', () => {
    const fromSources = new URL('../src/workers/report-thread.ts', import.meta.url).href;
    expect(threadEntry(fromSources, './report-worker.js')).toBe(fileURLToPath(new URL('../dist/workers/report-worker.js', import.meta.url)));
    const built = new URL('../dist/workers/report-thread.js', import.meta.url).href;
    expect(threadEntry(built, './report-worker.js')).toBe(fileURLToPath(new URL('../dist/workers/report-worker.js', import.meta.url)));
    expect(ENTRY).toBe(fileURLToPath(new URL('./fixtures/threads/echo-worker.mjs', import.meta.url)));
  });
});

describe('a long-running thread on ThreadHost', () => {
  it('starts, answers calls by id with its data, errors with their fields, and its events', async () => {
    const events: unknown[] = [];
    const h = host({ onEvent: (e) => events.push(e), reviveError: (e) => Object.assign(new Error(e.message), { code: e.code }) });
    expect(h.running).toBe(false);
    h.start();
    expect([h.running, h.starts]).toEqual([true, 1]);
    const answers = await Promise.all(['a', 'b', 'c'].map((value) => h.call<{ echo: string; data: unknown }>(`echo ${value}`, { op: 'echo', value })));
    expect(answers.map((a) => [a.echo, a.data])).toEqual([
      ['a', { n: 7 }],
      ['b', { n: 7 }],
      ['c', { n: 7 }],
    ]);
    await expect(h.call('a refusal', { op: 'fail', value: 'x' })).rejects.toMatchObject({ message: 'refused x', code: 'refused' });
    expect(await h.call('an event', { op: 'emit', value: 'hello' })).toBe('emitted');
    await waitFor(() => events.length > 0, 'the event');
    expect(events).toEqual([{ said: 'hello' }]);
    // A call that cannot be copied to the thread fails alone; the thread goes on.
    await expect(h.call('a function', { op: 'echo', value: (() => 'x') as unknown as string })).rejects.toMatchObject({ name: 'DataCloneError' });
    expect(await h.call('echo', { op: 'echo', value: 'd' })).toMatchObject({ echo: 'd' });
    expect([h.inFlight, h.starts]).toEqual([0, 1]);
  });

  it('runs at the nice value asked for (this process stays at its own)', async () => {
    const before = ownNice();
    const h = host({ nice: 19 });
    expect(await h.call('nice', { op: 'nice' })).toEqual({ niced: true, nice: 19 });
    expect(ownNice()).toBe(before);
  });

  it('killed (process.exit inside the thread): its call fails, it is noted and started again at once, and answers again', async () => {
    const { lines, logger } = capturedLogger();
    const deaths: ThreadDeath[] = [];
    const h = host({ logger, onDeath: (d) => deaths.push(d) });
    h.start();
    const first = await h.call<{ threadId: number }>('echo', { op: 'echo', value: 'before' });
    const slow = h.call('a slow call', { op: 'slow', ms: 60_000 }).catch((e: unknown) => e);
    const err = await h.call('the exit', { op: 'exit', code: 3 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThreadStopped);
    expect(err).toMatchObject({ reason: 'exited', exitCode: 3, message: 'the exit could not be completed: the test thread stopped (exit code 3)' });
    // Every call it was running fails with it.
    expect(await slow).toMatchObject({ reason: 'exited', message: expect.stringMatching(/^a slow call could not be completed/) });
    expect(deaths).toEqual([expect.objectContaining({ outOfMemory: false, failed: 2, restartInMs: 0 })]);
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 50, thread: 'tollgate-test', failed: 2, restartInMs: 0, msg: 'test thread stopped: started again at once' }),
    );
    // Started again without a call asking for it.
    expect([h.running, h.starts]).toEqual([true, 2]);
    await waitFor(() => lines.filter((l) => l.msg === 'test thread started').length === 2, 'the new thread to say it started');
    const again = await h.call<{ echo: string; threadId: number }>('echo', { op: 'echo', value: 'after' });
    expect(again.echo).toBe('after');
    expect(again.threadId).not.toBe(first.threadId);
  });

  it('dying again soon after, it is started again after a pause, or by the next call', async () => {
    const deaths: ThreadDeath[] = [];
    const h = host({ onDeath: (d) => deaths.push(d) });
    h.start();
    await h.call('exit', { op: 'exit', code: 1 }).catch(() => {});
    await h.call('exit', { op: 'exit', code: 1 }).catch(() => {});
    expect(deaths.map((d) => d.restartInMs)).toEqual([0, 1000]);
    expect(h.running).toBe(false);
    expect(await h.call('echo', { op: 'echo', value: 'now' })).toMatchObject({ echo: 'now' });
    expect(h.starts).toBe(3);
  });

  it('past its heap bound (resourceLimits) the thread ends alone: this process goes on, says so, and the thread answers again', async () => {
    const { lines, logger } = capturedLogger();
    const h = host({ logger, logFields: { memoryMb: 24 }, resourceLimits: { maxOldGenerationSizeMb: 24, maxYoungGenerationSizeMb: 4 } });
    h.start();
    const before = process.memoryUsage().heapUsed;
    const err = await h.call('the allocation', { op: 'allocate' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ThreadStopped);
    expect((err as ThreadStopped).reason).toBe('out_of_memory');
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 50, outOfMemory: true, memoryMb: 24, failed: 1, msg: 'test thread stopped: started again at once' }),
    );
    // None of the thread's heap was this process's.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(64 << 20);
    expect(await h.call('echo', { op: 'echo', value: 'still here' })).toMatchObject({ echo: 'still here' });
    expect(h.starts).toBe(2);
  }, 60_000);

  it('stop() asks it to close: its close() runs and it ends by itself; every later call fails, and it is not started again', async () => {
    const events: unknown[] = [];
    const deaths: ThreadDeath[] = [];
    const h = host({ onEvent: (e) => events.push(e), onDeath: (d) => deaths.push(d) });
    h.start();
    await h.call('echo', { op: 'echo', value: 'x' });
    const t0 = Date.now();
    await h.stop();
    // Ended by itself after its close() (its timer cleared, the port closed), well before the 5 s grace.
    expect(Date.now() - t0).toBeLessThan(4000);
    expect(events).toContainEqual(expect.objectContaining({ closed: true }));
    expect(h.running).toBe(false);
    await expect(h.call('late', { op: 'echo', value: 'y' })).rejects.toMatchObject({
      reason: 'stopping',
      message: 'late could not be completed: the gateway is shutting down',
    });
    expect(() => h.start()).toThrow(ThreadStopped);
    expect([deaths, h.starts]).toEqual([[], 1]);
  });

  it('a thread still busy after the grace is terminated, and the calls it was running fail', async () => {
    const h = host();
    h.start();
    const slow = h.call('a slow call', { op: 'slow', ms: 60_000 }).catch((e: unknown) => e);
    const t0 = Date.now();
    await h.stop(300);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    expect(await slow).toMatchObject({ reason: 'stopping', message: 'a slow call could not be completed: the gateway is shutting down' });
    expect(h.running).toBe(false);
  });

  it('a thread whose code is missing is refused when started, naming the file and the build', async () => {
    const h = host({ entry: '/nonexistent/worker.js' });
    expect(() => h.start()).toThrow(/the test thread's code is missing \(\/nonexistent\/worker\.js\): build the gateway first/);
    await expect(h.call('echo', { op: 'echo', value: 'x' })).rejects.toMatchObject({ reason: 'not_started' });
  });
});

describe('an on-demand thread on ThreadHost', () => {
  it('starts with the first call, ends once idle (its close() run), and the next call starts another', async () => {
    const events: unknown[] = [];
    const h = host({ mode: 'on-demand', idleMs: 200, onEvent: (e) => events.push(e) });
    expect(h.running).toBe(false);
    const a = await h.call<{ threadId: number }>('echo', { op: 'echo', value: 'a' });
    expect(h.running).toBe(true);
    await waitFor(() => !h.running, 'the idle thread to end');
    await waitFor(() => events.some((e) => (e as { closed?: boolean }).closed), 'its close() to run');
    const b = await h.call<{ threadId: number }>('echo', { op: 'echo', value: 'b' });
    expect(b.threadId).not.toBe(a.threadId);
    expect(h.starts).toBe(2);
  });

  it('killed, it is not started again until the next call', async () => {
    const deaths: ThreadDeath[] = [];
    const h = host({ mode: 'on-demand', onDeath: (d) => deaths.push(d) });
    await h.call('exit', { op: 'exit', code: 2 }).catch(() => {});
    expect(deaths).toEqual([expect.objectContaining({ failed: 1, restartInMs: undefined })]);
    expect(h.running).toBe(false);
    expect(await h.call('echo', { op: 'echo', value: 'b' })).toMatchObject({ echo: 'b' });
  });
});
