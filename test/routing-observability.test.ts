// Seeing the services (docs/routing.md, "Seeing it"): /readyz lists every service with its healthy and total targets
// and answers 503 only when no service has a healthy target; /metrics counts tries per service, target and outcome,
// retries, and a health gauge per target. The read-only snapshot is what an admin endpoint or a page builds on.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

async function waitUntil(g: TestGateway, ok: (healthy: Record<string, number>) => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (ok(Object.fromEntries(g.gateway.services.snapshot().map((s) => [s.name, s.healthy])))) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('services never reached the expected health');
}

const CHECK = { path: '/healthz', intervalMs: 100, timeoutMs: 1000, unhealthyAfter: 1, healthyAfter: 1 };

describe('/readyz with services', () => {
  it('lists each service with healthy and total targets; one service out is still ready; none healthy is 503', async () => {
    const up = await TestUpstream.start();
    cleanup.push(() => up.close());
    const dead = await deadUrl();
    const g = await startTestGateway(
      testConfig({
        services: {
          catalog: { targets: [up.url, dead], healthCheck: CHECK },
          orders: { targets: [dead], healthCheck: CHECK },
        },
        defaultService: 'catalog',
      }),
    );
    cleanup.push(() => g.close());
    await waitUntil(g, (h) => h.catalog === 1 && h.orders === 0);
    const ready = await fetch(`${g.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({
      status: 'ready',
      checks: { services: 'up' },
      services: { catalog: { healthy: 1, total: 2 }, orders: { healthy: 0, total: 1 } },
    });
    // The last healthy target stops answering its checks: no service has one left.
    await up.close();
    await waitUntil(g, (h) => h.catalog === 0);
    const down = await fetch(`${g.url}/readyz`);
    expect(down.status).toBe(503);
    const body = (await down.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      code: 'service_unavailable',
      status: 503,
      checks: { services: 'down' },
      reasons: { services: 'no service has a healthy target' },
      services: { catalog: { healthy: 0, total: 2 }, orders: { healthy: 0, total: 1 } },
    });
    expect(JSON.stringify(body)).not.toContain('127.0.0.1');
  });

  it('the upstream shorthand keeps its upstream check (the only one) and shows as the service "upstream"', async () => {
    const up = await TestUpstream.start();
    cleanup.push(() => up.close());
    const g = await startTestGateway(testConfig({ upstream: { url: up.url } }));
    cleanup.push(() => g.close());
    expect(await (await fetch(`${g.url}/readyz`)).json()).toEqual({
      status: 'ready',
      checks: { upstream: 'up' },
      services: { upstream: { healthy: 1, total: 1 } },
    });
  });
});

describe('metrics per service and target', () => {
  it("counts tries by outcome, retries by reason, and gauges each target's health", async () => {
    const up = await TestUpstream.start();
    cleanup.push(() => up.close());
    const dead = await deadUrl();
    const g = await startTestGateway(
      testConfig({ services: { web: { targets: [dead, up.url], retries: 1, eject: { consecutiveFailures: 2, forMs: 60_000 } } }, defaultService: 'web' }),
    );
    cleanup.push(() => g.close());
    for (let i = 0; i < 6; i++) expect((await fetch(`${g.url}/m/${i}`)).status).toBe(200);
    const text = await (await fetch(`${g.url}/metrics`)).text();
    expect(text).toContain(`tollgate_service_requests_total{service="web",target="${up.url}",outcome="2xx"} 6`);
    expect(text).toContain(`tollgate_service_requests_total{service="web",target="${dead}",outcome="refused"} 2`);
    expect(text).toContain('tollgate_service_retries_total{service="web",reason="connect"} 2');
    expect(text).toContain(`tollgate_target_ejections_total{service="web",target="${dead}"} 1`);
    expect(text).toContain(`tollgate_target_healthy{service="web",target="${dead}"} 0`);
    expect(text).toContain(`tollgate_target_healthy{service="web",target="${up.url}"} 1`);
    const snap = g.gateway.services.snapshot();
    expect(snap).toEqual([
      {
        name: 'web',
        balance: 'round-robin',
        healthy: 1,
        total: 2,
        targets: [
          expect.objectContaining({
            url: dead,
            healthy: false,
            state: 'ejected',
            activeRequests: 0,
            recentErrors: [expect.objectContaining({ kind: 'refused' }), expect.objectContaining({ kind: 'refused' })],
          }),
          expect.objectContaining({ url: up.url, healthy: true, state: 'healthy', ejectedUntil: null, consecutiveFailures: 0, recentErrors: [] }),
        ],
      },
    ]);
  });
});
