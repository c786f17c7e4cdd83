// Runs the built CLI (dist/cli.js) as child processes, as users run it: one-shot commands with their exit code and
// output, and long-running ones (serve, dev, petstore) whose stdout, stderr and JSON log lines are captured for their
// whole life. Every wait is bounded. Child environments never inherit the variables that could point a command at
// the shared Redis or another config.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { track } from './children.js';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

// NODE_OPTIONS too: a runner's --inspect or loader flags must not leak into the CLI under test.
const INHERITED_OVERRIDES = ['REDIS_URL', 'TOLLGATE_CONFIG', 'PORT', 'HOST', 'UPSTREAM_URL', 'LOG_LEVEL', 'NODE_OPTIONS'];

/** process.env without the variables the CLI reads, plus `extra`. */
/**
 * How long a wait on a child (its start-up line, its exit, a one-shot command) may take before it fails. Generous on
 * purpose: each wait ends on its signal (a line printed, an exit), so on a quiet machine it costs nothing, and on a
 * busy one (a 2-core machine at load 15 starts a Node process in seconds, not milliseconds) only a real failure takes
 * this long. The runner's per-test timeout (vitest.config.ts) is above it.
 */
export const CHILD_CEILING_MS = 60_000;

export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of INHERITED_OVERRIDES) delete env[name];
  return { ...env, ...extra };
}

export function assertBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run "npm run build" before these tests (npm test does).`);
}

/**
 * A key command's stderr without its audit lines (one JSON "admin change" line per change it made) and without the
 * line naming the config and Redis it uses (test/cli-touches.test.ts checks that one), so a test can insist that
 * nothing else (no warning, no error) was written; `auditOf` gives the audit lines, parsed.
 */
export function withoutAudit(stderr: string): string {
  return stderr
    .split('\n')
    .filter((l) => !l.includes('"msg":"admin change"') && !l.startsWith('tollgate: config '))
    .join('\n')
    .trim();
}

export function auditOf(stderr: string): Array<Record<string, unknown>> {
  return stderr
    .split('\n')
    .filter((l) => l.includes('"msg":"admin change"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Wall time from spawn to exit. */
  ms: number;
  /** Date.now() when the process exited. */
  exitedAt: number;
}

/** Runs one command to completion (killed after timeoutMs); `env` adds variables to the clean environment. */
export function runCli(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = track(spawn(process.execPath, [CLI, ...args], { cwd: REPO, env: cleanEnv(opts.env), stdio: ['ignore', 'pipe', 'pipe'] }));
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? CHILD_CEILING_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const exitedAt = Date.now();
      resolve({ code, signal, stdout, stderr, ms: exitedAt - started, exitedAt });
    });
  });
}

/** Runs a command that must succeed; throws with its output otherwise. */
export async function cliOk(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  const r = await runCli(args, opts);
  if (r.code !== 0) throw new Error(`tollgate ${args.join(' ')} exited ${r.code ?? r.signal}:\n${r.stderr}${r.stdout}`);
  return r;
}

export interface LogLine {
  msg?: string;
  level?: number;
  [k: string]: unknown;
}

/** A long-running CLI process and everything it printed so far. */
export class CliProcess {
  stdout = '';
  stderr = '';
  /** Its stdout's JSON lines, parsed (other lines are skipped). */
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
        if (!line.startsWith('{')) continue;
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

  /** Starts `tollgate <args>`; `env` adds variables to the clean environment. */
  /** `where`: another copy of the CLI to run (an installed package's dist/cli.js) and the directory to run it in. */
  static start(args: string[], env: NodeJS.ProcessEnv = {}, where: { cli?: string; cwd?: string } = {}): CliProcess {
    return new CliProcess(
      track(spawn(process.execPath, [where.cli ?? CLI, ...args], { cwd: where.cwd ?? REPO, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] })),
    );
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

  /** Resolves when `found` returns something, re-checked on every output or exit; fails on exit or timeout. */
  private async until<T>(found: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const result = found();
      if (result !== undefined) return result;
      if (!this.running) throw new Error(`process exited (${this.exitCode}) before ${what}\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${timeoutMs} ms\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`);
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

  /** Waits for a log line whose msg contains `msg` (after `after` lines). */
  waitForLog(msg: string, opts: { timeoutMs?: number; after?: number } = {}): Promise<LogLine> {
    return this.until(
      () => this.logs.slice(opts.after ?? 0).find((l) => typeof l.msg === 'string' && l.msg.includes(msg)),
      `a "${msg}" log line`,
      opts.timeoutMs ?? CHILD_CEILING_MS,
    );
  }

  /**
   * The log lines after `after` whose msg starts with `prefix`, having waited up to forMs for one to come: for "nothing
   * was logged", which a test then proves was not merely late with a marker (a SIGHUP's reload) it waits for after.
   * Fails if the process exits meanwhile.
   */
  async logsWithin(prefix: string, opts: { after: number; forMs: number }): Promise<LogLine[]> {
    const matching = () => this.logs.slice(opts.after).filter((l) => String(l.msg).startsWith(prefix));
    try {
      await this.until(() => (matching().length > 0 ? true : undefined), `a "${prefix}" log line`, opts.forMs);
    } catch (err) {
      if (!this.running) throw err;
    }
    return matching();
  }

  /** Waits for the first match of `pattern` in stdout. */
  waitForStdout(pattern: RegExp, timeoutMs = CHILD_CEILING_MS): Promise<RegExpMatchArray> {
    return this.until(() => pattern.exec(this.stdout) ?? undefined, `${pattern} on stdout`, timeoutMs);
  }

  signal(sig: NodeJS.Signals): void {
    this.proc.kill(sig);
  }

  /** Exit code and signal, failing after timeoutMs. */
  async waitForExit(timeoutMs = CHILD_CEILING_MS): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.exited,
        new Promise<never>(
          (_, reject) =>
            (timer = setTimeout(
              () => reject(new Error(`process did not exit within ${timeoutMs} ms\nstdout:\n${this.stdout}\nstderr:\n${this.stderr}`)),
              timeoutMs,
            )),
        ),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERM, then SIGKILL if it has not exited within timeoutMs. */
  async stop(timeoutMs = 5_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.running) this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Starts `tollgate serve --config FILE` and waits for its "tollgate gateway listening" log line. */
export async function startServe(configFile: string, timeoutMs = CHILD_CEILING_MS): Promise<{ proc: CliProcess; url: string; port: number }> {
  const proc = CliProcess.start(['serve', '--config', configFile]);
  try {
    const line = await proc.waitForLog('tollgate gateway listening', { timeoutMs });
    if (typeof line.url !== 'string') throw new Error(`listening line without url: ${JSON.stringify(line)}`);
    return { proc, url: line.url, port: Number(new URL(line.url).port) };
  } catch (err) {
    await proc.stop();
    throw err;
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

/** A temporary directory for config files; remove() deletes it. */
export function tempDir(): { dir: string; write(name: string, config: unknown): string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-cli-test-'));
  return {
    dir,
    write(name, config) {
      const file = join(dir, name);
      writeFileSync(file, typeof config === 'string' ? config : stringify(config));
      return file;
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
