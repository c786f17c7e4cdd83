// The gateway as an HTTP intermediary (docs/routing.md, "HTTP between client and backend"), probed live: a backend on
// loopback that records every byte it was sent (trailers included) and answers what each test wants (1xx responses,
// trailers, Proxy-Authenticate), and clients that speak raw HTTP/1.x to the gateway composeGateway builds.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { startLimitsGateway } from './helpers/limits.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  rawTrailers: string[];
  body: Buffer;
}

type Answer = (req: IncomingMessage, res: ServerResponse) => void;

const plain: Answer = (_req, res) => {
  res.setHeader('content-type', 'text/plain');
  res.end('ok');
};

let backend: Server;
let answer: Answer = plain;
const seen: Seen[] = [];
let gw: TestGateway; // server.via on (the default)
let noVia: TestGateway; // server.via: false

beforeAll(async () => {
  backend = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawTrailers: req.rawTrailers, body: Buffer.concat(chunks) });
      answer(req, res);
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
  gw = await startTestGateway(testConfig({ upstream: { url, timeoutMs: 3000 } }));
  noVia = await startTestGateway(testConfig({ upstream: { url, timeoutMs: 3000 }, server: { via: false } }));
});

afterAll(async () => {
  await gw?.close();
  await noVia?.close();
  backend?.closeAllConnections();
  await new Promise<void>((r) => (backend ? backend.close(() => r()) : r()));
});

beforeEach(() => {
  seen.length = 0;
  answer = plain;
});

/**
 * Sends `text` on a connection of its own and returns every byte the gateway wrote until it closed the connection
 * (the request says `Connection: close`, or is HTTP/1.0), as latin1 text: 1xx responses, the final one, its trailers.
 */
async function exchange(port: number, text: string | Buffer, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const s = connect(port, '127.0.0.1', () => s.write(text));
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`the gateway did not close the connection in time; got ${JSON.stringify(Buffer.concat(chunks).toString('latin1'))}`));
    }, timeoutMs);
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
  });
}

/** The status lines of every response in a raw exchange, in order. */
function statusLines(raw: string): string[] {
  return raw.split('\r\n').filter((l) => /^HTTP\/1\.[01] \d{3}/.test(l));
}

/** The header block of the response whose status line starts with `HTTP/1.1 <status>`. */
function headBlock(raw: string, status: number): string {
  const start = raw.indexOf(`HTTP/1.1 ${status}`);
  expect(start, `no ${status} in ${JSON.stringify(raw)}`).toBeGreaterThanOrEqual(0);
  return raw.slice(start, raw.indexOf('\r\n\r\n', start));
}

function fieldOf(head: string, name: string): string[] {
  return head
    .split('\r\n')
    .slice(1)
    .filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`))
    .map((l) => l.slice(l.indexOf(':') + 1).trim());
}

const host = (g: TestGateway) => `Host: 127.0.0.1:${g.port}`;

describe('transfer codings (RFC 9112 §6.1)', () => {
  it('answers 501 not_implemented to a body in a transfer coding other than chunked, and never calls the backend', async () => {
    // (`chunked, chunked` and a list not ending in chunked never get this far: Node's parser answers 400.)
    for (const te of ['gzip, chunked', 'GZip,Chunked', 'deflate;x=1, chunked', 'identity, chunked', 'x-custom , chunked']) {
      const raw = await exchange(
        gw.port,
        [`POST /v1/upload HTTP/1.1`, host(gw), `Transfer-Encoding: ${te}`, 'Connection: close', '', '5', 'hello', '0', '', ''].join('\r\n'),
      );
      expect(statusLines(raw), te).toEqual(['HTTP/1.1 501 Not Implemented']);
      const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4).replace(/^[0-9a-f]+\r\n|\r\n0\r\n\r\n$/g, '')) as {
        code: string;
        status: number;
        message: string;
      };
      expect(body).toMatchObject({ code: 'not_implemented', status: 501 });
      expect(body.message, te).toContain(te.split(/[,;]/)[0]!.trim().toLowerCase());
    }
    expect(seen).toEqual([]);
  });

  it('still forwards a body that is chunked alone, as chunked', async () => {
    const raw = await exchange(
      gw.port,
      ['POST /v1/upload HTTP/1.1', host(gw), 'Transfer-Encoding: chunked', 'Connection: close', '', '5', 'hello', '0', '', ''].join('\r\n'),
    );
    expect(statusLines(raw)).toEqual(['HTTP/1.1 200 OK']);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers['transfer-encoding']).toBe('chunked');
    expect(seen[0]!.body.toString()).toBe('hello');
  });
});

describe('Via (RFC 9110 §7.6.3)', () => {
  it('adds "1.1 tollgate" to a forwarded request, after the Via it came with; an HTTP/1.0 request says 1.0', async () => {
    await exchange(gw.port, ['GET /v1/a HTTP/1.1', host(gw), 'Connection: close', '', ''].join('\r\n'));
    await exchange(gw.port, ['GET /v1/b HTTP/1.1', host(gw), 'Via: 1.0 corp-proxy, 1.1 edge', 'Connection: close', '', ''].join('\r\n'));
    await exchange(gw.port, ['GET /v1/c HTTP/1.0', host(gw), '', ''].join('\r\n'));
    expect(seen.map((s) => s.headers.via)).toEqual(['1.1 tollgate', '1.0 corp-proxy, 1.1 edge, 1.1 tollgate', '1.0 tollgate']);
  });

  it('with server.via: false, passes Via as the client sent it and adds none', async () => {
    await exchange(noVia.port, ['GET /v1/a HTTP/1.1', host(noVia), 'Connection: close', '', ''].join('\r\n'));
    await exchange(noVia.port, ['GET /v1/b HTTP/1.1', host(noVia), 'Via: 1.1 edge', 'Connection: close', '', ''].join('\r\n'));
    expect(seen.map((s) => s.headers.via)).toEqual([undefined, '1.1 edge']);
  });

  it("adds none to responses, and passes the backend's own Via on", async () => {
    let raw = await exchange(gw.port, ['GET /v1/a HTTP/1.1', host(gw), 'Connection: close', '', ''].join('\r\n'));
    expect(fieldOf(headBlock(raw, 200), 'via')).toEqual([]);
    answer = (_req, res) => {
      res.setHeader('via', '1.1 backend-cache');
      res.end('ok');
    };
    raw = await exchange(gw.port, ['GET /v1/a HTTP/1.1', host(gw), 'Connection: close', '', ''].join('\r\n'));
    expect(fieldOf(headBlock(raw, 200), 'via')).toEqual(['1.1 backend-cache']);
  });
});

describe("the backend's informational responses (RFC 9110 §15.2)", () => {
  /** A backend that sends 100, 102, 103 (two Link lines, one with two links) and 104 before its 200. */
  const informational: Answer = (_req, res) => {
    res.writeContinue();
    res.writeProcessing();
    // Raw, as a backend may send them: Node's writeEarlyHints refuses a Link line holding two links.
    res.socket!.write(
      'HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style, </app.js>; rel=preload; as=script\r\nLink: </font.woff2>; rel=preload; as=font; crossorigin\r\nConnection: x-hop\r\nX-Hop: secret\r\n\r\n',
    );
    res.socket!.write('HTTP/1.1 104 Upload Resumption Supported\r\nUpload-Draft-Interop-Version: 6\r\n\r\n');
    setTimeout(() => res.end('final'), 50);
  };

  it("passes 102, 103 (every Link line, as sent) and 104 on before the final response; not the backend's 100, not hop-by-hop fields", async () => {
    answer = informational;
    const raw = await exchange(gw.port, ['GET /v1/page HTTP/1.1', host(gw), 'Connection: close', '', ''].join('\r\n'));
    expect(statusLines(raw)).toEqual(['HTTP/1.1 102 Processing', 'HTTP/1.1 103 Early Hints', 'HTTP/1.1 104 Upload Resumption Supported', 'HTTP/1.1 200 OK']);
    const hints = headBlock(raw, 103);
    expect(fieldOf(hints, 'link')).toEqual([
      '</style.css>; rel=preload; as=style, </app.js>; rel=preload; as=script',
      '</font.woff2>; rel=preload; as=font; crossorigin',
    ]);
    expect(fieldOf(hints, 'x-hop')).toEqual([]);
    expect(fieldOf(hints, 'connection')).toEqual([]);
    expect(fieldOf(headBlock(raw, 104), 'upload-draft-interop-version')).toEqual(['6']);
    expect(raw.endsWith('final')).toBe(true);
  });

  it('stops passing 1xx on to a client that reads none of them once 64 KB wait for it; the final response still comes', async () => {
    const count = 3000;
    const link = `</${'x'.repeat(4000)}.css>; rel=preload`;
    let flushed = false;
    answer = (_req, res) => {
      const one = `HTTP/1.1 103 Early Hints\r\nLink: ${link}\r\n\r\n`;
      // The write completes once the gateway has read all but the kernel's buffers of the hints.
      res.socket!.write(one.repeat(count), () => {
        flushed = true;
        res.end('final');
      });
    };
    const chunks: Buffer[] = [];
    const s = connect(gw.port, '127.0.0.1');
    try {
      s.pause();
      s.write(['GET /v1/page HTTP/1.1', host(gw), 'Connection: close', '', ''].join('\r\n'));
      // Not reading while the backend's 12 MB of hints arrive at the gateway.
      for (let i = 0; i < 1000 && !flushed; i++) await new Promise((r) => setTimeout(r, 20));
      expect(flushed, 'the backend wrote every hint').toBe(true);
      await new Promise((r) => setTimeout(r, 300));
      const closed = new Promise<void>((resolve) => s.once('close', () => resolve()));
      s.on('data', (d: Buffer) => chunks.push(d));
      s.resume();
      await Promise.race([closed, new Promise((r) => setTimeout(r, 20_000))]);
    } finally {
      s.destroy();
    }
    const raw = Buffer.concat(chunks).toString('latin1');
    const hints = statusLines(raw).filter((l) => l.startsWith('HTTP/1.1 103')).length;
    expect(hints).toBeGreaterThan(0);
    expect(hints).toBeLessThan(count);
    expect(statusLines(raw).at(-1)).toBe('HTTP/1.1 200 OK');
    expect(raw.endsWith('final')).toBe(true);
  }, 60_000);

  it('sends no 1xx to an HTTP/1.0 client (it cannot take one), only the final response', async () => {
    answer = informational;
    const raw = await exchange(gw.port, ['GET /v1/page HTTP/1.0', host(gw), '', ''].join('\r\n'));
    expect(statusLines(raw)).toEqual(['HTTP/1.1 200 OK']);
    expect(raw.endsWith('final')).toBe(true);
  });

  it("a client that sent Expect: 100-continue gets the one 100 Continue of the gateway, then the backend's 103", async () => {
    answer = informational;
    const raw = await exchange(
      gw.port,
      ['POST /v1/upload HTTP/1.1', host(gw), 'Expect: 100-continue', 'Content-Length: 5', 'Connection: close', '', 'hello'].join('\r\n'),
    );
    expect(statusLines(raw)).toEqual([
      'HTTP/1.1 100 Continue',
      'HTTP/1.1 102 Processing',
      'HTTP/1.1 103 Early Hints',
      'HTTP/1.1 104 Upload Resumption Supported',
      'HTTP/1.1 200 OK',
    ]);
  });
});

describe('trailers (RFC 9110 §6.5)', () => {
  /**
   * A chunked answer with a Trailer header and trailer fields: two to pass on, one by a name the gateway sets itself as
   * a header, one that is never a trailer (RFC 9110 §6.5.1). A HEAD gets the headers alone (Node refuses Trailer there).
   */
  const withTrailers: Answer = (req, res) => {
    res.setHeader('content-type', 'text/plain');
    if (req.method === 'HEAD') return void res.end();
    res.setHeader('trailer', 'X-Checksum, Server-Timing');
    res.setHeader('server-timing', 'cache;desc=miss');
    res.write('part one, ');
    res.addTrailers([
      ['X-Checksum', 'sha256=abc'],
      ['Server-Timing', 'db;dur=53'],
      ['X-Request-Id', 'forged-by-backend'],
      ['WWW-Authenticate', 'Basic realm="late"'],
    ]);
    res.end('part two');
  };

  it("passes the backend's trailers and Trailer header to a client that sent TE: trailers, not fields the gateway set as headers", async () => {
    answer = withTrailers;
    const raw = await exchange(gw.port, ['GET /v1/report HTTP/1.1', host(gw), 'TE: trailers', 'Connection: close', '', ''].join('\r\n'));
    const head = headBlock(raw, 200);
    expect(fieldOf(head, 'trailer')).toEqual(['X-Checksum, Server-Timing']);
    expect(fieldOf(head, 'transfer-encoding')).toEqual(['chunked']);
    expect(fieldOf(head, 'server-timing')).toEqual(['cache;desc=miss']);
    const trailerSection = raw.slice(raw.lastIndexOf('\r\n0\r\n') + 5);
    expect(trailerSection).toBe('X-Checksum: sha256=abc\r\nServer-Timing: db;dur=53\r\n\r\n');
    expect(seen[0]!.headers.te).toBe('trailers');
    expect(seen[0]!.headers.connection).toMatch(/\bTE\b/i);
  });

  it('gives a client without TE: trailers neither the trailers nor the Trailer header (the response as before), and asks the backend for none', async () => {
    answer = withTrailers;
    const raw = await exchange(gw.port, ['GET /v1/report HTTP/1.1', host(gw), 'Connection: close', '', ''].join('\r\n'));
    expect(fieldOf(headBlock(raw, 200), 'trailer')).toEqual([]);
    expect(raw.endsWith('\r\n0\r\n\r\n')).toBe(true);
    expect(seen[0]!.headers.te).toBeUndefined();
  });

  it('never sets Trailer where it would not be chunked: a HEAD, and an HTTP/1.0 client, get their answer', async () => {
    answer = withTrailers;
    const head = await exchange(gw.port, ['HEAD /v1/report HTTP/1.1', host(gw), 'TE: trailers', 'Connection: close', '', ''].join('\r\n'));
    expect(statusLines(head)).toEqual(['HTTP/1.1 200 OK']);
    expect(fieldOf(headBlock(head, 200), 'trailer')).toEqual([]);
    const old = await exchange(gw.port, ['GET /v1/report HTTP/1.0', host(gw), 'TE: trailers', '', ''].join('\r\n'));
    expect(statusLines(old)).toEqual(['HTTP/1.1 200 OK']);
    expect(old.endsWith('part one, part two')).toBe(true);
  });

  it("passes a chunked request's trailers and Trailer header to the backend, not the names the gateway owns or reads", async () => {
    await exchange(
      gw.port,
      [
        'POST /v1/upload HTTP/1.1',
        host(gw),
        'Transfer-Encoding: chunked',
        'Trailer: X-Checksum',
        'Connection: close',
        '',
        '5',
        'hello',
        '0',
        'X-Checksum: sha256=def',
        'X-Consumer-Id: admin',
        'X-Forwarded-For: 6.6.6.6',
        'Authorization: Bearer stolen',
        'X-HTTP-Method-Override: DELETE',
        'Host: evil.example',
        '',
        '',
      ].join('\r\n'),
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]!.body.toString()).toBe('hello');
    expect(seen[0]!.headers.trailer).toBe('X-Checksum');
    expect(seen[0]!.rawTrailers).toEqual(['X-Checksum', 'sha256=def']);
  });
});

describe('request trailers on the whole request path (keys from a header source)', () => {
  it("never passes on a trailer by the name of the key's header, whether the key was hidden or not", async () => {
    const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
    for (const hideCredentials of [true, false]) {
      const keyed = await startLimitsGateway(testConfig({ upstream: { url, timeoutMs: 3000, hideCredentials }, auth: { sources: ['header:X-API-Key'] } }));
      try {
        const { key } = await keyed.createKey({});
        seen.length = 0;
        const raw = await exchange(
          keyed.port,
          [
            'POST /v1/upload HTTP/1.1',
            `Host: 127.0.0.1:${keyed.port}`,
            `X-API-Key: ${key}`,
            'Transfer-Encoding: chunked',
            'Connection: close',
            '',
            '5',
            'hello',
            '0',
            'X-API-Key: tg_not_the_judged_key',
            'X-Checksum: sha256=def',
            '',
            '',
          ].join('\r\n'),
        );
        expect(statusLines(raw), String(hideCredentials)).toEqual(['HTTP/1.1 200 OK']);
        expect(seen[0]!.headers['x-api-key'], String(hideCredentials)).toBe(hideCredentials ? undefined : key);
        expect(seen[0]!.rawTrailers, String(hideCredentials)).toEqual(['X-Checksum', 'sha256=def']);
      } finally {
        await keyed.close();
      }
    }
  });
});

describe('Proxy-Authenticate (RFC 9110 §11.7.1)', () => {
  it("keeps the backend's Proxy-Authenticate and Proxy-Authentication-Info from the client; the status and WWW-Authenticate pass", async () => {
    answer = (_req, res) => {
      res.statusCode = 407;
      res.setHeader('proxy-authenticate', 'Basic realm="backend-internal-proxy"');
      res.setHeader('proxy-authentication-info', 'nextnonce="abc"');
      res.setHeader('www-authenticate', 'Bearer realm="api"');
      res.end('{"error":"proxy auth"}');
    };
    const raw = await exchange(gw.port, ['GET /v1/secret HTTP/1.1', host(gw), 'Connection: close', '', ''].join('\r\n'));
    const head = headBlock(raw, 407);
    expect(fieldOf(head, 'proxy-authenticate')).toEqual([]);
    expect(fieldOf(head, 'proxy-authentication-info')).toEqual([]);
    expect(fieldOf(head, 'www-authenticate')).toEqual(['Bearer realm="api"']);
    expect(raw.endsWith('{"error":"proxy auth"}')).toBe(true);
  });
});
