// The built CLI as users run it (docs: "Running it for real", "Configuration reference", "The request path"): `node dist/cli.js` in a child process.
// Needs dist/ (npm test builds first). Uses loopback only: a TestUpstream, and a private TestRedis for the petstore.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpGet, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { CLI, CliProcess, REPO, assertBuilt, cleanEnv, tryConnect, runCli, type LogLine } from './helpers/cli.js';
import { RawConnection } from './helpers/gateway.js';
import { TestRedis, freePort } from './helpers/redis-server.js';
import { TestUpstream, echo } from './helpers/upstream.js';

const BAD_FIXTURE = 'test/fixtures/config/wrong-types.yaml';
const badFixtureErrors = [...readFileSync(new URL('./fixtures/config/wrong-types.yaml', import.meta.url), 'utf8').matchAll(/^# expect: (.*)$/gm)].map(
  (m) => m[1]!,
);

let dir: string;
let up: TestUpstream;
/** A static key in every serve config: /v1 requires one (authentication is the request path's first stage). */
const KEY = generateKey();
const AUTH = `Bearer ${KEY}`;

beforeAll(async () => {
  assertBuilt();
  dir = mkdtempSync(join(tmpdir(), 'tollgate-cli-'));
  up = await TestUpstream.start();
});

afterAll(async () => {
  await CliProcess.killAll();
  await up?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  up.seen.length = 0;
  up.behaviour = echo;
});

let fileCounter = 0;
function writeConfig(text: string, name = `gateway-${++fileCounter}.yaml`): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function gatewayYaml(
  opts: { routes?: string; drainTimeoutMs?: number; port?: number; upstreamTimeoutMs?: number; heapGrowthPercent?: number; logMaxBufferBytes?: number } = {},
): string {
  return [
    'server:',
    '  host: 127.0.0.1',
    `  port: ${opts.port ?? 0}`,
    `  drainTimeoutMs: ${opts.drainTimeoutMs ?? 3000}`,
    ...(opts.heapGrowthPercent === undefined ? [] : [`  heapGrowthPercent: ${opts.heapGrowthPercent}`]),
    'upstream:',
    `  url: ${up.url}`,
    `  timeoutMs: ${opts.upstreamTimeoutMs ?? 5000}`,
    'log:',
    '  level: info',
    ...(opts.logMaxBufferBytes === undefined ? [] : [`  maxBufferBytes: ${opts.logMaxBufferBytes}`]),
    opts.routes ?? 'routes: []',
    'keys:',
    `  - { id: cli-test, plan: enterprise, sha256: "${hashKey(KEY)}" }`,
    '',
  ].join('\n');
}

const PETS_ROUTE = [
  'routes:',
  '  - method: GET',
  '    path: /v1/pets/:petId',
  '    deprecation: "2026-06-01T00:00:00Z"',
  '    sunset: "2099-06-01T00:00:00Z"',
  '    link: https://example.com/docs/migrate-pets',
].join('\n');

async function startServe(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ proc: CliProcess; url: string; port: number; line: Record<string, unknown> }> {
  const proc = CliProcess.start(['serve', ...args], env);
  const line = await proc.waitForLog('tollgate gateway listening');
  const url = String(line.url);
  expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  return { proc, url, port: Number(new URL(url).port), line };
}

function httpGetJson(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpGet(url, { agent: false, headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('request timed out')));
  });
}

function postJson(url: string, body: unknown): Promise<{ status: number; body: string }> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(10_000) }).then(
    async (r) => ({ status: r.status, body: await r.text() }),
  );
}

describe('config check', () => {
  it('exits 0 and says so for config/gateway.yaml', async () => {
    const r = await runCli(['config', 'check', '--config', 'config/gateway.yaml']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^config\/gateway\.yaml: OK \(4 plans, 5 routes, 0 static keys, Redis store\)\n$/);
    expect(r.stderr).toBe('');
  });

  it('reads TOLLGATE_CONFIG, else config/gateway.yaml', async () => {
    const path = writeConfig('plans:\n  solo: { perMinute: 1, perDay: 2 }\n');
    const fromEnv = await runCli(['config', 'check'], { env: { TOLLGATE_CONFIG: path } });
    expect(fromEnv.code).toBe(0);
    expect(fromEnv.stdout).toContain(`${path}: OK (1 plans, 0 routes, 0 static keys, in-memory store)`);
    const byDefault = await runCli(['config', 'check']);
    expect(byDefault.code).toBe(0);
    expect(byDefault.stdout).toContain('config/gateway.yaml: OK');
  });

  it('exits 1 and names every bad field with its path', async () => {
    const r = await runCli(['config', 'check', '--config', BAD_FIXTURE]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(`${BAD_FIXTURE}: invalid configuration (${badFixtureErrors.length} problems)`);
    for (const e of badFixtureErrors) expect(r.stderr).toContain(`  ${e}\n`);
  });

  it('names the environment variable behind a bad value', async () => {
    const r = await runCli(['config', 'check', '--config', 'config/gateway.yaml'], { env: { PORT: 'http' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('server.port: expected number, got "http" (from PORT)');
  });

  it('exits 1 for a missing file', async () => {
    const r = await runCli(['config', 'check', '--config', join(dir, 'nope.yaml')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${join(dir, 'nope.yaml')}: file not found`);
  });
});

describe('usage errors', () => {
  it('the process exits with the code the command line asks for: 2 for a usage error, with the message on stderr', async () => {
    // Every usage error and --help is checked in process (test/cli-usage.test.ts); this is the process's own mapping.
    const r = await runCli(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/error/i);
  });
});

describe('serve', () => {
  it('refuses a bad config file: exit 1, every error on stderr, never listening', async () => {
    const proc = CliProcess.start(['serve', '--config', BAD_FIXTURE]);
    const { code } = await proc.waitForExit();
    expect(code).toBe(1);
    expect(proc.stderr).toContain('invalid configuration, refusing to start');
    for (const e of badFixtureErrors) expect(proc.stderr).toContain(e);
    expect(proc.stdout).not.toContain('listening');
  });

  it('listens on the port PORT names (0: any free one), reading the file TOLLGATE_CONFIG names, and proxies to the upstream', async () => {
    // The file asks for port 1, which the environment overrides.
    const path = writeConfig(gatewayYaml({ port: 1 }));
    const { proc, url, line } = await startServe([], { TOLLGATE_CONFIG: path, PORT: '0' });
    try {
      // The default heap growth is applied, and said at start-up.
      expect(line.heapGrowthPercent).toBe(35);
      const res = await httpGetJson(`${url}/v1/categories?limit=2`, { authorization: AUTH });
      expect(res.status).toBe(200);
      expect(up.seen.map((s) => s.url)).toEqual(['/v1/categories?limit=2']);
      expect(res.headers['x-request-id']).toBe(up.seen[0]!.headers['x-request-id']);
      expect(up.seen[0]!.headers['x-consumer-id']).toBe('cli-test');
      expect(up.seen[0]!.headers['x-consumer-plan']).toBe('enterprise');
      expect(up.seen[0]!.headers.authorization).toBeUndefined();
      // Without a key: 401, and the upstream is not called.
      expect((await httpGetJson(`${url}/v1/categories`)).status).toBe(401);
      expect(up.seen).toHaveLength(1);
      expect((await httpGetJson(`${url}/healthz`)).status).toBe(200);
      const ready = await httpGetJson(`${url}/readyz`);
      expect(ready.status).toBe(200);
      expect(JSON.parse(ready.body).checks).toEqual({ upstream: 'up' });
      const metrics = await httpGetJson(`${url}/metrics`);
      expect(metrics.body).toMatch(/^tollgate_http_requests_total\{[^}]*\} [1-9]/m);
      // Process metrics are on too, under the tollgate_ prefix.
      expect(metrics.body).toMatch(/^tollgate_process_cpu_user_seconds_total /m);
    } finally {
      proc.signal('SIGTERM');
      expect((await proc.waitForExit()).code).toBe(0);
    }
  });

  it('server.heapGrowthPercent: 0 leaves the heap growth to V8, and says so', async () => {
    const { proc, line } = await startServe(['--config', writeConfig(gatewayYaml({ heapGrowthPercent: 0 }))]);
    try {
      expect(line.heapGrowthPercent).toBe('v8');
    } finally {
      proc.signal('SIGTERM');
      expect((await proc.waitForExit()).code).toBe(0);
    }
  });

  it('log.maxBufferBytes: while nobody reads its stdout, the gateway keeps answering, drops log lines and counts them', async () => {
    const port = await freePort();
    const path = writeConfig(gatewayYaml({ port, logMaxBufferBytes: 1_048_576 }));
    const child = spawn(process.execPath, [CLI, 'serve', '--config', path], { cwd: REPO, env: cleanEnv(), stdio: ['ignore', 'pipe', 'inherit'] });
    // The log's reader stalls: the pipe (64 KB) fills, then the gateway's queue up to its 1 MiB bound.
    child.stdout.pause();
    const base = `http://127.0.0.1:${port}`;
    const dropped = async () => Number(/^tollgate_log_lines_dropped_total (\d+)$/m.exec(await (await fetch(`${base}/metrics`)).text())?.[1] ?? NaN);
    try {
      const deadline = Date.now() + 10_000;
      while (
        (await fetch(`${base}/healthz`).then(
          (r) => r.status,
          () => 0,
        )) !== 200
      ) {
        if (Date.now() > deadline) throw new Error('the gateway did not start');
        await sleep(50);
      }
      expect(await dropped()).toBe(0);
      // 5,000 requests: an access-log line each, about 1.7 MB in all.
      const statuses = new Map<number, number>();
      let sent = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (sent < 5_000) {
            sent++;
            const res = await fetch(`${base}/v1/pets/1`, { headers: { authorization: AUTH } });
            await res.arrayBuffer();
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          }
        }),
      );
      expect([...statuses]).toEqual([[200, 5_000]]);
      expect(await dropped()).toBeGreaterThan(0);
    } finally {
      child.stdout.resume();
      child.kill('SIGTERM');
      const code = await new Promise((resolve) => child.once('close', resolve));
      expect(code).toBe(0);
    }
  });

  it('SIGHUP applies a new file without dropping an open connection, and a bad file keeps the old config', async () => {
    const path = writeConfig(gatewayYaml());
    const { proc, port } = await startServe(['--config', path]);
    const conn = await RawConnection.open(port);
    try {
      conn.write(`GET /v1/pets/1 HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\n\r\n`);
      const before = await conn.read();
      expect(before.status).toBe(200);
      expect(before.headers.deprecation).toBeUndefined();

      writeFileSync(path, gatewayYaml({ routes: PETS_ROUTE }));
      let mark = proc.logs.length;
      proc.signal('SIGHUP');
      await proc.waitForLog('config reloaded', { after: mark });

      conn.write(`GET /v1/pets/1 HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\n\r\n`);
      const after = await conn.read();
      expect(after.status).toBe(200);
      expect(after.headers.deprecation).toBe('@1780272000');
      expect(after.headers.sunset).toBe('Mon, 01 Jun 2099 00:00:00 GMT');
      expect(after.headers.link).toBe('<https://example.com/docs/migrate-pets>; rel="deprecation"');
      expect(conn.ended).toBe(false);

      // A bad file: rejected, logged with its errors, the old config stays.
      writeFileSync(path, `${gatewayYaml({ routes: PETS_ROUTE })}plans:\n  free: { perMinute: sixty, perDay: 1 }\n`);
      mark = proc.logs.length;
      proc.signal('SIGHUP');
      const rejected: LogLine = await proc.waitForLog('config reload rejected', { after: mark });
      expect(rejected.errors).toEqual(['plans.free.perMinute: expected number, got "sixty"']);
      expect(rejected.level).toBe(50); // error: logged as one, not fatal (the gateway keeps serving)

      conn.write(`GET /v1/pets/1 HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\n\r\n`);
      const still = await conn.read();
      expect(still.status).toBe(200);
      expect(still.headers.deprecation).toBe('@1780272000');
      expect(conn.ended).toBe(false);
      expect(proc.running).toBe(true);

      // Restart-only fields are reported, not applied.
      writeFileSync(path, gatewayYaml({ routes: PETS_ROUTE, upstreamTimeoutMs: 1234, logMaxBufferBytes: 2_097_152 }));
      mark = proc.logs.length;
      proc.signal('SIGHUP');
      const reloaded = await proc.waitForLog('config reloaded', { after: mark });
      expect(reloaded.needsRestart).toEqual(['upstream.*', 'log.maxBufferBytes']);
    } finally {
      conn.destroy();
      proc.signal('SIGTERM');
      expect((await proc.waitForExit()).code).toBe(0);
    }
  });

  it('SIGTERM drains: the in-flight request completes, new connections are refused, exit 0 within the drain time', async () => {
    const DRAIN_MS = 3000;
    const SLOW_MS = 800;
    up.behaviour = (req, res, body) => {
      if (req.url === '/v1/slow') setTimeout(() => echo(req, res, body), SLOW_MS);
      else echo(req, res, body);
    };
    const path = writeConfig(gatewayYaml({ drainTimeoutMs: DRAIN_MS }));
    const { proc, url, port } = await startServe(['--config', path]);

    let finishedAt = 0;
    const inFlight = httpGetJson(`${url}/v1/slow`, { authorization: AUTH }).then((r) => {
      finishedAt = Date.now();
      return r;
    });
    const deadline = Date.now() + 5000;
    while (!up.seen.some((s) => s.url === '/v1/slow')) {
      if (Date.now() > deadline) throw new Error('the slow request never reached the upstream');
      await new Promise((r) => setTimeout(r, 10));
    }

    const sigtermAt = Date.now();
    proc.signal('SIGTERM');
    let refusedAt = 0;
    for (let i = 0; i < 100 && !refusedAt; i++) {
      if ((await tryConnect(port)) === 'refused') refusedAt = Date.now();
      else await new Promise((r) => setTimeout(r, 20));
    }
    expect(refusedAt).toBeGreaterThan(0);

    const res = await inFlight;
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).url).toBe('/v1/slow');
    // New connections were refused while that request was still running.
    expect(refusedAt).toBeLessThan(finishedAt);

    const { code } = await proc.waitForExit(DRAIN_MS + 2000);
    expect(code).toBe(0);
    expect(Date.now() - sigtermAt).toBeLessThan(DRAIN_MS);
    expect(proc.logs.some((l) => l.msg === 'stopped')).toBe(true);
  });

  it('SIGTERM exits 0 at the drain deadline even when a request never finishes', async () => {
    const DRAIN_MS = 400;
    up.behaviour = () => {}; // never answers
    const path = writeConfig(gatewayYaml({ drainTimeoutMs: DRAIN_MS, upstreamTimeoutMs: 30_000 }));
    const { proc, url } = await startServe(['--config', path]);
    const stuck = httpGetJson(`${url}/v1/forever`, { authorization: AUTH }).then(
      (r) => `status ${r.status}`,
      (err: Error) => `error ${err.message}`,
    );
    const deadline = Date.now() + 5000;
    while (!up.seen.some((s) => s.url === '/v1/forever')) {
      if (Date.now() > deadline) throw new Error('the request never reached the upstream');
      await new Promise((r) => setTimeout(r, 10));
    }
    const sigtermAt = Date.now();
    proc.signal('SIGTERM');
    const { code } = await proc.waitForExit(DRAIN_MS + 3000);
    expect(code).toBe(0);
    // A bound: timing (the exit comes at the drain deadline, later under load).
    expect(Date.now() - sigtermAt).toBeGreaterThanOrEqual(DRAIN_MS - 50);
    // The client is not left hanging.
    expect(await stuck).toMatch(/^error /);
  });
});

describe('petstore', () => {
  it('petstore --port 0 answers GET /v1/categories', async () => {
    const proc = CliProcess.start(['petstore', '--port', '0', '--host', '127.0.0.1']);
    try {
      const line = await proc.waitForLog('petstore listening');
      const url = String(line.url);
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const res = await httpGetJson(`${url}/v1/categories`);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual([]);
    } finally {
      proc.signal('SIGTERM');
      expect((await proc.waitForExit()).code).toBe(0);
    }
  });

  it('two petstore processes on one Redis never repeat ids', async () => {
    const redis = await TestRedis.start();
    const [a, b] = [0, 1].map(() => CliProcess.start(['petstore', '--port', '0'], { REDIS_URL: redis.url }));
    try {
      const urls = await Promise.all([a!, b!].map(async (p) => String((await p.waitForLog('petstore listening')).url)));
      const posts: Array<Promise<{ status: number; body: string }>> = [];
      for (let i = 0; i < 15; i++) for (const u of urls) posts.push(postJson(`${u}/v1/categories`, { name: `cat-${i}` }));
      const results = await Promise.all(posts);
      for (const r of results) expect(r.status).toBe(201);
      const ids = results.map((r) => (JSON.parse(r.body) as { id: number }).id);
      expect(new Set(ids).size).toBe(30);
      const listA = JSON.parse((await httpGetJson(`${urls[0]}/v1/categories`)).body) as Array<{ id: number }>;
      const listB = JSON.parse((await httpGetJson(`${urls[1]}/v1/categories`)).body) as Array<{ id: number }>;
      expect(listA.map((c) => c.id)).toEqual([...ids].sort((x, y) => x - y));
      expect(listB).toEqual(listA);
    } finally {
      for (const p of [a!, b!]) {
        p.signal('SIGTERM');
        expect((await p.waitForExit()).code).toBe(0);
      }
      await redis.stop();
    }
  });
});
