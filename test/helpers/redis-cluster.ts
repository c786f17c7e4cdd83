// Starts a private Redis Cluster on loopback for one test file: N primaries with R replicas each, redis-server
// processes in cluster mode joined by `redis-cli --cluster create`, so tests can kill a primary and watch a failover.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { Cluster, Redis } from 'ioredis';
import { TestRedis } from './redis-server.js';
import { track } from './children.js';
import { waitFor } from './wait.js';

/** Ceilings for forming the cluster: each wait ends on its signal; generous for a busy machine (see cli.ts). */
const FORM_CEILING_MS = 60_000;

/** Whether a TCP port on 127.0.0.1 can be bound right now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A port whose cluster bus port (port + 10000) is free too. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await portFree(port)) && (await portFree(port + 10_000))) {
      taken.add(port);
      taken.add(port + 10_000);
      return port;
    }
  }
  throw new Error('no free port pair for a cluster node');
}

function run(cmd: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = track(spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}:\n${out}`));
    });
  });
}

export class TestRedisCluster {
  private constructor(readonly nodes: TestRedis[]) {}

  /** `nodeTimeoutMs`: cluster-node-timeout, how long a silent primary takes to be failed over. */
  static async start(opts: { primaries?: number; replicas?: number; nodeTimeoutMs?: number; extraArgs?: string[] } = {}): Promise<TestRedisCluster> {
    const primaries = opts.primaries ?? 3;
    const replicas = opts.replicas ?? 1;
    const taken = new Set<number>();
    const nodes: TestRedis[] = [];
    for (let i = 0; i < primaries * (1 + replicas); i++) {
      const port = await freeClusterPort(taken);
      nodes.push(
        new TestRedis(port, [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          `nodes-${port}.conf`,
          '--cluster-node-timeout',
          String(opts.nodeTimeoutMs ?? 1000),
          ...(opts.extraArgs ?? []),
        ]),
      );
    }
    const cluster = new TestRedisCluster(nodes);
    try {
      await Promise.all(nodes.map((n) => n.startProcess()));
      await run(
        'redis-cli',
        ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'],
        FORM_CEILING_MS,
      );
      await waitFor(async () => (await cluster.states()).every((s) => s === 'ok'), 'every node reports cluster_state:ok', FORM_CEILING_MS, 100);
      await waitFor(async () => (await cluster.replicasInSync()) === primaries * replicas, 'every replica linked to its primary', FORM_CEILING_MS, 100);
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** Seed URLs for redis.cluster.nodes (every node; any one would do). */
  get urls(): string[] {
    return this.nodes.map((n) => `redis://127.0.0.1:${n.port}`);
  }

  private async eachNode<T>(fn: (c: Redis) => Promise<T>): Promise<Array<T | undefined>> {
    return Promise.all(
      this.nodes.map(async (n) => {
        const c = new Redis(n.port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, connectTimeout: 1000 });
        c.on('error', () => {});
        try {
          await c.connect();
          return await fn(c);
        } catch {
          return undefined;
        } finally {
          c.disconnect();
        }
      }),
    );
  }

  private async states(): Promise<Array<string | undefined>> {
    return this.eachNode(async (c) => /cluster_state:(\w+)/.exec(await c.cluster('INFO'))?.[1]);
  }

  private async replicasInSync(): Promise<number> {
    const links = await this.eachNode(async (c) => /^master_link_status:up/m.test(await c.info('replication')));
    return links.filter(Boolean).length;
  }

  /** A cluster client for assertions; the caller disconnects it. */
  client(): Cluster {
    const c = new Cluster(
      this.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
      { redisOptions: { maxRetriesPerRequest: 1 } },
    );
    c.on('error', () => {});
    return c;
  }

  /** The node serving `key`'s slot as primary right now. */
  async primaryOf(key: string): Promise<TestRedis> {
    const c = this.client();
    try {
      const slot = Number(await c.cluster('KEYSLOT', key));
      const slots = (await c.cluster('SLOTS')) as unknown as Array<[number, number, [string, number, ...unknown[]], ...unknown[]]>;
      const range = slots.find(([from, to]) => slot >= from && slot <= to);
      const port = range?.[2][1];
      const node = this.nodes.find((n) => n.port === port);
      if (!node) throw new Error(`no node serves slot ${slot}`);
      return node;
    } finally {
      c.disconnect();
    }
  }

  /** A plain connection to one node; the caller disconnects it. */
  private nodeClient(node: TestRedis): Redis {
    const c = new Redis(node.port, '127.0.0.1', { maxRetriesPerRequest: 1 });
    c.on('error', () => {});
    return c;
  }

  /** The nodes that are primaries right now. */
  async primaries(): Promise<TestRedis[]> {
    const roles = await this.eachNode(async (c) => ((await c.call('ROLE')) as [string])[0]);
    return this.nodes.filter((_, i) => roles[i] === 'master');
  }

  /**
   * Moves one slot from its primary to another, as `redis-cli --cluster reshard` does: IMPORTING / MIGRATING, the
   * keys one MIGRATE at a time (`pauseMs` between, so traffic meets the slot half-moved), then the slot's new owner
   * announced to every primary.
   */
  async migrateSlot(slot: number, from: TestRedis, to: TestRedis, pauseMs = 20): Promise<number> {
    const src = this.nodeClient(from);
    const dst = this.nodeClient(to);
    try {
      const fromId = (await src.cluster('MYID')) as string;
      const toId = (await dst.cluster('MYID')) as string;
      await dst.cluster('SETSLOT', slot, 'IMPORTING', fromId);
      await src.cluster('SETSLOT', slot, 'MIGRATING', toId);
      let moved = 0;
      for (let guard = 0; guard < 10_000; guard++) {
        const keys = (await src.cluster('GETKEYSINSLOT', slot, 1)) as string[];
        if (keys.length === 0) break;
        await src.migrate('127.0.0.1', to.port, '', 0, 5000, 'KEYS', ...keys);
        moved += keys.length;
        await new Promise((r) => setTimeout(r, pauseMs));
      }
      for (const node of await this.primaries()) {
        const c = this.nodeClient(node);
        try {
          await c.cluster('SETSLOT', slot, 'NODE', toId);
        } finally {
          c.disconnect();
        }
      }
      return moved;
    } finally {
      src.disconnect();
      dst.disconnect();
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}
