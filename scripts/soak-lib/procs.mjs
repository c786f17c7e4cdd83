// Child processes of the soak (redis-server, pet store, gateway, `keys create`): free ports, start with output to
// a log file, stop with guaranteed cleanup, and /proc readings (RSS, open file descriptors).
import { fork, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export { freePort, sleep, waitFor } from '../lib/wait.mjs';

/** The first JSON log line in `file` whose msg is `msg`, or undefined (pino writes one object per line). */
export function findLogLine(file, msg) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    if (!line.includes(msg)) continue;
    try {
      const o = JSON.parse(line);
      if (o.msg === msg) return o;
    } catch {}
  }
  return undefined;
}

/** The last `n` lines of a file, for error messages. */
export function tail(file, n = 15) {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-n).join('\n');
  } catch {
    return '(no output)';
  }
}

/**
 * Every process the soak starts is registered here and with a reaper process, so that all of them stop on a
 * normal end, on an error, on Ctrl-C, and (through the reaper) even when the soak itself is killed.
 */
export class Children {
  constructor() {
    this.children = new Map(); // pid -> { name, child, exited: Promise<{code, signal}> }
    this.stopping = false;
    this.onUnexpectedExit = undefined;
    this.reaper = fork(fileURLToPath(new URL('../lib/reaper.mjs', import.meta.url)), [], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
    this.reaper.unref();
    this.reaper.channel?.unref();
  }

  /** The scratch directory the reaper removes if the soak dies without cleaning up. */
  scratch(dir) {
    this.reaper.send({ scratch: dir });
  }

  keepScratch() {
    if (this.reaper.connected) this.reaper.send({ keepScratch: true });
  }

  /**
   * Starts `command args` with stdout and stderr appended to `logFile` (no pipes: a chatty child can never block
   * on a full pipe, and the soak process does not pay for its output). `long` marks a process that must live for
   * the whole run: its exit before stopAll() is reported through onUnexpectedExit.
   */
  start(name, command, args, { logFile, env = process.env, long = true } = {}) {
    const fd = openSync(logFile, 'a');
    let child;
    try {
      child = spawn(command, args, { stdio: ['ignore', fd, fd], env });
    } finally {
      closeSync(fd);
    }
    const exited = new Promise((resolve) => {
      child.once('error', (err) => resolve({ code: null, signal: null, error: err }));
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    if (child.pid === undefined) return { name, child, exited, pid: undefined };
    const entry = { name, child, exited, pid: child.pid, logFile };
    this.children.set(child.pid, entry);
    this.reaper.send({ add: child.pid });
    exited.then((how) => {
      this.children.delete(child.pid);
      if (this.reaper.connected) this.reaper.send({ remove: child.pid });
      if (long && !this.stopping && !entry.stopping) this.onUnexpectedExit?.(entry, how);
    });
    return entry;
  }

  /** Runs a short command to completion; resolves {code, stdout, stderr}. Killed after timeoutMs. */
  run(name, command, args, { env = process.env, timeoutMs = 30_000 } = {}) {
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
      if (child.pid !== undefined) {
        this.reaper.send({ add: child.pid });
        this.children.set(child.pid, { name, child, exited: new Promise((r) => child.once('exit', r)), pid: child.pid });
      }
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d) => {
        if (stdout.length < 1_000_000) stdout += d;
      });
      child.stderr.setEncoding('utf8').on('data', (d) => {
        if (stderr.length < 100_000) stderr += d;
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(new Error(`${name}: ${err.message}`));
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        if (child.pid !== undefined) {
          this.children.delete(child.pid);
          if (this.reaper.connected) this.reaper.send({ remove: child.pid });
        }
        resolve({ code: code ?? (signal ? `signal ${signal}` : null), stdout, stderr });
      });
    });
  }

  /** SIGTERM to one child; SIGKILL if it has not exited after graceMs. Resolves how it exited. */
  async stop(entry, graceMs = 15_000) {
    if (!entry || entry.pid === undefined) return undefined;
    entry.stopping = true;
    if (this.children.has(entry.pid)) {
      try {
        entry.child.kill('SIGTERM');
      } catch {}
    }
    let timer;
    const killed = new Promise((resolve) => {
      timer = setTimeout(() => {
        try {
          entry.child.kill('SIGKILL');
        } catch {}
        resolve(undefined);
      }, graceMs);
    });
    const how = await Promise.race([entry.exited, killed]);
    clearTimeout(timer);
    if (how === undefined) return { ...(await entry.exited), killedAfterMs: graceMs };
    return how;
  }

  /** Stops every child still running (in reverse start order), then lets the reaper go. */
  async stopAll(graceMs = 10_000) {
    this.stopping = true;
    const entries = [...this.children.values()].reverse();
    for (const e of entries) await this.stop(e, graceMs);
    if (this.reaper.connected) this.reaper.disconnect();
  }
}

/** RSS (bytes) from /proc/PID/status VmRSS, and open file descriptors (sockets among them) from /proc/PID/fd. */
export function procStats(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  const entries = readdirSync(`/proc/${pid}/fd`);
  let sockets = 0;
  for (const fd of entries) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) sockets++;
    } catch {}
  }
  return { rssBytes: m ? Number(m[1]) * 1024 : NaN, fds: entries.length, sockets };
}

/** True when /proc readings work here (Linux); the soak needs them. */
export function procAvailable() {
  try {
    procStats(process.pid);
    return true;
  } catch {
    return false;
  }
}
