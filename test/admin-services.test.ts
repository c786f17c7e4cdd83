// GET /services and GET /services/{name} on the admin listener (docs/admin-api.md, "Services"): a gateway composed as
// `tollgate serve` composes it, in front of real upstream servers on loopback: a healthy target, one that was stopped
// (ejected after failed requests), one whose health checks fail, and one holding a request (in flight). Every answer
// is checked against docs/admin.openapi.yaml.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import type { ServerResponse } from 'node:http';
import { composeGateway, type ComposedGateway } from '../src/compose.js';
import { startGateway, type RunningGateway } from '../src/server/gateway-server.js';
import { generateAdminToken, hashAdminToken } from '../src/admin/tokens.js';
import { Metrics } from '../src/observability/metrics.js';
import { silentLogger, testConfig } from './helpers/gateway.js';
import { CheckedApi } from './helpers/openapi.js';
import { TestUpstream } from './helpers/upstream.js';

const TOKEN = generateAdminToken();

let healthy: TestUpstream;
let stopped: TestUpstream;
let stoppedUrl: string;
let checkedDown: TestUpstream;
let slow: TestUpstream;
let gw: RunningGateway;
let composed: ComposedGateway;
const held: ServerResponse[] = [];

const api = new CheckedApi({ target: () => gw.adminUrl!, token: TOKEN });
/** A GET on the admin listener; `token: null` sends none. */
const admin = (path: string, token: string | null = TOKEN) => api.get(path, { token });

/** The raw path as sent, bypassing fetch's normalisation of dot segments. */
function rawGet(path: string): Promise<string> {
  const { port } = new URL(gw.adminUrl!);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), '127.0.0.1', () => s.end(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TOKEN}\r\nConnection: close\r\n\r\n`));
    let out = '';
    s.setTimeout(5000, () => s.destroy(new Error('no answer')));
    s.on('data', (c: Buffer) => (out += c.toString('latin1')));
    s.on('end', () => resolve(out));
    s.on('error', reject);
  });
}

async function until(ok: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

beforeAll(async () => {
  [healthy, stopped, checkedDown, slow] = await Promise.all([TestUpstream.start(), TestUpstream.start(), TestUpstream.start(), TestUpstream.start()]);
  stoppedUrl = stopped.url;
  checkedDown.behaviour = (_req, res) => {
    res.statusCode = 503;
    res.end('down');
  };
  slow.behaviour = (req, res) => {
    if (req.url === '/healthz') res.end('ok');
    else held.push(res);
  };
  const config = testConfig({
    server: { host: '127.0.0.1', port: 0 },
    admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(TOKEN) }] },
    services: {
      web: { targets: [healthy.url, { url: stoppedUrl, weight: 2 }], retries: 1, eject: { consecutiveFailures: 2, forMs: 60_000 } },
      checked: {
        targets: [checkedDown.url, slow.url],
        balance: 'least-requests',
        healthCheck: { path: '/healthz', intervalMs: 100, timeoutMs: 1000, unhealthyAfter: 1, healthyAfter: 1 },
      },
    },
    routes: [{ path: '/checked/*', service: 'checked', auth: 'none' }],
    defaultService: 'web',
    anonymous: { perMinute: 10_000 },
  });
  const gateway = (composed = await composeGateway({ config, logger: silentLogger, metrics: new Metrics(), env: {}, keyStages: false }));
  gw = await startGateway({ gateway, logger: silentLogger });
}, 120_000);

afterAll(async () => {
  for (const r of held) r.end();
  await gw?.shutdown();
  await Promise.all([healthy, checkedDown, slow].map((u) => u?.close()));
});

describe('GET /services', () => {
  it('shows a healthy target, a stopped one ejected with its errors, a failing check, and a request in flight', async () => {
    const before = await admin('/services');
    expect(before.status).toBe(200);
    const web0 = (before.body.services as Array<Record<string, unknown>>).find((s) => s.name === 'web');
    expect(web0).toMatchObject({ balance: 'round-robin', healthy: 2, total: 2 });

    await stopped.close();
    // Round-robin with weights 1 and 2: the stopped target is tried, refused, and each such request retried on the other.
    for (let i = 0; i < 4; i++) expect((await fetch(`${gw.url}/w/${i}`)).status).toBe(200);
    await until(() => composed.services.snapshot().find((s) => s.name === 'checked')!.healthy === 1, 'the failing check takes its target out');
    // One request held by the slow target: in flight while we look.
    const pending = fetch(`${gw.url}/checked/hold`).then(async (r) => r.status);
    await until(() => held.length === 1, 'the held request reaches the slow target');

    const r = await admin('/services');
    expect(r.status).toBe(200);
    expect(Date.parse(String(r.body.asOf))).toBeGreaterThan(Date.now() - 10_000);
    const services = r.body.services as Array<Record<string, unknown>>;
    expect(services.map((s) => s.name)).toEqual(['web', 'checked']);
    const [web, checked] = services;
    expect(web).toMatchObject({ name: 'web', balance: 'round-robin', healthy: 1, total: 2 });
    expect(web!.targets).toEqual([
      { url: healthy.url, weight: 1, healthy: true, state: 'healthy', ejectedUntil: null, activeRequests: 0, consecutiveFailures: 0, recentErrors: [] },
      {
        url: stoppedUrl,
        weight: 2,
        healthy: false,
        state: 'ejected',
        ejectedUntil: expect.any(String),
        activeRequests: 0,
        consecutiveFailures: 0,
        recentErrors: [
          { at: expect.any(String), kind: 'refused' },
          { at: expect.any(String), kind: 'refused' },
        ],
      },
    ]);
    const rest = Date.parse(String((web!.targets as Array<{ ejectedUntil: string }>)[1]!.ejectedUntil)) - Date.now();
    expect(rest).toBeGreaterThan(50_000);
    expect(rest).toBeLessThanOrEqual(60_000);

    expect(checked).toMatchObject({ name: 'checked', balance: 'least-requests', healthy: 1, total: 2 });
    const [down, busy] = checked!.targets as Array<Record<string, unknown>>;
    expect(down).toMatchObject({ url: checkedDown.url, healthy: false, state: 'health_check', ejectedUntil: null, activeRequests: 0 });
    expect((down!.recentErrors as Array<{ kind: string }>).map((e) => e.kind)).toContain('health_check');
    expect(busy).toMatchObject({ url: slow.url, healthy: true, state: 'healthy', activeRequests: 1 });

    // The same service alone.
    const one = await admin('/services/web');
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ name: 'web', healthy: 1, total: 2, asOf: expect.any(String) });

    held.shift()!.end('done');
    expect(await pending).toBe(200);
    await until(() => composed.services.snapshot()[1]!.targets[1]!.activeRequests === 0, 'the held request ends');
    expect(((await admin('/services/checked')).body.targets as Array<{ activeRequests: number }>)[1]!.activeRequests).toBe(0);
  });

  it('refuses without a token and answers 404 for names that are no service, never a crash or a 500', async () => {
    const none = await admin('/services', null);
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('missing_admin_token');
    expect((await admin('/services/web', generateAdminToken())).status).toBe(401);
    for (const name of ['nope', '__proto__', 'constructor', 'toString', 'WEB', 'web%00', '%F0%9F%92%A5', 'x'.repeat(5000)]) {
      const r = await admin(`/services/${name}`);
      expect(r.status, name).toBe(404);
      expect(r.body.code).toBe('not_found');
      expect(r.text.length).toBeLessThan(300);
    }
    // Dot segments sent as they are: no path tricks reach another endpoint.
    for (const raw of ['/services/..', '/services/../keys', '/services/%2e%2e%2fkeys', '/services/web/extra']) {
      const text = await rawGet(raw);
      expect(text.split('\r\n')[0], raw).toBe('HTTP/1.1 404 Not Found');
      expect(text).toContain('"code":"not_found"');
    }
  });

  it('every answer matched the OpenAPI document', () => {
    expect(api.problems).toEqual([]);
  });
});
