// Retries, the retry budget, passive ejection, active health checks and no_healthy_upstream (docs/routing.md), on
// real upstream servers on loopback that the tests stop, hang, reset or make answer 5xx. Each upstream counts the
// tries that reach it, so "retried" and "not retried" are counted where they land.
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { FaultUpstream, slow } from './helpers/fault-upstream.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { echo, TestUpstream } from './helpers/upstream.js';
import { track } from './helpers/children.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function upstream(): Promise<TestUpstream> {
  const u = await TestUpstream.start();
  cleanup.push(() => u.close());
  return u;
}

/** A loopback URL nothing listens on (a server started and closed): connections to it are refused. */
async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

async function gateway(raw: Record<string, unknown>, opts: Parameters<typeof startTestGateway>[1] = {}): Promise<TestGateway> {
  const g = await startTestGateway(testConfig(raw), opts);
  cleanup.push(() => g.close());
  return g;
}

async function call(url: string, init: RequestInit = {}): Promise<{ status: number; body: string; headers: Headers; ms: number }> {
  const t0 = performance.now();
  const res = await fetch(url, init);
  return { status: res.status, body: await res.text(), headers: res.headers, ms: performance.now() - t0 };
}

/** An upstream that reads the whole request, then drops the connection without a byte of response. */
async function resettingUpstream(): Promise<{ url: string; tries: () => number }> {
  let tries = 0;
  const server: Server = createServer((req) => {
    req.resume();
    req.on('end', () => {
      tries++;
      req.socket.destroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, tries: () => tries };
}

/**
 * A loopback URL whose connections never complete: a listener (backlog 1) in a stopped process, its accept queue
 * filled, so the kernel drops further SYNs and a connect just waits, as for a host that went dark.
 */
async function blackholeUrl(): Promise<string> {
  const child = track(
    spawn(process.execPath, [
      '-e',
      "require('net').createServer().listen({ port: 0, host: '127.0.0.1', backlog: 1 }, function () { console.log(this.address().port) })",
    ]),
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve(Number(String(d).trim())));
    child.once('error', reject);
  });
  child.kill('SIGSTOP');
  const fillers: Socket[] = [];
  cleanup.push(async () => {
    for (const s of fillers) s.destroy();
    child.kill('SIGKILL');
  });
  for (let i = 0; i < 8; i++) {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    fillers.push(s);
    const connected = await new Promise<boolean>((resolve) => {
      const t = setTimeout(() => resolve(false), 300);
      s.once('connect', () => {
        clearTimeout(t);
        resolve(true);
      });
    });
    if (!connected) return `http://127.0.0.1:${port}`;
  }
  throw new Error('the accept queue never filled');
}

const NO_EJECT = { consecutiveFailures: 1000, forMs: 1000 };

describe('retries', () => {
  it('a killed target: GETs and POSTs (their bodies whole) keep succeeding, each failed connect retried on the other target', async () => {
    const live = await upstream();
    const g = await gateway({
      services: { web: { targets: [await deadUrl(), live.url], retries: 1, eject: NO_EJECT } },
      defaultService: 'web',
      selfService: { enabled: false },
    });
    const body = Buffer.alloc(200_000, 'x');
    body.write('start', 0);
    body.write('end', body.length - 3);
    // Round-robin sends every other request to the dead target: half the GETs and half the POSTs are retried.
    for (let i = 0; i < 6; i++) expect((await call(`${g.url}/get/${i}`)).status).toBe(200);
    for (let i = 0; i < 6; i++) {
      const post = await call(`${g.url}/post/${i}`, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
      expect(post.status).toBe(200);
    }
    const posts = live.seen.filter((s) => s.method === 'POST');
    expect(posts).toHaveLength(6);
    for (const p of posts) expect(p.body.equals(body)).toBe(true);
    expect(live.seen.filter((s) => s.method === 'GET')).toHaveLength(6);
    const metrics = await (await fetch(`${g.url}/metrics`)).text();
    expect(metrics).toContain('tollgate_service_retries_total{service="web",reason="connect"} 6');
  });

  it('a target that never completes a connect: after connectTimeoutMs the try goes to the other target, POST body and all', async () => {
    const live = await upstream();
    const g = await gateway({
      services: { web: { targets: [await blackholeUrl(), live.url], connectTimeoutMs: 200, timeoutMs: 5000, retries: 1, eject: NO_EJECT } },
      defaultService: 'web',
    });
    for (let i = 0; i < 2; i++) {
      const get = await call(`${g.url}/g/${i}`);
      expect(get.status).toBe(200);
      const post = await call(`${g.url}/p/${i}`, { method: 'POST', body: `body-${i}` });
      expect(post.status).toBe(200);
      expect(post.ms).toBeLessThan(3000);
    }
    expect(live.seen.filter((s) => s.method === 'POST').map((s) => s.body.toString())).toEqual(['body-0', 'body-1']);
    const text = await (await fetch(`${g.url}/metrics`)).text();
    expect(text).toMatch(/tollgate_service_requests_total\{service="web",target="[^"]+",outcome="connect_timeout"\} 2/);
  });

  it('a POST whose connection breaks after it was sent is not retried: 502, one try; a GET is retried once', async () => {
    const a = await resettingUpstream();
    const b = await resettingUpstream();
    const g = await gateway({
      services: { web: { targets: [a.url, b.url], retries: 1, eject: NO_EJECT } },
      defaultService: 'web',
    });
    const post = await call(`${g.url}/orders`, { method: 'POST', body: '{"n":1}', headers: { 'content-type': 'application/json' } });
    expect(post.status).toBe(502);
    expect(JSON.parse(post.body)).toMatchObject({ code: 'bad_gateway', status: 502 });
    expect(a.tries() + b.tries()).toBe(1);
    const get = await call(`${g.url}/orders/1`);
    expect(get.status).toBe(502);
    expect(a.tries() + b.tries()).toBe(3);
    // Each try went to another target.
    expect([a.tries(), b.tries()].sort()).toEqual([1, 2]);
  });

  it('retryOn: an idempotent request answered 503 is tried on the other target; never two tries in one response', async () => {
    const bad = await upstream();
    bad.behaviour = (_req, res) => {
      res.statusCode = 503;
      res.setHeader('x-from', 'bad');
      res.end('from the bad target');
    };
    const good = await upstream();
    const g = await gateway({
      services: { web: { targets: [bad.url, good.url], retries: 1, retryOn: [503], eject: NO_EJECT } },
      defaultService: 'web',
    });
    for (let i = 0; i < 4; i++) {
      const r = await call(`${g.url}/r/${i}`);
      expect(r.status).toBe(200);
      expect(r.headers.get('x-from')).toBeNull();
      expect(JSON.parse(r.body).url).toBe(`/r/${i}`);
    }
    // A POST answered 503 is passed on as it is.
    bad.seen.length = 0;
    const posts = await Promise.all([0, 1].map(() => call(`${g.url}/p`, { method: 'POST', body: 'x' })));
    expect(posts.map((p) => p.status).sort()).toEqual([200, 503]);
    expect(posts.find((p) => p.status === 503)!.body).toBe('from the bad target');
  });

  it('retryOn: a 503 whose body is cut off after its headers is dropped whole; the client gets the other answer intact', async () => {
    const bad = await upstream();
    bad.behaviour = (_req, res) => {
      res.statusCode = 503;
      res.setHeader('content-length', '100000');
      res.flushHeaders();
      res.write('x'.repeat(1000), () => setTimeout(() => res.socket?.destroy(), 5));
    };
    const good = await upstream();
    const g = await gateway({
      services: { web: { targets: [bad.url, good.url], retries: 1, retryOn: [503], eject: NO_EJECT } },
      defaultService: 'web',
    });
    // Within the retry budget's floor (3 a second): each of these is retried.
    for (let i = 0; i < 3; i++) {
      const r = await call(`${g.url}/cut/${i}`);
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body).url).toBe(`/cut/${i}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(bad.seen.length).toBeGreaterThan(0);
  });

  it('the retry budget holds under a failing service: tries stay within 20% over the requests (plus 3 a second)', async () => {
    const a = await upstream();
    const b = await upstream();
    for (const u of [a, b])
      u.behaviour = (_req, res) => {
        res.statusCode = 503;
        res.end();
      };
    const g = await gateway({
      services: { web: { targets: [a.url, b.url], retries: 3, retryOn: [503], eject: NO_EJECT } },
      defaultService: 'web',
    });
    const started = Date.now();
    const requests = 150;
    for (let i = 0; i < requests; i++) expect((await call(`${g.url}/b/${i}`)).status).toBe(503);
    const seconds = Math.ceil((Date.now() - started) / 1000) + 1;
    const tries = a.seen.length + b.seen.length;
    // Without a budget: 4 tries each (600). With it: the requests, 20% more, and the 3-a-second floor.
    expect(tries).toBeGreaterThan(requests);
    expect(tries).toBeLessThanOrEqual(requests + Math.ceil(requests * 0.2) + 3 * seconds);
    const metrics = await (await fetch(`${g.url}/metrics`)).text();
    expect(metrics).toMatch(/tollgate_service_retries_total\{service="web",reason="budget_exhausted"\} [1-9]/);
  });
});

describe('timeouts and passive ejection', () => {
  it('a hung target: 504 within timeoutMs, then ejected after its failures in a row; requests go to the other at once', async () => {
    const hung = await FaultUpstream.start();
    cleanup.push(() => hung.close());
    hung.behaviour = slow(10_000);
    const live = await upstream();
    const g = await gateway({
      services: { web: { targets: [hung.url, live.url], timeoutMs: 300, retries: 0, eject: { consecutiveFailures: 2, forMs: 60_000 } } },
      defaultService: 'web',
    });
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await call(`${g.url}/h/${i}`));
    // Round-robin: the hung target got requests 0 and 2 (504 each, within the timeout), then rests.
    const timedOut = results.filter((r) => r.status === 504);
    expect(timedOut).toHaveLength(2);
    for (const r of timedOut) {
      expect(JSON.parse(r.body).code).toBe('gateway_timeout');
      // A bound: timing (the 300 ms timeout, later under load).
      expect(r.ms).toBeGreaterThanOrEqual(280);
      expect(r.ms).toBeLessThan(2000);
    }
    const after = [];
    for (let i = 0; i < 6; i++) after.push(await call(`${g.url}/after/${i}`));
    expect(after.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(after.every((r) => r.ms < 250)).toBe(true);
    const snap = g.gateway.services.snapshot().find((s) => s.name === 'web')!;
    expect(snap).toMatchObject({ healthy: 1, total: 2 });
    expect(snap.targets[0]).toMatchObject({ url: hung.url, healthy: false, state: 'ejected' });
    expect(snap.targets[0]!.recentErrors.map((e) => e.kind)).toContain('timeout');
    // A reload that keeps the target (and adds one) keeps its health: still resting.
    const third = await upstream();
    g.runtime.apply(
      testConfig({
        services: { web: { targets: [hung.url, live.url, third.url], timeoutMs: 300, retries: 0, eject: { consecutiveFailures: 2, forMs: 60_000 } } },
        defaultService: 'web',
      }),
    );
    const reloaded = g.gateway.services.snapshot().find((s) => s.name === 'web')!;
    expect(reloaded).toMatchObject({ healthy: 2, total: 3 });
    expect(reloaded.targets[0]).toMatchObject({ url: hung.url, state: 'ejected' });
  });
});

describe('active health checks', () => {
  it('take a failing target out before any request reaches it, and bring it back when it passes again', async () => {
    const flaky = await upstream();
    let healthy = true;
    flaky.behaviour = (req, res, body) => {
      if (req.url === '/base/healthz') {
        res.statusCode = healthy ? 200 : 500;
        return res.end();
      }
      echo(req, res, body);
    };
    const steady = await upstream();
    const g = await gateway({
      services: {
        web: {
          targets: [`${flaky.url}/base`, steady.url],
          healthCheck: { path: '/healthz', intervalMs: 100, timeoutMs: 1000, unhealthyAfter: 2, healthyAfter: 2 },
        },
      },
      defaultService: 'web',
    });
    const waitFor = async (want: number) => {
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline) {
        if (g.gateway.services.snapshot()[0]!.healthy === want) return;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error(`healthy targets never became ${want}`);
    };
    healthy = false;
    await waitFor(1);
    const count = () => flaky.seen.filter((s) => s.url !== '/base/healthz').length;
    for (let i = 0; i < 6; i++) expect((await call(`${g.url}/x/${i}`)).status).toBe(200);
    expect(count()).toBe(0);
    healthy = true;
    await waitFor(2);
    for (let i = 0; i < 6; i++) expect((await call(`${g.url}/y/${i}`)).status).toBe(200);
    expect(count()).toBe(3);
    const metrics = await (await fetch(`${g.url}/metrics`)).text();
    expect(metrics).toContain(`tollgate_target_healthy{service="web",target="${flaky.url}/base"} 1`);
  });
});

describe('no healthy target', () => {
  it('answers 503 no_healthy_upstream at once, with Retry-After, and spends no quota', async () => {
    const key = generateKey();
    const a = await deadUrl();
    const b = await deadUrl();
    const g = await gateway(
      {
        services: { web: { targets: [a, b], healthCheck: { path: '/healthz', intervalMs: 100, timeoutMs: 100, unhealthyAfter: 1, healthyAfter: 1 } } },
        routes: [{ path: '/web/*', service: 'web' }],
        keys: [{ id: 'key_q', plan: 'free', sha256: hashKey(key) }],
      },
      { keyStages: true },
    );
    const auth = { authorization: `Bearer ${key}` };
    const deadline = Date.now() + 5000;
    while (g.gateway.services.snapshot()[0]!.healthy > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    const before = JSON.parse((await call(`${g.url}/ratelimit`, { headers: auth })).body);
    for (let i = 0; i < 5; i++) {
      const r = await call(`${g.url}/web/${i}`, { headers: auth });
      expect(r.status).toBe(503);
      expect(JSON.parse(r.body)).toEqual({ code: 'no_healthy_upstream', message: expect.any(String), status: 503 });
      // Failed by health checks (none resting after ejection): one check interval (100 ms), rounded up to a second.
      expect(r.headers.get('retry-after')).toBe('1');
      expect(r.ms).toBeLessThan(200);
    }
    const after = JSON.parse((await call(`${g.url}/ratelimit`, { headers: auth })).body);
    expect(after.windows.map((w: { remaining: number }) => w.remaining)).toEqual(before.windows.map((w: { remaining: number }) => w.remaining));
    expect(before.windows[0].remaining).toBe(before.windows[0].limit);
  });
});

describe('a reload removing a target', () => {
  it('lets the requests in flight to it finish, whole; new requests go to the targets that stay', async () => {
    const leaving = await upstream();
    leaving.behaviour = (req, res, body) => {
      res.setHeader('content-type', 'application/json');
      res.flushHeaders();
      res.write('{"part":1,');
      setTimeout(() => res.end(`"url":${JSON.stringify(req.url)},"len":${body.length}}`), 400);
    };
    const staying = await upstream();
    const raw = (targets: string[]) => ({ services: { web: { targets } }, defaultService: 'web' });
    const g = await gateway(raw([leaving.url, staying.url]));
    // Round-robin: the first request goes to the leaving target and is still streaming when the reload lands.
    const inFlight = call(`${g.url}/slow`);
    await new Promise((r) => setTimeout(r, 150));
    g.runtime.apply(testConfig(raw([staying.url])));
    for (let i = 0; i < 4; i++) expect((await call(`${g.url}/after/${i}`)).status).toBe(200);
    const r = await inFlight;
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ part: 1, url: '/slow', len: 0 });
    expect(leaving.seen.map((s) => s.url)).toEqual(['/slow']);
    expect(g.gateway.services.snapshot()[0]!.targets.map((t) => t.url)).toEqual([staying.url]);
  });
});

describe('SIGHUP reload of services (built CLI)', () => {
  it('adds and removes targets under load without a failed request; the removed one gets nothing after the reload', async () => {
    const { CliProcess, assertBuilt, tempDir } = await import('./helpers/cli.js');
    const { startLoad } = await import('./helpers/load.js');
    assertBuilt();
    const [a, b, c] = [await upstream(), await upstream(), await upstream()];
    const tmp = tempDir();
    cleanup.push(async () => tmp.remove());
    const config = (targets: string[]) => ({
      server: { port: 0 },
      log: { level: 'info' },
      admin: { port: 0 },
      anonymous: { perMinute: 100_000 },
      services: { web: { targets, healthCheck: { path: '/healthz', intervalMs: 200 } } },
      routes: [{ path: '/web/*', service: 'web', auth: 'none' }],
    });
    const file = tmp.write('gateway.yaml', config([a.url, b.url]));
    const proc = CliProcess.start(['serve', '--config', file]);
    cleanup.push(async () => void (await proc.stop()));
    const url = String((await proc.waitForLog('tollgate gateway listening')).url);
    const load = startLoad({ url, path: (n) => `/web/${n}`, concurrency: 4, durationMs: 8000, maxRequests: 3000, ratePerSecond: 300 });
    await new Promise((r) => setTimeout(r, 700));
    // Add c, remove a.
    tmp.write('gateway.yaml', config([b.url, c.url]));
    let mark = proc.logs.length;
    load.phase = 'reload-1';
    proc.signal('SIGHUP');
    await proc.waitForLog('config reloaded', { after: mark });
    const toA = () => a.seen.filter((s) => s.url.startsWith('/web/')).length;
    // Requests already in flight to a finish there; after them, a gets nothing until it is back.
    await new Promise((r) => setTimeout(r, 100));
    const aAfterReload = toA();
    await new Promise((r) => setTimeout(r, 600));
    expect(toA()).toBe(aAfterReload);
    // And back: a returns, c goes.
    tmp.write('gateway.yaml', config([a.url, b.url]));
    mark = proc.logs.length;
    proc.signal('SIGHUP');
    await proc.waitForLog('config reloaded', { after: mark });
    await new Promise((r) => setTimeout(r, 500));
    const results = await load.stop();
    expect(results.length).toBeGreaterThan(200);
    expect(results.filter((r) => r.status !== 200).map((r) => `${r.status ?? r.error} ${r.code ?? ''}`)).toEqual([]);
    expect(c.seen.filter((s) => s.url.startsWith('/web/')).length).toBeGreaterThan(0);
    // a is back after the second reload.
    expect(toA()).toBeGreaterThan(aAfterReload);
  }, 120_000);
});
