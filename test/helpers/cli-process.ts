// Runs the built CLI (`node dist/cli.js ...`) as child processes: one-shot commands with their exit code and
// output, and long-running ones (serve, dev) whose stdout/stderr are captured for the whole of their life.
// Child environments never inherit variables that could point a command at the shared Redis or another config.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = join(REPO_ROOT, 'dist', 'cli.js');

// NODE_OPTIONS too: a runner's --inspect or loader flags must not leak into the CLI under test.
const INHERITED_OVERRIDES = ['REDIS_URL', 'TOLLGATE_CONFIG', 'PORT', 'HOST', 'UPSTREAM_URL', 'LOG_LEVEL', 'NODE_OPTIONS'];

/** process.env without the variables the CLI reads, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of INHERITED_OVERRIDES) delete env[name];
  return { ...env, ...extra };
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

/** Runs one CLI command to completion (killed after timeoutMs). */
export function runCli(args: string[], opts: { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<CliResult> {
  const started = Date.now();
  const child = spawn(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, env: cleanEnv(opts.env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 15_000);
  return new Promise((resolvePromise, reject) => {
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const exitedAt = Date.now();
      resolvePromise({ code, signal, stdout, stderr, ms: exitedAt - started, exitedAt });
    });
  });
}

/** Runs a command that must succeed; throws with its output otherwise. */
export async function cliOk(args: string[], opts: { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<CliResult> {
  const r = await runCli(args, opts);
  if (r.code !== 0) throw new Error(`tollgate ${args.join(' ')} exited ${r.code ?? r.signal}:\n${r.stderr}${r.stdout}`);
  return r;
}

/** A long-running CLI process (serve, dev) with everything it printed so far. */
export class CliProcess {
  stdout = '';
  stderr = '';
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (this.stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (this.stderr += d));
    this.exited = new Promise((r) => child.once('close', (code, signal) => r({ code, signal })));
  }

  static spawn(args: string[], env: Record<string, string> = {}): CliProcess {
    return new CliProcess(spawn(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves with the first match of `pattern` in stdout, polling up to timeoutMs. */
  async waitForStdout(pattern: RegExp, timeoutMs = 10_000): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = pattern.exec(this.stdout);
      if (m) return m;
      if (!this.alive) throw new Error(`process exited before printing ${pattern}:\nstdout: ${this.stdout}\nstderr: ${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms:\nstdout: ${this.stdout}\nstderr: ${this.stderr}`);
      await sleep(20);
    }
  }

  /** Parsed JSON log lines printed so far (non-JSON lines are skipped). */
  logLines(): Array<Record<string, unknown>> {
    return this.stdout.split('\n').flatMap((line) => {
      if (!line.startsWith('{')) return [];
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  }

  /** SIGTERM, then SIGKILL if it has not exited within timeoutMs. */
  async stop(timeoutMs = 5_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.alive) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Starts `tollgate serve --config FILE` and waits for its "tollgate gateway listening" log line. */
export async function startServe(configFile: string, timeoutMs = 10_000): Promise<{ proc: CliProcess; url: string }> {
  const proc = CliProcess.spawn(['serve', '--config', configFile]);
  try {
    const m = await proc.waitForStdout(/^.*"msg":"tollgate gateway listening".*$/m, timeoutMs);
    const line = JSON.parse(m[0]) as { url?: string };
    if (!line.url) throw new Error(`listening line without url: ${m[0]}`);
    return { proc, url: line.url };
  } catch (err) {
    await proc.stop();
    throw err;
  }
}

/** A temporary directory for config files; remove() deletes it. */
export function tempDir(): { dir: string; write(name: string, config: unknown): string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-keys-test-'));
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
