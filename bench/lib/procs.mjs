// Child processes of the bench: free ports, start/stop with guaranteed cleanup, and /proc readings (RSS, CPU).
import { fork, spawn, execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export { freePort, sleep, waitFor } from '../../scripts/lib/wait.mjs';

/**
 * Every process the bench starts is registered here and with a reaper process, so that all of them stop
 * on a normal end, on an error, on Ctrl-C, and (through the reaper) even when the bench itself is killed.
 */
export class Procs {
  constructor() {
    this.children = new Map(); // pid -> { name, child }
    this.reaper = fork(fileURLToPath(new URL('../../scripts/lib/reaper.mjs', import.meta.url)), [], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
    this.reaper.unref();
    this.reaper.channel?.unref();
  }

  /** The scratch directory the reaper removes if the bench dies without cleaning up. */
  scratch(dir) {
    this.reaper.send({ scratch: dir });
  }

  track(name, child) {
    this.children.set(child.pid, { name, child });
    this.reaper.send({ add: child.pid });
    child.once('exit', () => {
      this.children.delete(child.pid);
      if (this.reaper.connected) this.reaper.send({ remove: child.pid });
    });
    return child;
  }

  /** Forks a bench helper (upstream, baseline proxy) and waits for its {ready, port} message. */
  async forkHelper(name, modulePath, args, { timeoutMs = 15_000, execArgv = [], env } = {}) {
    const child = this.track(name, fork(modulePath, args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv, ...(env ? { env } : {}) }));
    const ready = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not start within ${timeoutMs} ms`)), timeoutMs);
      child.once('message', (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${name} exited with code ${code} before it was ready`));
      });
    });
    // The helper's whole ready message too (bench/upstream.mjs reports every port it listens on).
    return { child, pid: child.pid, port: ready.port, ready };
  }

  spawn(name, cmd, args, opts) {
    return this.track(name, spawn(cmd, args, opts));
  }

  /** SIGTERM, then SIGKILL after graceMs; resolves once the process is gone. */
  async stop(child, graceMs = 5000) {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    try {
      child.kill('SIGTERM');
    } catch {}
    const timer = setTimeout(() => {
      for (const pid of [...descendants(child.pid), child.pid]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
    }, graceMs);
    await gone;
    clearTimeout(timer);
  }

  async stopAll(graceMs = 5000) {
    await Promise.all([...this.children.values()].map(({ child }) => this.stop(child, graceMs)));
    if (this.reaper.connected) {
      this.reaper.send({ keepScratch: true });
      this.reaper.disconnect();
    }
  }

  /** Synchronous last resort (process 'exit' handler): SIGKILL whatever is still running. */
  killAllSync() {
    for (const { child } of this.children.values()) {
      for (const pid of [...descendants(child.pid), child.pid]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
    }
  }
}

// ---- /proc readings ----

function readStat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
    // cutime/cstime (16, 17): children that have exited and been waited for.
    return { ppid: Number(rest[1]), utime: Number(rest[11]), stime: Number(rest[12]), cutime: Number(rest[13]), cstime: Number(rest[14]) };
  } catch {
    return undefined;
  }
}

/** Every descendant pid of pid (cluster workers, ...). */
export function descendants(pid) {
  const children = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = readStat(name);
    if (!st) continue;
    if (!children.has(st.ppid)) children.set(st.ppid, []);
    children.get(st.ppid).push(Number(name));
  }
  const out = [];
  const stack = [pid];
  while (stack.length) {
    for (const c of children.get(stack.pop()) ?? []) {
      out.push(c);
      stack.push(c);
    }
  }
  return out;
}

function statusField(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** VmRSS and VmHWM (peak) in MB of pid and of each descendant. */
export function memoryOf(pid) {
  const pids = [pid, ...descendants(pid)];
  const per = pids.map((p) => ({ pid: p, rssMB: statusField(p, 'VmRSS'), hwmMB: statusField(p, 'VmHWM') })).filter((x) => x.rssMB !== undefined);
  return {
    totalRssMB: per.reduce((a, x) => a + x.rssMB, 0),
    maxRssMB: Math.max(0, ...per.map((x) => x.rssMB)),
    maxHwmMB: Math.max(0, ...per.map((x) => x.hwmMB ?? 0)),
    processes: per,
  };
}

let clkTck;
/** Clock ticks per second of /proc's CPU times (USER_HZ). */
export function clockTicks() {
  clkTck ??= (() => {
    try {
      return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      return 100;
    }
  })();
  return clkTck;
}

/** CPU seconds used by this process and by its children that have already exited (wrk runs, CLI calls). */
export function selfCpuSeconds() {
  const st = readStat('self');
  return st ? (st.utime + st.stime + st.cutime + st.cstime) / clockTicks() : 0;
}

/** CPU seconds (user + system) used so far by pid and its descendants. */
export function cpuSecondsOf(pid) {
  clockTicks();
  let ticks = 0;
  for (const p of [pid, ...descendants(pid)]) {
    const st = readStat(p);
    if (st) ticks += st.utime + st.stime;
  }
  return ticks / clkTck;
}

/** System (kernel) CPU seconds used so far by pid and its descendants: the part of cpuSecondsOf callgrind cannot count. */
export function systemCpuSecondsOf(pid) {
  clockTicks();
  let ticks = 0;
  for (const p of [pid, ...descendants(pid)]) ticks += readStat(p)?.stime ?? 0;
  return ticks / clkTck;
}
