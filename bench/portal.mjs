#!/usr/bin/env node
// What the consumer portal costs the request path: the built CLI (`node dist/cli.js serve`) with its portal listener
// on, in front of the bench upstream, on a redis-server of the bench's own (a free port, no persistence). The portal
// never runs on the request path (its reports go through the report thread), so its people refreshing their pages
// should leave the gateway's p99 and its Redis commands per request as they were.
//
// Set-up, through the gateway's own surfaces: --consumers consumers on the `bench` plan (10^9 a minute and a day: no
// request is refused) over the admin API, a key each (the first carries the load; the others a few requests, so every
// consumer's usage panels have something to read), and --sessions portal sessions spread over them, each made the
// documented way: POST /consumers/{id}/portal-links with the admin token, then GET the link's url (303 and the
// session cookie).
//
//   1. Redis commands per gateway request, INFO commandstats on the gateway's Redis: --requests keyed requests with
//      the sessions idle; the portal's page calls alone (every session refreshing its page --cycles times, no
//      gateway request): commands per page call, by name; then --requests keyed requests while the sessions refresh,
//      the portal's calls made meanwhile charged at that rate and taken off by name. What is left per gateway request
//      should be the idle figure: the portal's commands go on its own connection and add nothing per request.
//   2. p99 and throughput under load (wrk or autocannon, --connections, the hot key), in paired rounds: the sessions
//      idle (the baseline); idle again (the noise floor of this machine's p99); the sessions refreshing, each GETting
//      every path its page reads (/api/me, /api/keys, /api/windows, /api/usage, /api/refusals, /api/deprecated)
//      every --every seconds, started at staggered times. Each side a warm-up, then --duration seconds measured; the
//      order turns every round. The figures: the median of the per-round ratios against the baseline of the same
//      round (target: p99 within 1.05x), with the gateway's CPU per request and Redis's commands per request.
//
//   npm run bench:portal
//   npm run bench:portal -- --rounds 3 --duration 5 --sessions 20 --every 5 --requests 5000 --connections 50
//   node bench/portal.mjs --cli /path/to/other/checkout/dist/cli.js     (another build's gateway, to compare)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gatewayConfig } from './lib/gateway-config.mjs';
import { onSpawn, runLoad, wrkAvailable } from './lib/load.mjs';
import { Procs, cpuSecondsOf, freePort, sleep, waitFor } from './lib/procs.mjs';
import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';
import { median } from './lib/stats.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '..');
let CLI = join(REPO, 'dist', 'cli.js');
const PATH = '/v1/bench';
/** gatewayConfig's admin token (its config holds the SHA-256 of this). */
const ADMIN_TOKEN = 'tga_bench-admin-token';
/**
 * Every GET the portal's pages make (src/portal/public/views: each page reads /api/me, then its own): a refresh here
 * makes them all at once, a heavier load than a person on one page. Usage by day is the Usage page's default; half the
 * sessions ask by hour (720 buckets), the report's larger answer.
 */
const pageCalls = (i) => ['/api/me', '/api/keys', '/api/windows', `/api/usage?granularity=${i % 2 ? 'hour' : 'day'}`, '/api/refusals', '/api/deprecated'];
const CALLS_PER_REFRESH = pageCalls(0).length;

const { values } = parseArgs({
  options: {
    rounds: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string' },
    requests: { type: 'string' },
    sessions: { type: 'string' },
    consumers: { type: 'string' },
    every: { type: 'string' },
    cycles: { type: 'string' },
    loader: { type: 'string' },
    cli: { type: 'string' },
  },
});
const num = (name, v, dflt, min, max) => {
  const n = v === undefined ? dflt : Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    process.stderr.write(`portal: --${name} takes a whole number ${min}-${max}\n`);
    process.exit(2);
  }
  return n;
};
const ROUNDS = num('rounds', values.rounds, 5, 1, 20);
const DURATION = num('duration', values.duration, 4, 1, 60);
const WARMUP = num('warmup', values.warmup, 1, 0, 30);
const CONNECTIONS = num('connections', values.connections, 50, 1, 500);
const REQUESTS = num('requests', values.requests, 5000, 100, 200_000);
const SESSIONS = num('sessions', values.sessions, 20, 1, 200);
const CONSUMERS = num('consumers', values.consumers, 4, 1, 50);
const EVERY = num('every', values.every, 5, 1, 60);
const CYCLES = num('cycles', values.cycles, 3, 1, 20);
if (values.cli) CLI = resolve(values.cli);
const LOADER = values.loader ?? (wrkAvailable() ? 'wrk' : 'autocannon');
if (!['wrk', 'autocannon'].includes(LOADER)) {
  process.stderr.write('portal: --loader is wrk or autocannon\n');
  process.exit(2);
}

const procs = new Procs();
onSpawn((child) => procs.track('wrk', child));
process.on('exit', () => procs.killAllSync());
for (const sig of ['SIGINT', 'SIGTERM'])
  process.once(sig, () => {
    procs.killAllSync();
    process.exit(130);
  });
const dir = mkdtempSync(join(tmpdir(), 'tollgate-portal-bench-'));
procs.scratch(dir);

function get(agent, port, headers) {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: PATH, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', () => resolve(0));
    req.setTimeout(10_000, () => req.destroy());
    req.end();
  });
}

/** Exactly n keyed requests, `concurrency` at a time: the statuses counted. */
async function requests(port, key, n, concurrency = 16) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses = {};
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        next++;
        const s = await get(agent, port, { authorization: `Bearer ${key}` });
        statuses[s] = (statuses[s] ?? 0) + 1;
      }
    }),
  );
  agent.destroy();
  return statuses;
}

async function admin(adminUrl, method, path, body) {
  const r = await fetch(`${adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`admin ${method} ${path} answered ${r.status}: ${text}`);
  return JSON.parse(text);
}

/** A portal session the way a platform's backend makes one: a link from the admin API, the browser sent to its url. */
async function openSession(adminUrl, consumer, actor) {
  const link = await admin(adminUrl, 'POST', `/consumers/${consumer}/portal-links`, { actor, scopes: ['keys:read', 'usage:read'] });
  const r = await fetch(link.url, { redirect: 'manual' });
  await r.arrayBuffer();
  const cookie = r.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .find((c) => c.startsWith('tollgate_portal='));
  if (r.status !== 303 || !cookie) throw new Error(`the link of ${consumer}/${actor} answered ${r.status} without a session cookie`);
  return { consumer, actor, cookie, origin: new URL(link.url).origin, calls: pageCalls(Number(actor.replace(/\D/g, '')) || 0) };
}

/** One page refresh of a session: every GET its page makes, at once, as the page does. */
async function refresh(session, stats) {
  await Promise.all(
    session.calls.map(async (path) => {
      const t = performance.now();
      let status = 0;
      try {
        const r = await fetch(`${session.origin}${path}`, { headers: { cookie: session.cookie } });
        await r.arrayBuffer();
        status = r.status;
      } catch {
        // counted as status 0
      }
      stats.calls++;
      stats.ms.push(performance.now() - t);
      stats.statuses[status] = (stats.statuses[status] ?? 0) + 1;
    }),
  );
}

const newStats = () => ({ calls: 0, ms: [], statuses: {} });

/**
 * The sessions refreshing until stop() resolves: session i first refreshes at i/SESSIONS of the period, then every
 * EVERY seconds (a refresh still running when the next is due delays it, as a page's timer would).
 */
function startRefreshing(sessions, stats) {
  let running = true;
  const loops = sessions.map(async (s, i) => {
    await sleep((i * EVERY * 1000) / sessions.length);
    while (running) {
      const next = performance.now() + EVERY * 1000;
      await refresh(s, stats);
      while (running && performance.now() < next) await sleep(Math.min(100, next - performance.now()));
    }
  });
  return async () => {
    running = false;
    await Promise.all(loops);
  };
}

async function startGateway(name, config) {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(config));
  const child = procs.spawn(name, process.execPath, [CLI, 'serve', '--config', path], { stdio: ['ignore', 'ignore', 'inherit'] });
  const urls = [`http://127.0.0.1:${config.server.port}/healthz`, `http://127.0.0.1:${config.admin.port}/openapi.json`];
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode}`);
      const answers = await Promise.all(
        urls.map((u) =>
          fetch(u).then(
            (r) => r.status,
            () => 0,
          ),
        ),
      );
      return answers.every((s) => s === 200);
    },
    20_000,
    `${name} to answer /healthz and its admin API`,
  );
  return child;
}

/** Each client connection's name by its address (CLIENT LIST): tollgate-gateway, tollgate-admin, tollgate-reports... */
async function connectionNames(redis) {
  const names = new Map();
  for (const line of String(await redis.client('LIST')).split('\n')) {
    const addr = / addr=(\S+)/.exec(line)?.[1];
    if (addr) names.set(addr, / name=(\S*)/.exec(line)?.[1] || '(unnamed)');
  }
  return names;
}

/**
 * The commands Redis ran while `work` ran, by the name of the connection that sent them (MONITOR, on a connection of
 * its own; a script's own commands come as "lua", apart from the EVALSHA that ran it). INFO commandstats cannot tell
 * connections apart; this says whether the portal's commands went anywhere near the request path's connection.
 */
async function commandsByConnection(redis, work) {
  const monitor = await redis.monitor();
  const bySource = new Map();
  monitor.on('monitor', (_time, _args, source) => bySource.set(source, (bySource.get(source) ?? 0) + 1));
  const before = await connectionNames(redis);
  await work();
  await sleep(200);
  monitor.disconnect();
  const names = new Map([...before, ...(await connectionNames(redis))]);
  const out = {};
  for (const [source, n] of bySource) {
    const name = source === 'lua' ? 'lua (inside scripts)' : (names.get(source) ?? '(gone)');
    out[name] = (out[name] ?? 0) + n;
  }
  // The bench's own CLIENT LIST calls.
  delete out.bench;
  return out;
}

const fmt = (v) => v.toFixed(3);
const perCommand = (calls, n) => Object.fromEntries(Object.entries(calls).map(([k, v]) => [k, v / n]));
const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
const pct = (xs, p) => {
  const v = [...xs].sort((a, b) => a - b);
  return v.length ? v[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)] : NaN;
};

try {
  const redisNode = await startRedis(procs, join(dir, 'redis'));
  const redis = redisNode.client;
  await redis.client('SETNAME', 'bench');
  const upstream = await procs.forkHelper('upstream', join(HERE, 'upstream.mjs'), []);
  const config = gatewayConfig({ port: await freePort(), upstreamUrl: `http://127.0.0.1:${upstream.port}`, redis: { url: redisNode.url } });
  config.admin.port = await freePort();
  config.portal = { port: await freePort() };
  const gw = await startGateway('portal-gateway', config);
  const port = config.server.port;
  const adminUrl = `http://127.0.0.1:${config.admin.port}`;

  // Consumers, a key each, and the sessions spread over them.
  const keys = [];
  for (let c = 0; c < CONSUMERS; c++) {
    const id = `bench-c${c}`;
    await admin(adminUrl, 'POST', '/consumers', { id, name: `Bench consumer ${c}`, plan: 'bench' });
    keys.push((await admin(adminUrl, 'POST', '/keys', { plan: 'bench', name: `${id}-key`, consumer: id })).key);
  }
  const [key] = keys;
  for (const k of keys.slice(1)) await requests(port, k, 50, 4);
  const sessions = [];
  for (let i = 0; i < SESSIONS; i++) sessions.push(await openSession(adminUrl, `bench-c${i % CONSUMERS}`, `person-${i}@bench.example`));
  // Every page call answers 200 before anything is measured: a path the portal does not serve shows here, not as a
  // cheap 404 in the figures.
  const check = newStats();
  await refresh(sessions[0], check);
  await refresh(sessions[1 % sessions.length], check);
  if (check.statuses[200] !== check.calls)
    throw new Error(
      `page refreshes answered ${JSON.stringify(check.statuses)}, expected 200 for ${[...new Set([...sessions[0].calls, ...sessions[1 % sessions.length].calls])].join(', ')}`,
    );

  // ---- 1. Redis commands per gateway request ----
  await requests(port, key, 500); // warm: the key cache, the upstream pool, the limit script loaded
  await sleep(1200);
  let s0 = await redisSnapshot(redis);
  const idleStatuses = await requests(port, key, REQUESTS);
  let s1 = await redisSnapshot(redis);
  const idle = redisDelta(s0, s1);

  const alone = newStats();
  s0 = await redisSnapshot(redis);
  for (let c = 0; c < CYCLES; c++) await Promise.all(sessions.map((s) => refresh(s, alone)));
  s1 = await redisSnapshot(redis);
  const portalAlone = redisDelta(s0, s1);
  const perPortalCall = perCommand(portalAlone.calls, alone.calls);
  // One refresh of every session again, by connection; then an idle window as long (what the gateway sends on its own).
  const byConnection = newStats();
  const t1 = performance.now();
  const portalByConnection = await commandsByConnection(redis, () => Promise.all(sessions.map((s) => refresh(s, byConnection))));
  const oneCycleMs = performance.now() - t1;
  const idleByConnection = await commandsByConnection(redis, () => sleep(oneCycleMs));
  // What each path costs alone, no gateway request: the gateway process's CPU (portal, report thread, all of it) and
  // Redis's commands per call, every session calling it twice, 4 at a time.
  const perPath = [];
  for (const path of [...new Set(sessions.flatMap((s) => s.calls))]) {
    const callers = sessions.filter((s) => s.calls.includes(path));
    const stats = newStats();
    const c0 = cpuSecondsOf(gw.pid);
    const p0 = await redisSnapshot(redis);
    const queue = [...callers, ...callers];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let s = queue.shift(); s; s = queue.shift()) await refresh({ ...s, calls: [path] }, stats);
      }),
    );
    const p1 = await redisSnapshot(redis);
    perPath.push({
      path,
      calls: stats.calls,
      cpuMs: ((cpuSecondsOf(gw.pid) - c0) * 1000) / stats.calls,
      cmds: redisDelta(p0, p1).commands / stats.calls,
      ms: pct(stats.ms, 50),
    });
  }

  const during = newStats();
  const stop1 = startRefreshing(sessions, during);
  await sleep(EVERY * 1000); // every session has refreshed once: the figures are the steady state
  const before = during.calls;
  s0 = await redisSnapshot(redis);
  const t0 = performance.now();
  const withStatuses = await requests(port, key, REQUESTS);
  s1 = await redisSnapshot(redis);
  const withMs = performance.now() - t0;
  // The calls that started and ended inside the window, roughly: those counted between the snapshots.
  const portalCallsInWindow = during.calls - before;
  await stop1();
  const withPortal = redisDelta(s0, s1);
  const charged = {};
  for (const [name, v] of Object.entries(withPortal.calls)) charged[name] = v - (perPortalCall[name] ?? 0) * portalCallsInWindow;

  console.log(
    `portal bench: ${LOADER}, ${CONNECTIONS} connections, ${ROUNDS} rounds x ${DURATION} s (warm-up ${WARMUP} s); ` +
      `${SESSIONS} sessions over ${CONSUMERS} consumers, each refreshing ${CALLS_PER_REFRESH} calls every ${EVERY} s\n`,
  );
  console.log(`1. Redis commands on the gateway's Redis (INFO commandstats), ${REQUESTS} keyed requests each`);
  const idlePer = perCommand(idle.calls, REQUESTS);
  const withPer = perCommand(withPortal.calls, REQUESTS);
  const chargedPer = perCommand(charged, REQUESTS);
  const names = [...new Set([...Object.keys(idlePer), ...Object.keys(withPer), ...Object.keys(perPortalCall)])].sort();
  console.log(
    `   ${'command'.padEnd(16)} ${'idle /req'.padStart(10)} ${'/portal call'.padStart(12)} ${'refreshing /req'.padStart(16)} ${'less portal /req'.padStart(17)}`,
  );
  for (const n of names)
    console.log(
      `   ${n.padEnd(16)} ${fmt(idlePer[n] ?? 0).padStart(10)} ${fmt(perPortalCall[n] ?? 0).padStart(12)} ${fmt(withPer[n] ?? 0).padStart(16)} ${fmt(chargedPer[n] ?? 0).padStart(17)}`,
    );
  const idleTotal = sum(idlePer);
  const chargedTotal = sum(chargedPer);
  console.log(
    `   ${'total'.padEnd(16)} ${fmt(idleTotal).padStart(10)} ${fmt(sum(perPortalCall)).padStart(12)} ${fmt(sum(withPer)).padStart(16)} ${fmt(chargedTotal).padStart(17)}`,
  );
  console.log(
    `   statuses: idle ${JSON.stringify(idleStatuses)}, refreshing ${JSON.stringify(withStatuses)}; the portal alone: ${alone.calls} calls ` +
      `${JSON.stringify(alone.statuses)}; during the refreshing window (${(withMs / 1000).toFixed(1)} s): ${portalCallsInWindow} portal calls, ` +
      `${JSON.stringify(during.statuses)} in all`,
  );
  const show = (o) =>
    Object.entries(o)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k} ${v}`)
      .join(', ') || 'none';
  console.log(
    `   by connection (MONITOR), one refresh of every session (${byConnection.calls} calls, ${(oneCycleMs / 1000).toFixed(1)} s): ${show(portalByConnection)}; ` +
      `an idle window as long: ${show(idleByConnection)}`,
  );
  console.log('   each path alone (every session calling it twice, 4 at a time): gateway CPU ms per call, Redis commands per call, median ms');
  for (const p of perPath)
    console.log(
      `     ${p.path.padEnd(28)} ${p.cpuMs.toFixed(2).padStart(7)} ms CPU ${p.cmds.toFixed(1).padStart(6)} cmds ${p.ms.toFixed(1).padStart(7)} ms (${p.calls} calls)`,
    );
  const diff = chargedTotal - idleTotal;
  console.log(
    `   per gateway request: ${fmt(idleTotal)} with the sessions idle, ${fmt(chargedTotal)} while they refresh less their calls' commands ` +
      `(${diff >= 0 ? '+' : ''}${fmt(diff)}; ${Math.abs(diff) < 0.05 ? 'UNCHANGED' : 'CHANGED'} to 0.05)\n`,
  );

  // ---- 2. under load, paired rounds ----
  const url = `http://127.0.0.1:${port}${PATH}`;
  const SIDES = ['idle', 'again', 'portal'];
  const COMPARED = [
    { id: 'again', what: 'sessions idle again (the baseline against itself)' },
    { id: 'portal', what: `${SESSIONS} sessions refreshing every ${EVERY} s` },
  ];
  // JIT, pools, the key cache, the report thread: one longer unmeasured run before the first round, portal included.
  const warmStats = newStats();
  const stopWarm = startRefreshing(sessions, warmStats);
  await runLoad({ loader: LOADER, url, connections: CONNECTIONS, durationS: 3, keys: [key], tmpDir: dir });
  await stopWarm();
  const rows = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const order = SIDES.map((_, i) => SIDES[(i + round - 1) % SIDES.length]);
    const row = { round, order };
    for (const side of order) {
      const stats = newStats();
      // The refreshers start before the warm-up, so the measured run sees them at their steady rate.
      const stop = side === 'portal' ? startRefreshing(sessions, stats) : undefined;
      await runLoad({ loader: LOADER, url, connections: CONNECTIONS, durationS: WARMUP || 1, keys: [key], tmpDir: dir });
      const calls0 = stats.calls;
      const cpu0 = cpuSecondsOf(gw.pid);
      const r0 = await redisSnapshot(redis);
      const r = await runLoad({ loader: LOADER, url, connections: CONNECTIONS, durationS: DURATION, keys: [key], tmpDir: dir });
      const r1 = await redisSnapshot(redis);
      const cpu = cpuSecondsOf(gw.pid) - cpu0;
      const portalCalls = stats.calls - calls0;
      await stop?.();
      const d = redisDelta(r0, r1);
      const portalCmds = sum(perPortalCall) * portalCalls;
      row[side] = {
        p99: r.latencyMs.p99,
        rps: r.rps,
        requests: r.requests,
        errors: r.errors + r.timeouts,
        non2xx: r.statuses['4xx/5xx'] ?? 0,
        cpuUsPerReq: (cpu * 1e6) / r.requests,
        redisCmdsPerReq: d.commands / r.requests,
        redisCmdsPerReqLessPortal: (d.commands - portalCmds) / r.requests,
        portalCalls,
        portalP99: pct(stats.ms, 99),
        portalStatuses: stats.statuses,
      };
    }
    rows.push(row);
    const b = row.idle;
    const parts = COMPARED.map((h) => {
      const t = row[h.id];
      return (
        `${h.id} p99 ${t.p99.toFixed(2)} ms (${(t.p99 / b.p99).toFixed(3)}x), ${Math.round(t.rps)} req/s (${(t.rps / b.rps).toFixed(3)}x), ` +
        `${t.cpuUsPerReq.toFixed(0)} us CPU/req, ${t.redisCmdsPerReq.toFixed(2)} Redis cmds/req` +
        (h.id === 'portal'
          ? ` (${t.redisCmdsPerReqLessPortal.toFixed(2)} less the portal's), ${t.portalCalls} portal calls ${JSON.stringify(t.portalStatuses)}, their p99 ${t.portalP99.toFixed(1)} ms`
          : '')
      );
    });
    console.log(
      `round ${round} (${order.join(', ')}): idle p99 ${b.p99.toFixed(2)} ms, ${Math.round(b.rps)} req/s, ${b.cpuUsPerReq.toFixed(0)} us CPU/req, ` +
        `${b.redisCmdsPerReq.toFixed(2)} Redis cmds/req\n    ${parts.join('\n    ')}`,
    );
  }
  const bad = rows.flatMap((r) =>
    SIDES.filter((s) => r[s].errors || r[s].non2xx).map((s) => `round ${r.round} ${s}: ${r[s].errors} errors, ${r[s].non2xx} 4xx/5xx`),
  );
  for (const line of bad) console.log(`WARNING ${line}`);
  const portalBad = rows.filter((r) => Object.keys(r.portal.portalStatuses).some((s) => s !== '200'));
  for (const r of portalBad) console.log(`WARNING round ${r.round}: portal calls answered ${JSON.stringify(r.portal.portalStatuses)}`);
  console.log(`\n2. Under load, against the sessions idle (median of the ${ROUNDS} per-round ratios)`);
  for (const h of COMPARED) {
    const p99s = rows.map((r) => r[h.id].p99 / r.idle.p99);
    const rps = rows.map((r) => r[h.id].rps / r.idle.rps);
    const cpu = rows.map((r) => r[h.id].cpuUsPerReq / r.idle.cpuUsPerReq);
    const mp = median(p99s);
    console.log(
      `   ${h.what}: p99 ${mp.toFixed(3)}x [${p99s.map((x) => x.toFixed(3)).join(' ')}] ${mp <= 1.05 ? 'within' : 'OVER'} 1.05x; ` +
        `throughput ${median(rps).toFixed(3)}x [${rps.map((x) => x.toFixed(3)).join(' ')}]; gateway CPU/req ${median(cpu).toFixed(3)}x; ` +
        `Redis cmds/req ${median(rows.map((r) => r[h.id].redisCmdsPerReq)).toFixed(2)}` +
        (h.id === 'portal'
          ? ` (less the portal's ${median(rows.map((r) => r.portal.redisCmdsPerReqLessPortal)).toFixed(2)}), ` +
            `${median(rows.map((r) => r.portal.portalCalls / DURATION)).toFixed(1)} portal calls/s`
          : ''),
    );
  }
  console.log(`   the baseline: Redis cmds/req ${median(rows.map((r) => r.idle.redisCmdsPerReq)).toFixed(2)}`);
  redis.disconnect();
  await procs.stop(gw);
} finally {
  await procs.stopAll(10_000).catch(() => procs.killAllSync());
  rmSync(dir, { recursive: true, force: true });
}
