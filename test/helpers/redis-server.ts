// Starts a private redis-server on a free loopback port for one test file, so tests can kill,
// hang (SIGSTOP) and restart it without touching the shared Redis on 6379.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { track } from './children.js';

/** How long a redis-server may take to answer PING after it is spawned: generous, for a busy machine (see cli.ts). */
export const REDIS_START_CEILING_MS = 60_000;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export class TestRedis {
  private proc: ChildProcess | undefined;
  private readonly dir = mkdtempSync(join(tmpdir(), 'tollgate-redis-'));
  /** `extraArgs`: more redis-server options (cluster mode, ACL users, TLS). */
  constructor(
    readonly port: number,
    private readonly extraArgs: readonly string[] = [],
  ) {}

  static async start(extraArgs: readonly string[] = []): Promise<TestRedis> {
    const r = new TestRedis(await freePort(), extraArgs);
    try {
      await r.startProcess();
    } catch (err) {
      await r.stop();
      throw err;
    }
    return r;
  }

  /** The redis-server process's pid while one was started. */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`;
  }

  async startProcess(): Promise<void> {
    const proc = track(
      spawn(
        'redis-server',
        ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, '--loglevel', 'warning', ...this.extraArgs],
        { stdio: 'ignore' },
      ),
    );
    this.proc = proc;
    const deadline = Date.now() + REDIS_START_CEILING_MS;
    for (;;) {
      const c = new Redis(this.port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      c.on('error', () => {});
      try {
        await c.connect();
        await c.ping();
        c.disconnect();
        return;
      } catch {
        c.disconnect();
        // Exited (a bad option, the port taken): no point waiting for it.
        if (proc.exitCode !== null || proc.signalCode !== null)
          throw new Error(`redis-server on ${this.port} exited (${proc.exitCode ?? proc.signalCode}) before answering`);
        if (Date.now() > deadline) {
          proc.kill('SIGKILL');
          throw new Error(`redis-server on ${this.port} did not answer within ${REDIS_START_CEILING_MS} ms`);
        }
        await sleep(50);
      }
    }
  }

  /** A fresh client for assertions; the caller disconnects it. */
  client(): Redis {
    const c = new Redis(this.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    c.on('error', () => {});
    return c;
  }

  async flush(): Promise<void> {
    const c = this.client();
    await c.flushall();
    c.disconnect();
  }

  async kill(): Promise<void> {
    const p = this.proc;
    // Already gone (exited, or killed by a signal: then exitCode stays null and signalCode is set).
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  }

  pause(): void {
    this.proc?.kill('SIGSTOP');
  }

  resume(): void {
    this.proc?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    this.resume();
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
