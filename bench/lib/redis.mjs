// The bench's own redis-server (a free port, no persistence) and its INFO counters.
import { Redis } from 'ioredis';
import { freePort, waitFor } from './procs.mjs';

export async function startRedis(procs, dir) {
  const port = await freePort();
  if (port === 6379) throw new Error('refusing to use port 6379 (the shared Redis)');
  const child = procs.spawn(
    'redis-server',
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'yes', '--logfile', ''],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  child.once('error', (err) => console.error(`redis-server: ${err.message} (is redis-server on the PATH?)`));
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: true, retryStrategy: () => 100 });
  client.on('error', () => {});
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`redis-server exited with code ${child.exitCode}`);
      if (client.status === 'wait') await client.connect();
      return (await client.ping()) === 'PONG';
    },
    15_000,
    `redis-server on port ${port}`,
  );
  return { port, url: `redis://127.0.0.1:${port}`, child, client };
}

/** Counters from one INFO call (stats + commandstats). */
export async function redisSnapshot(client) {
  const text = await client.info('stats', 'commandstats');
  const num = (name) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  const calls = {};
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]] = Number(m[2]);
  return { totalCommands: num('total_commands_processed'), reads: num('total_reads_processed'), calls };
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
