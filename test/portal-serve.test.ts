// The portal as an operator runs it: two built `tollgate serve` processes on one redis-server, each with its portal
// listener. A platform asks one instance's admin API for a sign-in link; the person signs in on the other instance's
// portal (sessions live in Redis), creates a key, rotates it with a 2-second overlap (both plaintexts work on both
// gateways, then only the new one), and reads the deprecated operation it called on a gateway, with the same numbers
// as the admin API's report. Every portal answer is checked against docs/portal.openapi.yaml.
import type request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { assertBuilt, CliProcess, startServe, tempDir } from './helpers/cli.js';
import { OpenApiDocument } from './helpers/openapi.js';
import { useStack } from './helpers/stack.js';
import { waitFor } from './helpers/wait.js';

/** A JSON answer: supertest's loose type, so the test can reach into it. */
type Json = request.Response['body'];

const TOKEN = generateAdminToken();
const doc = new OpenApiDocument(new URL('../docs/portal.openapi.yaml', import.meta.url));
const problems: string[] = [];
const stack = useStack({ redis: true });
const dir = tempDir();

interface Instance {
  url: string;
  adminUrl: string;
  portalUrl: string;
}
const gw: Instance[] = [];

beforeAll(async () => {
  assertBuilt();
  for (const name of ['one', 'two']) {
    const file = dir.write(`${name}.yaml`, {
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: stack.up.url },
      redis: { url: stack.redis.url, prefix: 'pserve:' },
      admin: { host: '127.0.0.1', port: 0, tokens: [{ id: 'platform', sha256: hashAdminToken(TOKEN) }] },
      portal: { host: '127.0.0.1', port: 0 },
      plans: { gold: { perMinute: 600, perDay: 10_000 } },
      usage: { flushIntervalMs: 200 },
      routes: [{ path: '/v1/things' }, { method: 'GET', path: '/v1/old', deprecation: '2026-01-01T00:00:00Z', successor: '/v1/things' }],
    });
    const { proc, url } = await startServe(file);
    const adminLine = await proc.waitForLog('admin API listening');
    const portalLine = await proc.waitForLog('portal listening');
    gw.push({ url, adminUrl: String(adminLine.url), portalUrl: String(portalLine.url) });
  }
}, 120_000);

afterAll(async () => {
  await CliProcess.killAll();
  dir.remove();
  expect(problems).toEqual([]);
});

async function adminCall(at: Instance, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const r = await fetch(`${at.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: r.status, body: (await r.json()) as Json };
}

async function portal(at: Instance, cookie: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }> {
  const headers: Record<string, string> = { cookie, ...(method !== 'GET' ? { 'content-type': 'application/json' } : {}) };
  const r = await fetch(`${at.portalUrl}${path}`, { method, headers, ...(method !== 'GET' ? { body: JSON.stringify(body ?? {}) } : {}) });
  const text = await r.text();
  problems.push(...doc.check(method, path, r.status, Object.fromEntries(r.headers), text));
  return { status: r.status, body: JSON.parse(text) as Json };
}

async function through(at: Instance, key: string, path: string): Promise<number> {
  const r = await fetch(`${at.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  await r.arrayBuffer();
  return r.status;
}

describe('the portal of `tollgate serve`', () => {
  it('a link from one instance signs in on the other; a rotation overlaps on both gateways; the deprecated panel matches the admin report', async () => {
    const [one, two] = [gw[0]!, gw[1]!];
    expect((await adminCall(one, 'POST', '/consumers', { id: 'initech', name: 'Initech', plan: 'gold' })).status).toBe(201);
    const link = await adminCall(one, 'POST', '/consumers/initech/portal-links', {
      actor: 'peter@initech.example',
      scopes: ['keys:read', 'keys:write', 'usage:read'],
    });
    expect(link.status).toBe(201);
    // The link names instance one's portal; the code works on any instance sharing the Redis.
    const code = new URL(link.body.url as string).searchParams.get('code')!;
    const exchanged = await fetch(`${two.portalUrl}/link?code=${encodeURIComponent(code)}`, { redirect: 'manual' });
    await exchanged.arrayBuffer();
    expect(exchanged.status).toBe(303);
    const cookie = /^(tollgate_portal=[A-Za-z0-9_-]{43});/.exec(exchanged.headers.get('set-cookie') ?? '')![1]!;

    const created = await portal(two, cookie, 'POST', '/api/keys', { name: 'billing job' });
    expect(created.status).toBe(201);
    const first = created.body.key as string;
    // Instance one learns the new key's hash from the change feed, a moment after instance two stored it.
    await waitFor(async () => (await through(one, first, '/v1/old')) === 200, 'the new key working on the other instance', 5_000, 50);
    expect(await through(two, first, '/v1/old')).toBe(200);

    const rotated = await portal(one, cookie, 'POST', `/api/keys/${created.body.id}/rotate`, { overlapSeconds: 2 });
    expect(rotated.status).toBe(200);
    const second = rotated.body.key as string;
    for (const at of [one, two]) {
      await waitFor(async () => (await through(at, second, '/v1/things')) === 200, 'the rotated key working', 1_500, 20);
      expect(await through(at, first, '/v1/things')).toBe(200);
    }
    const until = Date.parse(rotated.body.overlapUntil as string);
    await new Promise((r) => setTimeout(r, Math.max(0, until - Date.now()) + 200));
    for (const at of [one, two]) {
      await waitFor(async () => (await through(at, first, '/v1/things')) === 401, 'the first plaintext refused after the overlap', 10_000, 200);
      expect(await through(at, second, '/v1/things')).toBe(200);
    }

    // Two calls of the deprecated route (one per instance), flushed within 200 ms.
    let panel: Json = {};
    await waitFor(
      async () => {
        panel = (await portal(two, cookie, 'GET', '/api/deprecated')).body;
        return (panel.operations as Array<{ calls30d: number }>)[0]?.calls30d === 2;
      },
      'the two deprecated calls in the panel',
      15_000,
      200,
    );
    const report = await adminCall(one, 'GET', '/routes/deprecated?groupBy=consumer');
    const row = (report.body.routes as Array<{ path: string; consumers: Array<{ consumer: string; calls: number; lastSeen: string }> }>)
      .find((r) => r.path === '/v1/old')!
      .consumers.find((c) => c.consumer === 'initech')!;
    expect(panel.operations).toEqual([
      {
        method: 'GET',
        path: '/v1/old',
        calls7d: row.calls,
        calls30d: row.calls,
        lastCall: row.lastSeen,
        deprecation: '2026-01-01T00:00:00Z',
        successor: '/v1/things',
        brownouts: [],
      },
    ]);
  }, 90_000);
});
