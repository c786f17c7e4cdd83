// Faults under load (docs: "The request path", "Error codes", "Reliability"): a real `node dist/cli.js serve` on a private redis-server in front
// of an upstream that misbehaves on demand, driven by 20 concurrent keep-alive request loops (a few hundred
// requests/s, a few seconds per fault). For each fault: the gateway never exits and never answers 500; every request
// gets a contract status (with the JSON error body for errors) within its bound; requests that did not overlap the
// fault are all 200; and the gateway recovers by itself (after Redis returns, a fresh key's limit is exact again and
// counted in Redis). Faults: Redis killed and restarted, Redis hung (SIGSTOP/SIGCONT), upstream refusing, upstream
// resetting mid-response, upstream too slow, upstream closing connections after every answer, and an upstream that
// drops idle keep-alive connections without announcing it (the stale pooled socket race).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { generateKey, hashKey } from '../src/keys/format.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { CliProcess, assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { FaultUpstream, closeEach, keepAliveNoHint, ok, resetMidBody, slow } from './helpers/fault-upstream.js';
import { metricValue, waitFor } from './helpers/limits.js';
import { contractViolations, startLoad, tally, timedRequest, type LoadResult } from './helpers/load.js';
import { TestRedis } from './helpers/redis-server.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'faults:';
const ks = new Keyspace(PREFIX);
const COMMAND_TIMEOUT_MS = 100;
const UPSTREAM_TIMEOUT_MS = 1000;
/** Redis faults: no request may wait on Redis longer than commandTimeoutMs; the rest is slack for a loaded 2-core box. */
const REDIS_BOUND_MS = COMMAND_TIMEOUT_MS * 2 + 800;
/** Upstream faults: no answer later than upstream.timeoutMs, plus slack. */
const UPSTREAM_BOUND_MS = UPSTREAM_TIMEOUT_MS + 1000;
const EXACT_PER_MINUTE = 5;
/** Static keys (config `keys:`): they survive a Redis restart, so the limits stage alone meets the outage. */
const KEYS = { load: generateKey(), exactAfterKill: generateKey(), exactAfterPause: generateKey() };
const AUTH = { authorization: `Bearer ${KEYS.load}` };

let redis: TestRedis;
let admin: Redis;
let up: FaultUpstream;
let dir: ReturnType<typeof tempDir>;
let gw: { proc: CliProcess; url: string };

function gatewayConfig(upstreamUrl: string, level = 'info'): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0, drainTimeoutMs: 1000 },
    upstream: { url: upstreamUrl, timeoutMs: UPSTREAM_TIMEOUT_MS },
    redis: { url: redis.url, prefix: PREFIX, failMode: 'open', commandTimeoutMs: COMMAND_TIMEOUT_MS },
    log: { level },
    plans: { big: { perMinute: 1_000_000, perDay: 10_000_000 }, exact: { perMinute: EXACT_PER_MINUTE, perDay: 1000 } },
    ban: { threshold: 1000, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 },
    keys: [
      { id: 'load', plan: 'big', sha256: hashKey(KEYS.load) },
      { id: 'exact-after-kill', plan: 'exact', sha256: hashKey(KEYS.exactAfterKill) },
      { id: 'exact-after-pause', plan: 'exact', sha256: hashKey(KEYS.exactAfterPause) },
    ],
  };
}

async function startGateway(file: string): Promise<{ proc: CliProcess; url: string }> {
  const proc = CliProcess.start(['serve', '--config', file]);
  const line = await proc.waitForLog('tollgate gateway listening');
  return { proc, url: String(line.url) };
}

beforeAll(async () => {
  assertBuilt();
  [redis, up] = await Promise.all([TestRedis.start(), FaultUpstream.start()]);
  admin = redis.client();
  dir = tempDir();
  gw = await startGateway(dir.write('gateway.yaml', gatewayConfig(up.url)));
});

afterAll(async () => {
  await CliProcess.killAll();
  admin?.disconnect();
  await up?.close();
  await redis?.stop();
  dir?.remove();
});

async function metrics(url: string): Promise<string> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(3000) });
  return res.text();
}

/** The gateway survived: still running, nothing on stderr (no crash, no warning), no 500 answered, no unhandled error. */
async function expectGatewayHealthy(g: { proc: CliProcess; url: string }): Promise<void> {
  expect(g.proc.running, `gateway exited:\n${g.proc.stderr}`).toBe(true);
  expect(g.proc.stderr, g.proc.stderr).toBe('');
  expect(g.proc.logs.filter((l) => l.msg === 'unhandled error')).toEqual([]);
  const text = await metrics(g.url);
  expect(text).not.toMatch(/^tollgate_http_requests_total\{[^}]*status="500"[^}]*\} [1-9]/m);
}

interface Scenario {
  /** Starts the fault; resolves once it is in force. */
  fault(): Promise<void> | void;
  /** How long the fault lasts under load. */
  faultMs: number;
  /** Ends the fault; resolves once healed from the outside (the gateway still has to notice). */
  heal(): Promise<void> | void;
  /** After healing: waits (bounded) until the gateway is back to normal. */
  recovered?(): Promise<void>;
  headers?: (n: number) => Record<string, string>;
}

interface Outcome {
  results: LoadResult[];
  /** Requests whose lifetime overlapped the fault (from just before it started until it was healed). */
  exposed: LoadResult[];
  /** Every other request: these must all be plain 200s. */
  unexposed: LoadResult[];
}

/**
 * 20 keep-alive loops at about 250 requests/s: 600 ms of normal traffic, the fault, healing, recovery, then 700 ms
 * of normal traffic again. Bounded: at most 15 s and 4000 requests whatever happens.
 */
async function runUnderLoad(s: Scenario): Promise<Outcome> {
  const load = startLoad({
    url: gw.url,
    path: (n) => `/v1/load/${n}`,
    headers: s.headers ?? (() => AUTH),
    concurrency: 20,
    ratePerSecond: 250,
    durationMs: 15_000,
    maxRequests: 4000,
    requestTimeoutMs: 5000,
  });
  let faultAt = Infinity;
  let healedAt = Infinity;
  try {
    load.phase = 'before';
    // Pacing, not waiting for an event: each phase is a stretch of traffic whose answers are judged apart.
    await sleep(600);
    load.phase = 'fault';
    faultAt = Date.now();
    await s.fault();
    await sleep(s.faultMs);
    await s.heal();
    healedAt = Date.now();
    load.phase = 'healing';
    await s.recovered?.();
    load.phase = 'after';
    await sleep(700);
  } finally {
    await load.stop();
  }
  const results = load.results;
  const overlaps = (r: LoadResult) => r.startedAt <= healedAt && r.startedAt + r.ms >= faultAt - 5;
  const exposed = results.filter(overlaps);
  if (process.env.FAULTS_DEBUG)
    console.log(
      tally(results),
      'exposed',
      tally(exposed),
      'max ms',
      Math.max(...results.map((r) => r.ms)),
      'p99',
      results.map((r) => r.ms).sort((a, b) => a - b)[Math.floor(results.length * 0.99)],
      'dur',
      Date.now() - faultAt,
    );
  const unexposed = results.filter((r) => !overlaps(r));
  expect(results.filter((r) => r.phase === 'before').length, tally(results)).toBeGreaterThan(20);
  expect(results.filter((r) => r.phase === 'after').length, tally(results)).toBeGreaterThan(20);
  // Outside the fault, and once recovered, every request is a plain 200.
  expect(unexposed.filter((r) => r.error !== undefined || r.status !== 200).map((r) => `${r.phase}: ${r.error ?? r.status} ${r.body ?? ''}`)).toEqual([]);
  return { results, exposed, unexposed };
}

/** A fresh key of the `exact` plan admits exactly perMinute requests, and Redis (not per-instance memory) counted them. */
async function expectExactLimit(key: string, id: string): Promise<void> {
  const statuses: number[] = [];
  for (let i = 0; i < EXACT_PER_MINUTE + 2; i++) {
    const r = await timedRequest(`${gw.url}/v1/exact/${i}`, { headers: { authorization: `Bearer ${key}` }, timeoutMs: 5000 });
    statuses.push(r.status ?? -1);
  }
  expect(statuses).toEqual([...Array(EXACT_PER_MINUTE).fill(200), 429, 429]);
  expect(await admin.get(ks.minuteWindow(keySubject(id)))).toBe(String(EXACT_PER_MINUTE));
}

async function degradedOver(): Promise<void> {
  await waitFor(async () => metricValue(await metrics(gw.url), 'tollgate_redis_degraded') === 0, 'degraded mode over', 30_000, 100);
}

describe('Redis faults under load (failMode open, commandTimeoutMs 100)', () => {
  it('Redis killed and restarted mid-load: every request 200 within the bound, then limits exact in Redis again', async () => {
    const before = await metrics(gw.url);
    const { results, exposed } = await runUnderLoad({
      fault: () => redis.kill(),
      faultMs: 1500,
      heal: () => redis.startProcess(),
      recovered: degradedOver,
    });
    expect(exposed.length).toBeGreaterThan(100);
    expect(contractViolations(results, { statuses: [200, 429, 502, 503, 504], boundMs: REDIS_BOUND_MS })).toEqual([]);
    // Stronger than the contract's list: a known key on failMode open is served on memory limits throughout.
    expect(tally(results)).toMatch(/^200×\d+$/);

    const after = await metrics(gw.url);
    const transitions = (text: string, to: string) => metricValue(text, 'tollgate_redis_degraded_transitions_total', { to }) ?? 0;
    // Bounds: a kill and restart is at least one degraded episode; how the reconnects line up can make it more.
    expect(transitions(after, 'degraded') - transitions(before, 'degraded')).toBeGreaterThanOrEqual(1);
    expect(transitions(after, 'normal') - transitions(before, 'normal')).toBeGreaterThanOrEqual(1);
    expect(gw.proc.logs.some((l) => String(l.msg).startsWith('redis unreachable: degraded mode'))).toBe(true);

    await expectExactLimit(KEYS.exactAfterKill, 'exact-after-kill');
    await expectGatewayHealthy(gw);
  });

  it('Redis hung (SIGSTOP) then resumed mid-load, with a Redis-issued key in the mix: every request 200 within the bound, then exact again', async () => {
    // A key issued in Redis (not static): its cached record carries it through the hang.
    const issued = await runCli(['keys', 'create', '--plan', 'big', '--json', '--config', dir.write('keys.yaml', gatewayConfig(up.url))]);
    expect(issued.code, issued.stderr).toBe(0);
    const issuedKey = (JSON.parse(issued.stdout) as { key: string }).key;
    expect((await timedRequest(`${gw.url}/v1/warm`, { headers: { authorization: `Bearer ${issuedKey}` } })).status).toBe(200);

    const { results, exposed } = await runUnderLoad({
      fault: () => redis.pause(),
      faultMs: 1500,
      heal: () => redis.resume(),
      recovered: degradedOver,
      headers: (n) => (n % 2 ? AUTH : { authorization: `Bearer ${issuedKey}` }),
    });
    expect(exposed.length).toBeGreaterThan(100);
    expect(contractViolations(results, { statuses: [200, 429, 502, 503, 504], boundMs: REDIS_BOUND_MS })).toEqual([]);
    expect(tally(results)).toMatch(/^200×\d+$/);
    expect(metricValue(await metrics(gw.url), 'tollgate_redis_errors_total', { op: 'limit_check' })).toBeGreaterThan(0);

    await expectExactLimit(KEYS.exactAfterPause, 'exact-after-pause');
    await expectGatewayHealthy(gw);
  });
});

describe('upstream faults under load (upstream.timeoutMs 1000)', () => {
  it('upstream refusing connections: 502 bad_gateway at once, 200 again by itself when it listens on the same port', async () => {
    const port = up.port;
    const { results, exposed } = await runUnderLoad({
      fault: () => up.stopListening(),
      faultMs: 1000,
      heal: async () => {
        await up.listenAgain();
        expect(up.port).toBe(port);
      },
    });
    expect(contractViolations(exposed, { statuses: [200, 502], boundMs: UPSTREAM_BOUND_MS })).toEqual([]);
    expect(exposed.filter((r) => r.status === 502).length, tally(exposed)).toBeGreaterThan(20);
    expect(contractViolations(results, { statuses: [200, 502], boundMs: UPSTREAM_BOUND_MS })).toEqual([]);
    expect(metricValue(await metrics(gw.url), 'tollgate_upstream_errors_total', { kind: 'refused' })).toBeGreaterThan(0);
    await expectGatewayHealthy(gw);
  });

  it('upstream resetting mid-response: the client sees its connection cut (never a clean end, never a 500); later requests are fine', async () => {
    let n = 0;
    const { results, exposed } = await runUnderLoad({
      // Half the answers declare a Content-Length, half are chunked: either way the cut must reach the client.
      fault: () => void (up.behaviour = (req, res, body) => resetMidBody({ chunked: n++ % 2 === 0 })(req, res, body)),
      faultMs: 1000,
      heal: () => void (up.behaviour = ok),
    });
    // A 502 when the reset beat the response headers; otherwise the 200 already sent is cut off.
    expect(contractViolations(exposed, { statuses: [200, 502], boundMs: UPSTREAM_BOUND_MS, errors: ['cut', 'ECONNRESET'] })).toEqual([]);
    const cut = exposed.filter((r) => r.error === 'cut');
    expect(cut.length, tally(exposed)).toBeGreaterThan(20);
    for (const r of cut) expect(r.status).toBe(200);
    // A 200 that ended normally carries a complete body: a truncated one must never look complete.
    for (const r of exposed.filter((x) => x.status === 200 && x.error === undefined)) expect(r.body).toBe('{"ok":true}');
    expect(contractViolations(results, { statuses: [200, 502], boundMs: UPSTREAM_BOUND_MS, errors: ['cut', 'ECONNRESET'] })).toEqual([]);
    expect(metricValue(await metrics(gw.url), 'tollgate_upstream_errors_total', { kind: 'reset' })).toBeGreaterThan(0);
    await expectGatewayHealthy(gw);
  });

  it('upstream slower than timeoutMs: 504 gateway_timeout within the bound, 200 again once it is fast', async () => {
    const { results, exposed } = await runUnderLoad({
      fault: () => void (up.behaviour = slow(UPSTREAM_TIMEOUT_MS + 700)),
      faultMs: 1500,
      heal: () => void (up.behaviour = ok),
      // Requests sent during the fault take up to timeoutMs to come back.
      recovered: () => sleep(UPSTREAM_TIMEOUT_MS),
    });
    expect(contractViolations(results, { statuses: [200, 504], boundMs: UPSTREAM_BOUND_MS })).toEqual([]);
    const timedOut = exposed.filter((r) => r.status === 504);
    // A bound: how many requests the load sends during the fault depends on load.
    expect(timedOut.length, tally(exposed)).toBeGreaterThanOrEqual(20);
    // 504 is the gateway's deadline, not a client's: none before timeoutMs (a bound: later under load).
    for (const r of timedOut) expect(r.ms).toBeGreaterThanOrEqual(UPSTREAM_TIMEOUT_MS - 20);
    expect(metricValue(await metrics(gw.url), 'tollgate_upstream_errors_total', { kind: 'timeout' })).toBeGreaterThan(0);
    await expectGatewayHealthy(gw);
  });

  it('upstream closing every connection after one answer (Connection: close): no 502 at all', async () => {
    const connectionsBefore = up.connections;
    const requestsBefore = up.requests;
    const { results, exposed } = await runUnderLoad({
      fault: () => void (up.behaviour = closeEach),
      faultMs: 1500,
      heal: () => void (up.behaviour = ok),
    });
    expect(tally(results)).toMatch(/^200×\d+$/);
    expect(exposed.length).toBeGreaterThan(100);
    // The upstream did close: about one connection per request during the fault.
    expect(up.connections - connectionsBefore).toBeGreaterThan((exposed.length * 3) / 4);
    expect(up.requests - requestsBefore).toBe(results.length);
    await expectGatewayHealthy(gw);
  });
});

describe('stale pooled upstream sockets', () => {
  it('an upstream that drops idle keep-alive connections without a Keep-Alive hint: no 502 from the race, each request answered once', async () => {
    // The gateway picks a pooled socket that the upstream is closing for idleness: before the fix in
    // src/pipeline/proxy.ts, each such request got 502 bad_gateway (ECONNRESET). Paced so that most reuses land in
    // the closing window (a socket idle 60-90 ms) and the rest well before it; 2 loops at once keep more than one
    // pooled socket in play.
    const racy = await FaultUpstream.start({ idleClose: { afterMs: 60, windowMs: 30 } });
    racy.behaviour = keepAliveNoHint;
    const g = await startGateway(dir.write('racy.yaml', gatewayConfig(racy.url, 'debug')));
    try {
      const load = startLoad({
        url: g.url,
        headers: () => AUTH,
        concurrency: 2,
        pauseMs: () => (Math.random() < 0.7 ? 63 + Math.random() * 20 : 5 + Math.random() * 35),
        durationMs: 3000,
        maxRequests: 300,
        requestTimeoutMs: 5000,
      });
      const results = await load.done;
      const retries = g.proc.logs.filter((l) => String(l.msg).startsWith('upstream reset a reused connection')).length;
      if (process.env.FAULTS_DEBUG) console.log('racy', tally(results), 'retries', retries, 'dropped', racy.dropped, 'conns', racy.connections);
      expect(results.length).toBeGreaterThan(50);
      expect(racy.dropped, 'the race never happened: the test did not exercise stale sockets').toBeGreaterThan(0);
      expect(tally(results)).toMatch(/^200×\d+$/);
      expect(contractViolations(results, { statuses: [200], boundMs: UPSTREAM_BOUND_MS })).toEqual([]);
      // Each stale socket cost one retry on a fresh one, and the upstream answered every request exactly once.
      // A bound: a request written to a socket the upstream had already closed is retried without being counted.
      expect(retries).toBeGreaterThanOrEqual(racy.dropped);
      expect(racy.requests).toBe(results.length);
      await expectGatewayHealthy(g);
    } finally {
      g.proc.signal('SIGTERM');
      await g.proc.waitForExit(5000).catch(() => g.proc.signal('SIGKILL'));
      await racy.close();
    }
  });
});
