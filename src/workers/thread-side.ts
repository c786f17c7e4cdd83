// The thread's side of thread-host.ts, for a thread's entry file: threadSide() gives the thread the nice value its host
// asked for (before the entry does any work, so that on a busy machine the request path goes first) and its data;
// serve() answers the host's calls by id (an error answered with its message and the fields the entry carries), and on
// 'close' runs the entry's close() (finish, release connections) and closes the port, so the thread ends by itself.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { FromThread, ThreadEnvelope, ThreadErrorReply, ToThread } from './thread-host.js';

/** This thread's nice value, on Linux, where a thread's priority is its own. Whether it was set. */
export function lowerPriority(nice: number): boolean {
  try {
    // /proc/thread-self -> "<pid>/task/<tid>": setpriority() on a thread id changes that thread alone.
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return false;
    setPriority(tid, nice);
    return true;
  } catch {
    return false;
  }
}

export interface ServeOptions<Call> {
  /** A call's answer (plain data: it is structured-cloned to the host). */
  answer(call: Call): unknown;
  /** Asked to close (idle, or the gateway stopping): stop loops and timers, release connections. */
  close?(): Promise<void> | void;
  /** Fields an error carries to the host besides its message (its reviveError rebuilds the error from them). */
  errorFields?(err: unknown): Omit<ThreadErrorReply, 'message'>;
}

export interface ThreadSide<D> {
  /** What the host gave the thread (ThreadHostOptions.data). */
  readonly data: D;
  /** Whether the nice value the host asked for was set. */
  readonly niced: boolean;
  /** Answers the host's calls until it asks the thread to close; tells the host the thread is ready. */
  serve<Call>(opts: ServeOptions<Call>): void;
  /** A message of the thread's own to the host (ThreadHostOptions.onEvent). */
  emit(event: unknown): void;
}

/** The thread's side: call it first in a thread's entry file. */
export function threadSide<D>(): ThreadSide<D> {
  const port = parentPort;
  if (!port) throw new Error('threadSide() runs in a worker thread started by ThreadHost');
  const envelope = workerData as ThreadEnvelope<D>;
  const niced = envelope.nice !== undefined && lowerPriority(envelope.nice);
  const post = (m: FromThread): void => port.postMessage(m);
  return {
    data: envelope.data,
    niced,
    emit: (event) => post({ event }),
    serve<Call>({ answer, close, errorFields }: ServeOptions<Call>): void {
      port.on('message', (msg: ToThread<Call>) => {
        if (msg === 'close') {
          void Promise.resolve()
            .then(() => close?.())
            .catch(() => {})
            .finally(() => port.close());
          return;
        }
        Promise.resolve()
          .then(() => answer(msg.call))
          .then(
            (value) => post({ id: msg.id, ok: true, value }),
            (err: unknown) => post({ id: msg.id, ok: false, error: { ...errorFields?.(err), message: err instanceof Error ? err.message : String(err) } }),
          );
      });
      post({ ready: true, niced });
    },
  };
}
