// Every child process a test helper starts is registered here, so that it is stopped whatever the test's outcome: by
// the helper's own stop on the happy path; by the per-file reaper (test/reaper-setup.ts) after each file, when a test
// timed out or threw before its finally; by this worker's 'exit'; and, if the worker itself died without running any
// of that, by the run's global teardown (test/reaper-global.ts), which kills what the pid ledger still lists.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The directory (one file per live child, named by its pid) the global setup creates and its teardown reaps. */
export const LEDGER_ENV = 'TOLLGATE_TEST_PID_LEDGER';

const live = new Set<ChildProcess>();

/**
 * A process's start time (clock ticks since boot, /proc/<pid>/stat field 22): with the pid, it names one process, so
 * a reaper never kills a later process that was given a recycled pid. Undefined when the process is gone (or for a
 * zombie, which is gone but for its exit status).
 */
export function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
    return fields[19];
  } catch {
    return undefined;
  }
}

/** Whether the process `pid` started at `startTime` is still running. */
export function stillRunning(pid: number, startTime: string): boolean {
  return startTimeOf(pid) === startTime;
}

function ledgerFile(pid: number): string | undefined {
  const dir = process.env[LEDGER_ENV];
  return dir ? join(dir, String(pid)) : undefined;
}

/** Registers a child just spawned (until it exits); returns it. */
export function track<T extends ChildProcess>(child: T): T {
  const pid = child.pid;
  if (pid === undefined) return child; // it failed to spawn: its 'error' event says why
  live.add(child);
  const file = ledgerFile(pid);
  const started = startTimeOf(pid);
  if (file && started !== undefined) {
    try {
      mkdirSync(join(file, '..'), { recursive: true });
      writeFileSync(file, started);
    } catch {
      // The ledger is the last resort; the other three reapers still know this child.
    }
  }
  child.once('exit', () => {
    live.delete(child);
    if (file) rmSync(file, { force: true });
  });
  return child;
}

const openServers = new Set<() => Promise<unknown>>();

/**
 * Registers the close of an in-process server a helper started (an upstream, a gateway), for the per-file reaper;
 * returns the function that unregisters it, for the helper's own close. They die with the worker anyway: this frees
 * their ports and timers for the next file when a test never reached its own close.
 */
export function trackServer(close: () => Promise<unknown>): () => void {
  openServers.add(close);
  return () => openServers.delete(close);
}

/** Closes every in-process server still registered (each bounded, none stopping the others); returns how many. */
export async function closeTrackedServers(timeoutMs = 10_000): Promise<number> {
  const closes = [...openServers];
  openServers.clear();
  await Promise.allSettled(closes.map((close) => Promise.race([close(), new Promise((r) => setTimeout(r, timeoutMs).unref())])));
  return closes.length;
}

/** How many tracked children are still running. */
export function trackedCount(): number {
  return live.size;
}

/** SIGKILLs every tracked child still running (a stopped one too: SIGKILL needs no SIGCONT); returns their pids. */
export function killTracked(): number[] {
  const pids: number[] = [];
  for (const child of live) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    try {
      child.kill('SIGKILL');
      if (child.pid !== undefined) pids.push(child.pid);
    } catch {
      // already gone
    }
  }
  return pids;
}

/** Kills every process the ledger lists that is still the process it was written for; returns their pids. */
export function reapLedger(dir: string): number[] {
  const pids: number[] = [];
  let names: string[] = [];
  try {
    names = readdirSync(dir);
  } catch {
    return pids;
  }
  for (const name of names) {
    const pid = Number(name);
    let started = '';
    try {
      started = readFileSync(join(dir, name), 'utf8');
    } catch {
      continue;
    }
    if (Number.isInteger(pid) && pid > 0 && started && stillRunning(pid, started)) {
      try {
        process.kill(pid, 'SIGKILL');
        pids.push(pid);
      } catch {
        // gone meanwhile
      }
    }
  }
  return pids;
}

// The worker's own exit (a normal end, or process.exit after an error): 'exit' listeners run synchronously, and
// kill() is synchronous, so nothing this worker started outlives it.
process.once('exit', () => {
  killTracked();
});
