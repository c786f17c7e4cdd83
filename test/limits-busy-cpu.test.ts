// A busy machine must not break a key's exact limit. Two `node dist/cli.js serve` processes on one private Redis, a
// perMinute-40 key, and both cores saturated by CPU-burning child processes: each gateway's event loop runs late, so
// a Redis answer can sit unread in the socket when the command's deadline fires. Such a request must still be decided
// by Redis's answer; only a Redis that did not answer may hand it to the per-instance memory limits (which, on two
// instances, admit past the key's limit). A short commandTimeoutMs makes a late event loop likely in every round.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { Agent, request as httpRequest } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { CliProcess, assertBuilt, runCli } from './helpers/cli.js';

const PER_MINUTE = 40;
const ROUNDS = 5;
const REQUESTS = 120;
/** Short, so that a late event loop outlasts it; Redis itself (idle but for these requests) answers well within it. */
const COMMAND_TIMEOUT_MS = 30;
/** CPU burners: twice the machine's two cores. */
const BURNERS = 4;
/** A burner ends by itself after this, whatever happens to the test. */
const BURNER_LIFETIME_MS = 90_000;

let redis: TestRedis;
let up: TestUpstream;
let dir: string;
let configFile: string;
const gateways: Array<{ proc: CliProcess; url: string; agent: Agent }> = [];

async function startGateway(): Promise<{ proc: CliProcess; url: string; agent: Agent }> {
  const proc = CliProcess.start(['serve', '--config', configFile]);
  const line = await proc.waitForLog('tollgate gateway listening', { timeoutMs: 20_000 });
  return { proc, url: String(line.url), agent: new Agent({ keepAlive: true, maxSockets: REQUESTS }) };
}

/** One request's status (0: no answer within 20 s). */
function send(gw: { url: string; agent: Agent }, key: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpRequest(`${gw.url}/v1/categories`, { agent: gw.agent, headers: { authorization: `Bearer ${key}` }, timeout: 20_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', () => resolve(0));
    req.end();
  });
}

/** Sends `key` to `gw` until it is admitted (its record cached there): at most 20 tries, 100 ms apart. */
async function cache(gw: { url: string; agent: Agent }, key: string): Promise<number> {
  for (let i = 0; ; i++) {
    const status = await send(gw, key);
    if (status !== 503 || i === 19) return status;
    await sleep(100);
  }
}

/** Processes that keep one core each busy until killed, or until their lifetime ends. */
function startBurners(): ChildProcess[] {
  return Array.from({ length: BURNERS }, () =>
    spawn(process.execPath, ['-e', `const end = Date.now() + ${BURNER_LIFETIME_MS}; while (Date.now() < end) {}`], { stdio: 'ignore' }),
  );
}

async function stopBurners(burners: ChildProcess[]): Promise<void> {
  await Promise.all(
    burners.map(async (b) => {
      if (b.exitCode !== null || b.signalCode !== null) return;
      const exited = new Promise((r) => b.once('exit', r));
      b.kill('SIGKILL');
      await exited;
    }),
  );
}

beforeAll(async () => {
  assertBuilt();
  [redis, up] = await Promise.all([TestRedis.start(), TestUpstream.start()]);
  dir = mkdtempSync(join(tmpdir(), 'tollgate-busy-cpu-'));
  configFile = join(dir, 'gateway.yaml');
  writeFileSync(
    configFile,
    stringify({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url, timeoutMs: 10_000 },
      redis: { url: redis.url, prefix: 'busy:', failMode: 'open', commandTimeoutMs: COMMAND_TIMEOUT_MS },
      log: { level: 'info' },
      plans: { free: { perMinute: PER_MINUTE, perDay: 100_000 } },
      anonymous: { perMinute: 10_000 },
    }),
  );
  gateways.push(...(await Promise.all([startGateway(), startGateway()])));
}, 60_000);

afterAll(async () => {
  await Promise.all(
    gateways.map(async (g) => {
      g.agent.destroy();
      g.proc.signal('SIGTERM');
      await g.proc.waitForExit(10_000).catch(() => undefined);
    }),
  );
  await CliProcess.killAll();
  await up?.close();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 30_000);

describe('two gateways on one Redis, both cores saturated', () => {
  it(`${REQUESTS} concurrent requests for a perMinute-${PER_MINUTE} key, split across both: never more than ${PER_MINUTE} admitted, in each of ${ROUNDS} rounds`, async () => {
    const [a, b] = [gateways[0]!, gateways[1]!];
    // A key per round (a fresh minute window each), created before the load starts.
    const keys: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const r = await runCli(['keys', 'create', '--config', configFile, '--plan', 'free', '--json'], { timeoutMs: 30_000 });
      expect(r.code, r.stderr).toBe(0);
      keys.push((JSON.parse(r.stdout) as { key: string }).key);
    }
    // Each gateway caches every key first (one admitted request each, counted in its round), so the bursts' checks
    // have their whole Redis budget, as nearly every request has: they test the limit check's deadline, not the key
    // lookup's (two round trips within the same budget, before any limit is checked).
    // A lookup that misses its budget on a busy machine answers 503 and caches nothing (nor counts): tried again.
    const warm: number[][] = [];
    for (const key of keys) warm.push([await cache(a, key), await cache(b, key)]);
    expect(warm.flat()).toEqual(keys.flatMap(() => [200, 200]));
    const rounds: Array<Record<number, number>> = [];
    const logsBefore = gateways.map((g) => g.proc.logs.length);
    const burners = startBurners();
    try {
      for (const [i, key] of keys.entries()) {
        const statuses = [...warm[i]!, ...(await Promise.all(Array.from({ length: REQUESTS }, (_, j) => send(j % 2 ? b : a, key))))];
        const counts: Record<number, number> = {};
        for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
        rounds.push(counts);
      }
    } finally {
      await stopBurners(burners);
    }
    // For a failure's message: the rounds, and what the gateways warned of meanwhile (timeouts, degraded mode).
    const warned = gateways.flatMap((g, i) => g.proc.logs.slice(logsBefore[i]).filter((l) => (l.level ?? 0) >= 40 && l.msg !== 'api key banned'));
    const seen = `${JSON.stringify(rounds)}\n${warned
      .slice(0, 10)
      .map((l) => JSON.stringify(l))
      .join('\n')}`;
    // Every request answered, admitted or refused: Redis was healthy throughout, so nothing is a 503 or a 500.
    for (const counts of rounds) expect(Object.keys(counts).sort(), seen).toEqual(['200', '429']);
    // The guarantee: the key's limit holds across the fleet in every round, however late each process ran.
    for (const counts of rounds) expect(counts[200], seen).toBeLessThanOrEqual(PER_MINUTE);
  }, 180_000);
});
