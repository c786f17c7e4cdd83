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
