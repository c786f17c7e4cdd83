// What usage reports do to the gateway instance that serves them: a private redis-server seeded with --keys keys
// (default 20,000), each with --ledger-days days of ledger (default 5) spread over a --days window (default 35); one
// gateway (`tollgate serve`, its own process) under a steady keyed load from this process (--rate requests/s over 8
// keep-alive connections, loopback). Paired rounds, in alternating order: --seconds of load alone, and --seconds of
// load while reports run back to back on the same instance's admin API, from a client process of their own
// (bench/lib/report-client.mjs: a billing export, every page of a --days GET /usage, limit 1000; then the dashboard
// overview, GET /usage/summary by hour over 24 h and by day over 7 days, each a period the overview's cache has not
// seen, so each is computed). Prints per round the request path's p99
// alone and with reports, and their ratio; then the median ratio, the reports' status and time, the gateway's CPU
// per export and Redis's commands per export (INFO commandstats).
//
//   npm run bench:reports
//   npm run bench:reports -- --keys 2000 --rounds 3 --seconds 10
//   node bench/report-load.mjs --cli /path/to/other/dist/cli.js   (another build of the gateway, to compare)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent, request } from 'node:http';
import { Redis } from 'ioredis';
import { bulkCreateKeys, loadFormat } from './lib/keys.mjs';
import { Procs, cpuSecondsOf, freePort, sleep, waitFor } from './lib/procs.mjs';
import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';
import { median } from './lib/stats.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const { values: opts } = parseArgs({
  options: {
    keys: { type: 'string', default: '20000' },
    days: { type: 'string', default: '35' },
    'ledger-days': { type: 'string', default: '5' },
    rate: { type: 'string', default: '100' },
    seconds: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '5' },
    cli: { type: 'string', default: join(repoRoot, 'dist/cli.js') },
  },
});
const KEYS = Number(opts.keys);
const DAYS = Number(opts.days);
const LEDGER_DAYS = Number(opts['ledger-days']);
const RATE = Number(opts.rate);
const SECONDS = Number(opts.seconds);
const ROUNDS = Number(opts.rounds);
for (const [name, v, lo, hi] of [
  ['--keys', KEYS, 10, 200_000],
  ['--days', DAYS, 1, 35],
  ['--ledger-days', LEDGER_DAYS, 1, DAYS],
  ['--rate', RATE, 1, 2000],
  ['--seconds', SECONDS, 2, 300],
  ['--rounds', ROUNDS, 1, 50],
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

function get(agent, port, path, headers, { body = false } = {}) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const req = request({ host: '127.0.0.1', port, path, agent, headers }, (res) => {
      const chunks = [];
      if (body) res.on('data', (c) => chunks.push(c));
      else res.resume();
      res.on('end', () =>
        resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6, text: body ? Buffer.concat(chunks).toString('utf8') : '' }),
      );
    });
    req.on('error', (err) => resolve({ status: 0, ms: Number(process.hrtime.bigint() - t0) / 1e6, text: err.message }));
    req.setTimeout(120_000, () => req.destroy());
    req.end();
  });
}

/** Steady keyed load at RATE/s for `ms`: every request's latency and status. */
async function steadyLoad(port, plaintexts, ms) {
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const out = [];
  const pending = [];
  const start = Date.now();
  for (let i = 0; Date.now() - start < ms; i++) {
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

/** The next message from the report client that carries `field`. */
function reply(client, field) {
  return new Promise((resolve) => {
    const on = (m) => {
      if (m && field in m) {
        client.off('message', on);
        resolve(m[field]);
      }
    };
    client.on('message', on);
  });
}

try {
  const format = await loadFormat(repoRoot);
  const redisNode = await startRedis(procs, join(dir, 'redis'));
  const redis = new Redis(redisNode.port, '127.0.0.1');
  process.stdout.write(`seeding ${KEYS} keys with ${LEDGER_DAYS} days of ledger each within ${DAYS} days… `);
  const t0 = Date.now();
  const plaintexts = await bulkCreateKeys({ redis, format, prefix: PREFIX, plan: 'bench', total: KEYS, withPlaintext: 200, namePrefix: 'bench' });
  const ks = new format.Keyspace(PREFIX);
  const ids = await redis.smembers(ks.keyIds());
  const today = Math.floor(Date.now() / DAY_MS);
  const day = {};
  for (let h = 0; h < 24; h++) Object.assign(day, { [`a${h}`]: '7', [`r${h}`]: '1' });
  day.b3 = '2';
  for (let i = 0; i < ids.length; i += 500) {
    const p = redis.pipeline();
    ids.slice(i, i + 500).forEach((id, j) => {
      // Distinct days per key, spread over the window.
      for (let d = 0; d < LEDGER_DAYS; d++)
        p.hset(ks.usageDay(format.subjectOf(id), today - ((((i + j) % DAYS) + Math.floor((d * DAYS) / LEDGER_DAYS)) % DAYS)), day);
    });
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
    spawn(process.execPath, [opts.cli, 'serve', '--config', configPath], {
      env: { ...process.env, TOLLGATE_ADMIN_TOKEN: TOKEN },
      stdio: ['ignore', 'ignore', 'inherit'],
    }),
  );
  await waitFor(async () => (await get(undefined, port, '/healthz', {})).status === 200, 15_000, 'the gateway');
  await steadyLoad(port, plaintexts, 2000); // warm-up: key cache, connections
  const { child: reportClient } = await procs.forkHelper('report client', fileURLToPath(new URL('./lib/report-client.mjs', import.meta.url)), [
    String(adminPort),
    TOKEN,
    String(DAYS),
    String(KEYS),
  ]);
  const ask = (op) => {
    const r = reply(reportClient, 'result');
    reportClient.send(op);
    return r;
  };

  // One export and one overview with no load: Redis's commands and the gateway's CPU for each.
  let before = await redisSnapshot(redis);
  let cpu0 = cpuSecondsOf(gw.pid);
  const first = await ask('export');
  const exportCpu = cpuSecondsOf(gw.pid) - cpu0;
  let after = await redisSnapshot(redis);
  const exportCalls = redisDelta(before, after).calls;
  const exportRedisCpu = after.cpuSeconds - before.cpuSeconds;
  before = await redisSnapshot(redis);
  cpu0 = cpuSecondsOf(gw.pid);
  const ov = await ask('overview');
  const overviewCpu = cpuSecondsOf(gw.pid) - cpu0;
  after = await redisSnapshot(redis);
  const overviewCalls = redisDelta(before, after).calls;
  const overviewRedisCpu = after.cpuSeconds - before.cpuSeconds;
  console.log(
    `export alone: status ${first.status}, ${first.pages} pages, ${(first.ms / 1000).toFixed(2)} s, every key once: ${first.complete}; ` +
      `gateway CPU ${exportCpu.toFixed(2)} s; Redis CPU ${exportRedisCpu.toFixed(2)} s; Redis calls ${JSON.stringify(exportCalls)}${first.message ? ` ${first.message}` : ''}`,
  );
  console.log(
    `overview alone: status ${ov.status}, ${(ov.ms / 1000).toFixed(2)} s; gateway CPU ${overviewCpu.toFixed(2)} s; Redis CPU ${overviewRedisCpu.toFixed(2)} s; Redis calls ${JSON.stringify(overviewCalls)}`,
  );

  const ratios = [];
  const reports = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const quietPhase = () => steadyLoad(port, plaintexts, SECONDS * 1000);
    const reportPhase = async () => {
      // Reports back to back for the whole phase, from the report client's process.
      const runs = reply(reportClient, 'results');
      reportClient.send('loop');
      const load = await steadyLoad(port, plaintexts, SECONDS * 1000);
      reportClient.send('stop');
      reports.push(...(await runs));
      return load;
    };
    const [quiet, during] = round % 2 ? [await quietPhase(), await reportPhase()] : [undefined, await reportPhase()];
    const q = quiet ?? (await quietPhase());
    const bad = (rs) => rs.filter((x) => x.status !== 200).length;
    const ratio = p99(during) / p99(q);
    ratios.push(ratio);
    console.log(
      `round ${round} (${round % 2 ? 'alone first' : 'reports first'}): p99 ${p99(q).toFixed(2)} ms alone (${q.length} requests, ${bad(q)} not 200), ` +
        `${p99(during).toFixed(2)} ms with reports (${during.length}, ${bad(during)} not 200): ${ratio.toFixed(2)}x`,
    );
  }
  const exports = reports.filter((r) => r.kind === 'export');
  const overviews = reports.filter((r) => r.kind === 'overview');
  console.log(
    `exports under load: ${exports.length}, statuses ${[...new Set(exports.map((r) => r.status))].join(',')}, every key once: ${exports.every((r) => r.complete)}, ` +
      `median ${(median(exports.map((r) => r.ms)) / 1000).toFixed(2)} s`,
  );
  console.log(
    `overviews under load: ${overviews.length}, statuses ${[...new Set(overviews.map((r) => r.status))].join(',')}, median ${(median(overviews.map((r) => r.ms)) / 1000).toFixed(2)} s`,
  );
  for (const r of reports.filter((x) => x.status !== 200)) console.log(`  ${r.kind} answered ${r.status}: ${r.message ?? ''}`);
  console.log(`median ratio over ${ROUNDS} rounds: ${median(ratios).toFixed(2)}x`);
  redis.disconnect();
  redisNode.client.disconnect();
  await procs.stop(gw);
} finally {
  await procs.stopAll();
  rmSync(dir, { recursive: true, force: true });
}
