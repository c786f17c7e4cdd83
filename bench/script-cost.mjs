// What the limit script costs Redis per check, the usage ledger off and on, measured two ways where nothing but Redis
// and this process run (the full bench's Redis CPU lines share two cores with the gateway, the load generator and
// the upstream, and move with them by more than the ledger's cost):
// 1. instructions: redis-server under valgrind's callgrind, which counts the instructions it executes: the same count
//    for the same work whatever else the machine is doing;
// 2. Redis CPU per check from INFO (used_cpu_user + used_cpu_sys), the ledger off and on in alternating runs.
//
//   npm run bench:script-cost                       # both; about 3 minutes
//   npm run bench:script-cost -- --dist /other/build/dist --rounds 10
//
// Checks go through RedisLimiterStore as the gateway sends them (the record's revision; auto-pipelined), every one
// admitted. Needs valgrind (Debian's package) on the PATH for the first part; --no-callgrind skips it.
// With a build that has request windows (dist/limits/windows.js), part 1 also measures, the ledger on, what a route
// window, a cost above 1 and shadow mode add to a plan-only check; with one that has consumers' pools
// (dist/limits/quota.js), what a key of a consumer (its pool, a cap inside it) and a monthly window add. A build from
// before them (--dist of an older checkout) is measured plan-only, so the two builds' plan-only figures compare.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { bulkCreateKeys, loadFormat } from './lib/keys.mjs';
import { Procs } from './lib/procs.mjs';
import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';
import { median } from './lib/stats.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const { values: opts } = parseArgs({
  options: {
    checks: { type: 'string', default: '5000' },
    rounds: { type: 'string', default: '6' },
    dist: { type: 'string', default: join(repoRoot, 'dist') },
    'no-callgrind': { type: 'boolean', default: false },
  },
});
const CHECKS = Number(opts.checks);
if (!Number.isInteger(CHECKS) || CHECKS < 100 || CHECKS > 1_000_000) {
  console.error('--checks: a whole number from 100 to 1000000');
  process.exit(1);
}
const ROUNDS = Number(opts.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 50) {
  console.error('--rounds: a whole number from 1 to 50');
  process.exit(1);
}
if (!opts['no-callgrind']) {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
  } catch {
    console.error('valgrind is not on the PATH (Debian: apt-get install valgrind), or run with --no-callgrind');
    process.exit(1);
  }
}
const dist = resolve(opts.dist);
const { RedisLimiterStore } = await import(pathToFileURL(join(dist, 'limits/redis-store.js')).href);
/** The request-windows module, when the build has it (else: a build whose check takes the plan's limits). */
const windows = await import(pathToFileURL(join(dist, 'limits/windows.js')).href).catch(() => undefined);
const { recordRevision } = await import(pathToFileURL(join(dist, 'keys/redis-store.js')).href);
/** The pools module, when the build has consumers' pools (their keys' checks run in the consumer's slot). */
const pools = await import(pathToFileURL(join(dist, 'limits/quota.js')).href).catch(() => undefined);
const subjects = pools ? await import(pathToFileURL(join(dist, 'limits/subject.js')).href) : undefined;
const months = pools ? await import(pathToFileURL(join(dist, 'limits/months.js')).href) : undefined;
const format = await loadFormat(dirname(dist));

const LEDGER_MS = 35 * 86_400_000;
const limits = { perMinute: 1e9, perDay: 1e9 };
/**
 * What each check is asked: the plan's windows alone (as today's requests), or a variant (part 1, newer builds). A
 * variant is a request, or { request, pooled: the keys' consumer subjects, instant: taken at the check's time }.
 */
const VARIANTS = windows
  ? {
      'plan only': windows.planRequest(limits),
      'plan + 1 route window': windows.limitRequest([...windows.planWindows(limits), ...windows.routeWindows('bench', { perMinute: 1e9 }, 'enforce')]),
      'plan + 2 route windows': windows.limitRequest([
        ...windows.planWindows(limits),
        ...windows.routeWindows('bench', { perMinute: 1e9, perDay: 1e9 }, 'enforce'),
      ]),
      'plan only, cost 5': windows.limitRequest(windows.planWindows(limits), 5),
      'plan only, shadow mode (room left)': windows.planRequest(limits, 'shadow'),
      // Every check a shadow refusal: the minute window (limit 1) is full after each key's first request.
      'plan only, shadow refusal (minute full)': windows.limitRequest(windows.planWindows({ perMinute: 1, perDay: 1e9 }, 'shadow')),
      ...(pools
        ? {
            'key of a consumer (its pool, no cap)': { request: windows.planRequest(limits), pooled: true },
            'key of a consumer + 1 cap (minute)': {
              request: windows.limitRequest([...windows.planWindows(limits), ...windows.capWindows({ perMinute: 1e9 }, 'enforce')]),
              pooled: true,
            },
            'plan + month window': {
              request: windows.limitRequest(windows.planWindows({ ...limits, perMonth: 1e12 }, 'enforce', months.monthPeriod(Date.now()))),
              instant: true,
            },
          }
        : {}),
    }
  : { 'plan only': limits };
/** The number of consumers the seeded keys belong to (a pooled variant's checks spread over their slots). */
const CONSUMERS = 20;
const ban = { threshold: 10, windowSeconds: 60, resetAfterSeconds: 3600, durationsSeconds: [60, 600, 3600] };
const PREFIX = 'bench:';
const ks = new format.Keyspace(PREFIX);

/**
 * `n` active keys written as the bench writes them (bench/lib/keys.mjs), each with what the gateway's key cache would
 * hold for it: the id, the plaintext's hash, and the record's revision (the same function the key store uses).
 */
async function seedKeys(redis, n) {
  const plaintexts = await bulkCreateKeys({ redis, format, prefix: PREFIX, plan: 'pro', total: n, withPlaintext: n, namePrefix: 'script-cost' });
  return Promise.all(
    plaintexts.map(async (plaintext, i) => {
      const hash = format.hashKey(plaintext);
      const id = await redis.get(ks.keyByHash(hash));
      const bytes = await redis.getBuffer(ks.keyRecord(id));
      const key = { id, subject: format.subjectOf(id), hash, revision: recordRevision(bytes) };
      if (!pools) return key;
      // Its copy in its consumer's hash of keys, byte for byte (what the key store keeps for a key of a consumer).
      const consumer = `bench-c${i % CONSUMERS}`;
      await redis.hset(ks.consumerKeys(consumer), id, bytes);
      return { ...key, pooled: subjects.keySubject(id, consumer) };
    }),
  );
}

/** `n` checks over the keys in turn, `concurrency` at a time (ioredis batches what overlaps, as under load). */
async function drive(store, keys, n, concurrency, from = { next: 0 }, asked = VARIANTS['plan only']) {
  let sent = 0;
  const worker = async () => {
    while (sent < n) {
      sent++;
      const k = keys[from.next++ % keys.length];
      const request = asked.request ? (asked.instant ? windows.atInstant(asked.request, Date.now()) : asked.request) : asked;
      const d = await store.check(asked.pooled ? k.pooled : k.subject, request, ban, k.hash, k.revision);
      if (d.outcome !== 'admitted') throw new Error(`a check was not admitted: ${d.outcome}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

function connect(port) {
  const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, enableAutoPipelining: true, retryStrategy: () => 200 });
  redis.on('error', () => {});
  return redis;
}

/** Part 1: instructions per check and Redis commands per check, the ledger on or off (200 keys, 20 checks at a time). */
async function instructions(procs, ledgerMs, asked = VARIANTS['plan only']) {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-script-cost-'));
  procs.scratch(dir);
  const out = join(dir, 'callgrind.out');
  const server = await startRedis(procs, dir, {
    wrapper: ['valgrind', '--tool=callgrind', `--callgrind-out-file=${out}`, `--log-file=${join(dir, 'valgrind.log')}`],
    startTimeoutMs: 60_000,
  });
  const redis = connect(server.port);
  try {
    await redis.connect();
    const keys = await seedKeys(redis, 200);
    const store = new RedisLimiterStore(redis, ks, () => ledgerMs);
    await drive(store, keys, 1000, 20, undefined, asked);
    execFileSync('callgrind_control', ['--zero', String(server.child.pid)], { cwd: dir, stdio: 'ignore' });
    const before = await redisSnapshot(redis);
    await drive(store, keys, CHECKS, 20, undefined, asked);
    execFileSync('callgrind_control', ['--dump', String(server.child.pid)], { cwd: dir, stdio: 'ignore' });
    const { commands } = redisDelta(before, await redisSnapshot(redis));
    const dump = readdirSync(dir).find((f) => f.startsWith('callgrind.out.'));
    const total = Number(/^(?:summary|totals):\s*(\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'))?.[1]);
    if (!Number.isFinite(total) || total <= 0) throw new Error(`no instruction total in ${dump}`);
    return { instructions: total / CHECKS, commands: commands / CHECKS };
  } finally {
    redis.disconnect();
    server.client.disconnect();
    await procs.stop(server.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Part 2: Redis CPU per check from INFO, the ledger off and on in alternating runs on one redis-server (10,000 keys
 * in turn, 64 checks at a time, 60,000 checks per run): per round, the ratio of the two.
 */
async function redisCpu(procs) {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-script-cost-'));
  procs.scratch(dir);
  const server = await startRedis(procs, dir);
  const redis = connect(server.port);
  try {
    await redis.connect();
    const keys = await seedKeys(redis, 10_000);
    const stores = { off: new RedisLimiterStore(redis, ks, () => 0), on: new RedisLimiterStore(redis, ks, () => LEDGER_MS) };
    const cursor = { next: 0 };
    for (const store of Object.values(stores)) await drive(store, keys, 20_000, 64, cursor);
    const perCheck = { off: [], on: [] };
    const n = 60_000;
    for (let round = 0; round < ROUNDS; round++) {
      for (const which of round % 2 ? ['on', 'off'] : ['off', 'on']) {
        const before = await redisSnapshot(redis);
        await drive(stores[which], keys, n, 64, cursor);
        const after = await redisSnapshot(redis);
        perCheck[which].push(((after.cpuSeconds - before.cpuSeconds) / n) * 1e6);
      }
      console.log(`  round ${round + 1}: Redis CPU ${perCheck.off.at(-1).toFixed(2)} us/check without the ledger, ${perCheck.on.at(-1).toFixed(2)} with it`);
    }
    return perCheck;
  } finally {
    redis.disconnect();
    server.client.disconnect();
    await procs.stop(server.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

const pct = (r) => `${r >= 1 ? '+' : ''}${((r - 1) * 100).toFixed(1)}%`;

const procs = new Procs();
process.on('exit', () => procs.killAllSync());
try {
  console.log(`limit script from ${dist}`);
  if (!opts['no-callgrind']) {
    console.log(`1. instructions, redis-server under callgrind: ${CHECKS} admitted checks over 200 keys`);
    const off = await instructions(procs, 0);
    const on = await instructions(procs, LEDGER_MS);
    console.log(`  without the ledger: ${Math.round(off.instructions)} instructions per check, ${off.commands.toFixed(2)} Redis commands per check`);
    console.log(`  with the ledger:    ${Math.round(on.instructions)} instructions per check, ${on.commands.toFixed(2)} Redis commands per check`);
    console.log(`  the ledger: +${Math.round(on.instructions - off.instructions)} instructions per check, ${pct(on.instructions / off.instructions)}`);
    for (const [name, asked] of Object.entries(VARIANTS)) {
      if (name === 'plan only') continue;
      const v = await instructions(procs, LEDGER_MS, asked);
      console.log(
        `  ${name} (ledger on): ${Math.round(v.instructions)} instructions per check (${pct(v.instructions / on.instructions)} on plan only), ${v.commands.toFixed(2)} Redis commands per check`,
      );
    }
  }
  console.log(`2. Redis CPU (INFO), Redis alone with this process: ${ROUNDS} rounds, 60000 checks per run over 10000 keys`);
  const cpu = await redisCpu(procs);
  const paired = median(cpu.on.map((v, i) => v / cpu.off[i]));
  console.log(`  the ledger: ${median(cpu.on).toFixed(2)} against ${median(cpu.off).toFixed(2)} us/check (medians); paired per round ${pct(paired)}`);
} finally {
  await procs.stopAll();
}
