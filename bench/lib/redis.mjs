// The bench's own redis-server (a free port, no persistence), its Redis Cluster for scenario k, and their INFO counters.
import { Redis } from 'ioredis';
import { execFile } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { freePort, waitFor } from './procs.mjs';

/**
 * A private redis-server on a free port. `wrapper`: a command line it runs under (script-cost.mjs runs it under
 * valgrind), given more time to start.
 */
export async function startRedis(procs, dir, { wrapper = [], startTimeoutMs = 15_000 } = {}) {
  const port = await freePort();
  if (port === 6379) throw new Error('refusing to use port 6379 (the shared Redis)');
  return startRedisNode(procs, dir, port, [], { wrapper, startTimeoutMs });
}

async function startRedisNode(procs, dir, port, extraArgs, { wrapper = [], startTimeoutMs = 15_000 } = {}) {
  mkdirSync(dir, { recursive: true });
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--protected-mode',
    'yes',
    '--logfile',
    '',
    ...extraArgs,
  ];
  const [cmd, ...cmdArgs] = [...wrapper, 'redis-server', ...args];
  const child = procs.spawn('redis-server', cmd, cmdArgs, { ...(wrapper.length ? { cwd: dir } : {}), stdio: ['ignore', 'ignore', 'inherit'] });
  child.once('error', (err) => console.error(`redis-server: ${err.message} (is redis-server on the PATH?)`));
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: true, retryStrategy: () => 100 });
  client.on('error', () => {});
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
      if (client.status === 'wait') await client.connect();
      return (await client.ping()) === 'PONG';
    },
    startTimeoutMs,
    `redis-server on port ${port}`,
  );
  return { port, url: `redis://127.0.0.1:${port}`, child, client };
}
/** Counters from one INFO call (stats + commandstats + cpu: the CPU seconds Redis reports it used, user + sys). */
export async function redisSnapshot(client) {
  const text = await client.info('stats', 'commandstats', 'cpu');
  const seconds = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(text)?.[1] ?? 0);
  const num = (name) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  const calls = {};
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]] = Number(m[2]);
  return {
    totalCommands: num('total_commands_processed'),
    reads: num('total_reads_processed'),
    calls,
    cpuSeconds: seconds('used_cpu_user') + seconds('used_cpu_sys'),
  };
}

/**
 * What Redis did between two snapshots, less the bench's own INFO call. `commands` counts every command Redis ran,
 * including those inside scripts (on Redis 7.0 total_commands_processed and commandstats both include them);
 * `reads` is read events on client sockets, i.e. network round trips after ioredis's auto-pipelining batched them.
 */
export function redisDelta(before, after) {
  const calls = {};
  let commands = 0;
  for (const [name, n] of Object.entries(after.calls)) {
    if (name === 'info') continue;
    const d = n - (before.calls[name] ?? 0);
    if (d > 0) {
      calls[name] = d;
      commands += d;
    }
  }
  return {
    commands,
    totalCommandsProcessed: Math.max(0, after.totalCommands - before.totalCommands - 1),
    reads: Math.max(0, after.reads - before.reads - 1),
    calls,
  };
}

/**
 * A Redis Cluster of `primaries` primaries without replicas (the bench measures request cost, not failover: a
 * replica would add replication work to every write), joined with `redis-cli --cluster create`. Each node is
 * returned like startRedis's server, with a client connected to that node alone (for INFO and CPU per primary).
 */
export async function startRedisCluster(procs, dir, primaries = 3) {
  const ports = [];
  for (let i = 0; i < primaries; i++) ports.push(await freeBusPort(ports));
  const nodes = await Promise.all(
    ports.map((port) =>
      startRedisNode(procs, join(dir, `cluster-${port}`), port, [
        '--cluster-enabled',
        'yes',
        '--cluster-node-timeout',
        '5000',
        '--cluster-announce-ip',
        '127.0.0.1',
      ]),
    ),
  );
  // redis-cli --cluster create wants three primaries at least; one node is given every slot itself. (Alone, a node
  // would not know its own address for CLUSTER SLOTS: hence --cluster-announce-ip.)
  if (primaries === 1) await nodes[0].client.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  else
    await new Promise((resolve, reject) =>
      execFile(
        'redis-cli',
        ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
        { timeout: 30_000 },
        (err, stdout, stderr) =>
          err ? reject(new Error(`redis-cli --cluster create failed (is redis-cli on the PATH?): ${stderr || stdout || err.message}`)) : resolve(),
      ),
    );
  await waitFor(
    async () => (await Promise.all(nodes.map(async (n) => /cluster_state:ok/.test(await n.client.cluster('INFO'))))).every(Boolean),
    20_000,
    'every cluster node to report cluster_state:ok',
  );
  return { nodes, urls: nodes.map((n) => n.url) };
}

/** A free port whose cluster bus port (port + 10000) is free as well. */
async function freeBusPort(taken) {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (taken.includes(port)) continue;
    if ((await portFree(port)) && (await portFree(port + 10_000))) return port;
  }
  throw new Error('no free port pair (port, port + 10000) on 127.0.0.1 for a cluster node');
}

function portFree(port) {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}
