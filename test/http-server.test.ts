// The gateway's HTTP server has Node create requests and responses that already carry the Express app's prototypes
// (expressPrototypes), so Express's per-request Object.setPrototypeOf changes nothing. These tests check that Node
// really builds them so, and that everything Express and Node do with them still works: Express helpers, a
// 100-continue answer, keep-alive; and that a draining server's answers close their connections.
import { afterEach, describe, expect, it } from 'vitest';
import express from 'express';
import { Agent, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { closeConnectionsAfterResponses, createGatewayServer, expressPrototypes } from '../src/server/http-server.js';

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
  it("has Node build requests and responses that already carry the app's prototypes", async () => {
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

    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
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

  it("makes subclasses of Node's classes the app's prototypes, inheriting what the app had, once per app", () => {
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

describe('closeConnectionsAfterResponses', () => {
  /** One raw keep-alive connection: sends `first`, then `later` ones; resolves with all received once it is closed. */
  function rawExchange(url: string, [first, ...later]: [string, ...string[]], afterFirstSent: () => void): Promise<string> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => {
        socket.write(first);
        afterFirstSent();
        for (const r of later) setTimeout(() => socket.writable && socket.write(r), 20);
      });
      let got = '';
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => (got += d));
      socket.on('close', () => resolve(got));
      socket.on('error', reject);
      setTimeout(() => reject(new Error(`the server kept the connection open; received: ${got}`)), 3000).unref();
    });
  }

  it('makes an answer in flight, and one whose app said keep-alive, close their connection', async () => {
    const app = express();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    app.get('/slow', async (_req, res) => {
      await held;
      res.set({ connection: 'keep-alive', 'keep-alive': 'timeout=5' }).json({ slow: true });
    });
    app.get('/fast', (_req, res) => res.json({ fast: true }));
    app.get('/own', (_req, res) => {
      res.writeHead(200, { connection: 'keep-alive', 'keep-alive': 'timeout=5', 'content-type': 'text/plain', 'x-own': 'yes' });
      res.end('own');
    });
    const s = createGatewayServer(app);
    const url = await listen(s);

    // Before the mark, a keep-alive connection stays open between requests.
    const before = await fetch(`${url}/fast`);
    expect(before.headers.get('connection')).toBe('keep-alive');
    await before.text();

    const received = rawExchange(url, ['GET /slow HTTP/1.1\r\nHost: x\r\n\r\n', 'GET /fast HTTP/1.1\r\nHost: x\r\n\r\n'], () => {
      setTimeout(() => {
        closeConnectionsAfterResponses(s);
        release();
      }, 20);
    });
    const text = await received;
    // The in-flight answer came, said close, dropped the Keep-Alive hint, and the connection was closed after it:
    // the second request on it was never answered.
    expect(text).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(text).not.toMatch(/\r\nkeep-alive:/i);
    expect(text).toContain('{"slow":true}');
    expect(text).not.toContain('"fast"');

    // A new request after the mark is answered, with Connection: close too, also when the app hands writeHead a
    // keep-alive of its own.
    const after = await fetch(`${url}/fast`);
    expect(after.headers.get('connection')).toBe('close');
    expect(await after.json()).toEqual({ fast: true });
    const own = await fetch(`${url}/own`);
    expect(own.headers.get('connection')).toBe('close');
    expect(own.headers.get('x-own')).toBe('yes');
    expect(await own.text()).toBe('own');
  });
});
