// OutboundClient against real loopback servers: one attempt bounded as a whole (a server silent before its headers
// and one stalling mid-body both end within timeoutMs), redirects answered not followed, the body cut at its bound,
// errors told apart by kind (refused, reset, TLS verification, a bad URL), keep-alive pools reused per origin.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OutboundClient, OutboundError } from '../src/outbound/client.js';
import { makeCertificates, type TestCertificates } from './helpers/tls.js';

interface Served {
  url: string;
  server: Server;
  requests: IncomingMessage[];
  connections: number;
  close(): Promise<void>;
}

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void, tls?: { cert: Buffer; key: Buffer }): Promise<Served> {
  const server: Server = tls ? createHttpsServer(tls) : createServer();
  const sockets = new Set<Socket>();
  const served: Served = {
    url: '',
    server,
    requests: [],
    connections: 0,
    async close() {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
  server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
    served.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    served.requests.push(req);
    handler(req, res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  served.url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  return served;
}

async function failure(p: Promise<unknown>): Promise<OutboundError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(OutboundError);
    return err as OutboundError;
  }
  throw new Error('expected the request to fail');
}

let client: OutboundClient;
const servers: Served[] = [];
const started = async (...args: Parameters<typeof serve>) => {
  const s = await serve(...args);
  servers.push(s);
  return s;
};

beforeAll(() => {
  client = new OutboundClient();
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await client.close();
});

describe('OutboundClient', () => {
  it('answers status, headers and body, and sends method, headers and body as given', async () => {
    const s = await started((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => res.writeHead(201, { 'x-seen': `${req.method} ${req.url} ${req.headers['x-a']} ${Buffer.concat(chunks).toString()}` }).end('done'));
    });
    const res = await client.request({ url: `${s.url}/p/q?x=1`, method: 'POST', headers: { 'x-a': 'b' }, body: 'hello', timeoutMs: 2000 });
    expect(res.status).toBe(201);
    expect(res.headers['x-seen']).toBe('POST /p/q?x=1 b hello');
    expect(res.body.toString()).toBe('done');
  });

  it('reuses a keep-alive connection per origin', async () => {
    const s = await started((_req, res) => res.end('ok'));
    for (let i = 0; i < 5; i++) {
      expect((await client.request({ url: `${s.url}/`, timeoutMs: 2000 })).status).toBe(200);
      // undici hands a connection back to its pool a moment after the body's end.
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(s.requests).toHaveLength(5);
    expect(s.connections).toBe(1);
  });

  it('a server that never sends its headers: timeout within timeoutMs', async () => {
    const s = await started(() => {
      /* never answers */
    });
    const started_ = Date.now();
    const err = await failure(client.request({ url: `${s.url}/hang`, timeoutMs: 300 }));
    const took = Date.now() - started_;
    expect(err.kind).toBe('timeout');
    expect(took).toBeGreaterThanOrEqual(280);
    expect(took).toBeLessThan(1300);
  });

  it('a server that stalls in the middle of its body: timeout within timeoutMs, the whole attempt counted', async () => {
    const s = await started((_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('x'.repeat(100));
      // The headers come quickly; the rest of the body never does.
    });
    const started_ = Date.now();
    const err = await failure(client.request({ url: `${s.url}/slow-body`, timeoutMs: 300 }));
    const took = Date.now() - started_;
    expect(err.kind).toBe('timeout');
    expect(took).toBeGreaterThanOrEqual(280);
    expect(took).toBeLessThan(1300);
  });

  it('a 302 is the answer: the redirect is not followed', async () => {
    const target = await started((_req, res) => res.end('target'));
    const s = await started((_req, res) => res.writeHead(302, { location: `${target.url}/elsewhere` }).end());
    const res = await client.request({ url: `${s.url}/go`, method: 'POST', body: '{}', timeoutMs: 2000 });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe(`${target.url}/elsewhere`);
    await new Promise((r) => setTimeout(r, 100));
    expect(target.requests).toHaveLength(0);
    expect(target.connections).toBe(0);
  });

  it('keeps the body up to maxBodyBytes and drops the rest (64 KiB by default)', async () => {
    const s = await started((req, res) => {
      // A body that would go on for a long time: only what fits is read.
      res.writeHead(200);
      const chunk = Buffer.alloc(16 * 1024, 'a');
      let sent = 0;
      const more = () => {
        while (sent < 10 * 1024 * 1024) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      if (req.url === '/big') more();
      else res.end('0123456789');
    });
    const small = await client.request({ url: `${s.url}/small`, timeoutMs: 2000, maxBodyBytes: 4 });
    expect(small.body.toString()).toBe('0123');
    const big = await client.request({ url: `${s.url}/big`, timeoutMs: 5000 });
    expect(big.body.length).toBe(64 * 1024);
    const none = await client.request({ url: `${s.url}/big`, timeoutMs: 5000, maxBodyBytes: 0 });
    expect(none.status).toBe(200);
    expect(none.body.length).toBe(0);
    // A small body not read, on a connection kept or closed: nothing left behind to throw later.
    for (const connection of ['keep-alive', 'close'] as const)
      expect((await client.request({ url: `${s.url}/small`, timeoutMs: 2000, maxBodyBytes: 0, connection })).body.length).toBe(0);
    await new Promise((r) => setTimeout(r, 50));
    // The client is still good for more.
    expect((await client.request({ url: `${s.url}/small`, timeoutMs: 2000 })).body.toString()).toBe('0123456789');
  });

  it('a refused connection is kind connect, ECONNREFUSED', async () => {
    const s = await started((_req, res) => res.end());
    const url = s.url;
    await s.close();
    servers.length = 0;
    const err = await failure(client.request({ url: `${url}/`, timeoutMs: 2000 }));
    expect(err).toMatchObject({ kind: 'connect', code: 'ECONNREFUSED' });
  });

  it('a connection closed without an answer is kind reset, ECONNRESET', async () => {
    const s = await started((req) => req.socket.destroy());
    const err = await failure(client.request({ url: `${s.url}/`, timeoutMs: 2000 }));
    expect(err).toMatchObject({ kind: 'reset', code: 'ECONNRESET' });
  });

  it('refuses what is not an http(s) URL without connecting', async () => {
    expect(await failure(client.request({ url: 'not a url', timeoutMs: 100 }))).toMatchObject({ kind: 'other', code: 'ERR_INVALID_URL' });
    expect(await failure(client.request({ url: 'file:///etc/passwd', timeoutMs: 100 }))).toMatchObject({ kind: 'other', code: 'ERR_INVALID_URL' });
  });

  describe('over TLS', () => {
    let certs: TestCertificates;
    beforeAll(() => {
      certs = makeCertificates();
    });
    afterAll(() => certs?.remove());
    const tlsServer = (certFile: string, keyFile: string) => ({ cert: readFileSync(certFile), key: readFileSync(keyFile) });

    it('verifies against the CA given; a certificate from another CA is kind tls', async () => {
      const good = await started((_req, res) => res.end('secure'), tlsServer(certs.certFile, certs.keyFile));
      const other = certs.issue('outbound-foreign', { ca: 'other-ca' });
      const foreign = await started((_req, res) => res.end('foreign'), tlsServer(other.certFile, other.keyFile));
      const tls = { ca: readFileSync(certs.caFile) };
      const ok = await client.request({ url: `${good.url}/`, timeoutMs: 3000, tls });
      expect(ok.body.toString()).toBe('secure');
      const err = await failure(client.request({ url: `${foreign.url}/`, timeoutMs: 3000, tls }));
      expect(err).toMatchObject({ kind: 'tls', code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
      expect(foreign.requests).toHaveLength(0);
      // Without the CA, the system's CAs: the test CA is none of them.
      const untrusted = await failure(client.request({ url: `${good.url}/`, timeoutMs: 3000 }));
      expect(untrusted.kind).toBe('tls');
      // rejectUnauthorized false accepts it.
      expect((await client.request({ url: `${foreign.url}/`, timeoutMs: 3000, tls: { rejectUnauthorized: false } })).status).toBe(200);
    });

    it('checks the name against servername: a certificate for another name is kind tls', async () => {
      const good = await started((_req, res) => res.end('secure'), tlsServer(certs.certFile, certs.keyFile));
      const err = await failure(
        client.request({ url: `${good.url}/`, timeoutMs: 3000, tls: { ca: readFileSync(certs.caFile), servername: 'elsewhere.example' } }),
      );
      expect(err).toMatchObject({ kind: 'tls', code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
    });
  });

  it('after close, refuses', async () => {
    const c = new OutboundClient();
    await c.close();
    expect(await failure(c.request({ url: 'http://127.0.0.1:1/', timeoutMs: 100 }))).toMatchObject({ kind: 'other', code: 'ERR_CLIENT_CLOSED' });
  });
});
