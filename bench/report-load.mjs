// What a big usage report does to the gateway instance that serves it: a private redis-server seeded with --keys
// keys (default 20,000), each with 35 days of ledger; one gateway (`tollgate serve`, its own process) under a steady
// keyed load from this process (--rate requests/s over 8 keep-alive connections, loopback); the request path's p99
// measured for --seconds without a report, then while a 35-day GET /usage runs on the same instance's admin API.
// Prints the report's status and time, both p99s and their ratio.
//
//   npm run bench:reports
//   npm run bench:reports -- --keys 5000 --rate 150 --seconds 15
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent, request } from 'node:http';
import { Redis } from 'ioredis';
import { bulkCreateKeys, loadFormat } from './lib/keys.mjs';
import { Procs, freePort, sleep, waitFor } from './lib/procs.mjs';
import { startRedis } from './lib/redis.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const { values: opts } = parseArgs({
  options: {
    keys: { type: 'string', default: '20000' },
    days: { type: 'string', default: '35' },
    rate: { type: 'string', default: '100' },
    seconds: { type: 'string', default: '20' },
  },
});
const KEYS = Number(opts.keys);
const DAYS = Number(opts.days);
const RATE = Number(opts.rate);
const SECONDS = Number(opts.seconds);
for (const [name, v, lo, hi] of [
  ['--keys', KEYS, 10, 200_000],
  ['--days', DAYS, 1, 35],
  ['--rate', RATE, 1, 2000],
  ['--seconds', SECONDS, 2, 300],
]) {
  if (!Number.isInteger(v) || v < lo || v > hi) {
    console.error(`${name}: a whole number from ${lo} to ${hi}`);
    process.exit(1);
  }
}

const TOKEN = 'tga_bench-report-load';
const PREFIX = 'bench:';
const procs = new Procs();
const dir = mkdtempSync(join(tmpdir(), 'tollgate-report-load-'));
procs.scratch(dir);
const DAY_MS = 86_400_000;

function get(agent, port, path, headers) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const req = request({ host: '127.0.0.1', port, path, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    });
    req.on('error', () => resolve({ status: 0, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    req.setTimeout(30_000, () => req.destroy());
    req.end();
  });
}

/** Steady keyed load at RATE/s for `ms` (or until `until` settles): every request's latency and status. */
async function steadyLoad(port, plaintexts, ms, until) {
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const out = [];
  const pending = [];
  const start = Date.now();
  let stop = false;
  until?.then(() => (stop = true));
  for (let i = 0; !stop && Date.now() - start < ms; i++) {
    const due = start + (i * 1000) / RATE;
    if (due > Date.now()) await sleep(due - Date.now());
    pending.push(get(agent, port, '/v1/bench', { authorization: `Bearer ${plaintexts[i % plaintexts.length]}` }).then((r) => out.push(r)));
  }
  await Promise.all(pending);
  agent.destroy();
  return out;
}

function p99(rs) {
  const xs = rs.map((r) => r.ms).sort((a, b) => a - b);
  return xs[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))];
}

try {
  const format = await loadFormat(repoRoot);
  const redisNode = await startRedis(procs, join(dir, 'redis'));
  const redis = new Redis(redisNode.port, '127.0.0.1');
  process.stdout.write(`seeding ${KEYS} keys with ${DAYS} days of ledger… `);
  const t0 = Date.now();
  const plaintexts = await bulkCreateKeys({ redis, format, prefix: PREFIX, plan: 'bench', total: KEYS, withPlaintext: 200, namePrefix: 'bench' });
  const ks = new format.Keyspace(PREFIX);
  const ids = await redis.smembers(ks.keyIds());
  const today = Math.floor(Date.now() / DAY_MS);
  const day = {};
  for (let h = 0; h < 24; h++) day[`a${h}`] = '7';
  for (let i = 0; i < ids.length; i += 200) {
    const p = redis.pipeline();
    for (const id of ids.slice(i, i + 200)) for (let d = 0; d < DAYS; d++) p.hset(ks.usageDay(id, today - d), day);
    await p.exec();
  }
  console.log(`${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const upstream = await procs.forkHelper('upstream', fileURLToPath(new URL('./upstream.mjs', import.meta.url)), []);
  const port = await freePort();
  const adminPort = await freePort();
  const configPath = join(dir, 'gateway.yaml');
  writeFileSync(
    configPath,
    JSON.stringify({
      server: { host: '127.0.0.1', port },
      upstream: { url: `http://127.0.0.1:${upstream.port}` },
      redis: { url: `redis://127.0.0.1:${redisNode.port}`, prefix: PREFIX },
      admin: { host: '127.0.0.1', port: adminPort },
      plans: { bench: { perMinute: 1_000_000, perDay: 100_000_000 } },
      usage: { retentionDays: 35 },
      log: { level: 'warn' },
    }),
  );
  const gw = procs.track(
    'gateway',
    spawn(process.execPath, [join(repoRoot, 'dist/cli.js'), 'serve', '--config', configPath], {
      env: { ...process.env, TOLLGATE_ADMIN_TOKEN: TOKEN },
      stdio: ['ignore', 'ignore', 'inherit'],
    }),
  );
  await waitFor(async () => (await get(undefined, port, '/healthz', {})).status === 200, 15_000, 'the gateway');
  await steadyLoad(port, plaintexts, 2000); // warm-up: key cache, connections

  const quiet = await steadyLoad(port, plaintexts, SECONDS * 1000);
  const now = Date.now();
  const path = `/usage?from=${new Date(now - DAYS * DAY_MS).toISOString()}&to=${new Date(now).toISOString()}&limit=1000`;
  const report = get(new Agent(), adminPort, path, { authorization: `Bearer ${TOKEN}` });
  // Load for as long as the report runs (at most 10 minutes), then stop.
  const during = await steadyLoad(port, plaintexts, 600_000, report);
  const r = await report;
  const bad = (rs) => rs.filter((x) => x.status !== 200).length;
  console.log(`report: GET /usage over ${DAYS} days, ${KEYS} keys: status ${r.status} in ${(r.ms / 1000).toFixed(1)} s`);
  console.log(`request path, ${RATE}/s: p99 ${p99(quiet).toFixed(2)} ms without a report (${quiet.length} requests, ${bad(quiet)} not 200)`);
  console.log(`request path, ${RATE}/s: p99 ${p99(during).toFixed(2)} ms while it runs (${during.length} requests, ${bad(during)} not 200)`);
  console.log(`ratio: ${(p99(during) / p99(quiet)).toFixed(2)}x`);
  redis.disconnect();
  await procs.stop(gw);
} finally {
  await procs.stopAll();
  rmSync(dir, { recursive: true, force: true });
}
