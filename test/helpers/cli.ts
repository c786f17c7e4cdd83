// Runs the built CLI (dist/cli.js) as a child process: one-shot commands with their exit code and output,
// and long-running ones (serve, petstore) whose JSON log lines tests wait on. Every wait is bounded.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
// One definition of the child environment for every CLI test helper.
import { cleanEnv } from './cli-process.js';
import { fileURLToPath } from 'node:url';

export { cleanEnv };

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export function assertBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" before these tests (npm test does).`);
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion (killed after timeoutMs). */
export function runCli(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: REPO, env: opts.env ?? cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 10_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

export interface LogLine {
  msg?: string;
  level?: number;
  [k: string]: unknown;
}

/** A long-running CLI process and its structured output. */
export class CliProcess {
  stdout = '';
  stderr = '';
  readonly logs: LogLine[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitCode: number | null | undefined;
  private partial = '';
  private readonly waiters = new Set<() => void>();
  private static readonly all = new Set<CliProcess>();

  private constructor(readonly proc: ChildProcess) {
    CliProcess.all.add(this);
    proc.stdout!.on('data', (d: Buffer) => {
      const text = d.toString();
      this.stdout += text;
      this.partial += text;
      const lines = this.partial.split('\n');
      this.partial = lines.pop() ?? '';
      for (const line of lines) {
        try {
          this.logs.push(JSON.parse(line) as LogLine);
        } catch {
          // not a log line
        }
      }
      this.notify();
    });
    proc.stderr!.on('data', (d: Buffer) => {
      this.stderr += d.toString();
      this.notify();
    });
    this.exited = new Promise((resolve) => {
      proc.on('close', (code, signal) => {
        this.exitCode = code;
        CliProcess.all.delete(this);
        this.notify();
        resolve({ code, signal });
      });
    });
  }

  static start(args: string[], env: NodeJS.ProcessEnv = cleanEnv()): CliProcess {
    return new CliProcess(spawn(process.execPath, [CLI, ...args], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  /** Kills (SIGKILL) every process started here that is still running; for afterAll. */
  static async killAll(): Promise<void> {
    await Promise.all(
      [...CliProcess.all].map(async (p) => {
        p.proc.kill('SIGKILL');
        await p.exited;
      }),
    );
  }

  private notify(): void {
    for (const w of this.waiters) w();
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** Waits for a log line whose msg contains `msg` (after `after` lines), failing if the process exits or time runs out. */
  async waitForLog(msg: string, opts: { timeoutMs?: number; after?: number } = {}): Promise<LogLine> {
    const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
    for (;;) {
      const found = this.logs.slice(opts.after ?? 0).find((l) => typeof l.msg === 'string' && l.msg.includes(msg));
      if (found) return found;
      if (!this.running) throw new Error(`process exited (${this.exitCode}) before logging "${msg}"\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no "${msg}" log line in time\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`);
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          this.waiters.delete(done);
          resolve();
        };
        const t = setTimeout(done, Math.min(left, 200));
        this.waiters.add(done);
      });
    }
  }

  signal(sig: NodeJS.Signals): void {
    this.proc.kill(sig);
  }

  /** Exit code and signal, failing after timeoutMs. */
  async waitForExit(timeoutMs = 10_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.exited,
        new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`process did not exit within ${timeoutMs} ms\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)), timeoutMs))),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Resolves 'refused' or 'connected' for one connection attempt. */
export function tryConnect(port: number): Promise<'refused' | 'connected'> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('error', () => resolve('refused'));
  });
}
