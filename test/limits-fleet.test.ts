// Limits across a fleet (docs: "Running it for real", "Configuration reference", "The request path", "Reliability"): two `node dist/cli.js serve` processes on one
// private Redis in front of one upstream. One key's limit holds exactly across both instances under concurrency,
// the day window binds and shows in both instances' headers, `keys show` reports a ban and `keys unban` lifts it
// everywhere within a second, and SIGHUP applies a new plan limit without dropping a keep-alive connection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { CliProcess, assertBuilt, runCli } from './helpers/cli.js';
import { RawConnection } from './helpers/gateway.js';

let redis: TestRedis;
let up: TestUpstream;
let dir: string;
let configFile: string;
const gateways: Array<{ proc: CliProcess; url: string; port: number; agent: Agent }> = [];

function configFor(reloadPerMinute: number): Record<string, unknown> {
  return {
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url, timeoutMs: 5000 },
    // The guarantee holds "while Redis answers within commandTimeoutMs": give a loaded CI box room.
    redis: { url: redis.url, prefix: 'fleet:', failMode: 'open', commandTimeoutMs: 1000 },
    log: { level: 'info' },
    plans: {
      free: { perMinute: 60, perDay: 1000 },
      reload: { perMinute: reloadPerMinute, perDay: 1000 },
    },
    anonymous: { perMinute: 30 },
    ban: { threshold: 10, windowSeconds: 60, durationsSeconds: [60, 600], resetAfterSeconds: 3600 },
  };
}

function writeConfig(reloadPerMinute: number): void {
  writeFileSync(configFile, stringify(configFor(reloadPerMinute)));
}

async function startGateway(): Promise<{ proc: CliProcess; url: string; port: number; agent: Agent }> {
  const proc = CliProcess.start(['serve', '--config', configFile]);
  const line = await proc.waitForLog('tollgate gateway listening');
  const url = String(line.url);
  return { proc, url, port: Number(new URL(url).port), agent: new Agent({ keepAlive: true, maxSockets: 64 }) };
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  code: string | undefined;
}

function send(gw: { url: string; agent: Agent }, key: string, path = '/v1/categories'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${gw.url}${path}`, { agent: gw.agent, headers: { authorization: `Bearer ${key}` }, timeout: 10_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let code: string | undefined;
        if (res.statusCode !== 200) {
          try {
            code = (JSON.parse(text) as { code?: string }).code;
          } catch {
            code = undefined;
          }
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, code });
      });
    });
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
}

async function createKey(args: string[]): Promise<{ id: string; key: string }> {
  const r = await runCli(['keys', 'create', '--config', configFile, '--json', ...args]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { id: string; key: string };
}

beforeAll(async () => {
  assertBuilt();
  [redis, up] = await Promise.all([TestRedis.start(), TestUpstream.start()]);
  dir = mkdtempSync(join(tmpdir(), 'tollgate-limits-fleet-'));
  configFile = join(dir, 'gateway.yaml');
  writeConfig(50);
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
  await up?.close();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('two gateway processes on one Redis', () => {
  let banned: { id: string; key: string };

  it('330 concurrent requests for one key, split across both, admit exactly perMinute; the rest are 429', async () => {
    const [a, b] = [gateways[0]!, gateways[1]!];
    banned = await createKey(['--plan', 'free', '--per-minute', '100', '--per-day', '100000']);
    const seenBefore = up.seen.length;
    const answers = await Promise.all(Array.from({ length: 330 }, (_, i) => send(i % 2 ? b : a, banned.key)));
    const statuses = new Map<number, number>();
    for (const r of answers) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    expect(Object.fromEntries(statuses)).toEqual({ 200: 100, 429: 230 });
    expect(up.seen.length - seenBefore).toBe(100);
    // Strikes are counted atomically across the fleet too: threshold-1 answers are rate_limit_exceeded, the
    // threshold-th starts the ban, and everything after it is api_key_banned.
    const codes = answers.filter((r) => r.status === 429).map((r) => r.code);
    expect(codes.filter((c) => c === 'rate_limit_exceeded')).toHaveLength(9);
    expect(codes.filter((c) => c === 'api_key_banned')).toHaveLength(221);
    for (const r of answers.filter((x) => x.status === 429)) {
      expect(r.headers['retry-after']).toMatch(/^[1-9]\d*$/);
      expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(60);
    }
    // Both instances answered admitted and refused requests alike.
    expect(answers.filter((r, i) => i % 2 === 0 && r.status === 429).length).toBeGreaterThan(0);
    expect(answers.filter((r, i) => i % 2 === 1 && r.status === 429).length).toBeGreaterThan(0);
  });

  it('`keys show --json` reports bannedUntil (ISO-8601) and banLevel 1 after the ban', async () => {
    const r = await runCli(['keys', 'show', banned.id, '--json', '--config', configFile]);
    expect(r.code, r.stderr).toBe(0);
    const shown = JSON.parse(r.stdout) as { id: string; bannedUntil: string | null; banLevel: number };
    expect(shown.id).toBe(banned.id);
    expect(shown.banLevel).toBe(1);
    expect(shown.bannedUntil).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    const until = Date.parse(shown.bannedUntil!);
    expect(until).toBeGreaterThan(Date.now());
    expect(until).toBeLessThanOrEqual(Date.now() + 60_000);
    // Both instances refuse it (each from its own ban cache by now).
    for (const g of gateways) expect((await send(g, banned.key)).code).toBe('api_key_banned');
  });

  it('`keys unban` lifts the ban on both instances within 1 s and resets the level', async () => {
    const r = await runCli(['keys', 'unban', banned.id, '--config', configFile]);
    expect(r.code, r.stderr).toBe(0);
    const done = Date.now();
    const liftedAfter: number[] = [];
    for (const g of gateways) {
      let answer: Answer | undefined;
      for (let i = 0; i < 100 && Date.now() - done <= 1000; i++) {
        answer = await send(g, banned.key);
        if (answer.code !== 'api_key_banned') break;
        await sleep(25);
      }
      expect(answer?.code, `instance ${g.url} still answers api_key_banned 1 s after unban`).not.toBe('api_key_banned');
      // The minute window is still spent: the key is metered again, not banned.
      expect(answer?.status).toBe(429);
      expect(answer?.code).toBe('rate_limit_exceeded');
      liftedAfter.push(Date.now() - done);
    }
    expect(Math.max(...liftedAfter)).toBeLessThanOrEqual(1000);
    const shown = await runCli(['keys', 'show', banned.id, '--json', '--config', configFile]);
    expect(JSON.parse(shown.stdout)).toMatchObject({ bannedUntil: null, banLevel: 0 });
  });

  it("the day window binds across instances and shows in both instances' headers", async () => {
    const [a, b] = [gateways[0]!, gateways[1]!];
    const { key } = await createKey(['--plan', 'free', '--per-minute', '100', '--per-day', '5']);
    for (let i = 0; i < 5; i++) {
      const r = await send(i % 2 ? b : a, key);
      expect(r.status).toBe(200);
      expect(r.headers['x-ratelimit-limit']).toBe('5');
      expect(r.headers['x-ratelimit-remaining']).toBe(String(4 - i));
      expect(r.headers['ratelimit-policy']).toBe('"minute";q=100;w=60, "day";q=5;w=86400');
    }
    for (const g of [b, a]) {
      const r = await send(g, key);
      expect(r.status).toBe(429);
      expect(r.code).toBe('rate_limit_exceeded');
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(86_000);
      expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(86_400);
      expect(r.headers['x-ratelimit-limit']).toBe('5');
      expect(r.headers['x-ratelimit-remaining']).toBe('0');
      expect(Math.abs(Number(r.headers['x-ratelimit-reset']) - (Date.now() / 1000 + 86_400))).toBeLessThanOrEqual(3);
      expect(r.headers.ratelimit).toMatch(/^"minute";r=95;t=\d+, "day";r=0;t=\d+$/);
    }
  });

  it('SIGHUP after rewriting the config applies a new plan limit without dropping an open keep-alive connection', async () => {
    const { key } = await createKey(['--plan', 'reload']);
    const requestText = `GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`;
    const conns = await Promise.all(gateways.map((g) => RawConnection.open(g.port)));
    try {
      for (const c of conns) {
        c.write(requestText);
        const r = await c.read();
        expect(r.status).toBe(200);
        expect(r.headers['x-ratelimit-limit']).toBe('50');
      }
      writeConfig(7);
      for (const g of gateways) {
        const after = g.proc.logs.length;
        g.proc.signal('SIGHUP');
        await g.proc.waitForLog('config reloaded', { after });
      }
      for (const [i, c] of conns.entries()) {
        c.write(requestText);
        const r = await c.read();
        expect(r.status).toBe(200);
        expect(r.headers['x-ratelimit-limit']).toBe('7');
        expect(r.headers['x-ratelimit-remaining']).toBe(String(7 - 3 - i));
        expect(r.headers['ratelimit-policy']).toBe('"minute";q=7;w=60, "day";q=1000;w=86400');
        expect(c.ended).toBe(false);
      }
      for (const g of gateways) expect(g.proc.running).toBe(true);
    } finally {
      for (const c of conns) c.destroy();
      writeConfig(50);
    }
  });
});
