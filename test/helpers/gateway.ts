// Builds an in-process gateway on a loopback port (composeGateway, as `tollgate serve` builds it), and speaks raw
// HTTP/1.1 to it (absolute-form targets, hop-by-hop headers and exact response headers are beyond supertest's reach).
import type { Server } from 'node:http';
import { createGatewayServer } from '../../src/server/http-server.js';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { composeGateway, type ComposedGateway, type ComposeOptions } from '../../src/compose.js';
import { validateConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import type { Logger } from '../../src/observability/logger.js';
import type { Runtime } from '../../src/routing/runtime.js';
import { trackServer } from './children.js';

export const silentLogger: Logger = pino({ level: 'silent' });

/** A validated, frozen config from a partial raw one (defaults fill the rest); throws on an invalid one. */
export function testConfig(raw: Record<string, unknown>): Config {
  const result = validateConfig(raw);
  if (!result.ok) throw new Error(`invalid test config:\n${result.errors.join('\n')}`);
  return result.config;
}

export interface TestGateway {
  gateway: ComposedGateway;
  runtime: Runtime;
  server: Server;
  port: number;
  url: string;
  close(): Promise<void>;
}

/**
 * The gateway composeGateway builds, listening on a free loopback port. By default without the key stages
 * (authenticate ... keyLimits: `keyStages: false`), for tests of the proxy and route policy; pass `keyStages: true`
 * for the whole request path.
 */
export async function startTestGateway(config: Config, opts: Partial<Omit<ComposeOptions, 'config'>> = {}): Promise<TestGateway> {
  const gateway = await composeGateway({ logger: silentLogger, keyStages: false, ...opts, config });
  const server = createGatewayServer(gateway.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      untrack();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await gateway.close();
    })());
  const untrack = trackServer(close);
  return {
    gateway,
    runtime: gateway.runtime,
    server,
    port,
    url: `http://127.0.0.1:${port}`,
    close,
  };
}

export interface RawResponse {
  status: number;
  /** Lower-cased names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The header block exactly as received. */
  head: string;
  body: string;
}

/** Parses one complete HTTP/1.1 response from the start of `buf`, or returns undefined if more bytes are needed. */
export function parseResponse(buf: Buffer, headRequest = false): { response: RawResponse; length: number } | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = buf.subarray(0, end).toString('latin1');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const status = Number(statusLine.split(' ')[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    const name = line.slice(0, i).trim().toLowerCase();
    const value = line.slice(i + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  const bodyStart = end + 4;
  if (headRequest || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    return { response: { status, headers, head, body: '' }, length: bodyStart };
  }
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
    const parts: Buffer[] = [];
    let pos = bodyStart;
    for (let guard = 0; guard < 100_000; guard++) {
      const lineEnd = buf.indexOf('\r\n', pos);
      if (lineEnd < 0) return undefined;
      const size = parseInt(buf.subarray(pos, lineEnd).toString('latin1'), 16);
      if (size === 0) {
        const trailerEnd = buf.indexOf('\r\n', lineEnd + 2);
        if (trailerEnd < 0) return undefined;
        return { response: { status, headers, head, body: Buffer.concat(parts).toString('utf8') }, length: trailerEnd + 2 };
      }
      if (buf.length < lineEnd + 2 + size + 2) return undefined;
      parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
      pos = lineEnd + 2 + size + 2;
    }
    throw new Error('chunked body too long');
  }
  if (headers['content-length'] !== undefined) {
    const len = Number(headers['content-length']);
    if (buf.length < bodyStart + len) return undefined;
    return { response: { status, headers, head, body: buf.subarray(bodyStart, bodyStart + len).toString('utf8') }, length: bodyStart + len };
  }
  return undefined; // close-delimited: the caller finishes it on 'end'
}

/** A raw client connection: write request text, read whole responses one at a time. */
export class RawConnection {
  private buf = Buffer.alloc(0);
  private waiter: (() => void) | undefined;
  ended = false;
  readonly closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.waiter?.();
    });
    socket.on('error', () => {});
    this.closed = new Promise((resolve) => {
      socket.on('close', () => {
        this.ended = true;
        this.waiter?.();
        resolve();
      });
    });
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const s = connect(port, '127.0.0.1', () => {
        s.off('error', reject);
        resolve(new RawConnection(s));
      });
      s.once('error', reject);
    });
  }

  write(text: string | Buffer): void {
    this.socket.write(text);
  }

  /** The next complete response, within timeoutMs. */
  async read(opts: { timeoutMs?: number; head?: boolean } = {}): Promise<RawResponse> {
    const deadline = Date.now() + (opts.timeoutMs ?? 5000);
    for (;;) {
      const parsed = parseResponse(this.buf, opts.head);
      if (parsed) {
        this.buf = this.buf.subarray(parsed.length);
        return parsed.response;
      }
      if (this.ended) {
        const end = this.buf.indexOf('\r\n\r\n');
        if (end >= 0) {
          const p = parseResponse(Buffer.concat([this.buf.subarray(0, end), Buffer.from('\r\ncontent-length: 0\r\n\r\n')]));
          const body = this.buf.subarray(end + 4).toString('utf8');
          this.buf = Buffer.alloc(0);
          if (p) return { ...p.response, body };
        }
        throw new Error(`connection closed before a complete response: ${JSON.stringify(this.buf.toString('latin1'))}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no complete response in time; got ${JSON.stringify(this.buf.toString('latin1').slice(0, 500))}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiter = () => {
          clearTimeout(t);
          this.waiter = undefined;
          resolve();
        };
      });
    }
  }

  /** Resolves true if the peer closes the connection within timeoutMs. */
  async closedWithin(timeoutMs: number): Promise<boolean> {
    if (this.ended) return true;
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([this.closed.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), timeoutMs)))]);
    clearTimeout(timer);
    return result;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** One request on its own connection; `lines` are the request line and headers, without the blank line. */
export async function rawRequest(port: number, lines: string[], body = '', opts: { head?: boolean; timeoutMs?: number } = {}): Promise<RawResponse> {
  const conn = await RawConnection.open(port);
  try {
    conn.write(`${lines.join('\r\n')}\r\n\r\n${body}`);
    return await conn.read(opts);
  } finally {
    conn.destroy();
  }
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** No error body may leak a stack trace or an internal address (README, "Error codes"). */
export function leaksIn(text: string): string[] {
  const problems: string[] = [];
  if (/\bat .*\.(ts|js|mjs|cjs):\d+/.test(text) || /\n\s+at /.test(text)) problems.push('stack trace');
  if (text.includes('127.0.0.1') || text.includes('localhost') || /::1\b/.test(text)) problems.push('internal address');
  if (/<html|<pre/i.test(text)) problems.push('HTML');
  return problems;
}
