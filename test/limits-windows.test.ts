// Request costs, route windows and shadow mode (docs: keys-and-limits.md, "Windows, costs and shadow mode"): two
// `node dist/cli.js serve` processes on one private Redis in front of one upstream. Under concurrent load split across
// both, a key never gets more than any window allows (counted at the upstream) and a refusal takes nothing from any
// window; shadow mode lets requests through, counts them shadowRefused and bans nobody, while an enforced window
// beside it still refuses; a plan's candidate limits are tried in shadow while its enforced ones keep refusing and
// banning; shadow windows never reach the rate-limit headers; a cost a key can never pay is 403 with no strike;
// GET /ratelimit lists route windows and candidates with their mode; SIGHUP changes costs, windows and modes; every
// new config mistake is refused naming its field, and a cost above a plan's window is a warning.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { Redis } from 'ioredis';
import { TestRedis } from './helpers/redis-server.js';
import { echo, TestUpstream } from './helpers/upstream.js';
import { CliProcess, assertBuilt, runCli } from './helpers/cli.js';
import { waitFor } from './helpers/wait.js';
import { validateConfig } from '../src/config/load.js';

let redis: TestRedis;
let admin: Redis;
let up: TestUpstream;
/** A loopback URL nothing listens on: the `down` service's target (connections refused). */
let deadTarget: string;
let dir: string;
let configFile: string;
const PREFIX = 'win:';
const gateways: Gateway[] = [];

interface Gateway {
  proc: CliProcess;
  url: string;
  agent: Agent;
}

interface Variant {
  postCost: number;
  storePerMinute: number;
  shadowedMode: 'enforce' | 'shadow';
}

function configFor(v: Variant): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url, timeoutMs: 5000 },
    redis: { url: redis.url, prefix: PREFIX, failMode: 'open', commandTimeoutMs: 1000 },
    log: { level: 'info' },
    plans: {
      free: { perMinute: 60, perDay: 1000 },
      metered: { perMinute: 40, perDay: 100_000 },
      trial: { perMinute: 5, perDay: 1000, mode: 'shadow' },
      // The shadow week of lowering 6 a minute to 3: the enforced 6 keeps refusing (and banning) meanwhile.
      candidate: { perMinute: 6, perDay: 1000, shadow: { perMinute: 3 } },
    },
    ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 3600 },
    services: { down: { targets: [deadTarget], retries: 0 } },
    routes: [
      { method: 'POST', path: '/v1/categories', cost: v.postCost },
      { method: 'POST', path: '/v1/broken', cost: 5 },
      { method: 'POST', path: '/v1/down/orders', service: 'down', cost: 5 },
      { path: '/v1/down/*rest', name: 'down', service: 'down', limits: { free: { perMinute: 10 } } },
      { path: '/v1/store/*rest', name: 'store', limits: { default: { perMinute: v.storePerMinute }, metered: { perMinute: 100, perDay: 2000 } } },
      { path: '/v1/shadowed/*rest', name: 'shadowed', limits: { default: { perMinute: 2 } }, mode: v.shadowedMode },
      // More than the metered, trial and candidate plans' minute windows hold: a warning at start, 403 for their keys.
      { method: 'POST', path: '/v1/bulk', cost: 50 },
    ],
  };
}

const FIRST: Variant = { postCost: 5, storePerMinute: 10, shadowedMode: 'shadow' };

async function startGateway(): Promise<Gateway> {
  const proc = CliProcess.start(['serve', '--config', configFile]);
  const line = await proc.waitForLog('tollgate gateway listening');
  return { proc, url: String(line.url), agent: new Agent({ keepAlive: true, maxSockets: 64 }) };
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function send(gw: Gateway, key: string, method: string, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${gw.url}${path}`, { method, agent: gw.agent, headers: { authorization: `Bearer ${key}` }, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
}

async function createKey(plan: string, ...extra: string[]): Promise<{ id: string; key: string }> {
  const r = await runCli(['keys', 'create', '--config', configFile, '--json', '--plan', plan, ...extra]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { id: string; key: string };
}

/** Requests of a key the upstream received, by method and path prefix. */
function atUpstream(id: string, method: string, prefix: string): number {
  return up.seen.filter((s) => s.headers['x-consumer-id'] === id && s.method === method && s.url.startsWith(prefix)).length;
}

const windowCount = async (id: string, suffix: string): Promise<number> => Number((await admin.get(`${PREFIX}rl:{${id}}:${suffix}`)) ?? '0');

async function ledgerTotals(id: string): Promise<Record<string, number>> {
  const r = await runCli(['usage', '--key', id, '--json', '--config', configFile]);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { totals: Record<string, number> }).totals;
}

beforeAll(async () => {
  assertBuilt();
  [redis, up] = await Promise.all([TestRedis.start(), TestUpstream.start()]);
  // A path with "broken" in it gets no response: the connection is cut (the gateway answers 502; the request reached
  // the upstream, so it keeps its points).
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  deadTarget = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise<void>((r) => closed.close(() => r()));
  up.behaviour = (req, res, body) => (req.url?.includes('broken') ? res.socket?.destroy() : echo(req, res, body));
  admin = redis.client();
  dir = mkdtempSync(join(tmpdir(), 'tollgate-limits-windows-'));
  configFile = join(dir, 'gateway.yaml');
  writeFileSync(configFile, stringify(configFor(FIRST)));
  gateways.push(...(await Promise.all([startGateway(), startGateway()])));
}, 120_000);

afterAll(async () => {
  await Promise.all(
    gateways.map(async (g) => {
      g.agent.destroy();
      g.proc.signal('SIGTERM');
      await g.proc.waitForExit(5000).catch(() => undefined);
    }),
  );
  await CliProcess.killAll();
  admin?.disconnect();
  await up?.close();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('costs and route windows across two instances on one Redis', () => {
  it('30 concurrent POSTs of cost 5 against 40 a minute, split across both: exactly 8 reach the upstream; the windows hold 40 points', async () => {
    const [a, b] = [gateways[0]!, gateways[1]!];
    const { id, key } = await createKey('metered');
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => send(i % 2 ? b : a, key, 'POST', '/v1/categories')));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(8);
    expect(answers.filter((r) => r.status === 429)).toHaveLength(22);
    expect(atUpstream(id, 'POST', '/v1/categories')).toBe(8);
    // Refusals took nothing: the windows hold exactly what the admitted requests took.
    expect(await windowCount(id, 'minute')).toBe(40);
    expect(await windowCount(id, 'day')).toBe(40);
    for (const r of answers.filter((x) => x.status === 429)) expect(r.headers['retry-after']).toMatch(/^[1-9]\d*$/);
  });

  it('mixed concurrent load (route window, costly POSTs, plain GETs) never exceeds any window, and the windows count exactly what was admitted', async () => {
    const [a, b] = [gateways[0]!, gateways[1]!];
    const { id, key } = await createKey('free');
    const plan: Array<[string, string]> = [
      ...Array.from({ length: 40 }, () => ['GET', '/v1/store/items/1'] as [string, string]),
      ...Array.from({ length: 12 }, () => ['POST', '/v1/categories'] as [string, string]),
      ...Array.from({ length: 30 }, () => ['GET', '/v1/categories'] as [string, string]),
    ];
    // Interleaved, so every kind competes for the same minute window at once.
    const order = plan.map((p, i) => [p, (i * 37) % plan.length] as const).sort((x, y) => x[1] - y[1]);
    const answers = await Promise.all(order.map(([[method, path]], i) => send(i % 2 ? b : a, key, method, path)));
    expect(answers.every((r) => r.status === 200 || r.status === 429)).toBe(true);
    const store = atUpstream(id, 'GET', '/v1/store/');
    const posts = atUpstream(id, 'POST', '/v1/categories');
    const gets = atUpstream(id, 'GET', '/v1/categories');
    expect(store).toBeLessThanOrEqual(10);
    const points = store + 5 * posts + gets;
    expect(points).toBeLessThanOrEqual(60);
    expect(answers.filter((r) => r.status === 200)).toHaveLength(store + posts + gets);
    // What the upstream saw is exactly what the windows hold: no refusal took a point.
    expect(await windowCount(id, 'minute')).toBe(points);
    expect(await windowCount(id, 'day')).toBe(points);
    expect(await windowCount(id, 'route:store:minute')).toBe(store);
  });

  it('a route window refuses on its own: the 11th store request is 429 (the store window named), and the plan windows did not pay for it', async () => {
    const a = gateways[0]!;
    const { id, key } = await createKey('free');
    for (let i = 0; i < 10; i++) expect((await send(a, key, 'GET', '/v1/store/x')).status).toBe(200);
    const refused = await send(a, key, 'GET', '/v1/store/x');
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'rate_limit_exceeded', message: expect.stringContaining('(store:minute window)') });
    expect(refused.headers['ratelimit']).toMatch(/^"minute";r=50;t=\d+, "day";r=990;t=\d+, "store:minute";r=0;t=\d+$/);
    expect(refused.headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400, "store:minute";q=10;w=60');
    // The binding window is the one with the fewest points left: the route's.
    expect(refused.headers['x-ratelimit-limit']).toBe('10');
    expect(refused.headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
    // Another path of the same key is not held back by the store window.
    expect((await send(a, key, 'GET', '/v1/categories')).status).toBe(200);
    expect(await windowCount(id, 'minute')).toBe(11);
    expect(await windowCount(id, 'route:store:minute')).toBe(10);
  });

  it('`keys reset` empties the route windows too: the key is admitted on the route again at once', async () => {
    const a = gateways[0]!;
    const { id, key } = await createKey('free');
    for (let i = 0; i < 10; i++) expect((await send(a, key, 'GET', '/v1/store/x')).status).toBe(200);
    expect((await send(a, key, 'GET', '/v1/store/x')).status).toBe(429);
    const r = await runCli(['keys', 'reset', id, '--config', configFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(await admin.exists(`${PREFIX}rl:{${id}}:route:store:minute`)).toBe(0);
    expect((await send(a, key, 'GET', '/v1/store/x')).status).toBe(200);
  });

  it('a request that reached no target gets its cost back in every window it took it from, route windows included', async () => {
    const a = gateways[0]!;
    const { id, key } = await createKey('free');
    expect((await send(a, key, 'GET', '/v1/down/x')).status).toBe(502);
    expect((await send(a, key, 'POST', '/v1/down/orders')).status).toBe(502);
    expect(await windowCount(id, 'minute')).toBe(0);
    expect(await windowCount(id, 'day')).toBe(0);
    expect(await windowCount(id, 'route:down:minute')).toBe(0);
    expect(await ledgerTotals(id)).toMatchObject({ admitted: 0, upstreamFailed: 0 });
  });

  it('a request that reached the upstream keeps its cost in every window whatever happened, and is counted upstreamFailed', async () => {
    const a = gateways[0]!;
    const { id, key } = await createKey('free');
    expect((await send(a, key, 'GET', '/v1/store/x')).status).toBe(200);
    expect((await send(a, key, 'POST', '/v1/broken')).status).toBe(502);
    expect((await send(a, key, 'GET', '/v1/store/broken')).status).toBe(502);
    expect(await windowCount(id, 'minute')).toBe(1 + 5 + 1);
    expect(await windowCount(id, 'day')).toBe(1 + 5 + 1);
    expect(await windowCount(id, 'route:store:minute')).toBe(2);
    // upstreamFailed reaches Redis with the instance's next usage flush (usage.flushIntervalMs, 5 s here).
    await waitFor(async () => (await ledgerTotals(id)).upstreamFailed === 2, 'the instance flushed upstreamFailed', 30_000, 250);
    expect(await ledgerTotals(id)).toMatchObject({ admitted: 3, upstreamFailed: 2 });
  });

  it("GET /ratelimit lists the key's plan windows, then every route window of its plan, counting nothing", async () => {
    const a = gateways[0]!;
    const metered = await createKey('metered');
    await send(a, metered.key, 'GET', '/v1/store/x');
    const before = await windowCount(metered.id, 'route:store:minute');
    const q = await send(a, metered.key, 'GET', '/ratelimit');
    expect(q.status).toBe(200);
    const body = JSON.parse(q.body) as { windows: Array<{ name: string; limit: number; remaining: number; mode: string }> };
    expect(body.windows.map((w) => [w.name, w.limit, w.remaining, w.mode])).toEqual([
      ['minute', 40, 39, 'enforce'],
      ['day', 100_000, 99_999, 'enforce'],
      ['store:minute', 100, 99, 'enforce'],
      ['store:day', 2000, 1999, 'enforce'],
      ['shadowed:minute', 2, 2, 'shadow'],
    ]);
    // The headers show only the enforced windows: a client must not pace itself by a limit that is not in force.
    expect(q.headers['ratelimit-policy']).toBe('"minute";q=40;w=60, "day";q=100000;w=86400, "store:minute";q=100;w=60, "store:day";q=2000;w=86400');
    expect(await windowCount(metered.id, 'route:store:minute')).toBe(before);
    // It takes no parameter: a route named in the query changes nothing (nothing to probe or inject through).
    const withQuery = await send(a, metered.key, 'GET', '/ratelimit?route=store&name=%22x');
    expect((JSON.parse(withQuery.body) as typeof body).windows.map((w) => w.name)).toEqual(body.windows.map((w) => w.name));
  });
});

describe('shadow mode', () => {
  it('a shadow route window that would refuse lets the request through, never in the rate-limit headers, no Retry-After, no ban; counted shadowRefused per window', async () => {
    const a = gateways[0]!;
    const { id, key } = await createKey('free');
    const answers: Answer[] = [];
    for (let i = 0; i < 6; i++) answers.push(await send(a, key, 'GET', '/v1/shadowed/thing'));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(atUpstream(id, 'GET', '/v1/shadowed/')).toBe(6);
    answers.forEach((r, i) => {
      // Only the plan's enforced windows: the shadow window (2 a minute, spent after the second) is not among them.
      expect(r.headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
      expect(r.headers['ratelimit']).toMatch(new RegExp(`^"minute";r=${59 - i};t=\\d+, "day";r=${999 - i};t=\\d+$`));
      expect(r.headers['x-ratelimit-limit']).toBe('60');
      expect(r.headers['x-ratelimit-remaining']).toBe(String(59 - i));
      expect(r.headers['retry-after']).toBeUndefined();
    });
    // Nothing taken from the shadow window past its limit; the plan's windows took every request.
    expect(await windowCount(id, 'route:shadowed:minute')).toBe(2);
    expect(await windowCount(id, 'minute')).toBe(6);
    // Four shadow refusals, with a ban threshold of 3: no strike, no ban.
    const shown = await runCli(['keys', 'show', id, '--json', '--config', configFile]);
    expect(JSON.parse(shown.stdout)).toMatchObject({ bannedUntil: null, banLevel: 0 });
    expect(await admin.exists(`${PREFIX}strikes:{${id}}`)).toBe(0);
    expect(await ledgerTotals(id)).toEqual({ admitted: 6, rateLimited: 0, banned: 0, upstreamFailed: 0, shadowRefused: 4, wouldBan: 0, validationFailed: 0 });
    const metrics = await send(a, key, 'GET', '/metrics');
    const line = metrics.body.split('\n').find((l) => l.startsWith('tollgate_ratelimit_decisions_total{plan="free",decision="shadow_refused",window="route"}'));
    // Only this test sends to the shadow route: its gateway counted exactly the four shadow refusals above.
    expect(Number(line?.split(' ')[1])).toBe(4);
    const named = metrics.body.split('\n').find((l) => l.startsWith('tollgate_ratelimit_shadow_refusals_total{plan="free",window="shadowed:minute"}'));
    expect(Number(named?.split(' ')[1])).toBe(4);
  });

  it('a plan in shadow mode lets everything through and counts it; an enforced plan beside it still refuses', async () => {
    const [a, b] = [gateways[0]!, gateways[1]!];
    const trial = await createKey('trial');
    const answers: Answer[] = [];
    for (let i = 0; i < 8; i++) answers.push(await send(i % 2 ? b : a, trial.key, 'GET', '/v1/categories'));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    // No window of the plan is enforced: no rate-limit header at all (a client must not slow down for them).
    for (const r of answers) {
      for (const h of ['ratelimit', 'ratelimit-policy', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'retry-after']) {
        expect(r.headers[h], h).toBeUndefined();
      }
    }
    expect(await windowCount(trial.id, 'minute')).toBe(5);
    expect(await ledgerTotals(trial.id)).toMatchObject({ admitted: 8, rateLimited: 0, shadowRefused: 3 });

    const tight = await createKey('free', '--per-minute', '2');
    expect((await send(a, tight.key, 'GET', '/v1/categories')).status).toBe(200);
    expect((await send(b, tight.key, 'GET', '/v1/categories')).status).toBe(200);
    const refused = await send(a, tight.key, 'GET', '/v1/categories');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(await ledgerTotals(tight.id)).toMatchObject({ admitted: 2, rateLimited: 1, shadowRefused: 0 });
  });
});

describe('candidate limits (plans.<p>.shadow)', () => {
  it('the shadow week: the candidate 3 a minute is counted per window while the enforced 6 keeps refusing and banning; headers show only the 6', async () => {
    const a = gateways[0]!;
    const { id, key } = await createKey('candidate');
    const answers: Answer[] = [];
    for (let i = 0; i < 5; i++) answers.push(await send(a, key, 'GET', '/v1/categories'));
    const q = await send(a, key, 'GET', '/ratelimit');
    for (let i = 5; i < 9; i++) answers.push(await send(a, key, 'GET', '/v1/categories'));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200, 429, 429, 429]);
    expect(answers.map((r) => (r.status === 429 ? (JSON.parse(r.body) as { code: string }).code : 'ok'))).toEqual([
      ...Array<string>(6).fill('ok'),
      'rate_limit_exceeded',
      'rate_limit_exceeded',
      'api_key_banned',
    ]);
    expect(atUpstream(id, 'GET', '/v1/categories')).toBe(6);
    answers.slice(0, 6).forEach((r, i) => {
      expect(r.headers['ratelimit-policy']).toBe('"minute";q=6;w=60, "day";q=1000;w=86400');
      expect(r.headers['x-ratelimit-limit']).toBe('6');
      expect(r.headers['x-ratelimit-remaining']).toBe(String(5 - i));
      expect(r.headers['retry-after']).toBeUndefined();
    });
    expect(answers[6]!.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    // The quota endpoint lists the candidate with its mode, on the minute window's count (5 taken: none left under 3).
    const windows = (JSON.parse(q.body) as { windows: Array<{ name: string; limit: number; remaining: number; mode: string }> }).windows;
    expect(windows.map((w) => [w.name, w.limit, w.remaining, w.mode])).toEqual([
      ['minute', 6, 1, 'enforce'],
      ['day', 1000, 995, 'enforce'],
      ['store:minute', 10, 10, 'enforce'],
      ['shadowed:minute', 2, 2, 'shadow'],
      ['minute:shadow', 3, 0, 'shadow'],
    ]);
    expect(q.headers['ratelimit-policy']).toBe('"minute";q=6;w=60, "day";q=1000;w=86400, "store:minute";q=10;w=60');
    // The day window kept counting; the ledger has the three shadow refusals beside what was refused for real.
    expect(await windowCount(id, 'minute')).toBe(6);
    expect(await windowCount(id, 'day')).toBe(6);
    expect(await ledgerTotals(id)).toEqual({ admitted: 6, rateLimited: 2, banned: 1, upstreamFailed: 0, shadowRefused: 3, wouldBan: 0, validationFailed: 0 });
    const metrics = await send(a, key, 'GET', '/metrics');
    const line = metrics.body.split('\n').find((l) => l.startsWith('tollgate_ratelimit_shadow_refusals_total{plan="candidate",window="minute:shadow"}'));
    expect(line?.split(' ')[1]).toBe('3');
  });

  it("a key's own override of the window is not held to the plan's candidate", async () => {
    const a = gateways[0]!;
    const { key } = await createKey('candidate', '--per-minute', '6');
    const q = JSON.parse((await send(a, key, 'GET', '/ratelimit')).body) as { windows: Array<{ name: string }> };
    expect(q.windows.map((w) => w.name)).toEqual(['minute', 'day', 'store:minute', 'shadowed:minute']);
  });
});

describe('a cost a key can never pay', () => {
  const BODY = {
    code: 'cost_exceeds_limit',
    message: 'This request costs 5 points, more than the minute window of this key holds in all (4): it can never be admitted.',
    status: 403,
  };

  it("a key whose own limit is below the route's cost: 403 naming the window, no Retry-After, no points, no strike, no ban after many tries", async () => {
    const [a, b] = [gateways[0]!, gateways[1]!];
    const { id, key } = await createKey('free', '--per-minute', '4');
    for (let i = 0; i < 12; i++) {
      const r = await send(i % 2 ? b : a, key, 'POST', '/v1/categories');
      expect(r.status).toBe(403);
      expect(JSON.parse(r.body)).toEqual(BODY);
      expect(r.headers['content-type']).toBe('application/json; charset=utf-8');
      for (const h of ['retry-after', 'ratelimit', 'ratelimit-policy', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
        expect(r.headers[h], h).toBeUndefined();
      }
    }
    expect(atUpstream(id, 'POST', '/v1/categories')).toBe(0);
    // Twelve tries with a ban threshold of 3: no strike, no ban, no window opened.
    expect(await admin.exists(`${PREFIX}strikes:{${id}}`, `${PREFIX}rl:{${id}}:minute`, `${PREFIX}rl:{${id}}:day`)).toBe(0);
    const shown = await runCli(['keys', 'show', id, '--json', '--config', configFile]);
    expect(JSON.parse(shown.stdout)).toMatchObject({ bannedUntil: null, banLevel: 0 });
    // Every other route still serves the key, with its whole quota.
    const other = await send(a, key, 'GET', '/v1/categories');
    expect(other.status).toBe(200);
    expect(other.headers['x-ratelimit-remaining']).toBe('3');
  });

  it("a plan whose window is below a route's cost: its keys get 403 on that route, naming the window", async () => {
    const a = gateways[0]!;
    const { key } = await createKey('metered');
    const r = await send(a, key, 'POST', '/v1/bulk');
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body)).toEqual({
      code: 'cost_exceeds_limit',
      message: 'This request costs 50 points, more than the minute window of this key holds in all (40): it can never be admitted.',
      status: 403,
    });
  });

  it('the gateway started with that route, and said so in a warning naming route, plan and window', () => {
    const warnings = gateways[0]!.proc.logs.filter((l) => l.msg === 'config warning').map((l) => l.warning);
    expect(warnings).toEqual([
      "routes[0] (POST /v1/categories, cost 5): more than plan candidate's candidate limit minute:shadow (3): once enforced, its keys would be refused there with 403 cost_exceeds_limit",
      "routes[1] (POST /v1/broken, cost 5): more than plan candidate's candidate limit minute:shadow (3): once enforced, its keys would be refused there with 403 cost_exceeds_limit",
      "routes[2] (POST /v1/down/orders, cost 5): more than plan candidate's candidate limit minute:shadow (3): once enforced, its keys would be refused there with 403 cost_exceeds_limit",
      "routes[6] (POST /v1/bulk, cost 50): more than plan metered's minute window holds in all (40): its keys are refused there with 403 cost_exceeds_limit",
      "routes[6] (POST /v1/bulk, cost 50): more than plan trial's minute window holds in all (5): in shadow mode: every such request is a shadow refusal",
      "routes[6] (POST /v1/bulk, cost 50): more than plan candidate's minute window holds in all (6): its keys are refused there with 403 cost_exceeds_limit",
      "routes[6] (POST /v1/bulk, cost 50): more than plan candidate's candidate limit minute:shadow (3): once enforced, its keys would be refused there with 403 cost_exceeds_limit",
    ]);
  });
});

describe('SIGHUP', () => {
  it('applies new costs, route windows and modes to the next request on every instance', async () => {
    writeFileSync(configFile, stringify(configFor({ postCost: 3, storePerMinute: 3, shadowedMode: 'enforce' })));
    for (const g of gateways) {
      const after = g.proc.logs.length;
      g.proc.signal('SIGHUP');
      await g.proc.waitForLog('config reloaded', { after });
    }
    const [a, b] = [gateways[0]!, gateways[1]!];
    const { id, key } = await createKey('free');
    const post = await send(a, key, 'POST', '/v1/categories');
    expect(post.status).toBe(200);
    expect(post.headers['ratelimit']).toMatch(/^"minute";r=57;/);
    for (let i = 0; i < 3; i++) expect((await send(i % 2 ? b : a, key, 'GET', '/v1/store/x')).status).toBe(200);
    expect((await send(b, key, 'GET', '/v1/store/x')).status).toBe(429);
    expect(post.headers['ratelimit-policy']).toBe('"minute";q=60;w=60, "day";q=1000;w=86400');
    // The shadowed route is enforced now: its third request is refused.
    const other = await createKey('free');
    expect((await send(a, other.key, 'GET', '/v1/shadowed/x')).status).toBe(200);
    expect((await send(b, other.key, 'GET', '/v1/shadowed/x')).status).toBe(200);
    const refused = await send(a, other.key, 'GET', '/v1/shadowed/x');
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.body).message).toContain('(shadowed:minute window)');
    expect(await windowCount(id, 'minute')).toBe(6);
  });
});

describe('config mistakes are refused, naming the field', () => {
  const base = { plans: { free: { perMinute: 60, perDay: 1000 } } };
  const errorsOf = (raw: Record<string, unknown>): string[] => {
    const r = validateConfig(raw);
    return r.ok ? [] : r.errors;
  };

  it.each([
    ['a cost of 0', { routes: [{ path: '/v1/x', cost: 0 }] }, /^routes\[0\]\.cost: /],
    ['a fractional cost', { routes: [{ path: '/v1/x', cost: 1.5 }] }, /^routes\[0\]\.cost: expected int/],
    ['a cost as text', { routes: [{ path: '/v1/x', cost: '5' }] }, /^routes\[0\]\.cost: /],
    [
      'plan candidates with no window',
      { plans: { free: { perMinute: 60, perDay: 1000, shadow: {} } } },
      /^plans\.free\.shadow: expected perMinute and\/or perDay/,
    ],
    [
      'an unknown field in plan candidates',
      { plans: { free: { perMinute: 60, perDay: 1000, shadow: { perHour: 3 } } } },
      /^plans\.free\.shadow\.perHour: unknown field/,
    ],
    ['a plan candidate of 0', { plans: { free: { perMinute: 60, perDay: 1000, shadow: { perMinute: 0 } } } }, /^plans\.free\.shadow\.perMinute: /],
    [
      'a route candidate without its enforced window',
      { routes: [{ path: '/v1/x', limits: { default: { perMinute: 5, shadow: { perDay: 50 } } } }] },
      /^routes\[0\]\.limits\.default\.shadow\.perDay: a candidate perDay needs an enforced perDay beside it; for a window that enforces nothing yet, set perDay with the route's mode: shadow/,
    ],
    [
      'route limits for an unknown plan',
      { routes: [{ path: '/v1/x', limits: { gold: { perMinute: 3 } } }] },
      /^routes\[0\]\.limits\.gold: unknown plan; expected default or one of free/,
    ],
    [
      'route limits with no window',
      { routes: [{ path: '/v1/x', limits: { default: {} } }] },
      /^routes\[0\]\.limits\.default: expected perMinute and\/or perDay/,
    ],
    ['a route window of 0', { routes: [{ path: '/v1/x', limits: { default: { perDay: 0 } } }] }, /^routes\[0\]\.limits\.default\.perDay: /],
    [
      'an unknown field in route limits',
      { routes: [{ path: '/v1/x', limits: { default: { perHour: 3 } } }] },
      /^routes\[0\]\.limits\.default\.perHour: unknown field/,
    ],
    [
      'two routes with windows under one name',
      {
        routes: [
          { path: '/v1/a', name: 'shared', limits: { default: { perMinute: 3 } } },
          { path: '/v1/b', name: 'shared', limits: { default: { perMinute: 3 } } },
        ],
      },
      /^routes\[1\]\.name: route window name "shared" is already used by routes\[0\]/,
    ],
    [
      'two methods of one path with windows and no names',
      {
        routes: [
          { method: 'GET', path: '/v1/a', limits: { default: { perMinute: 3 } } },
          { method: 'POST', path: '/v1/a', limits: { default: { perMinute: 3 } } },
        ],
      },
      /^routes\[1\]\.path: route window name "\/v1\/a" is already used by routes\[0\]/,
    ],
    ['a route name with a brace', { routes: [{ path: '/v1/x', name: 'a}{b' }] }, /^routes\[0\]\.name: expected 1-64 characters/],
    ['a route name with a quote', { routes: [{ path: '/v1/x', name: 'a"b' }] }, /^routes\[0\]\.name: expected 1-64 characters/],
    ['a route mode that is neither', { routes: [{ path: '/v1/x', mode: 'dry-run' }] }, /^routes\[0\]\.mode: /],
    ['a plan mode that is neither', { plans: { free: { perMinute: 60, perDay: 1000, mode: 'Shadow' } } }, /^plans\.free\.mode: /],
    ['limits.mode that is neither', { limits: { mode: 'off' } }, /^limits\.mode: /],
    ['an unknown field under limits', { limits: { mode: 'shadow', dryRun: true } }, /^limits\.dryRun: unknown field/],
    ['a plan named default', { plans: { default: { perMinute: 60, perDay: 1000 } } }, /^plans\.default: .*reserved/],
    [
      'route limits under constructor',
      { routes: [{ path: '/v1/x', limits: { constructor: { perMinute: 3 } } }] },
      /^routes\[0\]\.limits\.constructor: unknown plan/,
    ],
  ])('%s', (_name, raw, pattern) => {
    const errors = errorsOf({ ...base, ...raw });
    expect(
      errors.some((e) => pattern.test(e)),
      errors.join('\n'),
    ).toBe(true);
  });

  it('route limits under __proto__ pollute nothing and add no window', () => {
    const r = validateConfig({ ...base, routes: [{ path: '/v1/x', limits: JSON.parse('{"__proto__": {"perMinute": 3}}') as object }] });
    expect(r.ok).toBe(true);
    if (r.ok) expect(Object.keys(r.config.routes[0]!.limits ?? {})).toEqual([]);
    expect(({} as Record<string, unknown>).perMinute).toBeUndefined();
  });

  it('tollgate config check: exit 1, the problems on stderr, no stack trace', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, stringify({ ...base, routes: [{ path: '/v1/x', limits: { gold: { perMinute: 3 } } }] }));
    const r = await runCli(['config', 'check', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('routes[0].limits.gold: unknown plan; expected default or one of free');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('a cost larger than a window of a plan (one in shadow mode too) or of the route is valid: config check warns, naming route, plan and window, and exits 0', async () => {
    const raw = {
      plans: { free: { perMinute: 60, perDay: 1000 }, trial: { perMinute: 10, perDay: 100, mode: 'shadow', shadow: { perDay: 20 } } },
      routes: [
        { path: '/v1/cheap' },
        { method: 'POST', path: '/v1/x', cost: 61 },
        { path: '/v1/y', name: 'y', cost: 5, limits: { default: { perMinute: 4, shadow: { perMinute: 2 } }, trial: { perMinute: 50 } } },
        { path: '/v1/public', cost: 5000, auth: 'none' },
      ],
    };
    expect(validateConfig(raw).ok).toBe(true);
    const file = join(dir, 'costly.yaml');
    writeFileSync(file, stringify(raw));
    const r = await runCli(['config', 'check', '--config', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${file}: OK (2 plans, 4 routes, 0 static keys, in-memory store)\n`);
    expect(r.stderr.split('\n')).toEqual([
      "warning: routes[1] (POST /v1/x, cost 61): more than plan free's minute window holds in all (60): its keys are refused there with 403 cost_exceeds_limit",
      "warning: routes[1] (POST /v1/x, cost 61): more than plan trial's minute window holds in all (10): in shadow mode: every such request is a shadow refusal",
      "warning: routes[1] (POST /v1/x, cost 61): more than plan trial's candidate limit day:shadow (20): once enforced, its keys would be refused there with 403 cost_exceeds_limit",
      "warning: routes[2] (/v1/y, cost 5): more than plan free's y:minute window holds in all (4): its keys are refused there with 403 cost_exceeds_limit",
      "warning: routes[2] (/v1/y, cost 5): more than plan free's candidate limit y:minute:shadow (2): once enforced, its keys would be refused there with 403 cost_exceeds_limit",
      // A public route: a request with a valid key there is metered by its plan, at the route's cost.
      "warning: routes[3] (/v1/public, cost 5000): more than plan free's minute window holds in all (60): its keys are refused there with 403 cost_exceeds_limit",
      "warning: routes[3] (/v1/public, cost 5000): more than plan free's day window holds in all (1000): its keys are refused there with 403 cost_exceeds_limit",
      "warning: routes[3] (/v1/public, cost 5000): more than plan trial's minute window holds in all (10): in shadow mode: every such request is a shadow refusal",
      "warning: routes[3] (/v1/public, cost 5000): more than plan trial's day window holds in all (100): in shadow mode: every such request is a shadow refusal",
      "warning: routes[3] (/v1/public, cost 5000): more than plan trial's candidate limit day:shadow (20): once enforced, its keys would be refused there with 403 cost_exceeds_limit",
      '',
    ]);
  });

  it('a valid config: defaults cost 1, enforce, no windows', () => {
    const r = validateConfig({ routes: [{ path: '/v1/x' }] });
    expect(r.ok && r.config.routes[0]).toMatchObject({ cost: 1 });
    expect(r.ok && r.config.limits).toEqual({ mode: 'enforce' });
  });
});
