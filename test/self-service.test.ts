// The quota endpoint for key holders (docs: "Limits, windows and bans", "Your own quota: GET /ratelimit"), on real
// Redis: a key reads its own plan, windows and ban without spending a request (the counters in Redis stay exactly
// as they were, the upstream never hears of it), and the figures agree with the headers of the next /v1 answer. A
// bad or missing key is a 401 that counts toward the anonymous per-address limit, as on /v1.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { Keyspace } from '../src/storage/keyspace.js';
import { monitorRedis, startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { testConfig } from './helpers/gateway.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'self:';
const ks = new Keyspace(PREFIX);
let redis: TestRedis;
let client: Redis;
let up: TestUpstream;
let gw: LimitsGateway;

function config(extra: Record<string, unknown> = {}) {
  return testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 1000 },
    plans: { free: { perMinute: 5, perDay: 50 } },
    anonymous: { perMinute: 3 },
    ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [300], resetAfterSeconds: 3600 },
    ...extra,
  });
}

async function get(url: string, key?: string, method = 'GET') {
  const res = await fetch(url, { method, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, headers: res.headers, body };
}

/** Every Redis key of one API key's limits, with its value and TTL: what a read must leave exactly as it was. */
async function limitState(id: string): Promise<unknown[]> {
  const keys = [ks.minuteWindow(keySubject(id)), ks.dayWindow(keySubject(id)), ks.ban(keySubject(id)), ks.strikes(keySubject(id))];
  return Promise.all(keys.map(async (k) => [k, await client.type(k), await client.dump(k), (await client.pttl(k)) > 0]));
}

beforeAll(async () => {
  redis = await TestRedis.start();
  client = redis.client();
  up = await TestUpstream.start();
  gw = await startLimitsGateway(config());
}, 120_000);

afterAll(async () => {
  await gw?.close();
  client?.disconnect();
  await up?.close();
  await redis?.stop();
});

describe('GET /ratelimit', () => {
  it('answers the plan, both windows and the ban, with the RateLimit headers, counting nothing', async () => {
    const { id, key } = await gw.createKey({ plan: 'free' });
    for (let i = 0; i < 2; i++) expect((await get(`${gw.url}/v1/x`, key)).status).toBe(200);
    const seenByUpstream = up.seen.length;
    const before = await limitState(id);
    const q = await get(`${gw.url}/ratelimit`, key);
    expect(q.status).toBe(200);
    expect(q.body).toMatchObject({
      plan: 'free',
      windows: [
        { name: 'minute', limit: 5, remaining: 3 },
        { name: 'day', limit: 50, remaining: 48 },
      ],
      banned: null,
    });
    const windows = q.body.windows as Array<{ resetAt: string }>;
    expect(Date.parse(windows[0]!.resetAt) - Date.now()).toBeGreaterThan(50_000);
    expect(Date.parse(windows[1]!.resetAt) - Date.now()).toBeGreaterThan(86_000_000);
    expect(q.headers.get('x-ratelimit-limit')).toBe('5');
    expect(q.headers.get('x-ratelimit-remaining')).toBe('3');
    expect(q.headers.get('ratelimit')).toMatch(/^"minute";r=3;t=\d+, "day";r=48;t=\d+$/);
    expect(q.headers.get('cache-control')).toBe('no-store');
    // One round trip: a single script call, and nothing written by what it ran (MONITOR sees every command).
    const mon = await monitorRedis(client.duplicate());
    expect((await get(`${gw.url}/ratelimit`, key)).status).toBe(200);
    // (The gateway's own periodic checks, CONFIG GET and INFO, may fall in the window: not the request's.)
    const commands = (await mon.stop()).filter((c) => c.source === 'lua' || !/^(ping|info|config)$/i.test(c.args[0]!));
    const fromGateway = commands.filter((c) => c.source !== 'lua');
    expect(fromGateway.map((c) => c.args[0]!.toLowerCase())).toEqual(['evalsha']);
    expect(
      commands
        .filter((c) => c.source === 'lua')
        .map((c) => c.args[0]!.toLowerCase())
        .sort(),
    ).toEqual(['get', 'get', 'get', 'hmget', 'pttl', 'pttl', 'time']);
    // Asked again and again: the windows in Redis are exactly as they were, and the upstream heard nothing.
    for (let i = 0; i < 5; i++) expect((await get(`${gw.url}/ratelimit`, key)).status).toBe(200);
    expect(await limitState(id)).toEqual(before);
    expect(up.seen.length).toBe(seenByUpstream);

    // The next /v1 answer agrees: one request further on, the same resets.
    const next = await get(`${gw.url}/v1/x`, key);
    expect(next.headers.get('x-ratelimit-remaining')).toBe('2');
    expect(Math.abs(Number(next.headers.get('x-ratelimit-reset')) - Number(q.headers.get('x-ratelimit-reset')))).toBeLessThanOrEqual(1);
    const after = await get(`${gw.url}/ratelimit`, key);
    expect((after.body.windows as Array<{ remaining: number }>).map((w) => w.remaining)).toEqual([2, 47]);
    expect(after.headers.get('x-ratelimit-reset')).toBe(next.headers.get('x-ratelimit-reset'));
  });

  it('shows a ban with its end, and a HEAD answers the same headers', async () => {
    const { id, key } = await gw.createKey({ plan: 'free', perMinute: 1 });
    let banned = false;
    for (let i = 0; i < 6 && !banned; i++) banned = (await get(`${gw.url}/v1/x`, key)).body.code === 'api_key_banned';
    expect(banned).toBe(true);
    const q = await get(`${gw.url}/ratelimit`, key);
    expect(q.status).toBe(200);
    const until = Date.parse(String((q.body.banned as { until: string }).until));
    expect(until - Date.now()).toBeGreaterThan(290_000);
    expect(until - Date.now()).toBeLessThanOrEqual(300_000);
    const before = await limitState(id);
    const head = await get(`${gw.url}/ratelimit`, key, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers.get('x-ratelimit-limit')).toBe('1');
    expect(await limitState(id)).toEqual(before);
  });

  it('a missing, wrong or revoked key gets the usual 401, and counts toward the anonymous limit', async () => {
    const { id, key } = await gw.createKey({ plan: 'free' });
    await gw.gateway.admin.lifecycle.revoke(id);
    const missing = await get(`${gw.url}/ratelimit`);
    expect([missing.status, missing.body.code]).toEqual([401, 'missing_api_key']);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="tollgate"');
    const revoked = await get(`${gw.url}/ratelimit`, key);
    expect([revoked.status, revoked.body.code]).toEqual([401, 'invalid_api_key']);
    const wrong = await get(`${gw.url}/ratelimit`, 'tg_notAKeyAtAll');
    expect(wrong.status).toBe(401);
    // anonymous.perMinute is 3: the fourth keyless answer from this address is a 429, here as on /v1.
    const fourth = await get(`${gw.url}/ratelimit`);
    expect([fourth.status, fourth.body.code]).toEqual([429, 'rate_limit_exceeded']);
    expect((await get(`${gw.url}/v1/x`)).status).toBe(429);
  });

  it('only GET and HEAD; the path is configurable, and the endpoint can be turned off', async () => {
    const { key } = await gw.createKey({ plan: 'free' });
    const post = await fetch(`${gw.url}/ratelimit`, { method: 'POST', headers: { authorization: `Bearer ${key}` } });
    expect(post.status).toBe(404);
    const moved = await startLimitsGateway(config({ selfService: { path: '/me/quota' } }));
    const off = await startLimitsGateway(config({ selfService: { enabled: false } }));
    try {
      const k = await moved.createKey({ plan: 'free' });
      expect((await get(`${moved.url}/me/quota`, k.key)).status).toBe(200);
      expect((await get(`${moved.url}/ratelimit`, k.key)).status).toBe(404);
      const k2 = await off.createKey({ plan: 'free' });
      expect((await get(`${off.url}/ratelimit`, k2.key)).status).toBe(404);
    } finally {
      await moved.close();
      await off.close();
    }
    expect(() => config({ selfService: { path: '/v1/quota' } })).toThrow(/selfService\.path/);
    expect(() => config({ selfService: { path: '/metrics' } })).toThrow(/selfService\.path/);
  });
});
