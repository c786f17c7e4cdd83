// Request validation on the request path, through a real gateway (composed as `tollgate serve` composes it, on a real
// redis-server, with its admin listener) in front of real upstreams on loopback. One order-service document is served
// twice: under /shop in enforce mode (400 invalid_request listing every problem, the upstream never called) and
// under /shadow in shadow mode (proxied, counted in the metric, the ledger's validationFailed and the invalid-request
// report, the first failing pointer logged without the key). A JSON body is read whole and the upstream gets exactly
// those bytes; any other body still streams (the upstream sees its first chunk before the client has sent the rest).
//
// The routes are made from test/fixtures/openapi/orders-3.0.yaml by the stand-in in helpers/openapi-operations.ts;
// with the document loader, the same gateway is `services.<name>.openapi: { file, basePath, validate }`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { generateAdminToken } from '../src/admin/tokens.js';
import { metricValue } from './helpers/limits.js';
import { startDocumentGateway } from './helpers/openapi-operations.js';
import { useStack } from './helpers/stack.js';
import { OpenApiDocument } from './helpers/openapi.js';
import type { TestRedis } from './helpers/redis-server.js';
import type { TestUpstream } from './helpers/upstream.js';

const TOKEN = generateAdminToken();
const MAX_BODY = 4096;
const IDLE_MS = 600;
const DOC = 'orders-3.0.yaml';
const adminDoc = new OpenApiDocument(new URL('../docs/admin.openapi.yaml', import.meta.url));

/** A second upstream that answers as soon as a request's first body chunk arrives (and says when it did). */
class FirstChunkUpstream {
  readonly firstChunk: Array<Promise<void>> = [];
  private resolveNext: (() => void) | undefined;
  private constructor(readonly server: Server) {}
  static async start(): Promise<FirstChunkUpstream> {
    const up = new FirstChunkUpstream(createServer());
    up.server.on('request', (req: IncomingMessage, res) => {
      let told = false;
      req.on('data', () => {
        if (!told) up.resolveNext?.();
        told = true;
      });
      req.on('end', () => res.end('done'));
    });
    await new Promise<void>((r) => up.server.listen(0, '127.0.0.1', r));
    return up;
  }
  /** Resolves when the next request's first chunk arrives. */
  nextFirstChunk(): Promise<void> {
    return new Promise((r) => (this.resolveNext = r));
  }
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }
}

const logLines: Array<Record<string, unknown>> = [];
const logger = pino(
  { level: 'info' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim() !== '') logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  }),
);

let streaming: FirstChunkUpstream;
beforeAll(async () => {
  streaming = await FirstChunkUpstream.start();
});
afterAll(async () => {
  await streaming?.close();
});

/**
 * The gateway: services shop and shadowshop on the test upstream, stream on the first-chunk one; the document's
 * routes under /shop (enforce), /shadow (shadow) and /live (enforce, to the first-chunk upstream), then a plain
 * /plain/* route without validation.
 */
function start(stack: { redis: TestRedis; up: TestUpstream }) {
  return startDocumentGateway(
    stack,
    TOKEN,
    'val:',
    [
      { file: DOC, service: 'shop', basePath: '/shop', validate: 'enforce' },
      { file: DOC, service: 'shadowshop', basePath: '/shadow', validate: 'shadow' },
      { file: DOC, service: 'stream', basePath: '/live', validate: 'enforce' },
    ],
    {
      server: { host: '127.0.0.1', port: 0, maxBodyBytes: MAX_BODY, responseIdleTimeoutMs: IDLE_MS },
      plans: { free: { perMinute: 1000, perDay: 10_000 } },
      services: { shop: { targets: [stack.up.url] }, shadowshop: { targets: [stack.up.url] }, stream: { targets: [streaming.url] } },
      routes: [{ method: '*', path: '/plain/*', service: 'stream' }],
    },
    logger,
  );
}

const s = useStack({ redis: true, gateway: start });
let key = '';
let keyId = '';
beforeAll(async () => {
  const made = await s.gw.composed.admin.issuer.create({ plan: 'free', name: 'acme-mobile' });
  key = made.key;
  keyId = made.record.id;
});

const auth = (): Record<string, string> => ({ authorization: `Bearer ${key}` });

const badOrderText = JSON.stringify({ customer: { email: 'nope' }, lines: [{ sku: 'x', quantity: 0 }], total: 0 }).replace(
  /}$/,
  ',"__proto__":{"polluted":1}}',
);

/** Sends a body in chunks (chunked transfer coding), optionally waiting on `between` before the rest. */
function sendChunked(
  url: string,
  path: string,
  headers: Record<string, string>,
  chunks: string[],
  between?: () => Promise<void>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { method: 'POST', headers: { ...headers, 'transfer-encoding': 'chunked' } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    void (async () => {
      req.write(chunks[0]);
      if (between) await between();
      for (const c of chunks.slice(1)) req.write(c);
      req.end();
    })().catch(reject);
  });
}

describe('enforce', () => {
  it('answers 400 invalid_request listing every failing pointer; the upstream gets nothing; the request still costs its point', async () => {
    const seen = s.up.seen.length;
    const first = await fetch(`${s.gw.url}/shop/orders`, { method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, body: badOrderText });
    const remaining1 = Number(first.headers.get('ratelimit-remaining') ?? first.headers.get('ratelimit')?.match(/r=(\d+)/)?.[1]);
    expect(first.status).toBe(400);
    const body = (await first.json()) as { code: string; message: string; status: number; problems: Array<{ path: string; message: string }> };
    expect(body.code).toBe('invalid_request');
    expect(body.status).toBe(400);
    expect(body.message).toBe("The request does not match the API's description of createOrder: see problems.");
    expect(body.problems).toEqual([
      { path: '/body/__proto__', message: 'is not a property this operation takes' },
      { path: '/body/customer/email', message: 'must be a valid email' },
      { path: '/body/lines/0/sku', message: 'must match pattern "^[A-Z]{2}-[0-9]+$"' },
      { path: '/body/lines/0/quantity', message: 'must be >= 1' },
      { path: '/body/total', message: 'must be > 0' },
    ]);
    expect(Object.prototype).not.toHaveProperty('polluted');
    const second = await fetch(`${s.gw.url}/shop/orders`, { method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, body: '{' });
    expect(second.status).toBe(400);
    expect(((await second.json()) as { problems: unknown }).problems).toEqual([{ path: '/body', message: 'is not valid JSON' }]);
    const remaining2 = Number(second.headers.get('ratelimit-remaining') ?? second.headers.get('ratelimit')?.match(/r=(\d+)/)?.[1]);
    expect(Number.isFinite(remaining1)).toBe(true);
    expect(remaining2).toBe(remaining1 - 1);
    expect(s.up.seen.length).toBe(seen);
  });

  it('checks path, query and header parameters before any body, and 401 comes before validation', async () => {
    const seen = s.up.seen.length;
    const r = await fetch(`${s.gw.url}/shop/orders/abc?fields=id,bogus`, { headers: auth() });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { problems: unknown }).problems).toEqual([
      { path: '/path/orderId', message: 'must be integer' },
      { path: '/query/fields/1', message: 'must be one of "id", "total", "lines"' },
      { path: '/headers/x-client-version', message: 'is required' },
    ]);
    const ok = await fetch(`${s.gw.url}/shop/orders/42?fields=id`, { headers: { ...auth(), 'X-Client-Version': '2.0' } });
    expect(ok.status).toBe(200);
    expect(s.up.seen.length).toBe(seen + 1);
    const anonymous = await fetch(`${s.gw.url}/shop/orders/abc`);
    expect(anonymous.status).toBe(401);
  });

  it('sends the upstream exactly the bytes it read, with their Content-Length (a chunked body too)', async () => {
    const text = '{ "customer": {"email": "ada@example.com"},\n "lines": [{"sku": "AB-1", "quantity": 2}], "total": 9.5, "note": "\u00e9t\u00e9" }';
    const r = await fetch(`${s.gw.url}/shop/orders`, { method: 'POST', headers: { ...auth(), 'content-type': 'application/json; charset=utf-8' }, body: text });
    expect(r.status).toBe(200);
    const got = s.up.seen.at(-1)!;
    expect(got.body.equals(Buffer.from(text))).toBe(true);
    expect(got.headers['content-length']).toBe(String(Buffer.byteLength(text)));

    const chunks = ['{"customer":{"email":"b@example.com"},', '"lines":[{"sku":"CD-2","quantity":1}],', '"total":1}'];
    const sent = await sendChunked(s.gw.url, '/shop/orders', { ...auth(), 'content-type': 'application/json' }, chunks);
    expect(sent.status).toBe(200);
    const chunked = s.up.seen.at(-1)!;
    expect(chunked.body.toString()).toBe(chunks.join(''));
    expect(chunked.headers['content-length']).toBe(String(chunks.join('').length));
    expect(chunked.headers['transfer-encoding']).toBeUndefined();
  });

  it('asks a client waiting on Expect: 100-continue for its body only once it is to be read, and checks it', async () => {
    const body = '{"customer":{"email":"e@example.com"},"lines":[{"sku":"GH-4","quantity":1}],"total":3}';
    const answer = await new Promise<{ status: number; continued: boolean }>((resolve, reject) => {
      let continued = false;
      const req = httpRequest(`${s.gw.url}/shop/orders`, {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json', 'content-length': String(body.length), expect: '100-continue' },
      });
      req.on('continue', () => {
        continued = true;
        req.end(body);
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, continued }));
      });
      req.on('error', reject);
    });
    expect(answer).toEqual({ status: 200, continued: true });
    expect(s.up.seen.at(-1)!.body.toString()).toBe(body);
  });

  it('answers hostile query strings and prototype keys with 400s, never a 500', async () => {
    const hostile = [
      '/shop/orders?filter[__proto__][polluted]=1&__proto__[polluted]=1&constructor[prototype][polluted]=1',
      '/shop/orders?limit=1e999&ids=' + '1,'.repeat(2000) + 'x',
      '/shop/orders?limit=%E0%A4%A&status=%00',
      '/shop/orders/%E0%A4%A',
    ];
    for (const path of hostile) {
      const r = await fetch(`${s.gw.url}${path}`, { headers: { ...auth(), 'x-client-version': '1.0' } });
      expect(r.status, path).toBe(400);
      expect(((await r.json()) as { code: string }).code).toBe('invalid_request');
    }
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('answers 413 for a JSON body over server.maxBodyBytes (declared or chunked), 408 for one that stops arriving', async () => {
    const seen = s.up.seen.length;
    const big = JSON.stringify({ customer: { email: 'a@b.co' }, lines: [], total: 1, note: 'x'.repeat(MAX_BODY) });
    const declared = await fetch(`${s.gw.url}/shop/orders`, { method: 'POST', headers: { ...auth(), 'content-type': 'application/json' }, body: big });
    expect(declared.status).toBe(413);
    expect(((await declared.json()) as { code: string }).code).toBe('payload_too_large');
    const chunked = await sendChunked(s.gw.url, '/shop/orders', { ...auth(), 'content-type': 'application/json' }, [big.slice(0, 3000), big.slice(3000)]);
    expect(chunked.status).toBe(413);
    const stalled = await sendChunked(
      s.gw.url,
      '/shop/orders',
      { ...auth(), 'content-type': 'application/json' },
      ['{"customer":', '{}}'],
      () => new Promise((r) => setTimeout(r, IDLE_MS * 3)),
    ).catch((err: unknown) => ({ status: -1, body: String(err) }));
    expect(stalled.status).toBe(408);
    expect(s.up.seen.length).toBe(seen);
  });
});

describe('shadow', () => {
  it('proxies an invalid request as it is, counts it per key and operation (metric, ledger, report) and logs its first pointer without the key', async () => {
    const before = s.up.seen.length;
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${s.gw.url}/shadow/orders?limit=0`, {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json' },
        body: badOrderText,
      });
      expect(r.status).toBe(200);
    }
    const ok = await fetch(`${s.gw.url}/shadow/orders/7`, { headers: { ...auth(), 'x-client-version': '1.0' } });
    expect(ok.status).toBe(200);
    const bad = await fetch(`${s.gw.url}/shadow/orders/x`, { headers: auth() });
    expect(bad.status).toBe(200);
    expect(s.up.seen.length).toBe(before + 5);
    expect(s.up.seen[before]!.body.toString()).toBe(badOrderText);

    const metrics = await (await fetch(`${s.gw.url}/metrics`)).text();
    expect(metricValue(metrics, 'tollgate_validation_failures_total', { service: 'shadowshop', operation: 'createOrder', mode: 'shadow' })).toBe(3);
    expect(metricValue(metrics, 'tollgate_validation_failures_total', { service: 'shadowshop', operation: 'getOrder', mode: 'shadow' })).toBe(1);
    expect(metricValue(metrics, 'tollgate_validation_failures_total', { service: 'shop', operation: 'createOrder', mode: 'enforce' })).toBeGreaterThanOrEqual(
      2,
    );
    expect(metrics).not.toContain(key);

    const lines = logLines.filter((l) => l.msg === 'request does not match the API description (shadow: proxied)');
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatchObject({ service: 'shadowshop', operation: 'createOrder', mode: 'shadow', pointer: '/body/__proto__', problems: 5 });
    expect(lines[3]).toMatchObject({ operation: 'getOrder', pointer: '/path/orderId' });
    expect(JSON.stringify(logLines)).not.toContain(key);

    await s.gw.composed.flushUsage();
    const admin = { authorization: `Bearer ${TOKEN}` };
    const usage = (await (await fetch(`${s.gw.adminUrl}/keys/${keyId}/usage`, { headers: admin })).json()) as { totals: Record<string, number> };
    // 4 shadow failures, plus the enforce refusals of the tests before (2 + 1 + 0): each counted where it was answered.
    expect(usage.totals.validationFailed).toBeGreaterThanOrEqual(4);

    const report = await fetch(`${s.gw.adminUrl}/usage/invalid-requests`, { headers: admin });
    expect(report.status).toBe(200);
    const text = await report.text();
    expect(adminDoc.check('GET', '/usage/invalid-requests', 200, Object.fromEntries(report.headers), text)).toEqual([]);
    const r = JSON.parse(text) as {
      operations: Array<{ operation: string; service: string; method: string; path: string; mode: string; keys: Array<Record<string, unknown>> }>;
    };
    const create = r.operations.find((o) => o.service === 'shadowshop' && o.operation === 'createOrder')!;
    expect(create).toMatchObject({ method: 'POST', path: '/shadow/orders', mode: 'shadow' });
    expect(create.keys).toEqual([{ id: keyId, name: 'acme-mobile', consumer: null, calls: 3, lastSeen: expect.any(String), pointer: '/body/__proto__' }]);
    const enforced = r.operations.find((o) => o.service === 'shop' && o.operation === 'getOrder')!;
    expect(enforced.keys[0]).toMatchObject({ id: keyId, calls: 2, pointer: '/path/orderId' });
    expect(r.operations.find((o) => o.service === 'shadowshop' && o.operation === 'deleteOrder')!.keys).toEqual([]);
    expect(JSON.stringify(r)).not.toContain(key);
  });
});

describe('bodies that are not validated', () => {
  /** Whether the streaming upstream saw the request's first chunk while the client held the rest back. */
  async function seenBeforeEnd(path: string, type: string, chunks: string[]): Promise<boolean> {
    const first = streaming.nextFirstChunk().then(() => true);
    let early = false;
    const r = await sendChunked(s.gw.url, path, { ...auth(), 'content-type': type }, chunks, async () => {
      early = await Promise.race([first, new Promise<false>((resolve) => setTimeout(() => resolve(false), 400))]);
    });
    expect(r).toEqual({ status: 200, body: 'done' });
    return early;
  }

  it('stream: the upstream sees the first chunk before the client sends the rest (no validation, or a media type without a schema)', async () => {
    expect(await seenBeforeEnd('/plain/upload', 'application/json', ['{"first": 1', ', "second": 2}'])).toBe(true);
    expect(await seenBeforeEnd('/live/orders', 'text/plain', ['one order', ' please'])).toBe(true);
  });

  it('a JSON body to a validating operation is read whole first: the upstream sees nothing until it is complete', async () => {
    const chunks = ['{"customer":{"email":"c@example.com"},', '"lines":[{"sku":"EF-3","quantity":1}],"total":2}'];
    expect(await seenBeforeEnd('/live/orders', 'application/json', chunks)).toBe(false);
  });
});
