// Redis outages on the request path (docs: "Configuration reference", "Reliability"): an in-process gateway wired like
// `tollgate serve` on a private redis-server that the tests kill, restart on the same port, and hang (SIGSTOP).
// failMode open keeps answering on per-instance memory limits within a bound and recovers by itself; failMode
// closed answers 503. Log lines are read from a pino destination stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { generateKey, hashKey } from '../src/keys/format.js';
import { Metrics } from '../src/observability/metrics.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { TestRedis, freePort } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger, metricValue, startLimitsGateway, waitFor, type LimitsGateway } from './helpers/limits.js';
import { keySubject } from '../src/limits/subject.js';

const PER_MINUTE = 5;
/** What a request may take while Redis is dead or hung, with commandTimeoutMs 100. */
const BOUND_MS = 500;
const PREFIX = 'outage:';
const keyspace = new Keyspace(PREFIX);

/** Static keys (config `keys:`): verified without Redis, so the limits stage alone meets the outage. */
function staticKeys(ids: string[]): { entries: Array<{ id: string; plan: string; sha256: string }>; keys: Record<string, string> } {
  const keys: Record<string, string> = {};
  const entries = ids.map((id) => {
    keys[id] = generateKey();
    return { id, plan: 'tiny', sha256: hashKey(keys[id]!) };
  });
  return { entries, keys };
}

function config(redisUrl: string, failMode: 'open' | 'closed', entries: Array<{ id: string; plan: string; sha256: string }>) {
  return testConfig({
    upstream: { url: up.url, timeoutMs: 2000 },
    redis: { url: redisUrl, prefix: PREFIX, failMode, commandTimeoutMs: 100 },
    plans: { tiny: { perMinute: PER_MINUTE, perDay: 1000 } },
    // Bans stay out of the way here.
    ban: { threshold: 1000, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 60 },
    keys: entries,
  });
}

interface Timed {
  status: number;
  code: string | undefined;
  ms: number;
}

async function timedGet(gw: LimitsGateway, key: string | undefined): Promise<Timed> {
  const started = Date.now();
  const r = request(gw.url).get('/v1/categories').timeout(5000);
  const res = await (key ? r.set('authorization', `Bearer ${key}`) : r);
  const ms = Date.now() - started;
  let code: string | undefined;
  if (res.status !== 200) code = (JSON.parse(res.text) as { code?: string }).code;
  return { status: res.status, code, ms };
}

async function degraded(gw: LimitsGateway): Promise<number | undefined> {
  return metricValue((await request(gw.url).get('/metrics')).text, 'tollgate_redis_degraded');
}

let up: TestUpstream;

beforeAll(async () => {
  up = await TestUpstream.start();
});

afterAll(async () => {
  await up?.close();
});

describe('failMode open', () => {
  let redis: TestRedis;
  let admin: Redis;
  let gw: LimitsGateway;
  const cap = captureLogger('info');
  const ids = ['kill', 'fresh-after', 'pause', 'during-pause', 'after-pause', 'probe'];
  const { entries, keys } = staticKeys(ids);
  const count = (msg: string) => cap.messages().filter((m) => m.includes(msg)).length;

  beforeAll(async () => {
    redis = await TestRedis.start();
    admin = redis.client();
    gw = await startLimitsGateway(config(redis.url, 'open', entries), { logger: cap.logger, metrics: new Metrics() });
  });

  afterAll(async () => {
    await gw?.close();
    admin?.disconnect();
    await redis?.stop();
  });

  it('Redis killed mid-traffic: no crash, only 200/429 within the bound, memory limits continuing the last Redis counts, degraded 1, /readyz 503 naming redis', async () => {
    expect(await degraded(gw)).toBe(0);
    // Spend the key's minute in Redis first: from here on, Redis says 429 and every 200 is a memory admission.
    for (let i = 0; i < PER_MINUTE; i++) expect((await timedGet(gw, keys.kill)).status).toBe(200);
    expect((await timedGet(gw, keys.kill)).status).toBe(429);
    expect(count('redis unreachable: degraded mode')).toBe(0);

    // Two request loops; Redis is killed once they have run a while, and they go on until enough requests
    // started after the kill (bounded in count and time).
    const answers: Array<Timed & { afterKill: boolean }> = [];
    let killedAt = Infinity;
    let stop = false;
    const traffic = async () => {
      for (let i = 0; i < 300 && !stop; i++) {
        const startedAt = Date.now();
        answers.push({ ...(await timedGet(gw, keys.kill)), afterKill: startedAt > killedAt });
        await sleep(5);
      }
    };
    const loops = [traffic(), traffic()];
    try {
      await waitFor(() => answers.length >= 6, 'traffic before the kill', 30_000, 5);
      await redis.kill();
      killedAt = Date.now();
      await waitFor(() => answers.filter((a) => a.afterKill).length >= 2 * PER_MINUTE + 4, 'traffic after the kill', 30_000, 10);
    } finally {
      stop = true;
      await Promise.all(loops);
    }

    // A bound: how many requests went out before the kill depends on timing.
    expect(answers.filter((a) => !a.afterKill).length).toBeGreaterThanOrEqual(6);
    for (const a of answers) {
      expect([200, 429]).toContain(a.status);
      if (a.status === 429) expect(a.code).toBe('rate_limit_exceeded');
      expect(a.ms).toBeLessThan(BOUND_MS);
    }
    // The memory window continues the one Redis last reported for the key, whose minute was spent: not one 200.
    expect(answers.filter((a) => a.status === 200)).toHaveLength(0);

    // A key Redis never reported to this instance: a memory window of exactly perMinute, then 429.
    const fresh = [];
    for (let i = 0; i < PER_MINUTE + 2; i++) fresh.push(await timedGet(gw, keys['fresh-after']));
    expect(fresh.map((a) => a.status)).toEqual([...Array(PER_MINUTE).fill(200), 429, 429]);
    for (const a of fresh) expect(a.ms).toBeLessThan(BOUND_MS);

    // Requests without a key still get their 401, on the memory anonymous limit.
    const anon = await timedGet(gw, undefined);
    expect(anon.status).toBe(401);
    expect(anon.ms).toBeLessThan(BOUND_MS);

    expect(await degraded(gw)).toBe(1);
    const ready = await request(gw.url).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ code: 'service_unavailable', status: 503, checks: { redis: 'down', upstream: 'up' } });
    expect(ready.body.message).toMatch(/redis/);
    expect(count('redis unreachable: degraded mode')).toBe(1);
    const warn = cap.lines.find((l) => String(l.msg).includes('redis unreachable: degraded mode'));
    expect(warn?.level).toBe(40);
  });

  it('Redis restarted on the same port: recovers by itself (degraded 0, readyz 200, limits exact on Redis again)', async () => {
    await redis.startProcess();
    // Keyed traffic is what probes Redis again; keep it going (bounded) until the breaker closes.
    await waitFor(
      async () => {
        const a = await timedGet(gw, keys.probe);
        expect([200, 429]).toContain(a.status);
        expect(a.ms).toBeLessThan(BOUND_MS);
        return (await degraded(gw)) === 0;
      },
      'degraded mode over after the restart',
      30_000,
      100,
    );
    expect(count('degraded mode over')).toBe(1);
    expect((await request(gw.url).get('/readyz')).status).toBe(200);

    const statuses = [];
    for (let i = 0; i < PER_MINUTE + 2; i++) statuses.push((await timedGet(gw, keys['after-pause'])).status);
    expect(statuses).toEqual([...Array(PER_MINUTE).fill(200), 429, 429]);
    // Counted in Redis, not in memory.
    expect(await admin.get(keyspace.minuteWindow(keySubject('after-pause')))).toBe(String(PER_MINUTE));
    await admin.del(
      keyspace.minuteWindow(keySubject('after-pause')),
      keyspace.dayWindow(keySubject('after-pause')),
      keyspace.strikes(keySubject('after-pause')),
    );
  });

  it('Redis hung (SIGSTOP): requests still answer within the bound (breaker); resume() recovers', async () => {
    expect((await timedGet(gw, keys.pause)).status).toBe(200);
    const degradedBefore = count('redis unreachable: degraded mode');
    const overBefore = count('degraded mode over');
    const scriptCalls = async () => {
      const stats = await admin.info('commandstats');
      return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    };
    const callsBefore = await scriptCalls();
    const answers: Timed[] = [];
    const pausedAt = Date.now();
    let pausedFor = 0;
    redis.pause();
    try {
      for (let i = 0; i < 15; i++) {
        answers.push(await timedGet(gw, keys['during-pause']));
        await sleep(30);
      }
      for (const a of answers) {
        expect([200, 429]).toContain(a.status);
        expect(a.ms).toBeLessThan(BOUND_MS);
      }
      expect(await degraded(gw)).toBe(1);
      const ready = await request(gw.url).get('/readyz').timeout(3000);
      expect(ready.status).toBe(503);
      expect(ready.body.checks).toMatchObject({ redis: 'down' });
      expect(count('redis unreachable: degraded mode')).toBe(degradedBefore + 1);
    } finally {
      pausedFor = Date.now() - pausedAt;
      redis.resume();
    }
    // The breaker: only the first request and one probe per 1 s cool-down sent a script to the hung Redis (it runs
    // them once resumed, so INFO counts them); every other request failed over at once without trying.
    await waitFor(async () => (await scriptCalls()) > callsBefore, 'the resumed Redis ran the scripts sent while it was paused', 30_000, 10);
    const attempts = (await scriptCalls()) - callsBefore;
    // A bound: one per cool-down (above), and the pause lasts as long as the load makes it.
    expect(attempts).toBeGreaterThanOrEqual(1);
    expect(attempts).toBeLessThanOrEqual(2 + Math.floor(pausedFor / 1000));
    expect(attempts).toBeLessThan(answers.length);

    await waitFor(
      async () => {
        const a = await timedGet(gw, keys.pause);
        expect(a.ms).toBeLessThan(BOUND_MS);
        return (await degraded(gw)) === 0;
      },
      'degraded mode over after SIGCONT',
      30_000,
      100,
    );
    expect(count('degraded mode over')).toBe(overBefore + 1);
    expect((await request(gw.url).get('/readyz')).status).toBe(200);
  });
});

describe('failMode closed', () => {
  let redis: TestRedis;
  let gw: LimitsGateway;
  const cap = captureLogger('info');
  const { entries, keys } = staticKeys(['closed']);

  beforeAll(async () => {
    redis = await TestRedis.start();
    gw = await startLimitsGateway(config(redis.url, 'closed', entries), { logger: cap.logger, metrics: new Metrics() });
  });

  afterAll(async () => {
    await gw?.close();
    await redis?.stop();
  });

  it('keyed requests get 503 service_unavailable while Redis is down, without an upstream call; back to normal after', async () => {
    expect((await timedGet(gw, keys.closed)).status).toBe(200);
    await redis.kill();
    const seen = up.seen.length;
    for (let i = 0; i < 10; i++) {
      const a = await timedGet(gw, keys.closed);
      expect(a.status).toBe(503);
      expect(a.code).toBe('service_unavailable');
      expect(a.ms).toBeLessThan(BOUND_MS);
    }
    expect(up.seen.length).toBe(seen);
    expect(await degraded(gw)).toBe(1);
    expect(cap.messages().some((m) => m.startsWith('redis unreachable: degraded mode'))).toBe(true);

    await redis.startProcess();
    await waitFor(async () => (await timedGet(gw, keys.closed)).status === 200, 'keyed requests admitted again', 30_000, 100);
    expect(await degraded(gw)).toBe(0);
    expect(cap.messages().some((m) => m.includes('degraded mode over'))).toBe(true);
  });
});

describe('start-up', () => {
  it('serves keyed requests from the first one: the gateway waits for a slow Redis before it answers (failMode closed)', async () => {
    const redis = await TestRedis.start();
    const cap = captureLogger('info');
    const { entries, keys } = staticKeys(['first']);
    // Redis accepts the connection but answers only 300 ms later (as a busy or just-started server might).
    redis.pause();
    const resume = setTimeout(() => redis.resume(), 300);
    let gw: LimitsGateway | undefined;
    try {
      gw = await startLimitsGateway(config(redis.url, 'closed', entries), { logger: cap.logger, metrics: new Metrics() });
      const first = await timedGet(gw, keys.first);
      expect(first.status).toBe(200);
      expect(await degraded(gw)).toBe(0);
      // (The hung ready check may have been logged as an outage; it must be over by the time the gateway serves.)
      const msgs = cap.messages();
      if (msgs.some((m) => m.includes('redis unreachable'))) expect(msgs.some((m) => m.includes('degraded mode over'))).toBe(true);
    } finally {
      clearTimeout(resume);
      redis.resume();
      await gw?.close();
      await redis.stop();
    }
  });

  it('Redis down at start-up: the gateway still starts (failMode open), serves on memory limits, and recovers when Redis comes', async () => {
    const port = await freePort();
    const cap = captureLogger('info');
    const { entries, keys } = staticKeys(['late']);
    const started = Date.now();
    const gw = await startLimitsGateway(config(`redis://127.0.0.1:${port}/0`, 'open', entries), { logger: cap.logger, metrics: new Metrics() });
    const redis = new TestRedis(port);
    try {
      expect(Date.now() - started).toBeLessThan(3000);
      const a = await timedGet(gw, keys.late);
      expect(a.status).toBe(200);
      expect(a.ms).toBeLessThan(BOUND_MS);
      expect(await degraded(gw)).toBe(1);
      await redis.startProcess();
      await waitFor(
        async () => {
          await timedGet(gw, keys.late);
          return (await degraded(gw)) === 0;
        },
        'degraded mode over once Redis is up',
        30_000,
        100,
      );
      expect(cap.messages().some((m) => m.includes('degraded mode over'))).toBe(true);
    } finally {
      await gw.close();
      await redis.stop();
    }
  });
});
