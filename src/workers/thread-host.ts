// The host side of a background thread (node:worker_threads): what every thread of the gateway needs, so that a
// thread's own module says only what it runs. It finds the thread's code (the build's JavaScript, also when the gateway
// runs from its sources under the test runner), bounds its heap (resourceLimits: a thread that needs more ends alone,
// never the process), asks for its CPU priority (nice, applied by the thread itself: thread-side.ts), sends it calls
// with ids and settles each with the thread's answer, notes a thread that dies (its calls fail with ThreadStopped, a
// log line says why) and starts a new one: on the next call for a thread started on demand, at once (then backing
// off if it keeps dying) for a long-running one. stop() ends it gracefully on shutdown.
import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import type { Logger } from '../observability/logger.js';

/** What the host passes as the thread's workerData; thread-side.ts unwraps it. */
export interface ThreadEnvelope<D> {
  data: D;
  /** The nice value the thread gives itself before anything else (Linux; elsewhere left as it is). */
  nice?: number;
}

/** Host to thread: a call to answer, or 'close' (release what you hold, then let the thread end). */
export type ToThread<Call> = { id: number; call: Call } | 'close';

/** An error the thread answered a call with: its message, and the fields its entry chose to carry (errorFields). */
export interface ThreadErrorReply {
  message: string;
  [field: string]: string | number | boolean | undefined;
}

/** Thread to host: started, a call's answer, or an event of the thread's own (onEvent). */
export type FromThread =
  { ready: true; niced: boolean } | { id: number; ok: true; value: unknown } | { id: number; ok: false; error: ThreadErrorReply } | { event: unknown };

/** Why a thread could not answer a call. */
export type ThreadStopReason =
  | 'not_started' // its code is missing, or the Worker could not be made
  | 'error' // an uncaught error ended it
  | 'exited' // it exited (process.exit inside the thread, or its event loop ran dry)
  | 'out_of_memory' // its heap passed resourceLimits: V8 ended the thread, not the process
  | 'stopping'; // the host is stopping (shutdown)

/** A call the thread could not answer; `reason` says why, `exitCode` how it exited when it did. */
export class ThreadStopped extends Error {
  constructor(
    message: string,
    readonly reason: ThreadStopReason,
    readonly exitCode?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ThreadStopped';
  }
}

/** What a host is told when its thread dies (not when it is stopped). */
export interface ThreadDeath {
  err: ThreadStopped;
  outOfMemory: boolean;
  /** Calls that were running and now fail. */
  failed: number;
  /** When a long-running thread starts again; undefined for a thread started on demand (the next call starts it). */
  restartInMs?: number;
}

export interface ThreadHostOptions<D> {
  /** The Worker's name (seen in heap snapshots, inspectors and the thread's own logs), e.g. tollgate-reports. */
  name: string;
  /** How log lines and errors name it, e.g. "report thread". */
  label: string;
  /** The thread's entry file: threadEntry(import.meta.url, './x-worker.js'). */
  entry: string;
  /** The thread's workerData (structured-cloned: plain data only). */
  data: D;
  /**
   * 'on-demand': started by the first call, ended once idle for idleMs, started again by the next call.
   * 'long-running': started by start() and kept: one that dies is started again at once (backing off while it keeps
   * dying); calls are answered as they come.
   */
  mode: 'on-demand' | 'long-running';
  /** On-demand: how long the thread stays once its last call is answered. */
  idleMs?: number;
  /** V8's bounds for the thread: maxOldGenerationSizeMb, maxYoungGenerationSizeMb, ... */
  resourceLimits?: ResourceLimits;
  /** The nice value the thread sets for itself (19: the lowest CPU priority). Unset: the process's. */
  nice?: number;
  /** How long a thread asked to close (idle, stop()) may take before it is terminated. Default 5000 ms. */
  closeGraceMs?: number;
  logger?: Logger;
  /** Fields every log line about the thread carries besides its name (e.g. its memory bound). */
  logFields?: Record<string, unknown>;
  /**
   * The error a call fails with when the thread could not answer it (it died, the host is stopping, its code is
   * missing). Default: a ThreadStopped naming the call.
   */
  failure?(what: string, err: ThreadStopped): Error;
  /** The error a call fails with when the thread answered with one. Default: an Error with its message. */
  reviveError?(error: ThreadErrorReply): Error;
  /** A message the thread sent of its own (thread-side emit()): counters, state changes. */
  onEvent?(event: unknown): void;
  /** The thread died (not stopped): after its calls were failed and it was logged. */
  onDeath?(death: ThreadDeath): void;
}

/** Restart delays of a long-running thread that keeps dying: the first at once, then slower. */
const RESTART_DELAYS_MS = [0, 1000, 5000, 30_000, 60_000];
const restartDelay = (quickDeaths: number): number => RESTART_DELAYS_MS[Math.min(quickDeaths, RESTART_DELAYS_MS.length - 1)]!;
/** A long-running thread that ran this long before dying is restarted at once again. */
const STEADY_MS = 60_000;
const DEFAULT_CLOSE_GRACE_MS = 5000;
/** On-demand threads stay this long once idle unless told otherwise. */
const DEFAULT_IDLE_MS = 5 * 60_000;

const HERE = fileURLToPath(import.meta.url);
/** src/ when run from the sources (the test runner), dist/ once built. */
const ROOT = resolve(dirname(HERE), '..');
const BUILT_ROOT = join(ROOT, '..', 'dist');

/**
 * A thread's entry file, named relative to the module that hosts it (`threadEntry(import.meta.url, './x-worker.js')`).
 * Built, it is that file, beside the host module in dist/. Run from the sources (the test runner compiles .ts files in
 * its own process; a worker thread loads plain JavaScript), it is the build's copy of it in dist/: the test command
 * builds first. A file outside src/ (a test's own .mjs entry) is taken as it is.
 */
export function threadEntry(from: string | URL, file: string): string {
  const path = fileURLToPath(new URL(file, from));
  if (!fileURLToPath(from).endsWith('.ts')) return path;
  const inside = relative(ROOT, path);
  if (inside.startsWith('..') || isAbsolute(inside)) return path;
  return join(BUILT_ROOT, inside);
}

interface Pending {
  what: string;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/**
 * A background thread, from its host's side. A thread is a host module and an entry file beside it in src/workers/:
 *
 *   const host = new ThreadHost<EventsCall, EventsThreadData>({
 *     name: 'tollgate-events', label: 'events thread', mode: 'long-running',
 *     entry: threadEntry(import.meta.url, './events-worker.js'), data,
 *     nice: 10, resourceLimits: { maxOldGenerationSizeMb: 128 }, logger,
 *   });
 *   host.start();                                   // at the gateway's start; host.stop() in its close()
 *   await host.call('the status', { op: 'status' }); // answered by the entry's answer()
 *
 * and in events-worker.ts: `const thread = threadSide<EventsThreadData>(); ...; thread.serve({ answer, close })`.
 */
export class ThreadHost<Call, D = unknown> {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private idle: NodeJS.Timeout | undefined;
  private restart: NodeJS.Timeout | undefined;
  private closed = false;
  private startedAt = 0;
  /** Deaths in a row, each soon after its start: how long the next restart waits. */
  private quickDeaths = 0;
  private started = 0;

  constructor(private readonly opts: ThreadHostOptions<D>) {}

  /** Whether a thread is running now. */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /** How many threads were started so far (the first, and every restart). */
  get starts(): number {
    return this.started;
  }

  /** Calls sent and not yet answered. */
  get inFlight(): number {
    return this.pending.size;
  }

  /**
   * Starts the thread now if it is not running (a long-running thread at the gateway's start). Throws when it cannot
   * be started (its code is missing: the gateway was not built).
   */
  start(): void {
    if (this.closed) throw new ThreadStopped(`the ${this.opts.label} is stopped`, 'stopping');
    clearTimeout(this.restart);
    this.spawn();
  }

  /**
   * Sends `call` to the thread (started first if it is not running) and settles with its answer. `what` names the
   * call in the error it fails with.
   */
  call<T>(what: string, call: Call): Promise<T> {
    if (this.closed) return Promise.reject(this.fail(what, new ThreadStopped('the gateway is shutting down', 'stopping')));
    clearTimeout(this.idle);
    clearTimeout(this.restart);
    let w: Worker;
    try {
      w = this.spawn();
    } catch (err) {
      return Promise.reject(this.fail(what, err as ThreadStopped));
    }
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { what, resolve: resolve as (v: unknown) => void, reject });
      try {
        w.postMessage({ id, call } satisfies ToThread<Call>);
      } catch (err) {
        // A call that cannot be copied to the thread (a function, a socket in it): a fault of the caller's, not the thread's.
        this.pending.delete(id);
        this.idleAfterLast();
        reject(err);
      }
    });
  }

  /**
   * Stops the thread for good (shutdown): it is asked to close (its entry's close(): finish what it is doing, release
   * its connections) and terminated if it has not ended within graceMs; 0 terminates it at once. Calls still running
   * fail (reason 'stopping'), and so does every later call.
   */
  async stop(graceMs: number = this.opts.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS): Promise<void> {
    this.closed = true;
    clearTimeout(this.idle);
    clearTimeout(this.restart);
    const w = this.worker;
    this.worker = undefined;
    if (w && graceMs > 0) await this.closeWithin(w, graceMs);
    this.failPending(new ThreadStopped('the gateway is shutting down', 'stopping'));
    await w?.terminate();
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    const { entry, name, label } = this.opts;
    if (!existsSync(entry)) throw new ThreadStopped(`the ${label}'s code is missing (${entry}): build the gateway first`, 'not_started');
    let w: Worker;
    try {
      w = new Worker(entry, {
        workerData: { data: this.opts.data, nice: this.opts.nice } satisfies ThreadEnvelope<D>,
        name,
        // V8 ends the thread (not the process) when its heap is full: see died().
        resourceLimits: this.opts.resourceLimits,
      });
    } catch (err) {
      throw new ThreadStopped((err as Error)?.message ?? String(err), 'not_started', undefined, { cause: err });
    }
    // The thread does not keep the process alive: a call in flight keeps its caller's request (and so the server), and
    // a long-running thread is stopped by the gateway's close().
    w.unref();
    w.on('message', (m: FromThread) => this.received(m));
    w.on('error', (err) => {
      const oom = (err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.died(w, new ThreadStopped(err.message, oom ? 'out_of_memory' : 'error', undefined, { cause: err }));
    });
    w.on('exit', (code) => this.died(w, new ThreadStopped(`the ${label} stopped (exit code ${code})`, 'exited', code)));
    this.worker = w;
    this.started++;
    this.startedAt = Date.now();
    return w;
  }

  private received(m: FromThread): void {
    if ('ready' in m)
      return void this.opts.logger?.debug({ thread: this.opts.name, lowPriority: m.niced, ...this.opts.logFields }, `${this.opts.label} started`);
    if ('event' in m) return this.opts.onEvent?.(m.event);
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.ok) p.resolve(m.value);
    else p.reject(this.opts.reviveError ? this.opts.reviveError(m.error) : new Error(m.error.message));
    this.idleAfterLast();
  }

  /** On demand, once the last call is answered: the thread ends if none comes within idleMs. */
  private idleAfterLast(): void {
    if (this.pending.size > 0 || this.opts.mode !== 'on-demand' || !this.worker) return;
    clearTimeout(this.idle);
    this.idle = setTimeout(() => this.stopIdle(), this.opts.idleMs ?? DEFAULT_IDLE_MS);
    this.idle.unref();
  }

  /** The thread ended on its own (an error, out of memory, or it exited): its calls fail, and it is noted. */
  private died(w: Worker, err: ThreadStopped): void {
    if (this.worker !== w) return;
    this.worker = undefined;
    clearTimeout(this.idle);
    const outOfMemory = err.reason === 'out_of_memory';
    const failed = this.pending.size;
    this.failPending(err);
    let restartInMs: number | undefined;
    if (this.opts.mode === 'long-running' && !this.closed) {
      if (Date.now() - this.startedAt >= STEADY_MS) this.quickDeaths = 0;
      restartInMs = restartDelay(this.quickDeaths++);
      this.scheduleRestart(restartInMs);
    }
    const { logger, name, label, logFields } = this.opts;
    if (restartInMs !== undefined)
      logger?.error(
        { thread: name, err, outOfMemory, failed, restartInMs, ...logFields },
        `${label} stopped: started again ${restartInMs ? `in ${restartInMs} ms` : 'at once'}`,
      );
    else if (failed > 0) logger?.error({ thread: name, err, outOfMemory, failed, ...logFields }, `${label} stopped while running calls: they fail`);
    this.opts.onDeath?.({ err, outOfMemory, failed, restartInMs });
  }

  private scheduleRestart(delayMs: number): void {
    clearTimeout(this.restart);
    const again = (): void => {
      if (this.closed || this.worker) return;
      try {
        this.spawn();
      } catch (err) {
        // Its code is gone (a redeploy under a running process?): noted, tried again later.
        this.opts.logger?.error({ thread: this.opts.name, err, ...this.opts.logFields }, `${this.opts.label} could not be started again`);
        this.scheduleRestart(restartDelay(this.quickDeaths++));
      }
    };
    if (delayMs <= 0) return again();
    this.restart = setTimeout(again, delayMs);
    this.restart.unref();
  }

  private fail(what: string, err: ThreadStopped): Error {
    return this.opts.failure
      ? this.opts.failure(what, err)
      : new ThreadStopped(`${what} could not be completed: ${err.message}`, err.reason, err.exitCode, { cause: err });
  }

  private failPending(err: ThreadStopped): void {
    for (const p of this.pending.values()) p.reject(this.fail(p.what, err));
    this.pending.clear();
  }

  /** Idle for idleMs: the thread is asked to close (its connections with it) and ends; the next call starts another. */
  private stopIdle(): void {
    const w = this.worker;
    if (!w || this.pending.size > 0) return;
    this.worker = undefined;
    void this.closeWithin(w, this.opts.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS);
  }

  /** Asks `w` to close; terminates it if it has not ended within graceMs (a connection that will not close does not keep it). */
  private closeWithin(w: Worker, graceMs: number): Promise<void> {
    return new Promise<void>((done) => {
      const timer = setTimeout(() => void w.terminate().finally(done), graceMs);
      timer.unref();
      w.once('exit', () => {
        clearTimeout(timer);
        done();
      });
      try {
        w.postMessage('close' satisfies ToThread<Call>);
      } catch {
        // Already gone: its exit event settles this.
      }
    });
  }
}
