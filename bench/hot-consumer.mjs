// The ceiling of one slot: how many limit checks per second one consumer's keys can get from one Redis. Every check of
// a key of a consumer runs in the consumer's slot (its pool, caps, record, ban and ledger share the hash tag
// {c:<consumer>}), so on a cluster all of one consumer's traffic is served by the one primary that owns that slot,
// whatever the cluster's size. This drives admitted checks of one consumer's keys (as the gateway sends them: the
// record's revision, auto-pipelined, the ledger on) into a private redis-server as fast as one process can, and reads
// Redis's own CPU: the checks per second, and the rate at which Redis would be busy all of a core (the ceiling). The
// same for as many keys without a consumer, for comparison (on a cluster they spread over slots and primaries).
//
//   npm run bench:hot-consumer                      # about a minute
//   npm run bench:hot-consumer -- --seconds 20 --concurrency 256
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { bulkCreateKeys, loadFormat } from './lib/keys.mjs';
import { Procs } from './lib/procs.mjs';
import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const { values: opts } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '128' },
    keys: { type: 'string', default: '100' },
  },
});
const SECONDS = Number(opts.seconds);
const CONCURRENCY = Number(opts.concurrency);
const KEYS = Number(opts.keys);
for (const [name, v, lo, hi] of [
  ['--seconds', SECONDS, 1, 600],
  ['--concurrency', CONCURRENCY, 1, 4096],
  ['--keys', KEYS, 1, 100_000],
]) {
  if (!Number.isInteger(v) || v < lo || v > hi) {
    console.error(`${name}: a whole number from ${lo} to ${hi}`);
    process.exit(1);
  }
}
const dist = join(repoRoot, 'dist');
const load = (path) => import(pathToFileURL(join(dist, path)).href);
const { RedisLimiterStore } = await load('limits/redis-store.js');
const { planRequest } = await load('limits/windows.js');
const { keySubject } = await load('limits/subject.js');
const { recordRevision } = await load('keys/redis-store.js');
const format = await loadFormat(repoRoot);

const PREFIX = 'bench:';
const LEDGER_MS = 35 * 86_400_000;
const ks = new format.Keyspace(PREFIX);
const request = planRequest({ perMinute: 1e12, perDay: 1e12 });
const ban = { threshold: 10, windowSeconds: 60, resetAfterSeconds: 3600, durationsSeconds: [60, 600, 3600] };

/** KEYS active keys; with `consumer`, each with its copy in the consumer's hash of keys (its checks in that slot). */
async function seed(redis, consumer) {
  const plaintexts = await bulkCreateKeys({ redis, format, prefix: PREFIX, plan: 'pro', total: KEYS, withPlaintext: KEYS, namePrefix: 'hot' });
  return Promise.all(
    plaintexts.map(async (plaintext) => {
      const hash = format.hashKey(plaintext);
      const id = await redis.get(ks.keyByHash(hash));
      const bytes = await redis.getBuffer(ks.keyRecord(id));
      if (consumer) await redis.hset(ks.consumerKeys(consumer), id, bytes);
      return { subject: keySubject(id, consumer), hash, revision: recordRevision(bytes) };
    }),
  );
}

/** Admitted checks over `keys` in turn, CONCURRENCY at a time, for `ms`: how many were made. */
async function drive(store, keys, ms) {
  const until = performance.now() + ms;
  let made = 0;
  let next = 0;
  const worker = async () => {
    while (performance.now() < until) {
      const k = keys[next++ % keys.length];
      const d = await store.check(k.subject, request, ban, k.hash, k.revision);
      if (d.outcome !== 'admitted') throw new Error(`a check was not admitted: ${d.outcome}`);
      made++;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return made;
}

async function measure(procs, label, consumer) {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-hot-consumer-'));
  procs.scratch(dir);
  const server = await startRedis(procs, dir);
  const redis = new Redis({ host: '127.0.0.1', port: server.port, enableAutoPipelining: true });
  redis.on('error', () => {});
  try {
    const keys = await seed(redis, consumer);
    const store = new RedisLimiterStore(redis, ks, () => LEDGER_MS);
    await drive(store, keys, 2000);
    const before = await redisSnapshot(server.client);
    const started = performance.now();
    const made = await drive(store, keys, SECONDS * 1000);
    const wall = (performance.now() - started) / 1000;
    const after = await redisSnapshot(server.client);
    const cpu = after.cpuSeconds - before.cpuSeconds;
    const { calls } = redisDelta(before, after);
    const perCheckUs = (cpu / made) * 1e6;
    const rate = made / wall;
    console.log(
      `  ${label}: ${Math.round(rate).toLocaleString('en')} checks/s for ${wall.toFixed(1)} s, Redis CPU ${((cpu / wall) * 100).toFixed(0)}% of a core, ` +
        `${perCheckUs.toFixed(1)} us per check, ${((calls.evalsha ?? 0) / made).toFixed(2)} EVALSHA per check: ceiling about ${Math.round(1e6 / perCheckUs).toLocaleString('en')} checks/s per Redis core`,
    );
    return { rate, perCheckUs };
  } finally {
    redis.disconnect();
    server.client.disconnect();
    await procs.stop(server.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

const procs = new Procs();
process.on('exit', () => procs.killAllSync());
try {
  console.log(`limit checks into one redis-server, ${KEYS} keys, ${CONCURRENCY} in flight, ${SECONDS} s each, the ledger on`);
  await measure(procs, `${KEYS} keys of one consumer (one slot)`, 'hot');
  await measure(procs, `${KEYS} keys without a consumer (${KEYS} slots)`, undefined);
} finally {
  await procs.stopAll();
}
