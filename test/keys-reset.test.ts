// Resetting a key's windows (docs: "Admin API", "Commands", "API keys, limits and bans"): `tollgate keys reset ID`
// as a child process against real Redis admits a spent key again and audits it as "cli"; on a Redis-less gateway the
// admin API resets the memory windows; and across a fleet the reset reaches each instance's own copy of the key's
// windows, so an instance that falls back to memory when Redis goes away admits the key instead of refusing it on
// counts the fleet has dropped, while keeping the key's cached record (a reset changes no record).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import { changeMessage, parseChangeMessage } from '../src/keys/types.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { Metrics } from '../src/observability/metrics.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { assertBuilt, auditOf, runCli, tempDir, withoutAudit } from './helpers/cli.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';

const TOKEN = generateAdminToken();
const PLANS = { small: { perMinute: 3, perDay: 1000 } };
let up: TestUpstream;

async function call(gw: RunningGateway, key: string): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${gw.url}/v1/things`, { headers: { authorization: `Bearer ${key}` } });
  const text = await res.text();
  let code: string | undefined;
  try {
    code = (JSON.parse(text) as { code?: string }).code;
  } catch {}
  return { status: res.status, ...(code !== undefined ? { code } : {}) };
}

async function adminPost(gw: RunningGateway, path: string, body: unknown = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${gw.adminUrl}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function start(raw: Record<string, unknown>): Promise<{ gw: RunningGateway; composed: ComposedGateway }> {
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    plans: PLANS,
    anonymous: { perMinute: 1000 },
    ...raw,
  });
  const composed = await composeGateway({ config, logger: silentLogger, metrics: new Metrics(), upstreamCheckTimeoutMs: 500 });
  return { gw: await startGateway({ gateway: composed, logger: silentLogger }), composed };
}

/** Spends a `small` key's minute window: 3 admitted, the 4th refused. */
async function spend(gw: RunningGateway, key: string): Promise<void> {
  for (let i = 0; i < 3; i++) expect((await call(gw, key)).status).toBe(200);
  expect(await call(gw, key)).toEqual({ status: 429, code: 'rate_limit_exceeded' });
}

beforeAll(async () => {
  up = await TestUpstream.start();
});
afterAll(async () => {
  await up?.close();
});

describe("the change feed's message", () => {
  it('says a reset apart from a record change; anything else after an id counts as a record change', () => {
    expect(changeMessage('key_a', 'record')).toBe('key_a');
    expect(changeMessage('key_a', 'windows')).toBe('key_a windows');
    expect(parseChangeMessage('key_a')).toEqual({ id: 'key_a', change: 'record' });
    expect(parseChangeMessage('key_a windows')).toEqual({ id: 'key_a', change: 'windows' });
    // Unknown (a newer version's, or garbage): the safe reading drops the cached record too.
    expect(parseChangeMessage('key_a windows extra')).toEqual({ id: 'key_a', change: 'record' });
    expect(parseChangeMessage('key_a plans')).toEqual({ id: 'key_a', change: 'record' });
  });
});

describe('tollgate keys reset (the built CLI, on real Redis)', () => {
  let redis: TestRedis;
  let gw: RunningGateway;
  const dir = tempDir();
  let file: string;

  beforeAll(async () => {
    assertBuilt();
    redis = await TestRedis.start();
    const redisCfg = { url: redis.url, prefix: 'reset:' };
    ({ gw } = await start({ redis: redisCfg, admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] } }));
    file = dir.write('gateway.yaml', { upstream: { url: up.url }, redis: redisCfg, plans: PLANS });
  }, 120_000);
  afterAll(async () => {
    await gw?.shutdown();
    await redis?.stop();
    dir.remove();
  });

  it('admits a spent key again, says so on stdout and audits "reset" by "cli"', async () => {
    const created = await adminPost(gw, '/keys', { plan: 'small' });
    const id = String(created.body.id);
    const key = String(created.body.key);
    await spend(gw, key);
    const r = await runCli(['keys', 'reset', id, '--config', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`Reset the windows of key ${id}; its next request starts them afresh.\n`);
    expect(withoutAudit(r.stderr)).toBe('');
    expect(auditOf(r.stderr)).toEqual([expect.objectContaining({ action: 'reset', keyId: id, by: 'cli' })]);
    expect((await call(gw, key)).status).toBe(200);
  });

  it('an unknown id, or none, is one line on stderr and a failing exit, nothing changed', async () => {
    const unknown = await runCli(['keys', 'reset', 'key_doesNotExist0000', '--config', file]);
    expect(unknown.code).toBe(1);
    // The line naming the config and Redis the command uses, then the error alone.
    expect(unknown.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^tollgate: config \S+ \(from --config\); Redis 127\.0\.0\.1:\d+\/0, tls off/),
      'error: no key with id "key_doesNotExist0000"',
    ]);
    expect(unknown.stdout).toBe('');
    const missing = await runCli(['keys', 'reset', '--config', file]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("missing required argument 'id'");
    expect(missing.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('reset on a Redis-less gateway (memory windows)', () => {
  it('the admin API admits a spent key again', async () => {
    const { gw } = await start({ admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] } });
    try {
      const created = await adminPost(gw, '/keys', { plan: 'small' });
      const key = String(created.body.key);
      await spend(gw, key);
      const r = await adminPost(gw, `/keys/${String(created.body.id)}/reset`);
      expect(r.status).toBe(200);
      expect(r.body.windows).toMatchObject([
        { name: 'minute', used: 0 },
        { name: 'day', used: 0 },
      ]);
      expect((await call(gw, key)).status).toBe(200);
    } finally {
      await gw.shutdown();
    }
  });
});

describe("reset reaches every instance's own copy of the windows", () => {
  it('an instance that falls back to memory after a reset made elsewhere admits the key, from its cached record', async () => {
    const redis = await TestRedis.start();
    const redisCfg = { url: redis.url, prefix: 'fleet:', failMode: 'open', commandTimeoutMs: 300 };
    const a = await start({ redis: redisCfg, admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] } });
    const b = await start({ redis: redisCfg });
    try {
      const created = await adminPost(a.gw, '/keys', { plan: 'small' });
      const id = String(created.body.id);
      const key = String(created.body.key);
      // b meters the key on Redis and remembers what Redis last reported: the minute window spent.
      await spend(b.gw, key);
      const heard = new Promise<string>((resolve) => b.composed.keys.onChange((changed, change) => changed === id && resolve(change)));
      expect((await adminPost(a.gw, `/keys/${id}/reset`)).status).toBe(200);
      const change = await Promise.race([heard, new Promise((r) => setTimeout(() => r('not heard within 2 s'), 2000))]);
      expect(change).toBe('windows');
      // Redis goes away before b sees the key again: b falls back to its memory windows (failMode open), which
      // continue from what b remembers; the key's record is still in b's cache (no Redis needed to accept it).
      await redis.kill();
      expect(await call(b.gw, key)).toEqual({ status: 200 });
      expect((await call(b.gw, key)).status).toBe(200);
    } finally {
      await a.gw.shutdown();
      await b.gw.shutdown();
      await redis.stop();
    }
  }, 120_000);
});
