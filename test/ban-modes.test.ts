// ban.enabled and ban.mode through a real gateway on a private redis-server in front of a loopback upstream: shadow
// mode computes, logs and counts the ladder but answers what the limits alone say; off computes nothing (no ban key in
// Redis, no ban command per request); a reload switches modes at once, and a ban in force is not enforced in shadow.
import { describe, expect, it } from 'vitest';
import { hashAdminToken } from '../src/admin/tokens.js';
import type { Config } from '../src/config/schema.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { testConfig } from './helpers/gateway.js';
import { captureLogger, commandCalls, metricValue, startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { useStack } from './helpers/stack.js';
import { assertBuilt, startServe, tempDir } from './helpers/cli.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'banmodes:';
const TOKEN = 'tga_ban-modes-test-token';
const ks = new Keyspace(PREFIX);
const log = captureLogger('info');

function config(ban: Record<string, unknown>): Config {
  return testConfig({
    upstream: { url: s.up.url },
    redis: { url: s.redis.url, prefix: PREFIX, commandTimeoutMs: 2000 },
    admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    plans: { tiny: { perMinute: 1, perDay: 10_000 } },
    anonymous: { perMinute: 1000 },
    ban: { threshold: 3, windowSeconds: 60, durationsSeconds: [600, 3600], resetAfterSeconds: 3600, ...ban },
  });
}

const s = useStack<LimitsGateway>({
  redis: true,
  client: true,
  gateway: async () => startLimitsGateway(config({}), { logger: log.logger }),
});

async function call(key: string): Promise<{ status: number; code: string | undefined }> {
  const res = await fetch(`${s.gw.url}/v1/categories`, { headers: { authorization: `Bearer ${key}` } });
  const body = (await res.json().catch(() => ({}))) as { code?: string };
  return { status: res.status, code: body.code };
}

async function calls(key: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await call(key);
    out.push(r.code ?? String(r.status));
  }
  return out;
}

/** Every Redis key of one key id (SCAN). */
async function keysOf(id: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  for (let i = 0; i < 1000; i++) {
    const [next, batch] = await s.client.scan(cursor, 'MATCH', `${PREFIX}*{${id}}*`, 'COUNT', 1000);
    out.push(...batch);
    cursor = next;
    if (cursor === '0') return out;
  }
  throw new Error('SCAN did not finish');
}

describe('ban.mode and ban.enabled', () => {
  it('enforce (the default): the third 429 in a row bans the key (429 api_key_banned)', async () => {
    s.gw.runtime.apply(config({}));
    const { key } = await s.gw.createKey({ plan: 'tiny' });
    expect(await calls(key, 6)).toEqual(['200', 'rate_limit_exceeded', 'rate_limit_exceeded', 'api_key_banned', 'api_key_banned', 'api_key_banned']);
  });

  it('shadow: never api_key_banned; the would-be ban is logged (level, seconds, window), counted in the metric and the ledger (wouldBan), in keys of its own', async () => {
    s.gw.runtime.apply(config({ mode: 'shadow' }));
    const { id, key } = await s.gw.createKey({ plan: 'tiny' });
    const before = metricValue(await s.gw.metrics.registry.metrics(), 'tollgate_ban_would_ban_total', { plan: 'tiny', level: '1' }) ?? 0;
    const mark = log.lines.length;
    expect(await calls(key, 8)).toEqual(['200', ...Array(7).fill('rate_limit_exceeded')]);
    const lines = log.lines.slice(mark).filter((l) => String(l.msg).startsWith('api key would have been banned'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ consumer: id, plan: 'tiny', banLevel: 1, seconds: 600, windows: ['minute'] });
    const after = metricValue(await s.gw.metrics.registry.metrics(), 'tollgate_ban_would_ban_total', { plan: 'tiny', level: '1' }) ?? 0;
    expect(after - before).toBe(1);
    // The 4th request started the would-be ban; the 5th to 8th fell in it.
    await s.gw.gateway.flushUsage();
    const u = await s.gw.gateway.usage.keyUsage(id, Date.now() - 3_600_000, Date.now() + 1, 'hour');
    expect(u.totals).toEqual({ admitted: 1, rateLimited: 7, banned: 0, upstreamFailed: 0, shadowRefused: 0, validationFailed: 0, wouldBan: 5 });
    // The enforced ladder's keys are left alone: switching back to enforce does not ban this key.
    const keys = await keysOf(id);
    expect(keys).not.toContain(ks.ban(keySubject(id)));
    expect(keys).not.toContain(ks.strikes(keySubject(id)));
    expect(keys).toContain(ks.shadowBan(keySubject(id)));
  });

  it('enabled: false: no ban key in Redis and no ban command per request (INFO commandstats), whatever the 429s', async () => {
    s.gw.runtime.apply(config({ enabled: false }));
    const { id, key } = await s.gw.createKey({ plan: 'tiny' });
    await call(key);
    const before = await commandCalls(s.client);
    expect(await calls(key, 12)).toEqual(Array(12).fill('rate_limit_exceeded'));
    const after = await commandCalls(s.client);
    const delta = (cmd: string) => (after.get(cmd) ?? 0) - (before.get(cmd) ?? 0);
    expect([delta('hmget'), delta('hset'), delta('incr') - 12 * 2]).toEqual([0, 0, 0]);
    expect(delta('evalsha')).toBe(12);
    const keys = await keysOf(id);
    for (const k of [ks.ban(keySubject(id)), ks.strikes(keySubject(id)), ks.shadowBan(keySubject(id)), ks.shadowStrikes(keySubject(id))])
      expect(keys).not.toContain(k);
    expect(await keysOf(id)).toEqual(expect.arrayContaining([ks.minuteWindow(keySubject(id)), ks.dayWindow(keySubject(id))]));

    // The same 12 refusals with bans on cost an HMGET each, and strike: the difference is the ban's, nothing else.
    s.gw.runtime.apply(config({ threshold: 1000 }));
    const other = await s.gw.createKey({ plan: 'tiny' });
    await call(other.key);
    const b2 = await commandCalls(s.client);
    await calls(other.key, 12);
    const a2 = await commandCalls(s.client);
    expect((a2.get('hmget') ?? 0) - (b2.get('hmget') ?? 0)).toBe(12);
  });

  it('switching: a ban in force is not enforced in shadow mode (nor with bans off), and is again once back in enforce mode', async () => {
    s.gw.runtime.apply(config({}));
    const { key } = await s.gw.createKey({ plan: 'tiny' });
    expect((await calls(key, 4)).at(-1)).toBe('api_key_banned');
    // This instance remembered the ban (its ban cache): shadow mode stops that at once too.
    s.gw.runtime.apply(config({ mode: 'shadow' }));
    expect(await calls(key, 2)).toEqual(['rate_limit_exceeded', 'rate_limit_exceeded']);
    s.gw.runtime.apply(config({ enabled: false }));
    expect(await calls(key, 1)).toEqual(['rate_limit_exceeded']);
    s.gw.runtime.apply(config({}));
    expect(await calls(key, 1)).toEqual(['api_key_banned']);
  });
});

describe('a SIGHUP reload switches the ban mode (tollgate serve, Redis-less, a static key)', () => {
  it('enforce bans; after SIGHUP to shadow the same key gets what its limits say (429 rate_limit_exceeded, never api_key_banned); back to enforce it is banned again', async () => {
    assertBuilt();
    const key = generateKey();
    const files = tempDir();
    const file = (mode: string) =>
      files.write('gateway.yaml', {
        upstream: { url: s.up.url },
        plans: { tiny: { perMinute: 1, perDay: 10_000 } },
        keys: [{ id: 'static-one', plan: 'tiny', sha256: hashKey(key) }],
        ban: { threshold: 2, windowSeconds: 60, durationsSeconds: [600], mode },
      });
    const path = file('enforce');
    const { proc, url } = await startServe(path);
    try {
      const get = async () => {
        const res = await fetch(`${url}/v1/categories`, { headers: { authorization: `Bearer ${key}` } });
        return ((await res.json()) as { code?: string }).code ?? String(res.status);
      };
      const seq = async (n: number) => {
        const out: string[] = [];
        for (let i = 0; i < n; i++) out.push(await get());
        return out;
      };
      expect(await seq(4)).toEqual(['200', 'rate_limit_exceeded', 'api_key_banned', 'api_key_banned']);
      const reload = async (mode: string) => {
        file(mode);
        const mark = proc.logs.length;
        proc.signal('SIGHUP');
        await proc.waitForLog('config reloaded', { after: mark });
      };
      await reload('shadow');
      const shadowFrom = proc.logs.length;
      expect(await seq(3)).toEqual(['rate_limit_exceeded', 'rate_limit_exceeded', 'rate_limit_exceeded']);
      // The would-be ban was logged once (its own ladder: two strikes). The log reaches the test through a pipe, after
      // the answer: waited for, then counted.
      await proc.waitForLog('api key would have been banned', { after: shadowFrom });
      expect(proc.logs.filter((l) => String(l.msg).startsWith('api key would have been banned'))).toHaveLength(1);
      await reload('enforce');
      expect(await seq(1)).toEqual(['api_key_banned']);
    } finally {
      await proc.stop();
      files.remove();
    }
  });
});
