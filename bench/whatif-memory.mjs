// What a what-if costs the gateway that answers it: a private redis-server seeded with --keys keys of one plan, each
// with --busy-hours hours (spread over the last 7 days) whose busiest minute is over the simulated limit; one gateway
// (`tollgate serve`, its own process); then --concurrent POST /plans/simulate at once (the plan's minute limit
// lowered). Prints the answers' size, the keys and hour rows in them, their time, and the gateway's RSS before, its
// peak (VmHWM) and after: the figure a container's memory limit is sized from.
//
//   node bench/whatif-memory.mjs
//   node bench/whatif-memory.mjs --keys 5000 --busy-hours 125 --concurrent 3
//   node bench/whatif-memory.mjs --cli /path/to/other/dist/cli.js   (another build of the gateway, to compare)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { bulkCreateKeys, loadFormat } from './lib/keys.mjs';
import { Procs, freePort, memoryOf, waitFor } from './lib/procs.mjs';
import { startRedis } from './lib/redis.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const { values: opts } = parseArgs({
  options: {
    keys: { type: 'string', default: '5000' },
    'busy-hours': { type: 'string', default: '125' },
    concurrent: { type: 'string', default: '1' },
    'memory-mb': { type: 'string' },
    cli: { type: 'string', default: join(repoRoot, 'dist/cli.js') },
  },
});
const KEYS = Number(opts.keys);
const BUSY = Number(opts['busy-hours']);
const CONCURRENT = Number(opts.concurrent);
for (const [name, v, lo, hi] of [
  ['--keys', KEYS, 1, 200_000],
  ['--busy-hours', BUSY, 1, 168],
  ['--concurrent', CONCURRENT, 1, 10],
]) {
  if (!Number.isInteger(v) || v < lo || v > hi) {
    console.error(`${name}: a whole number from ${lo} to ${hi}`);
    process.exit(1);
  }
}

const TOKEN = 'tga_bench-whatif-memory';
const PREFIX = 'wm:';
const HOUR_MS = 3_600_000;
const procs = new Procs();
const dir = mkdtempSync(join(tmpdir(), 'tollgate-whatif-'));
procs.scratch(dir);

async function simulate(adminPort) {
  const t0 = Date.now();
  const res = await fetch(`http://127.0.0.1:${adminPort}/plans/simulate`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ plan: 'mid', perMinute: 60, from: new Date(Date.now() - 7 * 24 * HOUR_MS).toISOString() }),
  });
  const text = await res.text();
  const ms = Date.now() - t0;
  let keys = 0;
  let hours = 0;
  let code = '';
  try {
    const body = JSON.parse(text);
    code = body.code ?? '';
    keys = body.keys?.length ?? 0;
    hours = (body.keys ?? []).reduce((n, k) => n + (k.hours?.length ?? 0), 0);
  } catch {
    // Not JSON: the status says why.
  }
  return { status: res.status, code, bytes: Buffer.byteLength(text), keys, hours, ms };
}

try {
  const format = await loadFormat(repoRoot);
  const redisNode = await startRedis(procs, join(dir, 'redis'));
  const redis = new Redis(redisNode.port, '127.0.0.1');
  process.stdout.write(`seeding ${KEYS} keys with ${BUSY} busy hours each… `);
  await bulkCreateKeys({ redis, format, prefix: PREFIX, plan: 'mid', total: KEYS, withPlaintext: 0, namePrefix: 'customer' });
  const ks = new format.Keyspace(PREFIX);
  const ids = await redis.smembers(ks.keyIds());
  const firstHour = Math.floor(Date.now() / HOUR_MS) - 168;
  for (let i = 0; i < ids.length; i += 200) {
    const p = redis.pipeline();
    ids.slice(i, i + 200).forEach((id, j) => {
      const byDay = new Map();
      for (let b = 0; b < BUSY; b++) {
        // Busy hours spread over the week, a different set per key.
        const h = (firstHour + ((b * 168) / BUSY + ((i + j) % 7))) | 0;
        const day = Math.floor(h / 24);
        const fields = byDay.get(day) ?? {};
        fields[`a${h % 24}`] = '900';
        fields[`m${h % 24}`] = String(100 + ((i + j + b) % 50));
        byDay.set(day, fields);
      }
      for (const [day, fields] of byDay) p.hset(ks.usageDay(format.subjectOf(id), day), fields);
    });
    await p.exec();
  }
  console.log('done');

  const port = await freePort();
  const adminPort = await freePort();
  const configPath = join(dir, 'gateway.yaml');
  writeFileSync(
    configPath,
    JSON.stringify({
      server: { host: '127.0.0.1', port },
      upstream: { url: 'http://127.0.0.1:9' },
      redis: { url: `redis://127.0.0.1:${redisNode.port}`, prefix: PREFIX },
      admin: { host: '127.0.0.1', port: adminPort },
      plans: { mid: { perMinute: 300, perDay: 100_000 } },
      usage: { retentionDays: 7, ...(opts['memory-mb'] ? { reportMemoryMb: Number(opts['memory-mb']) } : {}) },
      log: { level: 'warn' },
    }),
  );
  const gw = procs.track(
    'gateway',
    spawn(process.execPath, [opts.cli, 'serve', '--config', configPath], {
      env: { ...process.env, TOLLGATE_ADMIN_TOKEN: TOKEN },
      stdio: ['ignore', 'ignore', 'inherit'],
    }),
  );
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => ({ status: 0 }))).status === 200, 15_000, 'the gateway');
  const before = memoryOf(gw.pid);
  const answers = await Promise.all(Array.from({ length: CONCURRENT }, () => simulate(adminPort)));
  const peak = memoryOf(gw.pid);
  console.log(`gateway: ${opts.cli}`);
  for (const a of answers)
    console.log(`answer: ${a.status}${a.code ? ` ${a.code}` : ''}, ${(a.bytes / 1e6).toFixed(2)} MB, ${a.keys} keys, ${a.hours} hour rows, ${a.ms} ms`);
  console.log(
    `gateway RSS: ${before.maxRssMB.toFixed(0)} MB before, peak (VmHWM) ${peak.maxHwmMB.toFixed(0)} MB, ${peak.maxRssMB.toFixed(0)} MB after; alive: ${gw.exitCode === null}`,
  );
  redis.disconnect();
} finally {
  await procs.stopAll?.();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
