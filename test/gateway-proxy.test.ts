// The proxy stage and the endpoints outside /v1, in process against a real loopback upstream (docs: "The request path", "Error codes"): what reaches the upstream, what comes back, and every failure the gateway answers itself.
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import request from 'supertest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { freePort } from './helpers/redis-server.js';
import { TestUpstream, echo } from './helpers/upstream.js';
import { RawConnection, UUID, leaksIn, rawRequest, startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';

const MAX_BODY = 1024;
// The upstream deadline: long enough that an echo in this same process answers well within it on a busy machine (a
// 200 ms deadline 504'd ordinary requests at load 15); the timeout tests judge against a late answer ten times later.
const TIMEOUT_MS = 2000;
/** When the slow upstream would answer: what the 504 must come well before. */
const LATE_MS = TIMEOUT_MS * 10;
/** The dead gateway's deadline: a refusal must be answered as a refusal, long before it. */
const DEAD_TIMEOUT_MS = 20_000;

let up: TestUpstream;
let gw: TestGateway; // trustProxy false, hideCredentials true
let trusting: TestGateway; // trustProxy true, hideCredentials false
let dead: TestGateway; // upstream port closed
let deadPort: number;

beforeAll(async () => {
  up = await TestUpstream.start();
  gw = await startTestGateway(testConfig({ upstream: { url: up.url, timeoutMs: TIMEOUT_MS }, server: { maxBodyBytes: MAX_BODY } }), {
    upstreamCheckTimeoutMs: 5000,
  });
  trusting = await startTestGateway(
    testConfig({ upstream: { url: up.url, timeoutMs: TIMEOUT_MS, hideCredentials: false }, server: { trustProxy: true, maxBodyBytes: MAX_BODY } }),
  );
  deadPort = await freePort();
  const deadUrl = `http://127.0.0.1:${deadPort}`;
  dead = await startTestGateway(testConfig({ upstream: { url: deadUrl, timeoutMs: DEAD_TIMEOUT_MS } }), { upstreamCheckTimeoutMs: 5000 });
});

afterAll(async () => {
  await gw?.close();
  await trusting?.close();
  await dead?.close();
  await up?.close();
});

beforeEach(() => {
  up.seen.length = 0;
  up.behaviour = echo;
});

type Headers = Record<string, string | string[] | undefined>;

/** A gateway error answer: status, JSON body {code, message, status}, security headers, nothing leaked. */
function expectError(status: number, headers: Headers, text: string, wantStatus: number, code: string): void {
  expect({ status, text }).toMatchObject({ status: wantStatus });
  expect(headers['content-type']).toMatch(/^application\/json/);
  const body = JSON.parse(text) as { code: string; message: string; status: number };
  expect(body).toEqual({ code, message: expect.any(String), status: wantStatus });
  expect(body.message.length).toBeGreaterThan(0);
  expect(headers['x-content-type-options']).toBe('nosniff');
  expect(headers['x-powered-by']).toBeUndefined();
  expect(leaksIn(text)).toEqual([]);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Proves nothing else is on its way to the upstream: a marker request through the same gateway, answered, has reached
 * the upstream, after anything the gateway sent before it. Returns the upstream requests other than the marker.
 */
async function upstreamRequestsBesidesMarker(g: TestGateway): Promise<typeof up.seen> {
  const marker = `/v1/marker-${Math.random().toString(36).slice(2)}`;
  expect((await request(g.url).get(marker)).status).toBe(200);
  return up.seen.filter((r) => r.url !== marker);
}

/** Waits (bounded) until `cond` holds. */
async function until(cond: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(10);
  }
}

describe('forwarding the request', () => {
  it('sends path and query unchanged, /v1 prefix and percent-encoding included', async () => {
    const target = '/v1/categories/a%3Fb%20c/%7Euser?x=1&y=%C3%A9&x=2&empty=&plus=a+b&path=a%2Fb;c';
    const res = await request(gw.url).get(target);
    expect(res.status).toBe(200);
    expect(up.seen).toHaveLength(1);
    expect(up.seen[0]!.url).toBe(target);
    expect(up.seen[0]!.method).toBe('GET');

    await request(gw.url).get('/v1?q=1');
    expect(up.seen[1]!.url).toBe('/v1?q=1');
  });

  it('forwards every method with its body, byte for byte', async () => {
    const body = Buffer.from(JSON.stringify({ name: 'Dog', description: 'x'.repeat(600) }));
    const res = await request(gw.url).post('/v1/categories').set('content-type', 'application/json').send(body.toString());
    expect(res.status).toBe(200);
    expect(up.seen[0]!.method).toBe('POST');
    expect(up.seen[0]!.body.equals(body)).toBe(true);
    expect(up.seen[0]!.headers['content-type']).toBe('application/json');
    expect(up.seen[0]!.headers['content-length']).toBe(String(body.length));

    for (const method of ['put', 'patch', 'delete'] as const) {
      const r = await request(gw.url)[method]('/v1/categories/7').send({ a: 1 });
      expect(r.status).toBe(200);
      expect(up.seen.at(-1)!.method).toBe(method.toUpperCase());
    }
  });

  it('streams a chunked body: the upstream sees the first chunk before the client sends the second', async () => {
    let firstChunkSeen: () => void = () => {};
    const firstChunk = new Promise<void>((r) => (firstChunkSeen = r));
    const received: Buffer[] = [];
    const streamingUpstream: Server = createServer((req, res) => {
      req.on('data', (c: Buffer) => {
        received.push(c);
        firstChunkSeen();
      });
      req.on('end', () => res.end(JSON.stringify({ bytes: Buffer.concat(received).length })));
    });
    await new Promise<void>((r) => streamingUpstream.listen(0, '127.0.0.1', r));
    const streamingGw = await startTestGateway(
      testConfig({ upstream: { url: `http://127.0.0.1:${(streamingUpstream.address() as AddressInfo).port}` }, server: { maxBodyBytes: MAX_BODY } }),
    );
    try {
      const done = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port: streamingGw.port, method: 'POST', path: '/v1/stream' }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject);
        req.write('a'.repeat(100));
        const guard = setTimeout(() => reject(new Error('first chunk never reached the upstream: the body is buffered')), 30_000);
        void firstChunk.then(() => {
          clearTimeout(guard);
          req.end('b'.repeat(100));
        });
      });
      const res = await done;
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual({ bytes: 200 });
    } finally {
      await streamingGw.close();
      streamingUpstream.closeAllConnections();
      await new Promise<void>((r) => streamingUpstream.close(() => r()));
    }
  });

  it('sets X-Forwarded-For to the peer and ignores client forwarding headers when trustProxy is false', async () => {
    await request(gw.url).get('/v1/whoami').set('X-Forwarded-For', '6.6.6.6').set('X-Forwarded-Proto', 'https').set('X-Forwarded-Host', 'evil.example');
    const h = up.seen[0]!.headers;
    expect(h['x-forwarded-for']).toBe('127.0.0.1');
    expect(h['x-forwarded-proto']).toBe('http');
    expect(h['x-forwarded-host']).toBe(`127.0.0.1:${gw.port}`);
    // The upstream's own Host, not the client's (changeOrigin).
    expect(h.host).toBe(`127.0.0.1:${up.port}`);
  });

  it('sets X-Forwarded-For/Proto/Host without any client forwarding headers', async () => {
    await request(gw.url).get('/v1/whoami');
    const h = up.seen[0]!.headers;
    expect(h['x-forwarded-for']).toBe('127.0.0.1');
    expect(h['x-forwarded-proto']).toBe('http');
    expect(h['x-forwarded-host']).toBe(`127.0.0.1:${gw.port}`);
  });

  it("keeps X-Forwarded-Host and the upstream's Host when the client lists Host in Connection", async () => {
    const res = await rawRequest(gw.port, ['GET /v1/whoami HTTP/1.1', 'Host: api.example', 'Connection: host']);
    expect(res.status).toBe(200);
    const h = up.seen[0]!.headers;
    expect(h['x-forwarded-host']).toBe('api.example');
    expect(h.host).toBe(`127.0.0.1:${up.port}`);
  });

  it('appends the peer to the client X-Forwarded-For when trustProxy is true', async () => {
    await request(trusting.url).get('/v1/whoami').set('X-Forwarded-For', '6.6.6.6, 10.0.0.1').set('X-Forwarded-Proto', 'https');
    const h = up.seen[0]!.headers;
    expect(h['x-forwarded-for']).toBe('6.6.6.6, 10.0.0.1, 127.0.0.1');
    expect(h['x-forwarded-proto']).toBe('https');

    await request(trusting.url).get('/v1/whoami');
    expect(up.seen[1]!.headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  it('generates an X-Request-Id (uuid), sends it upstream and returns it', async () => {
    const res = await request(gw.url).get('/v1/rid');
    const id = res.headers['x-request-id'];
    expect(id).toMatch(UUID);
    expect(up.seen[0]!.headers['x-request-id']).toBe(id);

    const again = await request(gw.url).get('/v1/rid');
    expect(again.headers['x-request-id']).toMatch(UUID);
    expect(again.headers['x-request-id']).not.toBe(id);
  });

  it("keeps a caller's sane X-Request-Id and replaces an insane one", async () => {
    const sane = 'req-2026.06/01:abc_DEF+9=';
    const res = await request(gw.url).get('/v1/rid').set('X-Request-Id', sane);
    expect(res.headers['x-request-id']).toBe(sane);
    expect(up.seen[0]!.headers['x-request-id']).toBe(sane);

    for (const insane of ['has spaces in it', 'x'.repeat(200), 'a"b', 'id;drop']) {
      up.seen.length = 0;
      const r = await request(gw.url).get('/v1/rid').set('X-Request-Id', insane);
      const id = r.headers['x-request-id'];
      expect(id).toMatch(UUID);
      expect(up.seen[0]!.headers['x-request-id']).toBe(id);
    }
  });

  it('the request id on an error answer is the one the caller sent', async () => {
    const res = await request(gw.url).get('/nowhere').set('X-Request-Id', 'trace-404');
    expect(res.status).toBe(404);
    expect(res.headers['x-request-id']).toBe('trace-404');
  });

  it('never forwards client-sent X-Consumer-Id or X-Consumer-Plan', async () => {
    await request(gw.url).get('/v1/me').set('X-Consumer-Id', 'admin').set('X-Consumer-Plan', 'enterprise');
    expect(up.seen[0]!.headers['x-consumer-id']).toBeUndefined();
    expect(up.seen[0]!.headers['x-consumer-plan']).toBeUndefined();
  });

  it('drops client headers an upstream folding "_" into "-" reads as the gateway\'s own (X_Consumer_Id, X_Forwarded_For, ...); others with "_" pass', async () => {
    // CGI/WSGI, PHP-FPM and nginx with underscores_in_headers read X_Consumer_Id as X-Consumer-Id: forwarded, it
    // would join the gateway's own value (`key_real,key_VICTIM`). A trusting gateway, so a real X-Forwarded-For is
    // still appended to.
    const key = generateKey();
    const g = await startTestGateway(
      testConfig({ upstream: { url: up.url }, server: { trustProxy: true }, keys: [{ id: 'key_real', plan: 'pro', sha256: hashKey(key) }] }),
      { keyStages: true },
    );
    try {
      const spoofs = [
        'X_Consumer_Id: key_VICTIM',
        'x_consumer-id: key_VICTIM',
        'X-Consumer_Id: key_VICTIM',
        'X_Consumer_Plan: enterprise',
        'X_CONSUMER_SCOPES: admin',
        'X-Consumer-Groups: admin',
        'X-Consumer-Metadata-Tier: spoofed',
        'X_Consumer_Metadata_Billing_Id: spoofed',
        'X_Forwarded_For: 6.6.6.6',
        'X_Forwarded_Host: evil.example',
        'X-Forwarded_Proto: spoofed',
        'X-Forwarded-Port: 6666',
        'X_Forwarded_Prefix: /evil',
        'X_Request_Id: spoofed-id',
        'X_Real_IP: 6.6.6.6',
        'X-Real-IP: 6.6.6.6',
        'Forwarded: for=6.6.6.6;host=evil.example',
      ];
      const res = await rawRequest(g.port, [
        'GET /v1/me HTTP/1.1',
        'Host: api.example',
        'X-Forwarded-For: 10.1.1.1',
        'X-Request-Id: trace-1',
        `Authorization: Bearer ${key}`,
        ...spoofs,
        'X_Custom_Thing: kept',
        'X-Other_Header: kept too',
        'Connection: close',
      ]);
      expect(res.status).toBe(200);
      const seen = up.seen[0]!;
      // The gateway's own, once each and with its values.
      expect(seen.headers).toMatchObject({
        'x-consumer-id': 'key_real',
        'x-consumer-plan': 'pro',
        'x-forwarded-for': '10.1.1.1, 127.0.0.1',
        'x-forwarded-host': 'api.example',
        'x-forwarded-proto': 'http',
        'x-request-id': 'trace-1',
      });
      const names = seen.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase().replaceAll('_', '-'));
      const owned = names.filter(
        (n) => n.startsWith('x-consumer-') || n.startsWith('x-forwarded-') || n === 'x-request-id' || n === 'x-real-ip' || n === 'forwarded',
      );
      expect(owned.sort()).toEqual(['x-consumer-id', 'x-consumer-plan', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-request-id']);
      const raw = JSON.stringify(seen.rawHeaders);
      for (const spoof of ['key_VICTIM', 'enterprise', 'admin', '6.6.6.6', 'evil.example', 'spoofed', '6666']) expect(raw).not.toContain(spoof);
      // Unrelated headers with underscores go through as sent.
      expect(seen.headers.x_custom_thing).toBe('kept');
      expect(seen.headers['x-other_header']).toBe('kept too');
    } finally {
      await g.close();
    }
  });

  it('strips Authorization when hideCredentials is true and keeps it when false', async () => {
    await request(gw.url).get('/v1/me').set('Authorization', 'Bearer secret-key-123');
    expect(up.seen[0]!.headers.authorization).toBeUndefined();
    expect(JSON.stringify(up.seen[0]!.rawHeaders)).not.toContain('secret-key-123');

    await request(trusting.url).get('/v1/me').set('Authorization', 'Bearer secret-key-123');
    expect(up.seen[1]!.headers.authorization).toBe('Bearer secret-key-123');
  });

  it('strips hop-by-hop request headers, including those the client lists in Connection', async () => {
    const res = await rawRequest(gw.port, [
      'GET /v1/hop HTTP/1.1',
      `Host: 127.0.0.1:${gw.port}`,
      'Connection: x-foo, close',
      'X-Foo: secret',
      'X-Kept: yes',
      // Names that are also Object.prototype properties are headers like any other.
      'Constructor: kept-too',
      'Keep-Alive: timeout=5',
      'TE: trailers',
      'Proxy-Authorization: Basic dXNlcjpwYXNz',
      'Proxy-Connection: keep-alive',
      'Trailer: X-Checksum',
    ]);
    expect(res.status).toBe(200);
    const h = up.seen[0]!.headers;
    expect(h['x-kept']).toBe('yes');
    expect(Object.hasOwn(h, 'constructor') ? h.constructor : undefined).toBe('kept-too');
    // Trailer only ever goes with a chunked body (this GET has none); TE is the gateway's own, for a client that keeps
    // trailers (http-intermediary.test.ts).
    for (const name of ['x-foo', 'keep-alive', 'proxy-authorization', 'proxy-connection', 'trailer']) expect(h[name], name).toBeUndefined();
    expect(h.te).toBe('trailers');
    expect(h.connection ?? '').not.toMatch(/x-foo/i);
  });

  it('expects no 100-continue from the upstream: Expect is answered by the gateway and not forwarded', async () => {
    const conn = await RawConnection.open(gw.port);
    try {
      conn.write(
        `${['POST /v1/expect HTTP/1.1', 'Host: x', 'Content-Type: text/plain', 'Content-Length: 5', 'Expect: 100-continue', 'Connection: close'].join('\r\n')}\r\n\r\n`,
      );
      const cont = await conn.read();
      expect(cont.status).toBe(100);
      conn.write('hello');
      const res = await conn.read();
      expect(res.status).toBe(200);
      expect(up.seen[0]!.body.toString()).toBe('hello');
      expect(up.seen[0]!.headers.expect).toBeUndefined();
    } finally {
      conn.destroy();
    }
  });

  it('Expect: 100-continue with a body over the limit: 413 at once, no 100 first, body never asked for, connection closed', async () => {
    const conn = await RawConnection.open(gw.port);
    try {
      conn.write(
        `${['PUT /v1/expect-big HTTP/1.1', 'Host: x', 'Content-Type: text/plain', `Content-Length: ${MAX_BODY + 1}`, 'Expect: 100-continue'].join('\r\n')}\r\n\r\n`,
      );
      const res = await conn.read();
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'payload_too_large', status: 413 });
      expect(res.headers.connection).toBe('close');
      expect(await conn.closedWithin(2000)).toBe(true);
      expect(up.seen).toEqual([]);
    } finally {
      conn.destroy();
    }
  });
});

describe('passing the response back', () => {
  it("passes the upstream's status, body and headers through untouched (its 400 error body included)", async () => {
    const errorBody = '{"code":"invalid_request","message":"name: required","status":400,"extra":[1,2]}';
    up.behaviour = (_req, res) => {
      res.statusCode = 400;
      res.setHeader('content-type', 'application/json; charset=utf-8');
      res.setHeader('x-upstream-thing', 'yes');
      res.setHeader('cache-control', 'no-store');
      res.end(errorBody);
    };
    const res = await request(gw.url).post('/v1/categories').send({});
    expect(res.status).toBe(400);
    expect(res.text).toBe(errorBody);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.headers['x-upstream-thing']).toBe('yes');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('passes 201 with Location, 204 and 404 from the upstream through', async () => {
    up.behaviour = (req, res) => {
      if (req.url === '/v1/created') {
        res.writeHead(201, { location: '/v1/categories/42', 'content-type': 'application/json' });
        res.end('{"id":42}');
      } else if (req.url === '/v1/empty') {
        res.writeHead(204).end();
      } else {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","message":"no pet","status":404}');
      }
    };
    const created = await request(gw.url).post('/v1/created').send({ name: 'x' });
    expect(created.status).toBe(201);
    expect(created.headers.location).toBe('/v1/categories/42');
    expect(created.body).toEqual({ id: 42 });
    expect((await request(gw.url).delete('/v1/empty')).status).toBe(204);
    const missing = await request(gw.url).get('/v1/pets/99');
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ code: 'not_found', message: 'no pet', status: 404 });
  });

  it('strips hop-by-hop response headers, those the upstream lists in Connection, and X-Powered-By', async () => {
    up.behaviour = (_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.setHeader('connection', 'x-bar');
      res.setHeader('x-bar', 'upstream-internal');
      res.setHeader('keep-alive', 'timeout=999');
      res.setHeader('proxy-connection', 'keep-alive');
      res.setHeader('x-powered-by', 'Express');
      res.setHeader('x-kept', 'yes');
      res.end('{}');
    };
    const res = await rawRequest(gw.port, ['GET /v1/hop HTTP/1.1', 'Host: x']);
    expect(res.status).toBe(200);
    expect(res.headers['x-kept']).toBe('yes');
    expect(res.headers['x-bar']).toBeUndefined();
    expect(res.headers['proxy-connection']).toBeUndefined();
    expect(res.headers['keep-alive'] ?? '').not.toContain('999');
    expect(res.headers.connection ?? '').not.toMatch(/x-bar/i);
    expect(res.headers['x-powered-by']).toBeUndefined();
    expect(res.head).not.toMatch(/x-powered-by/i);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it("keeps the gateway's own headers over the upstream's (X-Request-Id, security headers)", async () => {
    up.behaviour = (_req, res) => {
      res.setHeader('x-request-id', 'upstream-made-this');
      res.setHeader('x-content-type-options', 'sniff-away');
      res.end('ok');
    };
    const res = await request(gw.url).get('/v1/x').set('X-Request-Id', 'mine');
    expect(res.headers['x-request-id']).toBe('mine');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('sends the security headers of a JSON API and none of the HTML-only ones, on proxied and error answers', async () => {
    up.behaviour = echo;
    for (const path of ['/v1/x', '/nowhere']) {
      const res = await request(gw.url).get(path);
      expect(res.headers).toMatchObject({
        'content-security-policy': "default-src 'none';frame-ancestors 'none'",
        'x-content-type-options': 'nosniff',
        'x-frame-options': 'DENY',
        'strict-transport-security': expect.stringMatching(/^max-age=\d+/),
        'referrer-policy': 'no-referrer',
        'cross-origin-resource-policy': 'same-origin',
      });
      for (const html of [
        'cross-origin-opener-policy',
        'origin-agent-cluster',
        'x-dns-prefetch-control',
        'x-download-options',
        'x-permitted-cross-domain-policies',
        'x-xss-protection',
      ]) {
        expect(res.headers[html], `${path}: ${html}`).toBeUndefined();
      }
    }
  });

  it("honours the client's Connection: close even when the upstream keeps its own connection alive", async () => {
    const conn = await RawConnection.open(gw.port);
    try {
      conn.write('GET /v1/close HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      const res = await conn.read();
      expect(res.status).toBe(200);
      expect(res.headers.connection).toBe('close');
      expect(await conn.closedWithin(1000)).toBe(true);
    } finally {
      conn.destroy();
    }
  });

  it('keeps a client keep-alive connection open across requests', async () => {
    const conn = await RawConnection.open(gw.port);
    try {
      for (let i = 0; i < 3; i++) {
        conn.write(`GET /v1/ka/${i} HTTP/1.1\r\nHost: x\r\n\r\n`);
        const res = await conn.read();
        expect(res.status).toBe(200);
        expect(res.headers.connection).toBe('keep-alive');
        // The server's idle timeout, as Node states it on its own answers (not the upstream's own hint).
        expect(res.headers['keep-alive']).toBe(`timeout=${Math.floor(gw.server.keepAliveTimeout / 1000)}`);
      }
      expect(up.seen.map((s) => s.url)).toEqual(['/v1/ka/0', '/v1/ka/1', '/v1/ka/2']);
    } finally {
      conn.destroy();
    }
  });

  it('reuses one keep-alive upstream socket for sequential requests', async () => {
    const sockets = new Set<unknown>();
    up.behaviour = (req, res, body) => {
      sockets.add(req.socket);
      echo(req, res, body);
    };
    for (let i = 0; i < 6; i++) expect((await request(gw.url).get(`/v1/pool/${i}`)).status).toBe(200);
    expect(up.seen).toHaveLength(6);
    expect(sockets.size).toBe(1);
    expect(up.seen.every((s) => s.headers.connection === 'keep-alive')).toBe(true);
  });
});

describe('upstream failures', () => {
  it('answers 502 bad_gateway (not 504) when the upstream refuses the connection', async () => {
    const started = Date.now();
    const res = await request(dead.url).get('/v1/categories');
    expectError(res.status, res.headers, res.text, 502, 'bad_gateway');
    expect(res.text).not.toContain(String(deadPort));
    // On the refusal, not on the deadline.
    expect(Date.now() - started).toBeLessThan(DEAD_TIMEOUT_MS / 2);
  });

  it('answers 502 bad_gateway when the upstream resets the socket before answering', async () => {
    up.behaviour = (req) => req.socket.destroy();
    const res = await request(gw.url).get('/v1/reset');
    expectError(res.status, res.headers, res.text, 502, 'bad_gateway');
    // The gateway recovers: the next request gets a fresh upstream connection.
    up.behaviour = echo;
    expect((await request(gw.url).get('/v1/after-reset')).status).toBe(200);
  });

  it('answers 504 gateway_timeout when the upstream sends no headers within timeoutMs', async () => {
    let upstreamClosed = false;
    up.behaviour = (_req, res) => {
      res.on('close', () => (upstreamClosed = true));
      const t = setTimeout(() => res.end('late'), LATE_MS);
      res.on('close', () => clearTimeout(t));
    };
    const started = Date.now();
    const res = await request(gw.url).get('/v1/slow');
    const elapsed = Date.now() - started;
    expectError(res.status, res.headers, res.text, 504, 'gateway_timeout');
    // On the gateway's deadline: not before it, and long before the upstream's late answer (however busy the machine,
    // a 504 sent at the deadline does not take nine deadlines more to arrive).
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(elapsed).toBeLessThan(LATE_MS / 2);
    // The abandoned upstream request is cancelled, not left running.
    await until(() => upstreamClosed);
  });

  it('does not time out an upstream that sent its headers in time but streams the body slowly', async () => {
    up.behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first ');
      setTimeout(() => res.end('last'), TIMEOUT_MS * 1.5);
    };
    const res = await request(gw.url).get('/v1/slow-body');
    expect(res.status).toBe(200);
    expect(res.text).toBe('first last');
  });

  it('counts upstream errors by kind in /metrics', async () => {
    up.behaviour = (req) => req.socket.destroy();
    await request(gw.url).get('/v1/reset');
    await request(dead.url).get('/v1/refused');
    const gwMetrics = (await request(gw.url).get('/metrics')).text;
    expect(gwMetrics).toMatch(/^tollgate_upstream_errors_total\{kind="reset"\} [1-9]/m);
    const deadMetrics = (await request(dead.url).get('/metrics')).text;
    expect(deadMetrics).toMatch(/^tollgate_upstream_errors_total\{kind="refused"\} [1-9]/m);
  });
});

describe('request body limits', () => {
  it('answers 413 payload_too_large when Content-Length exceeds maxBodyBytes, without calling the upstream', async () => {
    const conn = await RawConnection.open(gw.port);
    try {
      conn.write(
        `${['POST /v1/upload HTTP/1.1', 'Host: x', 'Content-Type: application/octet-stream', `Content-Length: ${MAX_BODY + 1}`].join('\r\n')}\r\n\r\n`,
      );
      const res = await conn.read();
      expectError(res.status, res.headers, res.body, 413, 'payload_too_large');
      expect(res.headers.connection).toBe('close');
      expect(await conn.closedWithin(1000)).toBe(true);
    } finally {
      conn.destroy();
    }
    expect(await upstreamRequestsBesidesMarker(gw)).toEqual([]);
  });

  it('answers 413 to a real oversized upload with Content-Length', async () => {
    const res = await request(gw.url)
      .post('/v1/upload')
      .set('content-type', 'application/octet-stream')
      .send(Buffer.alloc(MAX_BODY * 3, 97));
    expectError(res.status, res.headers, res.text, 413, 'payload_too_large');
    expect(await upstreamRequestsBesidesMarker(gw)).toEqual([]);
  });

  it('accepts a body of exactly maxBodyBytes', async () => {
    const res = await request(gw.url).post('/v1/upload').set('content-type', 'application/octet-stream').send(Buffer.alloc(MAX_BODY, 97));
    expect(res.status).toBe(200);
    expect(up.seen[0]!.body.length).toBe(MAX_BODY);
  });

  it('counts a chunked body while it streams and aborts the upstream request past the limit (413)', async () => {
    let upstreamAborted = false;
    let upstreamGotRequest = false;
    // The upstream's request never ends, so TestUpstream.seen stays empty; watch its raw request instead.
    const watch = (req: import('node:http').IncomingMessage) => {
      if (req.url !== '/v1/chunked-big') return;
      upstreamGotRequest = true;
      req.on('close', () => (upstreamAborted = !req.complete));
    };
    const upServer = (up as unknown as { server: Server }).server;
    upServer.on('request', watch);
    try {
      const result = await new Promise<{ status: number; headers: IncomingHttpHeaders; body: string; sent: number }>((resolve, reject) => {
        let sent = 0;
        let answered = false;
        const req = httpRequest(
          { host: '127.0.0.1', port: gw.port, method: 'POST', path: '/v1/chunked-big', headers: { 'content-type': 'application/octet-stream' } },
          (res) => {
            answered = true;
            let body = '';
            res.on('data', (d: Buffer) => (body += d.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, sent }));
            res.on('error', reject);
          },
        );
        req.on('error', (err) => {
          if (!answered) reject(err);
        });
        let i = 0;
        const tick = setInterval(() => {
          if (answered || i >= 40) {
            clearInterval(tick);
            if (!answered) req.end();
            return;
          }
          i++;
          sent += 256;
          req.write(Buffer.alloc(256, 98));
        }, 10);
      });
      expect(result.headers['transfer-encoding']).toBeUndefined();
      expectError(result.status, result.headers, result.body, 413, 'payload_too_large');
      expect(result.sent).toBeLessThan(40 * 256);
      expect(upstreamGotRequest).toBe(true);
      await until(() => upstreamAborted);
      expect(up.seen).toEqual([]);
    } finally {
      upServer.off('request', watch);
    }
  });

  it('passes a chunked body under the limit', async () => {
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: gw.port, method: 'POST', path: '/v1/chunked-small' }, (r) => {
        let body = '';
        r.on('data', (d: Buffer) => (body += d.toString()));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.write('a'.repeat(300));
      req.write('b'.repeat(300));
      req.end('c'.repeat(300));
    });
    expect(res.status).toBe(200);
    expect(up.seen[0]!.headers['transfer-encoding']).toBe('chunked');
    expect(up.seen[0]!.body.toString()).toBe('a'.repeat(300) + 'b'.repeat(300) + 'c'.repeat(300));
  });
});

describe('only the configured upstream is contacted', () => {
  it('reduces an absolute-form request target to its path and query', async () => {
    const res = await rawRequest(gw.port, ['GET http://other.invalid/v1/categories?x=1 HTTP/1.1', 'Host: other.invalid', 'Connection: close']);
    expect(res.status).toBe(200);
    expect(up.seen).toHaveLength(1);
    expect(up.seen[0]!.url).toBe('/v1/categories?x=1');
    expect(up.seen[0]!.headers.host).toBe(`127.0.0.1:${up.port}`);
  });

  it('serves ops endpoints and 404s in absolute form too, never proxying them', async () => {
    const health = await rawRequest(gw.port, ['GET http://other.invalid/healthz HTTP/1.1', 'Host: other.invalid', 'Connection: close']);
    expect(health.status).toBe(200);
    const other = await rawRequest(gw.port, ['GET https://other.invalid:8443/admin HTTP/1.1', 'Host: other.invalid', 'Connection: close']);
    expectError(other.status, other.headers, other.body, 404, 'not_found');
    expect(up.seen).toEqual([]);
  });

  it('never treats a //host path as another host', async () => {
    const outside = await rawRequest(gw.port, ['GET //other.invalid/v1/categories HTTP/1.1', 'Host: x', 'Connection: close']);
    expectError(outside.status, outside.headers, outside.body, 404, 'not_found');
    expect(up.seen).toEqual([]);

    const inside = await rawRequest(gw.port, ['GET /v1//other.invalid/categories HTTP/1.1', 'Host: x', 'Connection: close']);
    expect(inside.status).toBe(200);
    expect(up.seen).toHaveLength(1);
    expect(up.seen[0]!.url).toBe('/v1//other.invalid/categories');
    expect(up.seen[0]!.headers.host).toBe(`127.0.0.1:${up.port}`);
  });
});

describe('outside /v1', () => {
  it('answers 404 not_found JSON for everything that is not an ops endpoint, without calling the upstream', async () => {
    for (const [method, path] of [
      ['get', '/'],
      ['get', '/v2/categories'],
      ['get', '/v1x/categories'],
      ['get', '/categories'],
      ['post', '/healthz'],
      ['delete', '/metrics'],
      ['get', '/healthz/extra'],
    ] as const) {
      const res = await request(gw.url)[method](path);
      expect(res.status, `${method} ${path}`).toBe(404);
      expectError(res.status, res.headers, res.text, 404, 'not_found');
    }
    expect(up.seen).toEqual([]);
  });

  it('GET /healthz answers 200 with security headers, even with the upstream down', async () => {
    for (const g of [gw, dead]) {
      const res = await request(g.url).get('/healthz');
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('GET /readyz answers 200 when the upstream answers', async () => {
    const res = await request(gw.url).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body.checks).toEqual({ upstream: 'up' });
    // Any HTTP answer from the upstream counts as up; /readyz is not itself proxied.
    expect(up.seen.map((s) => s.url)).toEqual(['/healthz']);
  });

  it('GET /readyz answers 503 naming the upstream when it is down', async () => {
    const res = await request(dead.url).get('/readyz');
    expectError(
      res.status,
      res.headers,
      JSON.stringify({ code: res.body.code, message: res.body.message, status: res.body.status }),
      503,
      'service_unavailable',
    );
    expect(res.body.message).toContain('upstream');
    expect(res.body.checks).toEqual({ upstream: 'down' });
    expect(leaksIn(res.text)).toEqual([]);
  });

  it('GET /metrics exposes request counts by route, method and status, and upstream latency', async () => {
    await request(gw.url).get('/v1/metrics-probe');
    await request(gw.url).post('/v1/metrics-probe').send({});
    await request(gw.url).get('/no-such-thing');
    const res = await request(gw.url).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    const line = (route: string, method: string, status: string) =>
      new RegExp(
        `^tollgate_http_requests_total\\{(?=[^}]*route="${route.replace(/[*/]/g, '\\$&')}")(?=[^}]*method="${method}")(?=[^}]*status="${status}")[^}]*\\} [1-9]`,
        'm',
      );
    expect(res.text).toMatch(line('/v1/*', 'GET', '200'));
    expect(res.text).toMatch(line('/v1/*', 'POST', '200'));
    expect(res.text).toMatch(line('unmatched', 'GET', '404'));
    expect(res.text).toMatch(/^tollgate_upstream_duration_seconds_count\{status="200"\} [1-9]/m);
    expect(res.text).toMatch(/^tollgate_upstream_duration_seconds_bucket\{le="0\.1",status="200"\} \d+/m);
    expect(res.text).toMatch(/^tollgate_http_request_duration_seconds_count\{route="\/v1\/\*"\} [1-9]/m);
  });
});

describe('request logs', () => {
  it('log one line per request with id, method, URL and status, and never a key pasted into the URL', async () => {
    const { captureLogger } = await import('./helpers/limits.js');
    const { generateKey } = await import('../src/keys/format.js');
    const cap = captureLogger('info');
    const logged = await startTestGateway(testConfig({ upstream: { url: up.url } }), { logger: cap.logger });
    try {
      const key = generateKey();
      const res = await request(logged.url).get(`/v1/categories?api_key=${key}&x=1`).set('x-request-id', 'log-test-1');
      expect(res.status).toBe(200);
      const line = cap.lines.find((l) => (l.req as { id?: string } | undefined)?.id === 'log-test-1');
      expect(line).toBeDefined();
      expect(line!.req).toMatchObject({ method: 'GET', url: '/v1/categories?api_key=tg_[redacted]&x=1' });
      expect(line!.res).toEqual({ statusCode: 200 });
      expect(JSON.stringify(cap.lines)).not.toContain(key);
    } finally {
      await logged.close();
    }
  });

  it('a key sent as X-Request-Id is not taken as the id: a UUID replaces it in the response, upstream and logs, and the key is in no log line', async () => {
    const { captureLogger } = await import('./helpers/limits.js');
    const { generateKey } = await import('../src/keys/format.js');
    const cap = captureLogger('info');
    const logged = await startTestGateway(testConfig({ upstream: { url: up.url } }), { logger: cap.logger });
    try {
      const key = generateKey();
      const ids: Array<string | undefined> = [];
      for (const given of [key, `trace-${key}`]) {
        up.seen.length = 0;
        const res = await request(logged.url).get('/v1/categories').set('x-request-id', given);
        expect(res.status).toBe(200);
        const id = res.headers['x-request-id'];
        ids.push(id);
        expect(id).toMatch(UUID);
        expect(up.seen[0]!.headers['x-request-id']).toBe(id);
        expect(JSON.stringify(up.seen[0]!.rawHeaders)).not.toContain(key);
        expect(cap.lines.some((l) => (l.req as { id?: string } | undefined)?.id === id)).toBe(true);
      }
      const bad = await request(logged.url).get('/nowhere').set('x-request-id', key);
      expect(bad.status).toBe(404);
      expect(bad.headers['x-request-id']).toMatch(UUID);
      ids.push(bad.headers['x-request-id']);
      // One access log line per request, each under the id it was answered with.
      const access = cap.lines.filter((l) => l.msg === 'request completed');
      expect(access.map((l) => (l.req as { id?: string } | undefined)?.id)).toEqual(ids);
      expect(JSON.stringify(cap.lines)).not.toContain(key);
    } finally {
      await logged.close();
    }
  });

  it('a request its client abandons is logged once, marked aborted, and not counted as answered in the metrics', async () => {
    const { captureLogger } = await import('./helpers/limits.js');
    const cap = captureLogger('info');
    const logged = await startTestGateway(testConfig({ upstream: { url: up.url } }), { logger: cap.logger });
    let upstreamGotIt = false;
    up.behaviour = (_req, res) => {
      upstreamGotIt = true;
      const t = setTimeout(() => res.end('late'), LATE_MS);
      res.on('close', () => clearTimeout(t));
    };
    try {
      const port = new URL(logged.url).port;
      const client = httpRequest({ host: '127.0.0.1', port, path: '/v1/abandoned', headers: { 'x-request-id': 'log-abandoned' } });
      client.on('error', () => {});
      client.end();
      await until(() => upstreamGotIt);
      client.destroy();
      const line = () => cap.lines.filter((l) => (l.req as { id?: string } | undefined)?.id === 'log-abandoned');
      await until(() => line().length > 0);
      // A later request's line marks that the abandoned one's close events are all handled (lines go out in order).
      up.behaviour = echo;
      expect((await request(logged.url).get('/v1/answered').set('x-request-id', 'log-answered')).status).toBe(200);
      await until(() => cap.lines.some((l) => (l.req as { id?: string } | undefined)?.id === 'log-answered'));
      expect(line()).toHaveLength(1);
      expect(line()[0]).toMatchObject({ level: 30, aborted: true, req: { method: 'GET', url: '/v1/abandoned' }, msg: 'request aborted' });
      expect(typeof line()[0]!.responseTime).toBe('number');
      // The answered request is counted; the abandoned one is not (it has no status the client saw).
      const metrics = (await request(logged.url).get('/metrics')).text;
      expect(metrics).toMatch(/tollgate_http_requests_total\{route="\/v1\/\*",method="GET",status="200"\} 1\n/);
    } finally {
      await logged.close();
    }
  });

  it('a 5xx the gateway answers on purpose is logged at error level with its status and no stack trace', async () => {
    const { captureLogger } = await import('./helpers/limits.js');
    const cap = captureLogger('info');
    const closedPort = await freePort();
    const logged = await startTestGateway(testConfig({ upstream: { url: `http://127.0.0.1:${closedPort}` } }), { logger: cap.logger });
    try {
      const res = await request(logged.url).get('/v1/categories').set('x-request-id', 'log-test-502');
      expect(res.status).toBe(502);
      const line = cap.lines.find((l) => (l.req as { id?: string } | undefined)?.id === 'log-test-502');
      expect(line).toMatchObject({ level: 50, res: { statusCode: 502 } });
      expect(JSON.stringify(line)).not.toMatch(/stack|at \w+ \(/);
    } finally {
      await logged.close();
    }
  });
});
