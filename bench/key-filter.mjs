// What the key filter (src/keys/known-hashes.ts) costs with many stored keys: its memory, the start-up build's time
// and Redis commands, and its false-positive rate measured, on the bench's own redis-server holding --keys keys laid
// out as RedisKeyStore writes them. The filter is built exactly as a gateway builds it (KnownHashes over
// RedisKeyStore, from dist/).
//
//   npm run bench:key-filter                    # 1,000,000 keys; about a minute
//   npm run bench:key-filter -- --keys 100000 --probes 200000
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { bulkCreateKeys, loadFormat } from './lib/keys.mjs';
import { Procs } from './lib/procs.mjs';
import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const { values: opts } = parseArgs({ options: { keys: { type: 'string', default: '1000000' }, probes: { type: 'string', default: '1000000' } } });
const KEYS = Number(opts.keys);
const PROBES = Number(opts.probes);
for (const [name, v] of [
  ['--keys', KEYS],
  ['--probes', PROBES],
]) {
  if (!Number.isInteger(v) || v < 1000 || v > 10_000_000) {
    console.error(`${name}: a whole number from 1000 to 10000000`);
    process.exit(1);
  }
}

const dist = (p) => import(pathToFileURL(join(repoRoot, 'dist', p)).href);
const [{ KnownHashes, filterShape }, { RedisKeyStore }, { connectRedis }, { Keyspace }] = await Promise.all([
  dist('keys/known-hashes.js'),
  dist('keys/redis-store.js'),
  dist('storage/redis.js'),
  dist('storage/keyspace.js'),
]);

const procs = new Procs();
process.on('exit', () => procs.killAllSync());
const dir = mkdtempSync(join(tmpdir(), 'tollgate-key-filter-'));
procs.scratch(dir);
try {
  const server = await startRedis(procs, join(dir, 'redis'));
  const prefix = 'tollgate:';
  const format = await loadFormat(repoRoot);
  const t0 = performance.now();
  await bulkCreateKeys({ redis: server.client, format, prefix, plan: 'free', total: KEYS, withPlaintext: 1000, namePrefix: 'bench' });
  console.log(`${KEYS} keys written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const connection = connectRedis({ url: server.url, commandTimeoutMs: 5000, purpose: 'cli' });
  await connection.waitForReady(10_000);
  const store = new RedisKeyStore(connection, new Keyspace(prefix));
  let built;
  const filter = new KnownHashes(store, (b) => (built = b));
  globalThis.gc?.();
  const heapBefore = process.memoryUsage();
  const before = await redisSnapshot(server.client);
  filter.rebuild();
  await filter.settled();
  const after = await redisSnapshot(server.client);
  if (!built || 'error' in built) throw new Error(`build failed: ${built?.error}`);
  globalThis.gc?.();
  const heapAfter = process.memoryUsage();
  // The Bloom filter itself (certain only with a change feed listening, which this bench has not).
  const bloom = filter.current;
  let falsePositives = 0;
  for (let i = 0; i < PROBES; i++) if (bloom.test(randomBytes(32).toString('hex'))) falsePositives++;
  const delta = redisDelta(before, after);
  const shape = filterShape(Math.max(100_000, Math.ceil(KEYS * 1.25)));
  const result = {
    keys: KEYS,
    hashesInFilter: built.hashes,
    filterBytes: built.bytes,
    bitsPerStoredKey: +((built.bytes * 8) / KEYS).toFixed(2),
    hashFunctions: shape.hashes,
    buildMs: Math.round(built.ms),
    buildRedisCommands: delta.calls,
    arrayBuffersDeltaBytes: heapAfter.arrayBuffers - heapBefore.arrayBuffers,
    probes: PROBES,
    falsePositiveRate: falsePositives / PROBES,
  };
  console.log(JSON.stringify(result, null, 2));
  filter.close();
  await connection.close();
} finally {
  await procs.stopAll();
  rmSync(dir, { recursive: true, force: true });
}
