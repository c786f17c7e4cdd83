#!/usr/bin/env node
// What events cost the request path, and what a queue costs Redis: the built CLI (`node dist/cli.js serve`) in front
// of the bench upstream, on a redis-server of the bench's own (a free port, no persistence), one key on the `bench`
// plan (10^9 a minute and a day: no request crosses a threshold).
//
//   1. Redis commands per request, INFO commandstats: --requests keyed requests (none crossing a threshold) to a
//      gateway without an events section, then to one with it (two webhooks), by command name. The events thread's
//      own polls in that window (outbox reads, claims of an empty queue) are subtracted by name; an idle window as
//      long right after checks that nothing else was left.
//   2. p99 and throughput under load (wrk or autocannon, --connections, one hot key), in paired rounds on the
//      events-on gateway: the baseline with both webhook queues empty; the same again (the noise floor); the same with
//      --queued deliveries published to the outbox (dist/events/outbox.js's RedisOutbox) for a webhook whose port
//      refuses connections; and for one whose receiver accepts and never answers. Each side: a warm-up, the queues
//      emptied (and filled for a treatment, waiting until the dispatcher has queued them all) within --pause seconds,
//      then the measured run. The sides' order turns every round. Printed per round (with the gateway's CPU per
//      request, its main thread's apart, and Redis's), then the median of the per-round ratios against the baseline.
//   3. A full queue's Redis memory: events.queue.maxPerEndpoint (10,000 by default) typical quota.threshold events in
//      one endpoint's queue (dist/events/endpoint-queue.js), MEMORY USAGE summed over its five keys; then --overflow
//      more: the queue stays at the bound, the oldest dropped and counted.
//
//   npm run bench:events
//   node bench/events.mjs --cli /path/to/other/checkout/dist/cli.js     (another build's gateway, to compare)
//   npm run bench:events -- --rounds 3 --duration 5 --pause 3 --queued 1000 --requests 5000 --connections 50
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { gatewayConfig } from './lib/gateway-config.mjs';
import { bulkCreateKeys, loadFormat } from './lib/keys.mjs';
import { onSpawn, runLoad, wrkAvailable } from './lib/load.mjs';
import { Procs, clockTicks, cpuSecondsOf, freePort, sleep, waitFor } from './lib/procs.mjs';

import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';
import { median } from './lib/stats.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '..');
let CLI = join(REPO, 'dist', 'cli.js');
const PATH = '/v1/bench';
const PREFIX = 'tollgate:';
const { values } = parseArgs({
  options: {
    rounds: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string' },
    requests: { type: 'string' },
    queued: { type: 'string' },
    overflow: { type: 'string' },
    pause: { type: 'string' },
    loader: { type: 'string' },
    cli: { type: 'string' },
  },
});
const num = (name, v, dflt, min, max) => {
  const n = v === undefined ? dflt : Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    process.stderr.write(`events: --${name} takes a whole number ${min}-${max}\n`);
    process.exit(2);
  }
  return n;
};
const ROUNDS = num('rounds', values.rounds, 5, 1, 20);
const DURATION = num('duration', values.duration, 4, 1, 60);
const WARMUP = num('warmup', values.warmup, 1, 0, 30);
const CONNECTIONS = num('connections', values.connections, 50, 1, 500);
const REQUESTS = num('requests', values.requests, 5000, 100, 200_000);
const QUEUED = num('queued', values.queued, 1000, 1, 10_000);
const PAUSE = num('pause', values.pause, 2, 1, 30);
const OVERFLOW = num('overflow', values.overflow, 1000, 1, 100_000);
// Another build's gateway (its dist/cli.js) under the same harness: the queue and outbox code used here stay this one's.
if (values.cli) CLI = resolve(values.cli);
const LOADER = values.loader ?? (wrkAvailable() ? 'wrk' : 'autocannon');
if (!['wrk', 'autocannon'].includes(LOADER)) {
  process.stderr.write('events: --loader is wrk or autocannon\n');
  process.exit(2);
}

const dist = (p) => import(pathToFileURL(join(REPO, 'dist', p)).href);
const { RedisOutbox } = await dist('events/outbox.js');
const { EndpointQueue, DEFAULT_MAX_PER_ENDPOINT } = await dist('events/endpoint-queue.js');

const procs = new Procs();
onSpawn((child) => procs.track('wrk', child));
process.on('exit', () => procs.killAllSync());
for (const sig of ['SIGINT', 'SIGTERM'])
  process.once(sig, () => {
    procs.killAllSync();
    process.exit(130);
  });
const dir = mkdtempSync(join(tmpdir(), 'tollgate-events-bench-'));
procs.scratch(dir);

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
/** The webhooks of the events-on gateway: each takes one consumer's events only, so a fill goes to one queue. */
const HOOKS = [
  { id: 'refused', consumer: 'c-refused', what: 'refused (nothing listens on its port)' },
  { id: 'hanging', consumer: 'c-hanging', what: 'hanging (accepts, never answers: 15 s timeouts)' },
];

/** A quota.threshold CloudEvent of the usual size (test/events-queue.test.ts's: 401 bytes of JSON). */
function thresholdEvent(id, consumer = 'acme-corp') {
  return JSON.stringify({
    specversion: '1.0',
    id,
    source: 'urn:tollgate:prod',
    type: 'quota.threshold',
    subject: `consumer:${consumer}`,
    time: '2026-11-29T07:31:12.345Z',
    datacontenttype: 'application/json',
    data: {
      keyId: 'k_8f3a2c9d1e',
      consumer,
      plan: 'pro',
      window: 'day',
      limit: 100000,
      used: 80000,
      percent: 80,
      resetAt: '2026-11-30T00:00:00.000Z',
    },
  });
}

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

async function startGateway(name, config) {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify(config));
  const child = procs.spawn(name, process.execPath, [CLI, 'serve', '--config', path], { stdio: ['ignore', 'ignore', 'inherit'] });
  const port = config.server.port;
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode}`);
      return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status === 200;
    },
    20_000,
    `${name} to answer /healthz`,
  );
  return child;
}

/**
 * The events thread's own commands in a delta, by name: its outbox reads (commands the request path never sends), and
 * per claim of an empty queue (one EVALSHA of claim.lua: ZCARD, HEXISTS, ZRANGEBYSCORE, ZRANGE, ZCARD; the only
 * HEXISTS anyone sends here) its six. Subtracted exactly rather than estimated from an idle window; the idle window
 * right after checks that nothing else runs in the background.
 */
const OUTBOX_READS = ['xreadgroup', 'xautoclaim', 'xack', 'xgroup', 'hgetall'];
const CLAIM = { evalsha: 1, zcard: 2, hexists: 1, zrangebyscore: 1, zrange: 1 };
function withoutEventsThread(calls) {
  const out = { ...calls };
  const claims = calls.hexists ?? 0;
  for (const [name, k] of Object.entries(CLAIM)) out[name] = (out[name] ?? 0) - k * claims;
  for (const name of OUTBOX_READS) delete out[name];
  for (const [name, v] of Object.entries(out)) if (v === 0) delete out[name];
  return { calls: out, claims, outboxReads: OUTBOX_READS.reduce((a, n) => a + (calls[n] ?? 0), 0) };
}

/** Redis commands of n requests (the events thread's polls subtracted), and what is left of an idle window as long. */
async function commandsPerRequest(redis, port, key, n) {
  await requests(port, key, 200); // warm: the key cache, the upstream pool, the limit script loaded
  await sleep(1200);
  const s0 = await redisSnapshot(redis);
  const t0 = performance.now();
  const statuses = await requests(port, key, n);
  const s1 = await redisSnapshot(redis);
  const ms = performance.now() - t0;
  await sleep(ms);
  const s2 = await redisSnapshot(redis);
  const during = withoutEventsThread(redisDelta(s0, s1).calls);
  const idle = withoutEventsThread(redisDelta(s1, s2).calls);
  const perReq = Object.fromEntries(Object.entries(during.calls).map(([k, v]) => [k, v / n]));
  return { statuses, ms, during, idle, perReq };
}

const fmt = (v) => v.toFixed(3);

/** CPU seconds of a process's main thread (the request path's event loop): its task whose id is the pid. */
function mainThreadCpuSeconds(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / clockTicks();
  } catch {
    return 0;
  }
}

try {
  const format = await loadFormat(REPO);
  const redisNode = await startRedis(procs, join(dir, 'redis'));
  const redis = redisNode.client;
  const ks = new format.Keyspace(PREFIX);
  const [key] = await bulkCreateKeys({ redis, format, prefix: PREFIX, plan: 'bench', total: 1, withPlaintext: 1, namePrefix: 'events' });

  // ---- 3 first, on a prefix of its own, while nothing else runs on this Redis ----
  const memKs = new format.Keyspace('membench:');
  const q = new EndpointQueue(redis, memKs, 'ep-memory', { maxPerEndpoint: DEFAULT_MAX_PER_ENDPOINT });
  const memKeys = [
    memKs.endpointDue('ep-memory'),
    memKs.endpointEvents('ep-memory'),
    memKs.endpointDead('ep-memory'),
    memKs.endpointState('ep-memory'),
    memKs.endpointQueued('ep-memory'),
  ];
  const queueBytes = async () => {
    let bytes = 0;
    for (const k of memKeys) bytes += Number((await redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0')) ?? 0);
    return bytes;
  };
  const fill = async (from, to) => {
    for (let i = from; i < to; i += 1000) {
      const batch = [];
      for (let j = i; j < Math.min(to, i + 1000); j++) {
        const id = `quota-threshold:consumer:acme-corp:day:20261129T0000Z:${j}`;
        batch.push(q.enqueue(id, thresholdEvent(id), 1_764_000_000_000 + j));
      }
      await Promise.all(batch);
    }
  };
  const bound = q.maxPerEndpoint;
  const t3 = performance.now();
  await fill(0, bound);
  const fullBytes = await queueBytes();
  const fullStats = await q.stats();
  await fill(bound, bound + OVERFLOW);
  const overBytes = await queueBytes();
  const overStats = await q.stats();
  const fill3s = (performance.now() - t3) / 1000;
  await redis.del(...memKeys);

  // ---- the gateways ----
  const upstream = await procs.forkHelper('upstream', join(HERE, 'upstream.mjs'), []);
  const refusedPort = await freePort(); // nothing listens there: every attempt is refused at once
  const held = new Set();
  let hangingConnections = 0;
  const hanging = createServer((s) => {
    hangingConnections++;
    held.add(s);
    s.on('error', () => {});
    s.on('close', () => held.delete(s));
    s.resume();
  });
  await new Promise((r) => hanging.listen(0, '127.0.0.1', r));
  const hookUrl = { refused: `http://127.0.0.1:${refusedPort}/hook`, hanging: `http://127.0.0.1:${hanging.address().port}/hook` };
  const base = async () => {
    // The usage ledger off: its flushes are periodic, not per request, and would blur the count in 1.
    const c = gatewayConfig({ port: await freePort(), upstreamUrl: `http://127.0.0.1:${upstream.port}`, redis: { url: redisNode.url }, usage: false });
    c.log = { level: 'warn' };
    return c;
  };
  const eventsSection = {
    source: 'urn:tollgate:bench',
    thresholds: [80, 100],
    webhooks: HOOKS.map((h) => ({ id: h.id, url: hookUrl[h.id], secret: SECRET, filter: { consumers: [h.consumer] } })),
  };

  // 1: events off, then on
  const offCfg = await base();
  const off = await startGateway('events-off', offCfg);
  const cmdOff = await commandsPerRequest(redis, offCfg.server.port, key, REQUESTS);
  await procs.stop(off);
  const onCfg = { ...(await base()), events: eventsSection };
  const gw = await startGateway('events-on', onCfg);
  const port = onCfg.server.port;
  const cmdOn = await commandsPerRequest(redis, port, key, REQUESTS);

  console.log(`events bench: ${LOADER}, ${CONNECTIONS} connections, ${ROUNDS} rounds x ${DURATION} s (warm-up ${WARMUP} s), ${QUEUED} deliveries queued\n`);
  console.log(`1. Redis commands per request (INFO commandstats, ${REQUESTS} keyed requests crossing no threshold; the events thread's polls subtracted)`);
  const names = [...new Set([...Object.keys(cmdOff.perReq), ...Object.keys(cmdOn.perReq)])].sort();
  console.log(`   ${'command'.padEnd(16)} ${'events off'.padStart(10)} ${'events on'.padStart(10)}`);
  let equal = true;
  let totOff = 0;
  let totOn = 0;
  for (const n of names) {
    const a = cmdOff.perReq[n] ?? 0;
    const b = cmdOn.perReq[n] ?? 0;
    totOff += a;
    totOn += b;
    if (fmt(a) !== fmt(b)) equal = false;
    console.log(`   ${n.padEnd(16)} ${fmt(a).padStart(10)} ${fmt(b).padStart(10)}`);
  }
  console.log(`   ${'total'.padEnd(16)} ${fmt(totOff).padStart(10)} ${fmt(totOn).padStart(10)}`);
  console.log(
    `   statuses: off ${JSON.stringify(cmdOff.statuses)}, on ${JSON.stringify(cmdOn.statuses)}; the events thread's polls during the requests ` +
      `(${(cmdOn.ms / 1000).toFixed(1)} s): ${cmdOn.during.claims} claims, ${cmdOn.during.outboxReads} outbox reads`,
  );
  const left = (x) => JSON.stringify(x.idle.calls);
  console.log(
    `   idle windows as long, less those polls: off ${left(cmdOff)}, on ${left(cmdOn)} (${cmdOn.idle.claims} claims, ${cmdOn.idle.outboxReads} outbox reads)`,
  );
  // What an idle window still holds is a gateway's periodic work (not per request), named so a change shows.
  const quiet = !Object.keys(cmdOff.idle.calls).length && !Object.keys(cmdOn.idle.calls).length;
  console.log(
    `   ${equal ? 'EQUAL' : 'NOT EQUAL'}: per command, to 3 decimals; ${quiet ? 'nothing else in the idle windows' : 'the idle windows held other periodic work (above)'}\n`,
  );

  // 2: load, paired rounds
  const outbox = new RedisOutbox(redis, ks);
  const hookKeys = HOOKS.flatMap((h) => [
    ks.endpointDue(h.id),
    ks.endpointEvents(h.id),
    ks.endpointDead(h.id),
    ks.endpointState(h.id),
    ks.endpointQueued(h.id),
  ]);
  const url = `http://127.0.0.1:${port}${PATH}`;
  let published = 0;
  /** Publishes QUEUED events for one webhook's consumer and waits (10 s at most) until its queue has them all. */
  async function publishFor(hook) {
    const t0 = performance.now();
    const pending = [];
    for (let i = 0; i < QUEUED; i++) {
      const id = `quota-threshold:consumer:${hook.consumer}:day:20261129T0000Z:${++published}`;
      pending.push(
        outbox.publish({ id, type: 'quota.threshold', consumer: hook.consumer, key: '', plan: 'pro', ce: thresholdEvent(id, hook.consumer), percent: '80' }),
      );
    }
    await Promise.all(pending);
    await waitFor(
      async () => (await redis.hlen(ks.endpointEvents(hook.id))) + Number((await redis.hget(ks.endpointState(hook.id), 'dropped')) ?? 0) >= QUEUED,
      10_000,
      `${hook.id}'s queue to hold ${QUEUED} events`,
      20,
    );
    return performance.now() - t0;
  }
  /** Attempts made on the queue's events so far (the records' `attempts`), and how many are still queued. */
  async function attemptsOf(hook) {
    const vals = await redis.hvals(ks.endpointEvents(hook.id));
    let attempts = 0;
    for (const v of vals) attempts += Number(JSON.parse(v).attempts ?? 0);
    return { attempts, queued: vals.length };
  }
  // `again`: the baseline once more, its ratio to the baseline the noise floor of this machine's p99 in one round.
  const SIDES = ['empty', 'again', ...HOOKS.map((h) => h.id)];
  const COMPARED = [{ id: 'again', what: 'queues empty again (the baseline against itself)' }, ...HOOKS];
  // JIT, pools, the key cache: one longer unmeasured run before the first round.
  await runLoad({ loader: LOADER, url, connections: CONNECTIONS, durationS: 3, keys: [key], tmpDir: dir });
  const rows = [];
  for (let round = 1; round <= ROUNDS; round++) {
    // Turn the order every round: empty first, then last, ...
    const order = SIDES.map((_, i) => SIDES[(i + round - 1) % SIDES.length]);
    const row = { round, order };
    for (const side of order) {
      await redis.del(...hookKeys);
      await runLoad({ loader: LOADER, url, connections: CONNECTIONS, durationS: WARMUP || 1, keys: [key], tmpDir: dir });
      const hook = HOOKS.find((h) => h.id === side);
      // Every side waits as long after its warm-up (the treatments fill their queue meanwhile).
      const pauseEnd = performance.now() + PAUSE * 1000;
      const hc0 = hangingConnections;
      const fillMs = hook ? await publishFor(hook) : 0;
      if (fillMs > PAUSE * 1000) console.log(`WARNING round ${round} ${side}: the fill took ${fillMs.toFixed(0)} ms, longer than --pause`);
      await sleep(pauseEnd - performance.now());
      const cpu0 = cpuSecondsOf(gw.pid);
      const main0 = mainThreadCpuSeconds(gw.pid);
      const s0 = await redisSnapshot(redis);
      const r = await runLoad({ loader: LOADER, url, connections: CONNECTIONS, durationS: DURATION, keys: [key], tmpDir: dir });
      const s1 = await redisSnapshot(redis);
      const cpu = cpuSecondsOf(gw.pid) - cpu0;
      const mainCpu = mainThreadCpuSeconds(gw.pid) - main0;
      const d = redisDelta(s0, s1);
      row[side] = {
        p99: r.latencyMs.p99,
        rps: r.rps,
        requests: r.requests,
        errors: r.errors + r.timeouts,
        non2xx: r.statuses['4xx/5xx'] ?? 0,
        cpuUsPerReq: (cpu * 1e6) / r.requests,
        mainUsPerReq: (mainCpu * 1e6) / r.requests,
        otherMsPerS: ((cpu - mainCpu) * 1000) / r.durationS,
        redisCmdsPerReq: d.commands / r.requests,
        redisMsPerS: ((s1.cpuSeconds - s0.cpuSeconds) * 1000) / r.durationS,
        fillMs,
        ...(hook ? await attemptsOf(hook) : {}),
        ...(side === 'hanging' ? { connections: hangingConnections - hc0 } : {}),
      };
    }
    rows.push(row);
    const b = row.empty;
    const parts = COMPARED.map((h) => {
      const t = row[h.id];
      return (
        `${h.id} p99 ${t.p99.toFixed(2)} ms (${(t.p99 / b.p99).toFixed(3)}x), ${Math.round(t.rps)} req/s (${(t.rps / b.rps).toFixed(3)}x), ` +
        `${t.cpuUsPerReq.toFixed(0)} us CPU/req (main thread ${t.mainUsPerReq.toFixed(0)}, other threads ${t.otherMsPerS.toFixed(0)} ms/s), ${t.redisCmdsPerReq.toFixed(2)} Redis cmds/req (Redis CPU ${t.redisMsPerS.toFixed(0)} ms/s), ` +
        (h.id === 'hanging'
          ? `${t.connections} connections opened (${t.queued} queued)`
          : h.id === 'refused'
            ? `${t.attempts} attempts settled (${t.queued} queued)`
            : '')
      );
    });
    console.log(
      `round ${round} (${order.join(', ')}): empty p99 ${b.p99.toFixed(2)} ms, ${Math.round(b.rps)} req/s, ${b.cpuUsPerReq.toFixed(0)} us CPU/req ` +
        `(main thread ${b.mainUsPerReq.toFixed(0)}, other threads ${b.otherMsPerS.toFixed(0)} ms/s), ` +
        `${b.redisCmdsPerReq.toFixed(2)} Redis cmds/req (Redis CPU ${b.redisMsPerS.toFixed(0)} ms/s)\n    ${parts.join('\n    ')}`,
    );
  }
  const bad = rows.flatMap((r) =>
    SIDES.filter((s) => r[s].errors || r[s].non2xx).map((s) => `round ${r.round} ${s}: ${r[s].errors} errors, ${r[s].non2xx} 4xx/5xx`),
  );
  for (const line of bad) console.log(`WARNING ${line}`);
  console.log(`\n2. Under load, ${QUEUED} deliveries queued against queues empty (median of the ${ROUNDS} per-round ratios)`);
  for (const h of COMPARED) {
    const p99s = rows.map((r) => r[h.id].p99 / r.empty.p99);
    const rps = rows.map((r) => r[h.id].rps / r.empty.rps);
    const cpu = rows.map((r) => r[h.id].cpuUsPerReq / r.empty.cpuUsPerReq);
    const main = rows.map((r) => r[h.id].mainUsPerReq / r.empty.mainUsPerReq);
    const other = rows.map((r) => r[h.id].otherMsPerS - r.empty.otherMsPerS);
    const mp = median(p99s);
    console.log(
      `   ${h.what}: p99 ${mp.toFixed(3)}x [${p99s.map((x) => x.toFixed(3)).join(' ')}] ${mp <= 1.1 ? 'within' : 'OVER'} 1.1x; ` +
        `throughput ${median(rps).toFixed(3)}x [${rps.map((x) => x.toFixed(3)).join(' ')}]; gateway CPU/req ${median(cpu).toFixed(3)}x ` +
        `(main thread ${median(main).toFixed(3)}x, other threads ${median(other) >= 0 ? '+' : ''}${median(other).toFixed(0)} ms/s); ` +
        (h.id === 'again' ? 'nothing queued' : `fill ${median(rows.map((r) => r[h.id].fillMs)).toFixed(0)} ms`),
    );
  }

  console.log(
    `\n3. A full queue in Redis (MEMORY USAGE ... SAMPLES 0 over one endpoint's five keys; events of ${thresholdEvent('quota-threshold:consumer:acme-corp:day:20261129T0000Z:1').length} bytes)`,
  );
  console.log(
    `   ${fullStats.queued} events (the bound, events.queue.maxPerEndpoint ${bound}): ${fullBytes} bytes, ${(fullBytes / fullStats.queued).toFixed(0)} bytes per event`,
  );
  console.log(
    `   ${OVERFLOW} more: ${overStats.queued} queued, ${overStats.dropped} dropped (the oldest; enqueued ${overStats.enqueued}), ${overBytes} bytes (${((overBytes / fullBytes - 1) * 100).toFixed(2)}%); ` +
      `${bound + OVERFLOW} enqueues in ${fill3s.toFixed(1)} s`,
  );
  for (const s of held) s.destroy();
  hanging.close();
  redis.disconnect();
  await procs.stop(gw);
} finally {
  await procs.stopAll(10_000).catch(() => procs.killAllSync());
  rmSync(dir, { recursive: true, force: true });
}
