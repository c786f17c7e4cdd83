// What a SIGHUP reload does to each config section, through `tollgate serve` as a child process: a section either
// applies to the next request (shown by what the gateway or the admin API answers) or keeps its old value and is
// named under needsRestart in the "config reloaded" line (shown by both). Admin tokens apply: a removed or re-hashed
// token, and every dashboard session opened with it, is refused from the reload on, in one process and on every
// node:cluster worker. Needs dist/ (npm test builds first); loopback only: a TestUpstream and a private TestRedis.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CliProcess, assertBuilt, type LogLine } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream, echo } from './helpers/upstream.js';

const TOKEN_A = generateAdminToken();
const TOKEN_B = generateAdminToken();
const STATIC_KEY = generateKey();

let dir: string;
let up: TestUpstream;
let redis: TestRedis;

beforeAll(async () => {
  assertBuilt();
  dir = mkdtempSync(join(tmpdir(), 'tollgate-reload-sections-'));
  up = await TestUpstream.start();
  up.behaviour = echo;
  redis = await TestRedis.start();
}, 120_000);

afterAll(async () => {
  await CliProcess.killAll();
  await up?.close();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

type Cfg = Record<string, Record<string, unknown> | unknown[]>;

function baseConfig(workers = 1): Cfg {
  return {
    server: { host: '127.0.0.1', port: 0, workers },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: `reload${workers}:` },
    admin: {
      port: 0,
      tokens: [
        { id: 'alice', sha256: hashAdminToken(TOKEN_A) },
        { id: 'bob', sha256: hashAdminToken(TOKEN_B) },
      ],
      maxFailuresPerMinute: 50,
    },
    log: { level: 'info' },
    plans: { basic: { perMinute: 100, perDay: 10_000 }, one: { perMinute: 1, perDay: 10_000 } },
    anonymous: { perMinute: 1000 },
    keys: [{ id: 'static-1', plan: 'basic', sha256: hashKey(STATIC_KEY) }],
  };
}

/** A gateway serving `path`, and SIGHUP after rewriting it. */
class Served {
  url = '';
  adminUrl = '';
  constructor(
    readonly proc: CliProcess,
    readonly path: string,
    readonly workers: number,
  ) {}

  static async start(name: string, cfg: Cfg, workers = 1): Promise<Served> {
    const path = join(dir, name);
    writeFileSync(path, stringify(cfg));
    const s = new Served(CliProcess.start(['serve', '--config', path]), path, workers);
    // Every worker says both lines; the admin port is shared by them.
    s.adminUrl = String((await s.proc.waitForLog('admin API listening')).url);
    s.url = String((await s.proc.waitForLog('tollgate gateway listening')).url);
    await s.reloadedLines(0, workers, 'tollgate gateway listening');
    return s;
  }

  /** Waits for `count` lines with `msg` after `mark` (one per worker). */
  async reloadedLines(mark: number, count: number, msg = 'config reloaded'): Promise<LogLine[]> {
    const found: LogLine[] = [];
    let after = mark;
    while (found.length < count) {
      const line = await this.proc.waitForLog(msg, { after });
      found.push(line);
      after = this.proc.logs.indexOf(line) + 1;
    }
    return found;
  }

  /** Writes `cfg` and sends SIGHUP; resolves with the reload line (each worker's must agree). */
  async reload(cfg: Cfg): Promise<LogLine> {
    writeFileSync(this.path, stringify(cfg));
    const mark = this.proc.logs.length;
    this.proc.signal('SIGHUP');
    const lines = await this.reloadedLines(mark, this.workers);
    for (const l of lines) expect(l.needsRestart).toEqual(lines[0]!.needsRestart);
    return lines[0]!;
  }

  async stop(): Promise<void> {
    this.proc.signal('SIGTERM');
    await this.proc.waitForExit();
  }
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

async function send(url: string, opts: { method?: string; token?: string; cookie?: string; body?: unknown; close?: boolean } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (opts.cookie !== undefined) headers.cookie = opts.cookie;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  // A new connection per request when asked: with workers, each one may land on any of them.
  if (opts.close) headers.connection = 'close';
  const res = await fetch(url, {
    method: opts.method ?? 'GET',
    headers,
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.status, body, headers: res.headers };
}

/** Signs in to the dashboard with `token`: the session cookie ("name=value"). */
async function signIn(adminUrl: string, token: string): Promise<string> {
  const res = await fetch(`${adminUrl}/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token }),
    signal: AbortSignal.timeout(5000),
  });
  expect(res.status).toBe(204);
  const cookie = res.headers.get('set-cookie') ?? '';
  const pair = cookie.split(';')[0]!;
  expect(pair).toMatch(/^tollgate_session=./);
  return pair;
}

function withAdmin(cfg: Cfg, admin: Record<string, unknown>): Cfg {
  return { ...cfg, admin: { ...(cfg.admin as Record<string, unknown>), ...admin } };
}

describe('SIGHUP, section by section (one process)', () => {
  let g: Served;
  const base = () => baseConfig(1);

  beforeAll(async () => {
    g = await Served.start('sections.yaml', base());
  }, 120_000);

  afterAll(async () => {
    await g?.stop();
  });

  async function newKey(plan: string): Promise<{ id: string; key: string }> {
    const r = await send(`${g.adminUrl}/keys`, { method: 'POST', token: TOKEN_A, body: { plan } });
    expect(r.status).toBe(201);
    return { id: String(r.body.id), key: String(r.body.key) };
  }

  it('admin.tokens: a removed token and every session it opened are refused; a re-hashed one too; the others keep working', async () => {
    const bobSession = await signIn(g.adminUrl, TOKEN_B);
    const aliceSession = await signIn(g.adminUrl, TOKEN_A);
    expect((await send(`${g.adminUrl}/keys`, { cookie: bobSession })).status).toBe(200);
    expect((await send(`${g.adminUrl}/keys`, { method: 'POST', token: TOKEN_B, body: { plan: 'basic' } })).status).toBe(201);

    const onlyAlice = withAdmin(base(), { tokens: [{ id: 'alice', sha256: hashAdminToken(TOKEN_A) }] });
    const line = await g.reload(onlyAlice);
    expect(line.needsRestart).toBeUndefined();
    // The removed token can neither change nor read anything, by bearer or by its session.
    const create = await send(`${g.adminUrl}/keys`, { method: 'POST', token: TOKEN_B, body: { plan: 'basic' } });
    expect(create.status).toBe(401);
    expect(create.body.code).toBe('invalid_admin_token');
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_B })).status).toBe(401);
    const bySession = await send(`${g.adminUrl}/keys`, { cookie: bobSession });
    expect(bySession.status).toBe(401);
    expect(bySession.body.code).toBe('missing_admin_token');
    const signInAgain = await fetch(`${g.adminUrl}/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: TOKEN_B }),
    });
    expect(signInAgain.status).toBe(401);
    // The token still listed, and its session, are untouched.
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A })).status).toBe(200);
    expect((await send(`${g.adminUrl}/keys`, { cookie: aliceSession })).status).toBe(200);

    // The same id with another token's hash: the old token and its session end, the new token works.
    const TOKEN_A2 = generateAdminToken();
    await g.reload(withAdmin(base(), { tokens: [{ id: 'alice', sha256: hashAdminToken(TOKEN_A2) }] }));
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A })).status).toBe(401);
    expect((await send(`${g.adminUrl}/keys`, { cookie: aliceSession })).status).toBe(401);
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A2 })).status).toBe(200);

    // Both tokens back: they work again, but the sessions they opened before stay ended.
    await g.reload(base());
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_B })).status).toBe(200);
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A })).status).toBe(200);
    expect((await send(`${g.adminUrl}/keys`, { cookie: bobSession })).status).toBe(401);
    expect((await send(`${g.adminUrl}/keys`, { cookie: aliceSession })).status).toBe(401);
  });

  it('admin.tokens: an empty list refuses every token and session, and the listener stays up for the next reload', async () => {
    const session = await signIn(g.adminUrl, TOKEN_A);
    await g.reload(withAdmin(base(), { tokens: [] }));
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A })).status).toBe(401);
    expect((await send(`${g.adminUrl}/keys`, { cookie: session })).status).toBe(401);
    await g.reload(base());
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A })).status).toBe(200);
  });

  it('admin.maxFailuresPerMinute: a lower limit throttles the next wrong token, never the right one; a higher one lifts it', async () => {
    const wrong = () => send(`${g.adminUrl}/keys`, { token: generateAdminToken() });
    expect((await wrong()).status).toBe(401);
    const session = await signIn(g.adminUrl, TOKEN_A);
    expect((await g.reload(withAdmin(base(), { maxFailuresPerMinute: 1 }))).needsRestart).toBeUndefined();
    const throttled = await wrong();
    expect(throttled.status).toBe(429);
    expect(throttled.body.code).toBe('rate_limit_exceeded');
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A })).status).toBe(200);
    expect((await send(`${g.adminUrl}/keys`, { cookie: session })).status).toBe(200);
    await g.reload(withAdmin(base(), { maxFailuresPerMinute: 1000 }));
    expect((await wrong()).status).toBe(401);
    await g.reload(base());
  });

  it('admin.host and admin.port: named under needsRestart; the listener stays where it is', async () => {
    const line = await g.reload(withAdmin(base(), { host: '127.0.0.2', port: 18079 }));
    expect(line.needsRestart).toEqual(['admin.host', 'admin.port']);
    expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A })).status).toBe(200);
  });

  it('server: named under needsRestart, the old value stays (maxBodyBytes)', async () => {
    const { key } = await newKey('basic');
    const line = await g.reload({ ...base(), server: { ...(base().server as object), maxBodyBytes: 10 } });
    expect(line.needsRestart).toEqual(['server.*']);
    const res = await fetch(`${g.url}/v1/echo`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: 'x'.repeat(100) });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
  });

  it('upstream, redis, ops and tracing: each named under needsRestart', async () => {
    expect((await g.reload({ ...base(), upstream: { url: up.url, timeoutMs: 1234 } })).needsRestart).toEqual(['upstream.*']);
    expect((await g.reload({ ...base(), redis: { ...(base().redis as object), commandTimeoutMs: 250 } })).needsRestart).toEqual(['redis.*']);
    expect((await g.reload({ ...base(), ops: { port: 0 } })).needsRestart).toEqual(['ops.*']);
    // /metrics stays on the gateway port: the ops listener was not started.
    expect((await fetch(`${g.url}/metrics`)).status).toBe(200);
    expect((await g.reload({ ...base(), tracing: { otlpEndpoint: 'http://127.0.0.1:9/' } })).needsRestart).toEqual(['tracing.*']);
    expect((await g.reload(base())).needsRestart).toBeUndefined();
  });

  it('keys: named under needsRestart; a static key added by a reload opens nothing', async () => {
    const added = generateKey();
    const line = await g.reload({ ...base(), keys: [...(base().keys as unknown[]), { id: 'static-2', plan: 'basic', sha256: hashKey(added) }] });
    expect(line.needsRestart).toEqual(['keys']);
    expect((await send(`${g.url}/v1/x`, { token: added })).status).toBe(401);
    expect((await send(`${g.url}/v1/x`, { token: STATIC_KEY })).status).toBe(200);
  });

  it('usage: retentionDays applies; enabled and flushIntervalMs are named under needsRestart and the ledger keeps counting', async () => {
    const { id, key } = await newKey('basic');
    const counted = async (): Promise<number> => {
      const r = await send(`${g.adminUrl}/keys/${id}/usage?granularity=hour`, { token: TOKEN_A });
      expect(r.status).toBe(200);
      return Number((r.body.totals as { admitted: number }).admitted);
    };
    expect((await send(`${g.url}/v1/x`, { token: key })).status).toBe(200);
    expect(await counted()).toBe(1);

    const line = await g.reload({ ...base(), usage: { enabled: false, retentionDays: 7, flushIntervalMs: 1000 } });
    expect(line.needsRestart).toEqual(['usage.enabled', 'usage.flushIntervalMs']);
    expect((await send(`${g.adminUrl}/status`, { token: TOKEN_A })).body.usageRetentionDays).toBe(7);
    // The ledger is on until a restart, whole: the request is counted.
    expect((await send(`${g.url}/v1/x`, { token: key })).status).toBe(200);
    expect(await counted()).toBe(2);
    await g.reload(base());
    expect((await send(`${g.adminUrl}/status`, { token: TOKEN_A })).body.usageRetentionDays).toBe(35);
  });

  it('selfService and plans apply to the next request', async () => {
    const { key } = await newKey('basic');
    const plans = { basic: { perMinute: 7, perDay: 10_000 }, one: { perMinute: 1, perDay: 10_000 } };
    const line = await g.reload({ ...base(), selfService: { path: '/quota' }, plans });
    expect(line.needsRestart).toBeUndefined();
    expect((await send(`${g.url}/ratelimit`, { token: key })).status).toBe(404);
    const quota = await send(`${g.url}/quota`, { token: key });
    expect(quota.status).toBe(200);
    expect((quota.body.windows as Array<{ name: string; limit: number }>).find((w) => w.name === 'minute')?.limit).toBe(7);
    await g.reload(base());
    expect((await send(`${g.url}/ratelimit`, { token: key })).status).toBe(200);
  });

  it('anonymous, ban and routes apply to the next request', async () => {
    expect((await send(`${g.url}/v1/x`)).status).toBe(401);
    await g.reload({ ...base(), anonymous: { perMinute: 1 } });
    await send(`${g.url}/v1/x`);
    const anon = await send(`${g.url}/v1/x`);
    expect(anon.status).toBe(429);
    expect(anon.body.code).toBe('rate_limit_exceeded');

    const { key } = await newKey('one');
    await g.reload({
      ...base(),
      ban: { threshold: 1, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 3600 },
      routes: [{ path: '/v1/old', deprecation: '2026-01-01T00:00:00Z' }],
    });
    const codes: unknown[] = [];
    for (let i = 0; i < 3; i++) codes.push((await send(`${g.url}/v1/x`, { token: key })).body.code);
    expect(codes).toContain('api_key_banned');
    const { key: other } = await newKey('basic');
    expect((await send(`${g.url}/v1/old`, { token: other })).headers.get('deprecation')).toBe('@1767225600');
    await g.reload(base());
  });

  it('log: level applies (admin request lines stop at warn); maxBufferBytes is named under needsRestart', async () => {
    const line = await g.reload({ ...base(), log: { level: 'info', maxBufferBytes: 2_097_152 } });
    expect(line.needsRestart).toEqual(['log.maxBufferBytes']);

    // At warn the reload's own line is not written either: its counter says when it is done.
    const applied = async (): Promise<number> => {
      const text = await (await fetch(`${g.url}/metrics`)).text();
      return Number(/^tollgate_config_reloads_total\{result="applied"\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const adminLines = () => g.proc.logs.filter((l) => l.msg === 'admin request').length;
    const reloads = await applied();
    writeFileSync(g.path, stringify({ ...base(), log: { level: 'warn' } }));
    g.proc.signal('SIGHUP');
    for (let i = 0; i < 100 && (await applied()) === reloads; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await applied()).toBe(reloads + 1);
    const before = adminLines();
    expect((await send(`${g.adminUrl}/plans`, { token: TOKEN_A })).status).toBe(200);
    await g.reload(base());
    expect((await send(`${g.adminUrl}/plans`, { token: TOKEN_A })).status).toBe(200);
    await g.proc.waitForLog('admin request', { after: g.proc.logs.length - 1 }).catch(() => undefined);
    // Only the request made at info was logged.
    expect(adminLines() - before).toBe(1);
  });
});

describe('SIGHUP with server.workers: 2', () => {
  it('a removed admin token is refused by every worker once each has reloaded', async () => {
    const g = await Served.start('workers.yaml', baseConfig(2), 2);
    try {
      expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_B, close: true })).status).toBe(200);
      const started = Date.now();
      const line = await g.reload(withAdmin(baseConfig(2), { tokens: [{ id: 'alice', sha256: hashAdminToken(TOKEN_A) }] }));
      const reloadMs = Date.now() - started;
      expect(line.needsRestart).toBeUndefined();
      // Each request on a connection of its own, until both workers' listeners have answered some (bounded).
      const pids = new Set<unknown>();
      const mark = g.proc.logs.length;
      for (let i = 0; i < 100 && pids.size < 2; i++) {
        const r = await send(`${g.adminUrl}/keys`, { method: 'POST', token: TOKEN_B, body: { plan: 'basic' }, close: true });
        expect(r.status).toBe(401);
        expect((await send(`${g.adminUrl}/keys`, { token: TOKEN_A, close: true })).status).toBe(200);
        await g.proc.waitForLog('admin request', { after: mark });
        for (const l of g.proc.logs.slice(mark)) if (l.msg === 'admin request' && (l.res as { statusCode?: number })?.statusCode === 401) pids.add(l.pid);
      }
      expect(pids.size).toBe(2);
      console.log(`both workers reloaded ${reloadMs} ms after SIGHUP`);
    } finally {
      await g.stop();
    }
  }, 60_000);
});
