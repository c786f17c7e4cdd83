// Every CLI command that talks to Redis says on stderr, once, which config file it read and which Redis it uses
// (never a credential), stdout staying the command's answer; and a change to Redis with the example config (no
// --config, no TOLLGATE_CONFIG) is refused unless --yes. The built CLI as a child process, against a real
// redis-server started with --requirepass.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, REPO, runCli, tempDir } from './helpers/cli.js';
import { freePort } from './helpers/redis-server.js';
import { describeRedis } from '../src/commands/touches.js';

const PASSWORD = 'pw-Sekr3t-9f2c!';
const ENCODED = encodeURIComponent(PASSWORD);
let port = 0;
let server: ChildProcess | undefined;
const redisDir = mkdtempSync(join(tmpdir(), 'tollgate-touches-redis-'));
const dir = tempDir();
let url = '';
let configFile = '';

function client(): Redis {
  const c = new Redis({ port, host: '127.0.0.1', password: PASSWORD, db: 3, maxRetriesPerRequest: 1, lazyConnect: true, retryStrategy: () => null });
  c.on('error', () => {});
  return c;
}

beforeAll(async () => {
  assertBuilt();
  port = await freePort();
  server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', redisDir, '--requirepass', PASSWORD],
    {
      stdio: 'ignore',
    },
  );
  const deadline = Date.now() + 10_000;
  for (;;) {
    const c = client();
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      break;
    } catch {
      c.disconnect();
      if (Date.now() > deadline) throw new Error('redis-server did not start');
      await sleep(50);
    }
  }
  url = `redis://:${ENCODED}@127.0.0.1:${port}/3`;
  configFile = dir.write('gateway.yaml', { redis: { url }, plans: { free: { perMinute: 10, perDay: 100 } } });
});

afterAll(async () => {
  server?.kill('SIGKILL');
  dir.remove();
  await sleep(50);
  rmSync(redisDir, { recursive: true, force: true });
});

async function keyCount(): Promise<number> {
  const c = client();
  await c.connect();
  try {
    return (await c.keys('tollgate:key:*')).length;
  } finally {
    c.disconnect();
  }
}

function touchLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.startsWith('tollgate: config '));
}

function noSecret(text: string): void {
  expect(text).not.toContain(PASSWORD);
  expect(text).not.toContain(ENCODED);
  expect(text).not.toContain('Sekr3t');
}

describe('the CLI says what it touches', () => {
  it('a read names the config file (absolute) and the Redis (host:port/db, tls), once, never the password; --json stays clean', async () => {
    const r = await runCli(['keys', 'list', '--json', '--config', configFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([]);
    expect(touchLines(r.stderr)).toEqual([`tollgate: config ${resolve(configFile)} (from --config); Redis 127.0.0.1:${port}/3, tls off (from the config)`]);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    noSecret(r.stderr + r.stdout);
  });

  it('names where the config and Redis came from: TOLLGATE_CONFIG, REDIS_URL, --redis, the example', async () => {
    const viaEnv = await runCli(['usage', '--json'], { env: { TOLLGATE_CONFIG: configFile, REDIS_URL: `redis://:${ENCODED}@127.0.0.1:${port}/5` } });
    expect(viaEnv.code, viaEnv.stderr).toBe(0);
    expect(JSON.parse(viaEnv.stdout)).toMatchObject({ keys: [] });
    expect(touchLines(viaEnv.stderr)).toEqual([
      `tollgate: config ${resolve(configFile)} (from TOLLGATE_CONFIG); Redis 127.0.0.1:${port}/5, tls off (from REDIS_URL)`,
    ]);
    noSecret(viaEnv.stderr);

    const example = await runCli(['keys', 'list', '--json', '--redis', url]);
    expect(example.code, example.stderr).toBe(0);
    expect(touchLines(example.stderr)).toEqual([
      `tollgate: config ${resolve(REPO, 'config/gateway.yaml')} (the repository's example, as neither --config nor TOLLGATE_CONFIG names one); Redis 127.0.0.1:${port}/3, tls off (from --redis)`,
    ]);
    noSecret(example.stderr);
  });

  it('a password given only in the config (redis.password) or by REDIS_PASSWORD is never shown either', async () => {
    const file = dir.write('password-field.yaml', { redis: { url: `redis://127.0.0.1:${port}/3`, password: PASSWORD } });
    const r = await runCli(['keys', 'list', '--config', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(touchLines(r.stderr)).toHaveLength(1);
    noSecret(r.stderr + r.stdout);
    const env = await runCli(['keys', 'list', '--config', dir.write('no-password.yaml', { redis: { url: `redis://127.0.0.1:${port}/3` } })], {
      env: { REDIS_PASSWORD: PASSWORD },
    });
    expect(env.code, env.stderr).toBe(0);
    noSecret(env.stderr + env.stdout);
  });

  it('--quiet says nothing', async () => {
    const r = await runCli(['keys', 'list', '--json', '--quiet', '--config', configFile]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
  });

  it('a Redis that refuses (wrong password) still never shows the password', async () => {
    const r = await runCli(['keys', 'list', '--redis', `redis://:wrong-${ENCODED}@127.0.0.1:${port}/3`, '--config', configFile]);
    expect(r.code).toBe(1);
    noSecret(r.stderr);
  });
});

describe('a write with the example config', () => {
  it('is refused with one line and exit 1, writing nothing', async () => {
    const before = await keyCount();
    const r = await runCli(['keys', 'create', '--plan', 'free', '--redis', url]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^error: refusing to change Redis with the example config .*--config FILE or TOLLGATE_CONFIG, or pass --yes/);
    noSecret(r.stderr);
    expect(await keyCount()).toBe(before);
  });

  it.each([
    [['keys', 'revoke', 'key_x']],
    [['keys', 'rotate', 'key_x']],
    [['keys', 'unban', 'key_x']],
    [['keys', 'reset', 'key_x']],
    [['keys', 'update', 'key_x', '--name', 'n']],
  ])('%j is refused too', async (argv) => {
    const r = await runCli([...argv, '--redis', url]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: refusing to change Redis with the example config/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('goes ahead with --yes, saying what it touches', async () => {
    const before = await keyCount();
    const r = await runCli(['keys', 'create', '--plan', 'free', '--json', '--yes', '--redis', url]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ plan: 'free' });
    expect(touchLines(r.stderr)).toHaveLength(1);
    noSecret(r.stderr + r.stdout);
    expect(await keyCount()).toBe(before + 1);
  });

  it('goes ahead with --config or TOLLGATE_CONFIG naming a file', async () => {
    const before = await keyCount();
    expect((await runCli(['keys', 'create', '--plan', 'free', '--config', configFile])).code).toBe(0);
    expect((await runCli(['keys', 'create', '--plan', 'free'], { env: { TOLLGATE_CONFIG: configFile } })).code).toBe(0);
    expect(await keyCount()).toBe(before + 2);
  });

  it('a usage error stays a usage error (exit 2), and a dry-run import is a read', async () => {
    const bad = await runCli(['keys', 'update', 'key_x', '--redis', url]);
    expect(bad.code).toBe(2);
    const file = dir.write('import.jsonl', `${JSON.stringify({ plan: 'free', sha256: 'a'.repeat(64) })}\n`);
    const dry = await runCli(['keys', 'import', '--dry-run', '--file', file, '--redis', url]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('Dry run');
    const real = await runCli(['keys', 'import', '--file', file, '--redis', url]);
    expect(real.code).toBe(1);
    expect(real.stderr).toMatch(/^error: refusing to change Redis/);
  });
});

describe('describeRedis', () => {
  it('names a cluster or Sentinel by hosts only, with tls, never a credential', () => {
    const cluster = describeRedis({ cluster: { nodes: [`rediss://u:${ENCODED}@10.0.0.1:7000`, `rediss://:${ENCODED}@10.0.0.2:7001`] } });
    expect(cluster).toBe('cluster nodes 10.0.0.1:7000, 10.0.0.2:7001, tls on');
    const sentinel = describeRedis({ sentinel: { masterName: 'main', sentinels: [`redis://:${ENCODED}@10.0.0.3:26379`] }, password: PASSWORD });
    expect(sentinel).toBe('sentinel "main" via 10.0.0.3:26379, tls off');
    expect(describeRedis({ url: `rediss://admin:${ENCODED}@cache.example:6380/2?x=${ENCODED}` })).toBe('cache.example:6380/2, tls on');
    expect(describeRedis({ url: 'redis://127.0.0.1' })).toBe('127.0.0.1:6379/0, tls off');
  });
});
