// The gateway's HTTP server has Node create requests and responses that already carry the Express app's prototypes
// (expressPrototypes), so Express's per-request Object.setPrototypeOf changes nothing. These tests check that Node really builds them so,
// and that everything Express and Node do with them still works: Express helpers, a 100-continue answer, keep-alive.
import { afterEach, describe, expect, it } from 'vitest';
import express from 'express';
import { request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGatewayServer, expressPrototypes } from '../src/http-server.js';

let server: Server | undefined;
afterEach(async () => {
  if (!server) return;
  server.closeAllConnections();
  await new Promise<void>((r) => server!.close(() => r()));
  server = undefined;
});

async function listen(s: Server): Promise<string> {
  server = s;
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

describe('expressPrototypes', () => {
  it('has Node build requests and responses that already carry the app\'s prototypes', async () => {
    const app = express();
    const seen: Array<{ req: boolean; res: boolean }> = [];
    app.get('/x', (req, res) => {
      res.json({ app: req.app === app, path: req.path, host: req.hostname, accepts: req.accepts('json') });
    });
    const s = createGatewayServer(app);
    // Before Express runs: what did Node build?
    s.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
      seen.push({ req: Object.getPrototypeOf(req) === app.request, res: Object.getPrototypeOf(res) === app.response });
    });
    const url = await listen(s);

    const first = await fetch(`${url}/x`, { headers: { accept: 'application/json' } });
    const second = await fetch(`${url}/x`);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ app: true, path: '/x', host: '127.0.0.1', accepts: 'json' });
    expect(second.headers.get('content-type')).toMatch(/^application\/json/);
    await second.text();
    expect(seen).toEqual([
      { req: true, res: true },
      { req: true, res: true },
    ]);
  });

  it('keeps what Node itself does with the objects: keep-alive reuse and a 100-continue body', async () => {
    const app = express();
    app.post('/echo', express.text({ type: '*/*' }), (req, res) => {
      res.type('text/plain').send(`got ${String(req.body)}`);
    });
    const s = createGatewayServer(app);
    // The gateway asks for a 100-continue body itself (continueIfExpected); this bare app answers at once.
    s.on('checkContinue', (_req: IncomingMessage, res: ServerResponse) => res.writeContinue());
    const url = await listen(s);

    const agent = new (await import('node:http')).Agent({ keepAlive: true, maxSockets: 1 });
    const post = (expectContinue: boolean) =>
      new Promise<{ status: number; body: string; reused: boolean }>((resolve, reject) => {
        const headers: Record<string, string> = { 'content-type': 'text/plain', 'content-length': '5' };
        if (expectContinue) headers.expect = '100-continue';
        const r = httpRequest(`${url}/echo`, { method: 'POST', agent, headers }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, reused: r.reusedSocket }));
        });
        r.on('error', reject);
        if (expectContinue) r.on('continue', () => r.end('hello'));
        else r.end('hello');
      });
    try {
      expect(await post(false)).toEqual({ status: 200, body: 'got hello', reused: false });
      expect(await post(true)).toEqual({ status: 200, body: 'got hello', reused: true });
    } finally {
      agent.destroy();
    }
  });

  it('makes subclasses of Node\'s classes the app\'s prototypes, inheriting what the app had, once per app', () => {
    const app = express();
    const before = { request: app.request, response: app.response };
    const opts = expressPrototypes(app);
    expect(Object.getPrototypeOf(opts.IncomingMessage.prototype)).toBe(before.request);
    expect(Object.getPrototypeOf(opts.ServerResponse.prototype)).toBe(before.response);
    expect(app.request).toBe(opts.IncomingMessage.prototype);
    expect(app.response).toBe(opts.ServerResponse.prototype);
    expect((app.request as { app?: unknown }).app).toBe(app);
    expect(expressPrototypes(app)).toBe(opts);
  });
});
