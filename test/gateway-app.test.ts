// The gateway's request handler (src/server/app.ts): stage 0 and the request path called directly, and the Express
// app behind it for what the path leaves to it. Every way a request leaves the path is answered as when the path was
// a layer of Express's router: next('route') to the gateway's own endpoints and the 404, a stage's error (thrown,
// passed to next, a rejected promise, one with an HTTP status) to the error handler, once, whether or not the
// gateway's server made the request and response (expressPrototypes) or a plain node:http server did.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Request, RequestHandler } from 'express';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../src/observability/metrics.js';
import { ServiceRegistry } from '../src/routing/services.js';
import { Runtime } from '../src/routing/runtime.js';
import { buildGatewayApp } from '../src/server/app.js';
import { createGatewayServer } from '../src/server/http-server.js';
import { systemClock } from '../src/util/clock.js';
import { rawRequest, silentLogger, testConfig } from './helpers/gateway.js';

/** Stage 11 stand-in: how it leaves the path depends on the request's path. */
const proxyToUpstream: RequestHandler = (req, res, next) => {
  const path = req.url.split('?')[0];
  if (path === '/v1/throw') throw new Error('boom');
  if (path === '/v1/next-error') return next(new Error('boom'));
  if (path === '/v1/reject') return Promise.reject(new Error('boom')) as never;
  if (path === '/v1/too-large') return next(Object.assign(new Error('big'), { status: 413 }));
  if (path === '/v1/after-headers') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('partial');
    return next(new Error('late'));
  }
  if (path === '/v1/route') return next('route');
  const r = req as Request;
  res.status(200).json({ path: req.url, originalUrl: r.originalUrl, ip: r.ip, protocol: r.protocol, host: r.get('host'), linked: res.req === req });
};

function gatewayApp() {
  const config = testConfig({ upstream: { url: 'http://127.0.0.1:9' }, server: { trustProxy: true } });
  const metrics = new Metrics();
  return buildGatewayApp({
    runtime: new Runtime(config),
    clock: systemClock,
    logger: silentLogger,
    metrics,
    readiness: [],
    opsOnGatewayPort: true,
    observers: [],
    proxyToUpstream,
    services: new ServiceRegistry(config, { logger: silentLogger, metrics, healthChecks: false, outbound: {} as never }),
  });
}

describe.each([
  ['the gateway server', (app: ReturnType<typeof gatewayApp>) => createGatewayServer(app)],
  ['a plain node:http server', (app: ReturnType<typeof gatewayApp>) => createServer(app as unknown as RequestListener)],
])('the gateway app behind %s', (_name, serve) => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = serve(gatewayApp());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("runs the path with Express's request and response methods, trust proxy and originalUrl", async () => {
    const res = await request(url).get('/v1/pets?x=1').set('X-Forwarded-For', '203.0.113.9').set('X-Forwarded-Proto', 'https');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ path: '/v1/pets?x=1', originalUrl: '/v1/pets?x=1', ip: '203.0.113.9', protocol: 'https', host: res.body.host, linked: true });
    expect(res.headers['x-request-id']).toMatch(/./);
    expect(res.headers['x-frame-options']).toBe('DENY');
  });

  it('hands the gateway its own endpoints and answers 404 for what no stage answers', async () => {
    expect((await request(url).get('/healthz')).status).toBe(200);
    expect((await request(url).get('/readyz')).status).toBe(200);
    const metrics = await request(url).get('/metrics');
    expect(metrics.status).toBe(200);
    const routed = await request(url).get('/v1/route');
    expect(routed.status).toBe(404);
    expect(routed.body.code).toBe('not_found');
    // The path ran first: the 404 carries the request id and the security headers.
    expect(routed.headers['x-request-id']).toMatch(/./);
    expect(routed.headers['content-security-policy']).toBe("default-src 'none';frame-ancestors 'none'");
  });

  it.each(['/v1/throw', '/v1/next-error', '/v1/reject'])('answers a stage failing (%s) with one 500 internal_error', async (path) => {
    const res = await request(url).get(path);
    expect(res.status).toBe(500);
    expect(res.body.code).toBe('internal_error');
    expect(res.headers['x-request-id']).toMatch(/./);
  });

  it("answers an error with an HTTP status by that status's error", async () => {
    const res = await request(url).get('/v1/too-large');
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('payload_too_large');
  });

  it('cuts a response whose headers were sent when a stage fails', async () => {
    await expect(request(url).get('/v1/after-headers')).rejects.toThrow();
  });

  it('reduces an absolute-form target to its path before the path reads it (stage 0)', async () => {
    const port = Number(new URL(url).port);
    const res = await rawRequest(port, ['GET http://other.test/v1/pets#frag HTTP/1.1', 'Host: api.test', 'Connection: close']);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ path: '/v1/pets', originalUrl: '/v1/pets', host: 'other.test' });
  });
});
