#!/usr/bin/env node
// What active health checks cost a gateway, off the request path: two gateways (the built CLI) with the same
// services, --targets targets in all, one with `healthCheck` (every --interval-ms, 5 s by default) and one without,
// both idle and running side by side, so other work on the machine hits both alike. Each round reads both processes'
// CPU over --seconds; the difference is what the checks cost. The upstream (one process, a port per target) counts
// the checks it answered. Usage: npm run bench:health-cost -- [--targets 100] [--seconds 30] [--rounds 3] [--interval-ms 5000]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Procs, cpuSecondsOf, freePort, sleep, waitFor } from './lib/procs.mjs';
import { median } from './lib/stats.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = resolve(HERE, '..', 'dist', 'cli.js');
const { values } = parseArgs({
  options: { targets: { type: 'string' }, seconds: { type: 'string' }, rounds: { type: 'string' }, 'interval-ms': { type: 'string' } },
});
const num = (name, v, dflt, min, max) => {
  const n = v === undefined ? dflt : Number(v);
  if (!Number.isInteger(n) || n < min || n > max) {
    process.stderr.write(`health-cost: --${name} takes a whole number ${min}-${max}\n`);
    process.exit(2);
  }
  return n;
};
const targets = num('targets', values.targets, 100, 1, 1000);
const seconds = num('seconds', values.seconds, 30, 1, 600);
const rounds = num('rounds', values.rounds, 3, 1, 20);
const intervalMs = num('interval-ms', values['interval-ms'], 5000, 100, 60_000);

const procs = new Procs();
const dir = mkdtempSync(join(tmpdir(), 'tollgate-health-cost-'));
procs.scratch(dir);

/** Services of 10 targets each (the last one smaller), on the upstream's ports. */
function services(ports, checks) {
  const out = {};
  for (let i = 0; i < ports.length; i += 10)
    out[`svc${i / 10}`] = {
      targets: ports.slice(i, i + 10).map((p) => `http://127.0.0.1:${p}`),
      ...(checks ? { healthCheck: { path: '/healthz', intervalMs } } : {}),
    };
  return out;
}

async function gateway(name, ports, checks) {
  const port = await freePort();
  const config = join(dir, `${name}.json`);
  // Memory stores and warn-level logs: nothing but the checks (and the gateway's own timers) runs in it.
  writeFileSync(
    config,
    JSON.stringify({ server: { host: '127.0.0.1', port }, services: services(ports, checks), defaultService: 'svc0', log: { level: 'warn' } }),
  );
  const child = procs.spawn(name, process.execPath, [CLI, 'serve', '--config', config], { stdio: ['ignore', 'ignore', 'inherit'] });
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status === 200, 15_000, `${name} to answer /healthz`);
  return child;
}

async function checksAnswered(upstream) {
  return new Promise((r) => {
    upstream.child.once('message', (m) => r(m.healthChecks));
    upstream.child.send({ count: true });
  });
}

try {
  const upstream = await procs.forkHelper('upstream', join(HERE, 'upstream.mjs'), ['--extra-ports', String(targets - 1)]);
  const ports = upstream.ready.ports;
  const on = await gateway('checks-on', ports, true);
  const off = await gateway('checks-off', ports, false);
  await sleep(Math.min(intervalMs * 2, 10_000)); // first checks, JIT
  const rows = [];
  for (let round = 1; round <= rounds; round++) {
    const c0 = [cpuSecondsOf(on.pid), cpuSecondsOf(off.pid)];
    const n0 = await checksAnswered(upstream);
    const t0 = performance.now();
    await sleep(seconds * 1000);
    const wall = (performance.now() - t0) / 1000;
    const checks = (await checksAnswered(upstream)) - n0;
    const [cOn, cOff] = [cpuSecondsOf(on.pid) - c0[0], cpuSecondsOf(off.pid) - c0[1]];
    const row = {
      round,
      checks,
      wall,
      onMsPerS: (cOn * 1000) / wall,
      offMsPerS: (cOff * 1000) / wall,
      usPerCheck: checks ? ((cOn - cOff) * 1e6) / checks : NaN,
    };
    rows.push(row);
    console.log(
      `round ${round}: ${checks} checks in ${wall.toFixed(1)} s; CPU with checks ${row.onMsPerS.toFixed(2)} ms/s, without ${row.offMsPerS.toFixed(2)} ms/s; ${row.usPerCheck.toFixed(0)} us per check`,
    );
  }
  const m = (k) => median(rows.map((r) => r[k]));
  console.log(
    `\n${targets} targets, a check each every ${intervalMs} ms (${((targets * 1000) / intervalMs).toFixed(1)} checks/s), medians of ${rounds} round(s) of ${seconds} s:` +
      `\n  gateway CPU with checks ${m('onMsPerS').toFixed(2)} ms/s, without ${m('offMsPerS').toFixed(2)} ms/s: the checks cost ${(m('onMsPerS') - m('offMsPerS')).toFixed(2)} ms of CPU per second` +
      ` (${((m('onMsPerS') - m('offMsPerS')) / 10).toFixed(3)}% of one core), ${m('usPerCheck').toFixed(0)} us per check`,
  );
} finally {
  await procs.stopAll(10_000).catch(() => procs.killAllSync());
  rmSync(dir, { recursive: true, force: true });
}
