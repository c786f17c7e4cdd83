// An upstream that misbehaves on demand, for fault tests: it can stop listening (connections refused) and listen
// again on the SAME port, answer slowly, reset a response half-way, close every connection after one response, or
// keep connections alive and then drop them when idle without announcing a timeout (the stale pooled socket race).
// Unlike TestUpstream (upstream.ts), whose behaviours it reuses, it can come back on its port and tune its sockets.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { trackServer } from './children.js';
import { echo, type Behaviour } from './upstream.js';

export { echo, type Behaviour };

/** A small JSON 200 (cheaper than the echo under load). */
export const ok: Behaviour = (_req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end('{"ok":true}');
};

/** Answers `ok` after `ms`. */
export const slow =
  (ms: number): Behaviour =>
  (req, res, body) => {
    const t = setTimeout(() => {
      if (!res.destroyed) ok(req, res, body);
    }, ms);
    res.on('close', () => clearTimeout(t));
  };

/**
 * Sends the status line, headers and part of the body, then destroys the connection. `chunked`: no Content-Length,
 * so only the missing terminating chunk tells the body is incomplete.
 */
export const resetMidBody =
  (opts: { chunked: boolean }): Behaviour =>
  (_req, res) => {
    const part = `{"items":[${'"x",'.repeat(200)}`;
    res.setHeader('content-type', 'application/json');
    if (!opts.chunked) res.setHeader('content-length', String(part.length * 4));
    res.flushHeaders();
    res.write(part, () => setTimeout(() => res.socket?.destroy(), 5));
  };

/** `Connection: close` on every answer: each connection carries one request. */
export const closeEach: Behaviour = (req, res, body) => {
  res.setHeader('connection', 'close');
  ok(req, res, body);
};

/**
 * Keeps the connection alive but says so without a `Keep-Alive: timeout=N` hint (as nginx, Go and most servers
 * do), so the client cannot know when the server will drop the idle connection.
 */
export const keepAliveNoHint: Behaviour = (req, res, body) => {
  res.setHeader('connection', 'keep-alive');
  ok(req, res, body);
};

/**
 * An upstream's idle keep-alive timeout, without the `Keep-Alive: timeout` hint that would let the client stay clear
 * of it. After `afterMs` idle the upstream closes the connection, and the FIN reaches the gateway `windowMs` later: a
 * request the gateway sends on that pooled socket meanwhile is reset unanswered. On loopback the window is a few
 * microseconds; across a real network it is the transit time plus the gateway's event-loop lag, which `windowMs`
 * stands for, so the race happens often enough to test rather than once in a blue moon.
 */
export interface IdleClose {
  afterMs: number;
  windowMs: number;
}

export class FaultUpstream {
  behaviour: Behaviour = ok;
  /** Requests received (headers and body complete). */
  requests = 0;
  /** Request target -> Date.now() when it arrived (headers and body complete). */
  readonly seen = new Map<string, number>();
  /** Connections accepted. */
  connections = 0;
  /** Requests that arrived on a connection the upstream was already closing for idleness (reset unanswered). */
  dropped = 0;
  private readonly sockets = new Set<Socket>();
  private server: Server;
  private boundPort = 0;
  private untrack: () => void = () => {};
  private constructor(private readonly idleClose: IdleClose | undefined) {
    this.server = this.makeServer();
  }

  /** `idleClose`: drop keep-alive connections that sit idle (see IdleClose). */
  static async start(opts: { port?: number; idleClose?: IdleClose } = {}): Promise<FaultUpstream> {
    const up = new FaultUpstream(opts.idleClose);
    await up.listen(opts.port ?? 0);
    up.untrack = trackServer(() => up.close());
    return up;
  }

  private makeServer(): Server {
    const server = createServer();
    const idle = new Map<Socket, NodeJS.Timeout>();
    const closing = new Set<Socket>();
    if (this.idleClose) server.keepAliveTimeout = 60_000;
    server.on('connection', (s: Socket) => {
      this.connections++;
      this.sockets.add(s);
      s.on('close', () => {
        this.sockets.delete(s);
        clearTimeout(idle.get(s));
        idle.delete(s);
        closing.delete(s);
      });
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const socket = req.socket;
      if (closing.has(socket)) {
        // The request crossed the close on the wire: it is reset unanswered, as a closed socket would.
        this.dropped++;
        socket.resetAndDestroy();
        return;
      }
      clearTimeout(idle.get(socket));
      const ic = this.idleClose;
      if (ic) {
        res.on('finish', () =>
          idle.set(
            socket,
            setTimeout(() => {
              closing.add(socket);
              setTimeout(() => socket.destroy(), ic.windowMs);
            }, ic.afterMs),
          ),
        );
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('error', () => {});
      req.on('end', () => {
        this.requests++;
        this.seen.set(req.url ?? '', Date.now());
        this.behaviour(req, res, Buffer.concat(chunks));
      });
    });
    server.on('clientError', (_err, socket) => socket.destroy());
    return server;
  }

  private async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.boundPort = (this.server.address() as { port: number }).port;
  }

  get port(): number {
    return this.boundPort;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get listening(): boolean {
    return this.server.listening;
  }

  /** Stops listening and destroys every open connection: from now on connections to the port are refused. */
  async stopListening(): Promise<void> {
    const closed = new Promise<void>((r) => this.server.close(() => r()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  /** Listens again on the same port (retrying briefly if the port is still held). */
  async listenAgain(): Promise<void> {
    this.server = this.makeServer();
    const deadline = Date.now() + 3000;
    for (;;) {
      try {
        await this.listen(this.port);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || Date.now() > deadline) throw err;
        this.server = this.makeServer();
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  async close(): Promise<void> {
    this.untrack();
    if (this.server.listening) await this.stopListening();
    for (const s of this.sockets) s.destroy();
  }
}
