// The keys CLI (`node dist/cli.js keys ...`) and the whole key lifecycle across TWO `tollgate serve` processes
// on one private Redis: issue, use on both, rotate with grace, expiry, revoke within a second; then a scan of
// every Redis key and value and of the gateways' logs for any plaintext key. Also `tollgate dev`'s demo keys.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { hashKey, isWellFormedKey } from '../src/keys/format.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { auditOf, CliProcess, cliOk, runCli, startServe, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { freePort, TestRedis } from './helpers/redis-server.js';
import { leaksIn, UUID } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';
import { keySubject } from '../src/limits/subject.js';

const PREFIX = 'tollgate:';
const ks = new Keyspace(PREFIX);

let redis: TestRedis;
let upstream: TestUpstream;
let dir: ReturnType<typeof tempDir>;
let configFile: string;
let gateways: Array<{ proc: CliProcess; url: string }> = [];
/** Started early: a command against an unreachable Redis spends seconds waiting, so it overlaps the rest. */
let unreachableRun: Promise<CliResult>;

/** Every plaintext key any command printed: none may ever show up in Redis, in logs, or in a list/show output. */
const plaintexts = new Set<string>();
/** Every response body the gateways sent back during the lifecycle. */
const bodies: string[] = [];

const baseConfig = () => ({
  server: { host: '127.0.0.1', port: 0 },
  upstream: { url: upstream.url },
  // Generous: these tests are about the lifecycle, not outages; an overloaded machine must not turn lookups into 503s.
  redis: { url: redis.url, prefix: PREFIX, commandTimeoutMs: 1000, failMode: 'open' },
  log: { level: 'info' },
  plans: { free: { perMinute: 100_000, perDay: 1_000_000 }, pro: { perMinute: 200_000, perDay: 2_000_000 } },
  anonymous: { perMinute: 100_000 },
});

beforeAll(async () => {
  [redis, upstream] = await Promise.all([TestRedis.start(), TestUpstream.start()]);
  dir = tempDir();
  configFile = dir.write('gateway.yaml', baseConfig());
  const dead = `redis://127.0.0.1:${await freePort()}/0`;
  unreachableRun = keys('create', '--plan', 'free', '--redis', dead);
  gateways = await Promise.all([startServe(configFile), startServe(configFile)]);
});

afterAll(async () => {
  await unreachableRun?.catch(() => {});
  await Promise.all(gateways.map((g) => g.proc.stop()));
  await upstream?.close();
  await redis?.stop();
  dir?.remove();
});

function keys(...args: string[]): Promise<CliResult> {
  return runCli(['keys', ...args, '--config', configFile]);
}

async function keysOk(...args: string[]): Promise<CliResult> {
  return cliOk(['keys', ...args, '--config', configFile]);
}

async function createJson(...args: string[]): Promise<{ id: string; key: string; plan: string } & Record<string, unknown>> {
  const r = await keysOk('create', '--json', ...args);
  const lines = r.stdout.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  const created = JSON.parse(lines[0]!) as { id: string; key: string; plan: string } & Record<string, unknown>;
  plaintexts.add(created.key);
  return created;
}

/** GET through a gateway; records the body for the final scan. */
async function call(
  url: string,
  key: string | undefined,
  path = '/v1/orders',
): Promise<{ status: number; body: Record<string, unknown>; text: string; headers: Headers }> {
  const res = await fetch(url + path, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  bodies.push(text);
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    /* not JSON */
  }
  return { status: res.status, body, text, headers: res.headers };
}

async function statusOnBoth(key: string): Promise<number[]> {
  return Promise.all(gateways.map(async (g) => (await call(g.url, key)).status));
}

/** The X-Consumer-Id the upstream received for `key` on each gateway (the echo upstream sends its headers back). */
async function consumerOnBoth(key: string): Promise<unknown[]> {
  return Promise.all(
    gateways.map(async (g) => {
      const r = await call(g.url, key);
      expect(r.status).toBe(200);
      return (r.body.headers as Record<string, unknown> | undefined)?.['x-consumer-id'];
    }),
  );
}

/** Polls one gateway until `key` gets `status` (bounded); returns ms since `since`, or Infinity. */
async function msUntilStatus(url: string, key: string, status: number, since: number, timeoutMs = 2000): Promise<number> {
  while (Date.now() - since < timeoutMs) {
    if ((await call(url, key)).status === status) return Date.now() - since;
    await sleep(20);
  }
  return Infinity;
}

/** A one-line error on stderr, nothing on stdout. */
function expectOneLineError(r: CliResult, code: number, pattern: RegExp): void {
  expect(r.code, r.stderr).toBe(code);
  expect(r.stdout).toBe('');
  // A command that reached the point of using Redis has named the config and Redis it uses first (one line of its own).
  const lines = r.stderr
    .trimEnd()
    .split('\n')
    .filter((l) => !l.startsWith('tollgate: config '));
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^error: /);
  expect(lines[0]).toMatch(pattern);
}

function expectNoSecrets(text: string, where: string): void {
  for (const p of plaintexts) {
    expect(text.includes(p), `${where} contains a plaintext key`).toBe(false);
    expect(text.includes(hashKey(p)), `${where} contains a key hash`).toBe(false);
  }
}

describe('tollgate keys (CLI)', () => {
  it('generate prints a well-formed key and its SHA-256 (text and --json), storing nothing', async () => {
    const [json, text] = await Promise.all([cliOk(['keys', 'generate', '--json']), cliOk(['keys', 'generate'])]);
    const g = JSON.parse(json.stdout) as { key: string; sha256: string };
    expect(json.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(isWellFormedKey(g.key)).toBe(true);
    expect(g.sha256).toBe(hashKey(g.key));
    const key = /^key:\s+(tg_\S+)$/m.exec(text.stdout)?.[1];
    const sha = /^sha256:\s+([0-9a-f]{64})$/m.exec(text.stdout)?.[1];
    expect(key && isWellFormedKey(key)).toBe(true);
    expect(sha).toBe(hashKey(key!));
    expect(text.stdout).toContain(`sha256: "${sha}"`);
    plaintexts.add(g.key).add(key!);
  });

  it('create --json prints one JSON object with the key and its metadata, and nothing else', async () => {
    const c = await createJson('--plan', 'pro', '--name', 'acme', '--per-minute', '5', '--per-day', '50', '--expires', '2031-02-03T04:05:06Z');
    expect(c).toMatchObject({ plan: 'pro', name: 'acme', perMinute: 5, perDay: 50, status: 'active', expiresAt: '2031-02-03T04:05:06.000Z' });
    expect(c.id).toMatch(/^key_[0-9A-Za-z]{16}$/);
    expect(isWellFormedKey(c.key)).toBe(true);
    expect(Date.parse(String(c.createdAt))).toBeGreaterThan(Date.now() - 60_000);
    expect(c).not.toHaveProperty('hash');
    expect(c).not.toHaveProperty('prevHash');
  });

  it('create (text) shows the key once, with the id and the limits', async () => {
    const r = await keysOk('create', '--plan', 'free');
    const key = /^\s+(tg_[0-9A-Za-z]+)$/m.exec(r.stdout)?.[1];
    expect(key && isWellFormedKey(key)).toBe(true);
    plaintexts.add(key!);
    expect(r.stdout.split(key!).length - 1).toBe(1);
    expect(r.stdout).toMatch(/Created key key_[0-9A-Za-z]{16} \(plan free, 100000\/min 1000000\/day\)/);
    expect(withoutAudit(r.stderr)).toBe('');
    const [audit] = auditOf(r.stderr);
    expect(audit).toMatchObject({ action: 'create', by: 'cli', keyId: expect.stringMatching(/^key_/) });
    expect(r.stderr).not.toContain(key!);
  });

  it('list and show (text and --json) give metadata, ban state and level, never a key or a hash', async () => {
    const c = await createJson('--plan', 'free', '--name', 'lister');
    const [listJson, listText, showJson, showText] = await Promise.all([
      keysOk('list', '--json'),
      keysOk('list'),
      keysOk('show', c.id, '--json'),
      keysOk('show', c.id),
    ]);
    const listed = JSON.parse(listJson.stdout) as Array<Record<string, unknown>>;
    const mine = listed.find((k) => k.id === c.id);
    expect(mine).toMatchObject({ id: c.id, plan: 'free', name: 'lister', status: 'active', createdAt: c.createdAt });
    for (const k of listed) {
      expect(k).not.toHaveProperty('hash');
      expect(k).not.toHaveProperty('prevHash');
      expect(k).not.toHaveProperty('key');
    }
    expect(listText.stdout).toMatch(/^ID\s+NAME\s+PLAN\s+LIMITS\s+STATUS\s+CREATED\s+EXPIRES$/m);
    expect(listText.stdout).toMatch(
      new RegExp(`^${c.id}\\s+lister\\s+free\\s+100000/min 1000000/day\\s+active\\s+${String(c.createdAt).replace(/\./g, '\\.')}$`, 'm'),
    );
    const shown = JSON.parse(showJson.stdout) as Record<string, unknown>;
    expect(shown).toMatchObject({ id: c.id, plan: 'free', name: 'lister', status: 'active', bannedUntil: null, banLevel: 0 });
    expect(shown).not.toHaveProperty('hash');
    expect(shown).not.toHaveProperty('key');
    expect(showText.stdout).toMatch(new RegExp(`^id:\\s+${c.id}$`, 'm'));
    expect(showText.stdout).toMatch(/^banned until:\s+not banned$/m);
    expect(showText.stdout).toMatch(/^ban level:\s+0$/m);
    expect(showText.stdout).toMatch(/^status:\s+active$/m);
    for (const r of [listJson, listText, showJson, showText]) expectNoSecrets(r.stdout + r.stderr, 'list/show output');
  });

  it('show reports a ban; unban lifts it on every gateway and resets the level', async () => {
    const c = await createJson('--plan', 'free');
    expect(await statusOnBoth(c.key)).toEqual([200, 200]);
    const until = Date.now() + 120_000;
    const r = redis.client();
    try {
      await r.hset(ks.ban(keySubject(c.id)), 'until', String(until), 'level', '2', 'lastEnd', String(until));
      await r.set(ks.strikes(keySubject(c.id)), '3');
    } finally {
      r.disconnect();
    }
    const shown = JSON.parse((await keysOk('show', c.id, '--json')).stdout) as Record<string, unknown>;
    expect(shown.bannedUntil).toBe(new Date(until).toISOString());
    expect(shown.banLevel).toBe(2);
    const banned = await call(gateways[0]!.url, c.key);
    expect(banned.status).toBe(429);
    expect(banned.body.code).toBe('api_key_banned');

    const un = await keysOk('unban', c.id);
    expect(un.stdout).toMatch(new RegExp(`Unbanned key ${c.id}`));
    const times = await Promise.all(gateways.map((g) => msUntilStatus(g.url, c.key, 200, un.exitedAt)));
    for (const t of times) expect(t).toBeLessThan(1000);
    const after = JSON.parse((await keysOk('show', c.id, '--json')).stdout) as Record<string, unknown>;
    expect(after).toMatchObject({ bannedUntil: null, banLevel: 0 });
  });

  it('exits 1 with a one-line reason on stderr: unknown id, unknown plan, Redis unreachable', async () => {
    const [showX, revokeX, rotateX, unbanX, plan, unreachable] = await Promise.all([
      keys('show', 'key_doesnotexist'),
      keys('revoke', 'key_doesnotexist'),
      keys('rotate', 'key_doesnotexist', '--grace', '5'),
      keys('unban', 'key_doesnotexist'),
      keys('create', '--plan', 'platinum'),
      unreachableRun,
    ]);
    for (const r of [showX, revokeX, rotateX, unbanX]) expectOneLineError(r, 1, /no key with id "key_doesnotexist"/);
    expectOneLineError(plan, 1, /unknown plan "platinum"/);
    expectOneLineError(unreachable, 1, /Redis unreachable/);
    expect(unreachable.ms).toBeLessThan(20_000);
  });

  it('finds Redis through --redis, else REDIS_URL, else the file; the config through TOLLGATE_CONFIG', async () => {
    const noRedis = dir.write('no-redis.yaml', { ...baseConfig(), redis: undefined });
    const dead = `redis://127.0.0.1:${await freePort()}/0`;
    const [viaEnv, viaFlag, viaTollgateConfig, none] = await Promise.all([
      cliOk(['keys', 'list', '--json', '--config', noRedis], { env: { REDIS_URL: redis.url } }),
      cliOk(['keys', 'list', '--json', '--config', noRedis, '--redis', redis.url], { env: { REDIS_URL: dead } }),
      cliOk(['keys', 'list', '--json'], { env: { TOLLGATE_CONFIG: configFile } }),
      runCli(['keys', 'list', '--config', noRedis]),
    ]);
    for (const r of [viaEnv, viaFlag, viaTollgateConfig]) expect(Array.isArray(JSON.parse(r.stdout))).toBe(true);
    expectOneLineError(none, 1, /no Redis/);
  });
});

describe('the key lifecycle across two gateway processes', () => {
  let main: { id: string; key: string };

  it('a new key works on both instances; the upstream gets the consumer id and plan, never the key', async () => {
    main = await createJson('--plan', 'pro', '--name', 'lifecycle');
    upstream.seen.length = 0;
    for (const g of gateways) {
      const r = await call(g.url, main.key);
      expect(r.status).toBe(200);
      // None was sent: the gateway made one.
      expect(r.headers.get('x-request-id')).toMatch(UUID);
    }
    expect(upstream.seen).toHaveLength(2);
    for (const s of upstream.seen) {
      expect(s.headers['x-consumer-id']).toBe(main.id);
      expect(s.headers['x-consumer-plan']).toBe('pro');
      expect(s.headers.authorization).toBeUndefined();
    }
    // Refusals on both: no key, and a key with one character changed.
    const typo = main.key.slice(0, 10) + (main.key[10] === 'A' ? 'B' : 'A') + main.key.slice(11);
    for (const g of gateways) {
      const missing = await call(g.url, undefined);
      expect(missing.status).toBe(401);
      expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="tollgate"');
      const bad = await call(g.url, typo);
      expect(bad.status).toBe(401);
      expect(bad.body.code).toBe('invalid_api_key');
      expect(bad.headers.get('www-authenticate')).toBe('Bearer realm="tollgate", error="invalid_token"');
      expect(bad.text).not.toContain(typo);
      expect(leaksIn(bad.text)).toEqual([]);
    }
  });

  it('rotate --grace 2: old and new keys both work, then only the new one; --expires stops a key on time', async () => {
    const rotation = async () => {
      const r = await keysOk('rotate', main.id, '--grace', '2', '--json');
      const rotated = JSON.parse(r.stdout) as { id: string; key: string; graceSeconds: number; rotatedAt: string };
      plaintexts.add(rotated.key);
      expect(rotated).toMatchObject({ id: main.id, plan: 'pro', name: 'lifecycle', graceSeconds: 2 });
      expect(rotated.key).not.toBe(main.key);
      expect(isWellFormedKey(rotated.key)).toBe(true);
      expect(rotated).not.toHaveProperty('hash');
      // Within the grace period: both keys, on both instances, as the same consumer.
      expect(await consumerOnBoth(main.key)).toEqual([main.id, main.id]);
      expect(await consumerOnBoth(rotated.key)).toEqual([main.id, main.id]);
      expect(Date.now() - r.exitedAt).toBeLessThan(2000);
      // After the grace period: the old key fails on both, the new one keeps working.
      await sleep(Math.max(0, r.exitedAt + 2050 - Date.now()));
      const oldStatus = await statusOnBoth(main.key);
      expect(oldStatus).toEqual([401, 401]);
      expect(await statusOnBoth(rotated.key)).toEqual([200, 200]);
      main = { id: main.id, key: rotated.key };
    };
    const expiry = async () => {
      const expiresAt = new Date(Date.now() + 4000);
      const e = await createJson('--plan', 'free', '--expires', expiresAt.toISOString());
      expect(e.expiresAt).toBe(expiresAt.toISOString());
      expect(await statusOnBoth(e.key)).toEqual([200, 200]);
      await sleep(Math.max(0, expiresAt.getTime() + 50 - Date.now()));
      for (const g of gateways) {
        const r = await call(g.url, e.key);
        expect(r.status).toBe(401);
        expect(r.body.code).toBe('invalid_api_key');
      }
      const shown = JSON.parse((await keysOk('show', e.id, '--json')).stdout) as Record<string, unknown>;
      expect(shown.expiresAt).toBe(expiresAt.toISOString());
      expect((await keysOk('show', e.id)).stdout).toMatch(/^status:\s+expired$/m);
    };
    await Promise.all([rotation(), expiry()]);
  });

  it('rotate without grace: the old key stops on both instances within a second', async () => {
    const k = await createJson('--plan', 'free');
    expect(await statusOnBoth(k.key)).toEqual([200, 200]);
    const r = await keysOk('rotate', k.id, '--json');
    const rotated = JSON.parse(r.stdout) as { key: string; graceSeconds: number };
    plaintexts.add(rotated.key);
    expect(rotated.graceSeconds).toBe(0);
    const times = await Promise.all(gateways.map((g) => msUntilStatus(g.url, k.key, 401, r.exitedAt)));
    for (const t of times) expect(t).toBeLessThan(1000);
    expect(await statusOnBoth(rotated.key)).toEqual([200, 200]);
  });

  it('revoke: 401 on both instances within one second of the command exiting', async () => {
    expect(await statusOnBoth(main.key)).toEqual([200, 200]); // cached on both
    const r = await keysOk('revoke', main.id);
    expect(r.stdout.trim()).toBe(`Revoked key ${main.id}.`);
    const times = await Promise.all(gateways.map((g) => msUntilStatus(g.url, main.key, 401, r.exitedAt)));
    for (const t of times) expect(t).toBeLessThan(1000);
    for (const g of gateways) {
      const res = await call(g.url, main.key);
      expect(res.body).toEqual({ code: 'invalid_api_key', message: expect.any(String), status: 401 });
      expect(res.text).not.toContain(main.key);
    }
    const shown = JSON.parse((await keysOk('show', main.id, '--json')).stdout) as Record<string, unknown>;
    expect(shown).toMatchObject({ id: main.id, status: 'revoked' });
    expect(Date.parse(String(shown.revokedAt))).toBeGreaterThan(Date.now() - 60_000);
    expectOneLineError(await keys('rotate', main.id), 1, /revoked/);
  });

  it('no plaintext key anywhere: not in any Redis key or value, not in the logs, not in any response', async () => {
    // A bound: the tests above add the keys, and new tests add more.
    expect(plaintexts.size).toBeGreaterThanOrEqual(10);
    const exits = await Promise.all(gateways.map((g) => g.proc.stop()));
    for (const e of exits) expect(e).toEqual({ code: 0, signal: null });

    // Redis: every key name and every value.
    const r = redis.client();
    let dump = '';
    let names = 0;
    try {
      let cursor = '0';
      for (let i = 0; i < 10_000; i++) {
        const [next, batch] = await r.scan(cursor, 'COUNT', 500);
        for (const name of batch) {
          names++;
          const type = await r.type(name);
          let value: unknown;
          if (type === 'string') value = await r.get(name);
          else if (type === 'hash') value = await r.hgetall(name);
          else if (type === 'set') value = await r.smembers(name);
          else if (type === 'zset') value = await r.zrange(name, '0', '-1', 'WITHSCORES');
          else if (type === 'list') value = await r.lrange(name, 0, -1);
          else value = `(${type})`;
          dump += `${name}\t${JSON.stringify(value)}\n`;
        }
        cursor = next;
        if (cursor === '0') break;
      }
    } finally {
      r.disconnect();
    }
    expect(names).toBeGreaterThan(10);
    for (const p of plaintexts) expect(dump.includes(p), 'Redis holds a plaintext key').toBe(false);
    // The hashes are there (that is how keys are found), under the keyhash index and in the records.
    expect(dump).toContain(`${PREFIX}keyhash:`);

    // Logs of both gateway processes: neither a key nor its hash.
    const logs = gateways.map((g) => g.proc.stdout + g.proc.stderr).join('\n');
    expect(logs).toContain('tollgate gateway listening');
    const requestLines = gateways.flatMap((g) => g.proc.logs).filter((l) => l.req !== undefined);
    expect(requestLines.length).toBeGreaterThan(20);
    expectNoSecrets(logs, 'gateway logs');
    expect(logs).not.toMatch(/tg_[0-9A-Za-z]{49}/);

    // Responses (the echo upstream's included, so nothing reached the upstream either) and upstream requests.
    expect(bodies.length).toBeGreaterThan(30);
    for (const p of plaintexts) {
      for (const b of bodies) expect(b.includes(p), 'a response carries a plaintext key').toBe(false);
      for (const s of upstream.seen) expect(JSON.stringify(s.rawHeaders).includes(p)).toBe(false);
    }
  });
});

describe('tollgate dev', () => {
  it('prints one demo key per plan and a curl line; the printed keys work against it', async () => {
    const port = await freePort();
    const proc = CliProcess.start(['dev', '--port', String(port)]);
    try {
      await proc.waitForStdout(/Press Ctrl-C to stop/);
      const demo = [...proc.stdout.matchAll(/^ {4}([a-z0-9_-]+)\s+(tg_[0-9A-Za-z]+)$/gm)].map((m) => ({ plan: m[1]!, key: m[2]! }));
      expect(demo.map((d) => d.plan)).toEqual(['free', 'pro', 'business', 'enterprise']);
      for (const d of demo) expect(isWellFormedKey(d.key)).toBe(true);
      expect(new Set(demo.map((d) => d.key)).size).toBe(4);
      const url = `http://127.0.0.1:${port}`;
      expect(proc.stdout).toContain(`curl -si ${url}/v1/categories -H 'Authorization: Bearer ${demo[0]!.key}'`);
      for (const d of demo) {
        const res = await fetch(`${url}/v1/categories`, { headers: { authorization: `Bearer ${d.key}` }, signal: AbortSignal.timeout(5000) });
        expect(res.status, d.plan).toBe(200);
        expect(Array.isArray(await res.json())).toBe(true);
      }
      const post = await fetch(`${url}/v1/categories`, {
        method: 'POST',
        headers: { authorization: `Bearer ${demo[0]!.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Dog' }),
        signal: AbortSignal.timeout(5000),
      });
      expect(post.status).toBe(201);
      const refused = await fetch(`${url}/v1/categories`, {
        headers: { authorization: `Bearer ${demo[0]!.key.slice(0, -1)}${demo[0]!.key.endsWith('x') ? 'y' : 'x'}` },
        signal: AbortSignal.timeout(5000),
      });
      expect(refused.status).toBe(401);
      // The seed's deprecated route, with a sunset ahead, and the printed curl line that shows its headers.
      expect(proc.stdout).toContain(`curl -si ${url}/v1/pets/1 -H 'Authorization: Bearer ${demo[0]!.key}'`);
      const pets = await fetch(`${url}/v1/pets/1`, { headers: { authorization: `Bearer ${demo[1]!.key}` }, signal: AbortSignal.timeout(5000) });
      await pets.arrayBuffer();
      expect(pets.headers.get('deprecation')).toBe(`@${Date.parse('2026-06-01T00:00:00Z') / 1000}`);
      expect(Date.parse(pets.headers.get('sunset')!)).toBeGreaterThan(Date.now());
      // From the pet store's OpenAPI document: externalDocs and x-successor.
      expect(pets.headers.get('link')).toBe(
        '<https://example.com/docs/migrate-pets>; rel="deprecation", <https://example.com/docs/pets-v2>; rel="successor-version"',
      );
      // The dashboard and admin API, with the printed token.
      const admin = /Dashboard and admin API: (http:\/\/127\.0\.0\.1:\d+)\/ {2}\(admin token, for this run only: (tga_[\w-]+)\)/.exec(proc.stdout);
      expect(admin).not.toBeNull();
      const plans = await fetch(`${admin![1]}/plans`, { headers: { authorization: `Bearer ${admin![2]}` }, signal: AbortSignal.timeout(5000) });
      expect(plans.status).toBe(200);
    } finally {
      const exit = await proc.stop();
      expect(exit).toEqual({ code: 0, signal: null });
    }
  });
});
