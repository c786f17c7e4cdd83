// What the usage ledger's peakMinute costs Redis: nothing on the request path (test/peak-minute.test.ts counts the
// commands while requests flow), and at each usage flush raise-script calls by SHA, up to 200 keys each. This
// measures a flush where only Redis and this process run: commands per key from INFO commandstats (deterministic),
// and Redis CPU per key from INFO cpu, for a flush that raises every field (first) and one that raises none (a second
// instance's smaller figures).
//
//   npm run bench:peak-flush                    # 10,000 keys, 5 rounds; a few seconds
//   npm run bench:peak-flush -- --keys 50000 --rounds 3
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Procs } from './lib/procs.mjs';
import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';
import { median } from './lib/stats.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const { values: opts } = parseArgs({ options: { keys: { type: 'string', default: '10000' }, rounds: { type: 'string', default: '5' } } });
const KEYS = Number(opts.keys);
const ROUNDS = Number(opts.rounds);
if (!Number.isInteger(KEYS) || KEYS < 100 || KEYS > 1_000_000 || !Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 50) {
  console.error('--keys: a whole number from 100 to 1000000; --rounds: from 1 to 50');
  process.exit(1);
}
const dist = join(repoRoot, 'dist');
const { RedisUsageStore } = await import(pathToFileURL(join(dist, 'usage/store.js')).href);
const { HOUR_MS } = await import(pathToFileURL(join(dist, 'util/time.js')).href);
const { Keyspace } = await import(pathToFileURL(join(dist, 'storage/keyspace.js')).href);

const procs = new Procs();
process.on('exit', () => procs.killAllSync());
const dir = mkdtempSync(join(tmpdir(), 'tollgate-peak-'));
procs.scratch(dir);
try {
  const redis = await startRedis(procs, dir);
  // One server: many keys per raise call, as a standalone gateway flushes (a cluster's calls hold one slot's keys).
  const store = new RedisUsageStore(redis.client, new Keyspace('bench:'), undefined, { scriptKeys: 'any' });
  const rows = { raised: [], unchanged: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const atMs = (Math.floor(Date.now() / HOUR_MS) - 24 * (round + 1)) * HOUR_MS; // a fresh day-hour each round
    for (const [kind, peak] of [
      ['raised', 40],
      ['unchanged', 20],
    ]) {
      const entries = Array.from({ length: KEYS }, (_, i) => ({ id: `key_bench${i}`, atMs, peak }));
      const before = await redisSnapshot(redis.client);
      await store.raisePeaks(entries, 86_400_000);
      const after = await redisSnapshot(redis.client);
      const d = redisDelta(before, after);
      rows[kind].push({ calls: d.calls, usPerKey: ((after.cpuSeconds - before.cpuSeconds) * 1e6) / KEYS });
    }
  }
  console.log(`peakMinute flush, ${KEYS} keys x ${ROUNDS} rounds (one hour of one day per key)`);
  for (const [kind, list] of Object.entries(rows)) {
    const calls = Object.entries(list[0].calls)
      .map(([name, n]) => `${name} ${n} (${(n / KEYS).toFixed(4)}/key)`)
      .join(', ');
    console.log(`  ${kind.padEnd(9)} commands per key: ${calls}; Redis CPU per key: median ${median(list.map((r) => r.usPerKey)).toFixed(2)} µs`);
  }
  await procs.stop(redis.child);
} finally {
  await procs.stopAll();
  rmSync(dir, { recursive: true, force: true });
}
