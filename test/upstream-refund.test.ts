// Points come back only for a request that never reached a target (docs: keys-and-limits.md, "Limits, windows and
// bans"): a keyed request refused a connection on every try leaves the key's windows as they were and is not billed
// (not in admitted), on real Redis with real upstreams, through the memory fallback while Redis is down (failMode
// open), and on a gateway without Redis. A request that reached a target keeps its points whatever happened next (no
// answer in time, a reset, a POST the backend completed then cut): admitted, and counted upstreamFailed beside it; so a
// key cannot get more backend hits than its plan through a slow or resetting backend. The admin API, `tollgate usage`
// and its CSV show the count. A success costs Redis nothing more (INFO commandstats), a refund touches no strike or
// ban, and a client that aborts is not refunded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { hashAdminToken } from '../src/admin/tokens.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { runCli, tempDir } from './helpers/cli.js';
import { FaultUpstream } from './helpers/fault-upstream.js';
import { testConfig } from './helpers/gateway.js';
import { commandCalls, startLimitsGateway, waitFor, type LimitsGateway } from './helpers/limits.js';
import { CheckedApi } from './helpers/openapi.js';
import { TestRedis } from './helpers/redis-server.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'refund:';
const ks = new Keyspace(PREFIX);
const TOKEN = 'tga_refund-test-token';
const HOUR = 3_600_000;

let redis: TestRedis;
let client: Redis;
let up: FaultUpstream;
let hung: FaultUpstream;
let gw: LimitsGateway;
let slowGw: LimitsGateway;
let resetGw: LimitsGateway;
let resetting: FaultUpstream;
/** POSTs the resetting upstream read whole and acted on before cutting the connection. */
let completed = 0;
const api = new CheckedApi({ target: () => slowGw.gateway.adminApp!, token: TOKEN });

function config(upstreamUrl: string, extra: Record<string, unknown> = {}) {
  return testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: upstreamUrl, timeoutMs: 400 },
    redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 2000 },
    admin: { port: 0, tokens: [{ id: 'billing', sha256: hashAdminToken(TOKEN) }] },
    plans: { five: { perMinute: 5, perDay: 100 } },
    anonymous: { perMinute: 1000 },
    ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [600], resetAfterSeconds: 3600 },
    usage: { flushIntervalMs: 60_000 },
    ...extra,
  });
}

async function call(g: LimitsGateway, key: string, path = '/v1/things'): Promise<number> {
  const res = await fetch(`${g.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

/** What the key holder sees of its windows (the quota endpoint: counts nothing). */
async function remaining(g: LimitsGateway, key: string): Promise<{ minute: number; day: number }> {
  const res = await fetch(`${g.url}/ratelimit`, { headers: { authorization: `Bearer ${key}` } });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { windows: Array<{ name: string; remaining: number }> };
  return { minute: body.windows.find((w) => w.name === 'minute')!.remaining, day: body.windows.find((w) => w.name === 'day')!.remaining };
}

async function ledgerTotals(g: LimitsGateway, id: string) {
  await g.gateway.flushUsage();
  return (await g.gateway.usage.keyUsage(id, Date.now() - HOUR, Date.now() + 1, 'hour')).totals;
}

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
  up = await FaultUpstream.start();
  // Takes requests and never answers them.
  hung = await FaultUpstream.start();
  hung.behaviour = () => {};
  gw = await startLimitsGateway(config(up.url));
  slowGw = await startLimitsGateway(config(hung.url));
  // Reads each request whole, counts it done, then resets the connection without a response.
  resetting = await FaultUpstream.start();
  resetting.behaviour = (req) => {
    completed++;
    req.socket.destroy();
  };
  resetGw = await startLimitsGateway(config(resetting.url));
}, 120_000);

afterAll(async () => {
  await gw?.close();
  await slowGw?.close();
  await resetGw?.close();
  await resetting?.close();
  client?.disconnect();
  await up?.close();
  await hung?.close();
  await redis?.stop();
});

describe('requests the upstream failed', () => {
  it('connection refused (502): the windows get the request back and the ledger does not bill it', async () => {
    if (!up.listening) await up.listenAgain();
    const { id, key } = await gw.createKey({ plan: 'five' });
    expect(await call(gw, key)).toBe(200);
    expect(await remaining(gw, key)).toEqual({ minute: 4, day: 99 });
    await up.stopListening();
    try {
      for (let i = 0; i < 3; i++) expect(await call(gw, key)).toBe(502);
      expect(await remaining(gw, key)).toEqual({ minute: 4, day: 99 });
      expect(await client.get(ks.minuteWindow(keySubject(id)))).toBe('1');
      expect(await client.get(ks.dayWindow(keySubject(id)))).toBe('1');
      // More failures than the minute allows: none is refused, as none spends quota.
      for (let i = 0; i < 6; i++) expect(await call(gw, key)).toBe(502);
      expect(await remaining(gw, key)).toEqual({ minute: 4, day: 99 });
      expect(await ledgerTotals(gw, id)).toEqual({
        admitted: 1,
        rateLimited: 0,
        banned: 0,
        upstreamFailed: 0,
        shadowRefused: 0,
        wouldBan: 0,
        validationFailed: 0,
      });
      // The windows keep their expiry: a refund neither opens nor persists a window.
      expect(await client.pttl(ks.minuteWindow(keySubject(id)))).toBeGreaterThan(0);
      expect(await client.pttl(ks.dayWindow(keySubject(id)))).toBeGreaterThan(0);
    } finally {
      await up.listenAgain();
    }
    expect(await call(gw, key)).toBe(200);
    expect(await remaining(gw, key)).toEqual({ minute: 3, day: 98 });
  });

  it('no response in time (504): the request reached the target, so it keeps its points, admitted and upstreamFailed', async () => {
    const { id, key } = await slowGw.createKey({ plan: 'five' });
    const before = hung.requests;
    expect(await call(slowGw, key)).toBe(504);
    expect(await call(slowGw, key)).toBe(504);
    // The upstream did get them (it hung): the gateway, not the client, gave up.
    expect(hung.requests - before).toBe(2);
    expect(await remaining(slowGw, key)).toEqual({ minute: 3, day: 98 });
    expect(await client.get(ks.minuteWindow(keySubject(id)))).toBe('2');
    expect(await ledgerTotals(slowGw, id)).toEqual({
      admitted: 2,
      rateLimited: 0,
      banned: 0,
      upstreamFailed: 2,
      shadowRefused: 0,
      wouldBan: 0,
      validationFailed: 0,
    });
  });

  it('a slow backend (504 each time): the key gets no more backend hits than its plan allows, then 429', async () => {
    const { key } = await slowGw.createKey({ plan: 'five' });
    const before = hung.requests;
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) statuses.push(await call(slowGw, key));
    expect(statuses).toEqual([504, 504, 504, 504, 504, 429, 429, 429, 429]);
    expect(hung.requests - before).toBe(5);
  });

  it('a backend that resets after reading a POST (its work done): 502, and the points stay spent; no more hits than the plan', async () => {
    const { id, key } = await resetGw.createKey({ plan: 'five' });
    const before = completed;
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await fetch(`${resetGw.url}/v1/orders`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ order: i }),
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    expect(statuses).toEqual([502, 502, 502, 502, 502, 429, 429, 429]);
    // Each 502 was a POST the backend read whole and acted on: five, as the plan allows.
    expect(completed - before).toBe(5);
    expect(await remaining(resetGw, key)).toEqual({ minute: 0, day: 95 });
    // (The 429s are the window's, then the ban's after two strikes: not this test's point.)
    expect(await ledgerTotals(resetGw, id)).toMatchObject({ admitted: 5, upstreamFailed: 5 });
  });

  it('a success sends Redis nothing more than the limit check (INFO commandstats); a failure one call more', async () => {
    if (!up.listening) await up.listenAgain();
    const { key } = await gw.createKey({ plan: 'five', perMinute: 50 });
    expect(await call(gw, key)).toBe(200); // the key cached, the scripts loaded
    const N = 4;
    const before = await commandCalls(client);
    for (let i = 0; i < N; i++) expect(await call(gw, key)).toBe(200);
    const after = await commandCalls(client);
    const delta = (cmd: string, from = before, to = after) => (to.get(cmd) ?? 0) - (from.get(cmd) ?? 0);
    // One script call per request, and nothing of the refund's (its DECR, HGET) or anything else outside it.
    expect(delta('evalsha')).toBe(N);
    expect(delta('eval')).toBe(0);
    expect(delta('decr')).toBe(0);
    expect(delta('hget')).toBe(0);
    const outside = [...after.keys()].filter((c) => !['evalsha', 'info', 'time', 'get', 'hmget', 'incr', 'pttl', 'pexpire', 'hincrby'].includes(c));
    for (const c of outside) expect(delta(c), c).toBe(0);

    await up.stopListening();
    try {
      const failBefore = await commandCalls(client);
      for (let i = 0; i < N; i++) expect(await call(gw, key)).toBe(502);
      const failAfter = await commandCalls(client);
      // The check and the refund: two script calls per failed request (the refund script loaded on its first use).
      expect(delta('evalsha', failBefore, failAfter) + delta('eval', failBefore, failAfter)).toBe(2 * N);
    } finally {
      await up.listenAgain();
    }
  });

  it('a client that leaves before the upstream answers is not refunded: aborting cannot buy free requests', async () => {
    const { id, key } = await slowGw.createKey({ plan: 'five' });
    const before = hung.requests;
    for (let i = 0; i < 3; i++) {
      const ac = new AbortController();
      const pending = fetch(`${slowGw.url}/v1/things`, { headers: { authorization: `Bearer ${key}` }, signal: ac.signal });
      await waitFor(() => hung.requests > before + i, 'the upstream got the request', 30_000, 10);
      ac.abort();
      await expect(pending).rejects.toThrow();
    }
    // Past the upstream's timeout, whatever the gateway does about the requests it was left with.
    await new Promise((r) => setTimeout(r, 600));
    expect(await remaining(slowGw, key)).toEqual({ minute: 2, day: 97 });
    expect(await ledgerTotals(slowGw, id)).toEqual({
      admitted: 3,
      rateLimited: 0,
      banned: 0,
      upstreamFailed: 0,
      shadowRefused: 0,
      wouldBan: 0,
      validationFailed: 0,
    });
  });

  it('a refund never lifts a ban nor takes back a strike', async () => {
    if (!up.listening) await up.listenAgain();
    const { id, key } = await gw.createKey({ plan: 'five', perMinute: 1 });
    expect(await call(gw, key)).toBe(200);
    expect(await call(gw, key)).toBe(429); // a strike
    const strikes = await client.get(ks.strikes(keySubject(id)));
    expect(strikes).toBe('1');
    await up.stopListening();
    try {
      // The window is full: refused before the upstream, so nothing is given back.
      expect(await call(gw, key)).toBe(429); // the second strike: banned
      expect(await client.hget(ks.ban(keySubject(id)), 'level')).toBe('1');
      const ban = await client.hgetall(ks.ban(keySubject(id)));
      expect(await call(gw, key)).toBe(429);
      expect(await client.hgetall(ks.ban(keySubject(id)))).toEqual(ban);
    } finally {
      await up.listenAgain();
    }
    expect(await ledgerTotals(gw, id)).toMatchObject({ admitted: 1, upstreamFailed: 0, shadowRefused: 0 });
  });

  it('the admin API, `tollgate usage` and its CSV show upstreamFailed', async () => {
    const { id, key } = await slowGw.createKey({ plan: 'five' });
    expect(await call(slowGw, key)).toBe(504);
    expect(await call(slowGw, key)).toBe(504);
    await slowGw.gateway.flushUsage();
    const one = await api.get(`/keys/${id}/usage?granularity=hour`);
    expect(one.status).toBe(200);
    expect(one.body.totals).toEqual({ admitted: 2, rateLimited: 0, banned: 0, upstreamFailed: 2, shadowRefused: 0, wouldBan: 0, validationFailed: 0 });
    // Sorted by upstreamFailed: every key of the ledger (the earlier tests' too) in descending order of the figure, this
    // key's row exact, and a page of one holds the largest figure.
    const all = await api.get('/usage?sort=upstreamFailed&limit=1000');
    expect(all.status).toBe(200);
    const failed = (all.body.keys as Array<{ upstreamFailed: number }>).map((k) => k.upstreamFailed);
    expect(failed).toEqual([...failed].sort((a, b) => b - a));
    expect(all.body.keys.find((k: { id: string }) => k.id === id)).toEqual({
      id,
      plan: 'five',
      consumer: null,
      admitted: 2,
      rateLimited: 0,
      banned: 0,
      upstreamFailed: 2,
      shadowRefused: 0,
      wouldBan: 0,
      validationFailed: 0,
    });
    const top = await api.get('/usage?sort=upstreamFailed&limit=1');
    expect(top.status).toBe(200);
    expect(top.body.keys).toHaveLength(1);
    expect(top.body.keys[0].upstreamFailed).toBe(Math.max(...failed));
    expect(api.problems).toEqual([]);

    const dir = tempDir();
    try {
      const file = dir.write('gateway.yaml', {
        upstream: { url: up.url },
        redis: { url: redis.url, prefix: PREFIX },
        plans: { five: { perMinute: 5, perDay: 100 } },
      });
      const csv = await runCli(['usage', '--csv', '--sort', 'id', '--config', file]);
      expect(csv.code, csv.stderr).toBe(0);
      const rows = csv.stdout.trimEnd().split('\r\n');
      expect(rows[0]).toBe('id,name,plan,admitted,rate_limited,banned,upstream_failed,shadow_refused,would_ban,validation_failed,consumer,metadata');
      expect(rows.find((r) => r.startsWith(`${id},`))).toBe(`${id},,five,2,0,0,2,0,0,0,,`);
      const json = await runCli(['usage', '--key', id, '--json', '--config', file]);
      expect(json.code, json.stderr).toBe(0);
      expect(JSON.parse(json.stdout).totals).toEqual({
        admitted: 2,
        rateLimited: 0,
        banned: 0,
        upstreamFailed: 2,
        shadowRefused: 0,
        wouldBan: 0,
        validationFailed: 0,
      });
      expect((await runCli(['usage', '--sort', 'failed', '--config', file])).code).toBe(2);
    } finally {
      dir.remove();
    }
  });
});

describe('requests the upstream failed, while Redis is down (failMode open: memory limits)', () => {
  let own: TestRedis;
  let ownClient: Redis;
  let fallback: LimitsGateway;
  let down: FaultUpstream;

  beforeAll(async () => {
    own = await TestRedis.start();
    ownClient = own.client();
    down = await FaultUpstream.start();
    fallback = await startLimitsGateway(
      testConfig({
        server: { host: '127.0.0.1', port: 0 },
        upstream: { url: down.url, timeoutMs: 400 },
        redis: { url: own.url, prefix: PREFIX, commandTimeoutMs: 150, failMode: 'open' },
        plans: { five: { perMinute: 5, perDay: 100 } },
        anonymous: { perMinute: 1000 },
        usage: { flushIntervalMs: 60_000 },
      }),
    );
  }, 120_000);

  afterAll(async () => {
    await fallback?.close();
    ownClient?.disconnect();
    await down?.close();
    await own?.stop();
  });

  it('memory gives a refused request back, Redis is not credited with it, and the ledger does not bill it', async () => {
    const { id, key } = await fallback.createKey({ plan: 'five' });
    expect(await call(fallback, key)).toBe(200);
    expect(await remaining(fallback, key)).toEqual({ minute: 4, day: 99 });
    // Redis gone (killed: no command of the gateway's can run late there): memory admits, continuing Redis's windows;
    // the upstream refuses; the gateway answers 502.
    const record = (await ownClient.get(ks.keyRecord(id)))!;
    await own.kill();
    try {
      await down.stopListening();
      expect(await call(fallback, key)).toBe(502);
      expect(await call(fallback, key)).toBe(502);
      // The quota endpoint reads memory while Redis does not answer.
      expect(await remaining(fallback, key)).toEqual({ minute: 4, day: 99 });
      await down.listenAgain();
    } finally {
      // Back, empty (no persistence): what it learns of this key now is only what the gateway credits it.
      await own.startProcess();
      // The key itself is kept (as on a Redis with persistence): only its windows and ledger are gone.
      await waitFor(async () => (await ownClient.set(ks.keyRecord(id), record).catch(() => null)) === 'OK', 'the key record restored', 30_000, 50);
    }
    // Quota reads count nothing, and probe Redis once the breaker's cool-down is over.
    await waitFor(
      async () => {
        await remaining(fallback, key);
        return (await fallback.metrics.degraded.get()).values[0]?.value !== 1;
      },
      'the breaker closed',
      30_000,
      100,
    );
    // The next success is credited nothing for the failed ones: Redis's new window holds this one alone (with the
    // failed ones still owed to it, 3), and the ledger (new too) has it admitted and nothing of the refused ones.
    expect(await call(fallback, key)).toBe(200);
    expect(await ownClient.get(ks.minuteWindow(keySubject(id)))).toBe('1');
    expect(await ledgerTotals(fallback, id)).toEqual({
      admitted: 1,
      rateLimited: 0,
      banned: 0,
      upstreamFailed: 0,
      shadowRefused: 0,
      wouldBan: 0,
      validationFailed: 0,
    });
  });
});

describe('requests the upstream failed, on a gateway without Redis (memory limits and ledger)', () => {
  let memoryGw: LimitsGateway;
  let gone: FaultUpstream;

  beforeAll(async () => {
    gone = await FaultUpstream.start();
    memoryGw = await startLimitsGateway(
      testConfig({
        server: { host: '127.0.0.1', port: 0 },
        upstream: { url: gone.url, timeoutMs: 400 },
        plans: { five: { perMinute: 5, perDay: 100 } },
        anonymous: { perMinute: 1000 },
        usage: { flushIntervalMs: 60_000 },
      }),
    );
  });

  afterAll(async () => {
    await memoryGw?.close();
    await gone?.close();
  });

  it('memory windows get a refused request back; the ledger takes it out of admitted', async () => {
    const { id, key } = await memoryGw.createKey({ plan: 'five' });
    expect(await call(memoryGw, key)).toBe(200);
    await gone.stopListening();
    for (let i = 0; i < 7; i++) expect(await call(memoryGw, key)).toBe(502);
    expect(await remaining(memoryGw, key)).toEqual({ minute: 4, day: 99 });
    expect(await ledgerTotals(memoryGw, id)).toEqual({
      admitted: 1,
      rateLimited: 0,
      banned: 0,
      upstreamFailed: 0,
      shadowRefused: 0,
      wouldBan: 0,
      validationFailed: 0,
    });
    await gone.listenAgain();
    expect(await call(memoryGw, key)).toBe(200);
    expect(await remaining(memoryGw, key)).toEqual({ minute: 3, day: 98 });
  });
});
