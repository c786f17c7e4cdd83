// Starts a private primary, one replica and three sentinels on loopback for one test file, so a test can kill the
// primary and watch Sentinel promote the replica.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, TestRedis } from './redis-server.js';
import { track } from './children.js';
import { waitFor } from './wait.js';

export const MASTER_NAME = 'tollgate-test';

export class TestRedisSentinel {
  private constructor(
    readonly primary: TestRedis,
    readonly replica: TestRedis,
    private readonly sentinels: Array<{ port: number; proc: ChildProcess }>,
    private readonly dir: string,
  ) {}

  /** `downAfterMs`: how long a silent primary takes to be judged down (then the failover starts). */
  static async start(opts: { downAfterMs?: number } = {}): Promise<TestRedisSentinel> {
    const primary = await TestRedis.start();
    const replica = await TestRedis.start(['--replicaof', '127.0.0.1', String(primary.port)]).catch(async (err: unknown) => {
      await primary.stop();
      throw err;
    });
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-sentinel-'));
    const sentinels: Array<{ port: number; proc: ChildProcess }> = [];
    const s = new TestRedisSentinel(primary, replica, sentinels, dir);
    try {
      for (let i = 0; i < 3; i++) {
        const port = await freePort();
        const conf = join(dir, `sentinel-${port}.conf`);
        writeFileSync(
          conf,
          [
            `port ${port}`,
            'bind 127.0.0.1',
            `dir ${dir}`,
            `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${primary.port} 2`,
            `sentinel down-after-milliseconds ${MASTER_NAME} ${opts.downAfterMs ?? 1000}`,
            `sentinel failover-timeout ${MASTER_NAME} 10000`,
            `sentinel parallel-syncs ${MASTER_NAME} 1`,
            '',
          ].join('\n'),
        );
        sentinels.push({ port, proc: track(spawn('redis-server', [conf, '--sentinel', '--loglevel', 'warning'], { stdio: 'ignore' })) });
      }
      await waitFor(
        async () => (await s.replicaLinked()) && (await s.sentinelsAgree(primary.port)),
        'replica linked and every sentinel knows the primary',
        // Generous for a busy machine (see cli.ts): the wait ends as soon as they agree.
        60_000,
        100,
      );
    } catch (err) {
      await s.stop();
      throw err;
    }
    return s;
  }

  /** URLs for redis.sentinel.sentinels. */
  get urls(): string[] {
    return this.sentinels.map((x) => `redis://127.0.0.1:${x.port}`);
  }

  private async replicaLinked(): Promise<boolean> {
    const c = this.replica.client();
    try {
      return /^master_link_status:up/m.test(await c.info('replication'));
    } catch {
      return false;
    } finally {
      c.disconnect();
    }
  }

  /** The port every sentinel names as the primary's, or undefined while they disagree. */
  async primaryPort(): Promise<number | undefined> {
    const ports = await Promise.all(
      this.sentinels.map(async (x) => {
        const c = new Redis(x.port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
        c.on('error', () => {});
        try {
          await c.connect();
          const [, port] = (await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as [string, string];
          return Number(port);
        } catch {
          return undefined;
        } finally {
          c.disconnect();
        }
      }),
    );
    return ports.every((p) => p !== undefined && p === ports[0]) ? ports[0] : undefined;
  }

  private async sentinelsAgree(port: number): Promise<boolean> {
    return (await this.primaryPort()) === port;
  }

  async stop(): Promise<void> {
    for (const x of this.sentinels) x.proc.kill('SIGKILL');
    await Promise.all([this.primary.stop(), this.replica.stop()]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
