// The proxy's bounds in time (docs/routing.md, "Timeouts"), on real loopback upstreams and raw clients: timeoutMs runs
// from the proxy stage, so a request queued behind a target's exhausted pool gets its 504 in time; a client that stops
// reading its response is cut after server.responseIdleTimeoutMs and the target's connection freed; a body that stops
// arriving gets 408 after the same idle time; perTryTimeoutMs sends a hung GET to another target; a 101 nobody asked
// for is a 502; and retries add no listener to the client's response (no MaxListenersExceededWarning).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { validateConfig } from '../src/config/load.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { captureLogger, startLimitsGateway } from './helpers/limits.js';
import { waitFor } from './helpers/wait.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

const NO_EJECT = { consecutiveFailures: 1000, forMs: 1000 };

/** A loopback upstream with a handler of the test's, counting its requests by path and its open connections. */
async function upstream(handle: (req: IncomingMessage, res: ServerResponse) => void) {
  const seen = new Map<string, number>();
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    seen.set(req.url ?? '', (seen.get(req.url ?? '') ?? 0) + 1);
    handle(req, res);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen: (path: string) => seen.get(path) ?? 0, open: () => sockets.size };
}

async function gateway(raw: Record<string, unknown>): Promise<TestGateway> {
  const g = await startTestGateway(testConfig({ selfService: { enabled: false }, ...raw }));
  cleanup.push(() => g.close());
  return g;
}

async function call(url: string, init: RequestInit = {}): Promise<{ status: number; body: string; ms: number }> {
  const t0 = performance.now();
  const res = await fetch(url, { signal: AbortSignal.timeout(60_000), ...init });
  return { status: res.status, body: await res.text(), ms: performance.now() - t0 };
}

/** A raw client that sends `request` and never reads a byte of the answer. */
function stalledClient(port: number, request: string): Socket {
  const s = connect(port, '127.0.0.1');
  s.on('error', () => undefined);
  s.write(request);
  s.pause();
  cleanup.push(() => void s.destroy());
  return s;
}

/** Streams `total` bytes, honouring backpressure (a response a client is not reading stops at the buffers). */
function streamBig(res: ServerResponse, total: number): void {
  res.setHeader('content-type', 'application/octet-stream');
  res.setHeader('content-length', String(total));
  const chunk = Buffer.alloc(64 * 1024, 'x');
  let sent = 0;
  const pump = (): void => {
    while (sent < total) {
      sent += chunk.length;
      if (!res.write(chunk)) return void res.once('drain', pump);
    }
    res.end();
  };
  res.on('error', () => undefined);
  pump();
}

/** The queued request's deadline (timeoutMs) in the pool test. */
const QUEUED_TIMEOUT_MS = 800;

describe('timeoutMs counts from the proxy stage; responseIdleTimeoutMs frees the pool', () => {
  it('clients that never read hold every pooled connection: a queued request gets 504 in timeoutMs, then they are cut and the pool serves again', async () => {
    const up = await upstream((req, res) => (req.url === '/big' ? streamBig(res, 256 * 1024 * 1024) : res.end('ok')));
    const g = await gateway({
      upstream: { maxSockets: 2 },
      // The idle cut ten times the deadline: on a busy machine the queued request is sent a while after the stalled
      // responses stopped moving, and it must still find the pool held (at 1500 ms against 800, load 20 freed it first).
      server: { responseIdleTimeoutMs: 10 * QUEUED_TIMEOUT_MS },
      services: { web: { targets: [up.url], timeoutMs: QUEUED_TIMEOUT_MS, retries: 0, eject: NO_EJECT } },
      defaultService: 'web',
    });
    for (let i = 0; i < 2; i++) stalledClient(g.port, 'GET /big HTTP/1.1\r\nHost: gw\r\n\r\n');
    await waitFor(() => up.seen('/big') === 2, 'both big responses started');

    // Both of the target's connections are taken by responses nobody reads: this request waits for one.
    const queued = await call(`${g.url}/ok`);
    expect(queued.status).toBe(504);
    expect(JSON.parse(queued.body).code).toBe('gateway_timeout');
    // On its deadline: not before it, and long before the pool was freed by the idle cut.
    expect(queued.ms).toBeGreaterThanOrEqual(QUEUED_TIMEOUT_MS - 50);
    expect(queued.ms).toBeLessThan(5 * QUEUED_TIMEOUT_MS);
    // It never reached the target (and left no request queued for it).
    expect(up.seen('/ok')).toBe(0);

    // The stalled responses are cut after their idle time, and their connections to the target closed.
    await waitFor(() => up.open() === 0, 'the upstream connections of the stalled clients closed', 30_000);
    const after = await call(`${g.url}/ok`);
    expect(after).toMatchObject({ status: 200, body: 'ok' });
    expect(up.seen('/ok')).toBe(1);
  });

  it('a body that stops arriving: 408 request_timeout after responseIdleTimeoutMs, and the target connection closed', async () => {
    let aborted = 0;
    const up = await upstream((req, res) => {
      req.resume();
      req.on('end', () => res.end('done'));
      req.on('close', () => {
        if (!req.complete) aborted++;
      });
    });
    const g = await gateway({
      server: { responseIdleTimeoutMs: 400 },
      services: { web: { targets: [up.url], timeoutMs: 5000, retries: 0, eject: NO_EJECT } },
      defaultService: 'web',
    });
    const s = connect(g.port, '127.0.0.1');
    cleanup.push(() => void s.destroy());
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    const closed = new Promise<void>((r) => s.once('close', () => r()));
    const t0 = performance.now();
    s.write('POST /orders HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"partial":');
    await closed;
    const ms = performance.now() - t0;
    expect(got.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
    expect(JSON.parse(got.slice(got.indexOf('\r\n\r\n') + 4)).code).toBe('request_timeout');
    // A bound: timing (the body timeout, later under load).
    expect(ms).toBeGreaterThanOrEqual(380);
    expect(ms).toBeLessThan(2000);
    await waitFor(() => aborted === 1 && up.open() === 0, 'the target saw its request cut and its connection closed');
  });
});

describe("a client's body slower than timeoutMs is the client's doing, not the backend's", () => {
  it('ten POSTs whose bodies trickle past the deadline: 408 request_timeout each, not upstreamFailed, and no target ejected', async () => {
    let bodiesSeen = 0;
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      bodiesSeen++;
      req.resume();
      req.on('end', () => res.end('done'));
    };
    const a = await upstream(handler);
    const b = await upstream(handler);
    const g = await startLimitsGateway(
      testConfig({
        server: { host: '127.0.0.1', port: 0, responseIdleTimeoutMs: 3000 },
        selfService: { enabled: false },
        plans: { steady: { perMinute: 1000, perDay: 10_000 } },
        anonymous: { perMinute: 1000 },
        usage: { flushIntervalMs: 60_000 },
        // The default passive ejection: five failures in a row take a target out, at most half the service.
        services: { web: { targets: [a.url, b.url], timeoutMs: 500, retries: 0 } },
        routes: [{ path: '/orders', method: 'POST', service: 'web' }],
      }),
    );
    cleanup.push(() => g.close());
    const { id, key } = await g.createKey({ plan: 'steady' });

    /** A POST whose body comes a byte every 150 ms (never idle for responseIdleTimeoutMs), 40 bytes in all. */
    const trickle = (): Promise<{ head: string; body: string; ms: number }> =>
      new Promise((resolve) => {
        const s = connect(g.port, '127.0.0.1');
        cleanup.push(() => void s.destroy());
        s.on('error', () => undefined);
        let got = '';
        let sent = 0;
        const t0 = performance.now();
        const timer = setInterval(() => {
          if (sent >= 40 || s.destroyed) return clearInterval(timer);
          sent++;
          s.write('x');
        }, 150);
        s.on('data', (d: Buffer) => (got += d.toString('latin1')));
        s.once('close', () => {
          clearInterval(timer);
          const i = got.indexOf('\r\n\r\n');
          resolve({ head: got.slice(0, Math.max(0, i)), body: got.slice(i + 4), ms: performance.now() - t0 });
        });
        s.write(`POST /orders HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key}\r\nContent-Type: text/plain\r\nContent-Length: 40\r\n\r\n`);
      });
    const results = await Promise.all(Array.from({ length: 10 }, () => trickle()));
    for (const r of results) {
      expect(r.head.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
      expect(JSON.parse(r.body)).toMatchObject({ code: 'request_timeout', status: 408 });
      // A bound: timing (the 500 ms deadline, not the 6 s the body would take; later under load).
      expect(r.ms).toBeLessThan(3000);
    }
    // Every one reached a target (it read what came of the body): the deadline, not a refusal, ended them.
    expect(bodiesSeen).toBe(10);

    // The ledger: admitted (their points are spent), none counted against the backend.
    await g.gateway.flushUsage();
    const { totals } = await g.gateway.usage.keyUsage(id, Date.now() - 3_600_000, Date.now() + 1, 'hour');
    expect(totals).toMatchObject({ admitted: 10, upstreamFailed: 0 });
    // Passive health heard nothing: both targets in, no failure in a row.
    const web = g.gateway.services.snapshot().find((s) => s.name === 'web')!;
    expect(web.targets.map((t) => t.state)).toEqual(['healthy', 'healthy']);
    expect(web.targets.map((t) => t.consecutiveFailures)).toEqual([0, 0]);
  });
});

describe('a target that answers before the body arrived', () => {
  it('its answer reaches the client whole; the unfinished upstream request is closed, and the next request is served', async () => {
    const up = await upstream((req, res) => {
      if (req.method === 'POST') {
        res.statusCode = 401;
        res.end('nope');
      } else res.end('fine');
    });
    const g = await gateway({ services: { web: { targets: [up.url], timeoutMs: 3000, retries: 0, eject: NO_EJECT } }, defaultService: 'web' });
    const r = await call(`${g.url}/upload`, {
      method: 'POST',
      body: Buffer.alloc(1_000_000, 'b'),
      headers: { 'content-type': 'application/octet-stream' },
    });
    expect(r).toMatchObject({ status: 401, body: 'nope' });
    expect(await call(`${g.url}/after`)).toMatchObject({ status: 200, body: 'fine' });
    await waitFor(() => up.open() <= 1, 'the connection of the unfinished upload closed');
  });
});

describe('perTryTimeoutMs', () => {
  it('a GET hung on one target is retried on the other within timeoutMs', async () => {
    const hung = await upstream(() => undefined);
    const live = await upstream((_req, res) => res.end('live'));
    const g = await gateway({
      services: { web: { targets: [hung.url, live.url], timeoutMs: 3000, perTryTimeoutMs: 300, retries: 1, eject: NO_EJECT } },
      defaultService: 'web',
    });
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await call(`${g.url}/item`));
    expect(results.map((r) => [r.status, r.body])).toEqual(Array.from({ length: 4 }, () => [200, 'live']));
    // Round-robin sent two first tries to the hung target: each was cut at 300 ms and went to the other.
    expect(hung.seen('/item')).toBe(2);
    expect(live.seen('/item')).toBe(4);
    for (const r of results) expect(r.ms).toBeLessThan(1500);
  });

  it('a single-target service: a slow GET is not cut and sent to the same target again; it gets the whole timeoutMs', async () => {
    const slow = await upstream((_req, res) => void setTimeout(() => res.end('slow but fine'), 600));
    const g = await gateway({
      services: { web: { targets: [slow.url], timeoutMs: 3000, perTryTimeoutMs: 200, retries: 1, eject: NO_EJECT } },
      defaultService: 'web',
    });
    const r = await call(`${g.url}/item`);
    expect(r).toMatchObject({ status: 200, body: 'slow but fine' });
    // Sent once: no second copy of the GET to a target already working on the first.
    expect(slow.seen('/item')).toBe(1);
  });

  it('two targets, one out: the try on the one left is not cut by perTryTimeoutMs either', async () => {
    const slow = await upstream((_req, res) => void setTimeout(() => res.end('slow but fine'), 600));
    const down = await upstream(() => undefined);
    const g = await gateway({
      services: { web: { targets: [slow.url, down.url], timeoutMs: 3000, perTryTimeoutMs: 200, retries: 1, eject: { consecutiveFailures: 1, forMs: 60_000 } } },
      defaultService: 'web',
    });
    const web = g.gateway.services.get('web')!;
    const downTarget = web.targets.find((t) => t.url === down.url)!;
    // Out, as passive ejection takes a target out (by the registry's own clock).
    downTarget.ejectedAt = web.now();
    downTarget.ejectedUntil = web.now() + 60_000;
    const r = await call(`${g.url}/item`);
    expect(r).toMatchObject({ status: 200, body: 'slow but fine' });
    expect(slow.seen('/item')).toBe(1);
  });

  it('the log counts every try, a retry on the same target included', async () => {
    const resetting = await upstream((req) => req.socket.destroy());
    const { logger, lines } = captureLogger('warn');
    const g = await startTestGateway(
      testConfig({
        selfService: { enabled: false },
        services: { web: { targets: [resetting.url], timeoutMs: 3000, retries: 1, eject: NO_EJECT } },
        defaultService: 'web',
      }),
      { logger },
    );
    cleanup.push(() => g.close());
    expect((await call(`${g.url}/item`)).status).toBe(502);
    // A GET reset before its answer is retried; with one target, on the same one: two tries, both seen by it.
    expect(resetting.seen('/item')).toBe(2);
    const failed = lines.filter((l) => l.msg === 'upstream request failed');
    expect(failed).toEqual([expect.objectContaining({ kind: 'reset', tries: 2 })]);
  });

  it('a perTryTimeoutMs not below timeoutMs is refused, naming the field', () => {
    const r = validateConfig({ services: { web: { targets: ['http://127.0.0.1:9'], timeoutMs: 1000, perTryTimeoutMs: 1000 } }, defaultService: 'web' });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors).toEqual([expect.stringContaining('services.web.perTryTimeoutMs')]);
    if (!r.ok) expect(r.errors[0]).toContain("must be below the service's timeoutMs (1000)");
  });

  it('a POST with a body is not retried: 504 at timeoutMs, one try', async () => {
    const hung = await upstream((req) => req.resume());
    const g = await gateway({
      services: { web: { targets: [hung.url], timeoutMs: 600, perTryTimeoutMs: 200, retries: 1, eject: NO_EJECT } },
      defaultService: 'web',
    });
    const r = await call(`${g.url}/orders`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(504);
    // A bound: timing (the 600 ms timeout, later under load).
    expect(r.ms).toBeGreaterThanOrEqual(580);
    expect(hung.seen('/orders')).toBe(1);
  });
});

describe('an upstream that answers 101 to a plain request', () => {
  it('502 bad_gateway at once, instead of a client left waiting', async () => {
    const server = createTcpServer((s) => {
      s.on('error', () => undefined);
      s.once('data', () => s.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => server.close(() => r())));
    const g = await gateway({
      services: { web: { targets: [`http://127.0.0.1:${(server.address() as AddressInfo).port}`], timeoutMs: 5000, retries: 0, eject: NO_EJECT } },
      defaultService: 'web',
    });
    const r = await call(`${g.url}/plain`);
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body).code).toBe('bad_gateway');
    expect(r.ms).toBeLessThan(2000);
  });
});

describe('retries and the client response', () => {
  it('a request tried on four targets (three statuses in retryOn retried) adds no listener per try: no MaxListenersExceededWarning', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    cleanup.push(() => void process.off('warning', onWarning));
    const busy = await Promise.all(Array.from({ length: 4 }, () => upstream((_req, res) => ((res.statusCode = 503), res.end('busy')))));
    const g = await gateway({
      // Three retries: what the retry budget allows one request on a quiet service (3 a second).
      services: { web: { targets: busy.map((u) => u.url), retries: 3, retryOn: [503], eject: NO_EJECT } },
      defaultService: 'web',
    });
    expect(await call(`${g.url}/x`)).toMatchObject({ status: 503, body: 'busy' });
    // Every try went to a target of its own.
    expect(busy.map((u) => u.seen('/x'))).toEqual([1, 1, 1, 1]);
    // A warning is emitted on the next turn of the event loop.
    await new Promise((r) => setImmediate(r));
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
  });
});
