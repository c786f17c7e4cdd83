// A real upstream HTTP server on loopback whose behaviour each test chooses: echo, slow, reset, refuse. Given TLS
// options, it serves HTTPS (with them: its certificate, and a CA to demand client certificates by).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type ServerOptions as HttpsOptions } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { trackServer } from './children.js';

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  rawHeaders: string[];
  body: Buffer;
}

export type Behaviour = (req: IncomingMessage, res: ServerResponse, body: Buffer) => void;

/** Answers 200 with a JSON echo of what it received. */
export const echo: Behaviour = (req, res, body) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, bodyLength: body.length }));
};

export class TestUpstream {
  readonly seen: SeenRequest[] = [];
  behaviour: Behaviour = echo;
  private readonly sockets = new Set<Socket>();
  private untrack: () => void = () => {};
  private constructor(
    private readonly server: Server,
    private readonly scheme: 'http' | 'https',
  ) {}

  static async start(tls?: HttpsOptions): Promise<TestUpstream> {
    const server = tls ? (createHttpsServer(tls) as unknown as Server) : createServer();
    const up = new TestUpstream(server, tls ? 'https' : 'http');
    server.on('connection', (s) => {
      up.sockets.add(s);
      s.on('close', () => up.sockets.delete(s));
    });
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('error', () => {});
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        up.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body });
        up.behaviour(req, res, body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    up.untrack = trackServer(() => up.close());
    return up;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `${this.scheme}://127.0.0.1:${this.port}`;
  }

  get openSockets(): number {
    return this.sockets.size;
  }

  async close(): Promise<void> {
    this.untrack();
    for (const s of this.sockets) s.destroy();
    if (!this.server.listening) return;
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
