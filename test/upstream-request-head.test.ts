// The head of each try's upstream request as the backend reads it (pipeline/upstream-try.ts upstreamHeaders): Host
// set to the target, the gateway's headers and the client's in order, and the framing Node gives a request with no
// body of its own: none for a GET, `Content-Length: 0` for a POST, never a chunked body announced for nothing.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import request from 'supertest';
import { TestUpstream, echo } from './helpers/upstream.js';
import { rawRequest, startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';

let up: TestUpstream;
let gw: TestGateway;

beforeAll(async () => {
  up = await TestUpstream.start();
  gw = await startTestGateway(testConfig({ upstream: { url: up.url, timeoutMs: 5000 } }), { upstreamCheckTimeoutMs: 5000 });
});

afterAll(async () => {
  await gw?.close();
  await up?.close();
});

beforeEach(() => {
  up.seen.length = 0;
  up.behaviour = echo;
});

/** The header names of the backend's request, lower-cased, in the order they came. */
const names = (raw: string[]): string[] => raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());

describe('the upstream request head', () => {
  it('a GET: Host is the target, first; no framing header; the client headers after the gateway ones, each once', async () => {
    const res = await request(gw.url).get('/v1/head').set('x-one', 'a').set('x-two', 'b');
    expect(res.status).toBe(200);
    const seen = up.seen[0]!;
    expect(seen.headers.host).toBe(new URL(up.url).host);
    const order = names(seen.rawHeaders);
    expect(order[0]).toBe('host');
    expect(order).not.toContain('content-length');
    expect(order).not.toContain('transfer-encoding');
    expect(order.indexOf('x-forwarded-for')).toBeLessThan(order.indexOf('x-one'));
    expect(order.indexOf('x-one')).toBeLessThan(order.indexOf('x-two'));
    expect(new Set(order).size).toBe(order.length);
    expect(seen.headers['x-one']).toBe('a');
  });

  it('POST, PUT and PATCH sent with neither Content-Length nor Transfer-Encoding: Content-Length: 0, not a chunked body', async () => {
    for (const method of ['POST', 'PUT', 'PATCH']) {
      up.seen.length = 0;
      const res = await rawRequest(gw.port, [`${method} /v1/empty HTTP/1.1`, 'Host: api.example', 'Connection: close']);
      expect(res.status).toBe(200);
      const seen = up.seen[0]!;
      expect(seen.method).toBe(method);
      expect(seen.headers['content-length']).toBe('0');
      expect(seen.headers['transfer-encoding']).toBeUndefined();
      expect(seen.body.length).toBe(0);
    }
  });

  it('GET and DELETE sent without a body: no framing header added', async () => {
    for (const method of ['GET', 'DELETE']) {
      up.seen.length = 0;
      const res = await rawRequest(gw.port, [`${method} /v1/gone HTTP/1.1`, 'Host: api.example', 'Connection: close']);
      expect(res.status).toBe(200);
      expect(up.seen[0]!.headers['content-length']).toBeUndefined();
      expect(up.seen[0]!.headers['transfer-encoding']).toBeUndefined();
    }
  });

  it('a POST with a body: its Content-Length and bytes', async () => {
    const res = await request(gw.url).post('/v1/full').set('content-type', 'text/plain').send('hello');
    expect(res.status).toBe(200);
    expect(up.seen[0]!.headers['content-length']).toBe('5');
    expect(up.seen[0]!.body.toString()).toBe('hello');
  });

  it('the same head on a reused connection as on a fresh one', async () => {
    await request(gw.url).get('/v1/a').set('x-one', 'a');
    await request(gw.url).get('/v1/b').set('x-one', 'a');
    expect(names(up.seen[0]!.rawHeaders)).toEqual(names(up.seen[1]!.rawHeaders));
  });
});
