// The gateway's HTTP server: Node's, with requests and responses built the way Express wants them (so its
// per-request prototype change is a no-op), responses that close their connections once the server drains, and two
// request shapes handled the way a gateway should rather than the way Node does by default.
import { createServer, IncomingMessage, ServerResponse, type OutgoingHttpHeader, type RequestListener, type Server, type ServerOptions } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { ListenerTlsMaterial } from '../config/tls-files.js';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { errorBody } from '../http/errors.js';
import { awaitContinue } from '../http/expect-continue.js';
import { H, isSaneRequestId } from '../http/headers.js';

const DRAINING = Symbol('tollgate.draining');

/**
 * From now on, every response the server sends (those in flight as well as new ones) says `Connection: close` and
 * closes its connection when done, so no client sends another request on a connection about to go. For servers
 * made by createGatewayServer (their responses check the mark as their headers are written).
 */
export function closeConnectionsAfterResponses(server: Server): void {
  (server as unknown as Record<symbol, unknown>)[DRAINING] = true;
}

/** A draining server's response, about to write its headers (`writeHeadArgs`: what came after the status code). */
function closeAfterThis(res: ServerResponse, writeHeadArgs: unknown[]): void {
  // Headers given to writeHead itself would be written after (and win over) what is set here: set them first.
  const last = writeHeadArgs[writeHeadArgs.length - 1];
  if (last !== null && typeof last === 'object' && !Array.isArray(last)) {
    writeHeadArgs.pop();
    for (const [name, value] of Object.entries(last as Record<string, OutgoingHttpHeader | undefined>)) {
      if (value !== undefined) res.setHeader(name, value);
    }
  }
  res.shouldKeepAlive = false;
  if (res.hasHeader('connection')) res.setHeader('connection', 'close');
  res.removeHeader('keep-alive');
}

/** What an Express app carries besides being a request listener: the prototypes it gives every req and res. */
interface ExpressLike {
  request: object;
  response: object;
}

type PrototypeOptions = Required<Pick<ServerOptions, 'IncomingMessage' | 'ServerResponse'>>;
const bound = new WeakMap<ExpressLike, PrototypeOptions>();

/**
 * Server options that make Node create each request and response already carrying the app's prototypes, so that
 * Express never has to change an object's prototype.
 *
 * Express gives every request and response the app's prototypes (`app.request`, `app.response`) with
 * `Object.setPrototypeOf` when it starts handling them, and on V8 that is far from free. Measured with
 * `node --trace-gc-nvp` on a bare Express 5 + http-proxy-middleware proxy at one connection: 7.8 KB of every request
 * outlived two scavenges and was promoted to old space, against 0.2 KB without the prototype change (and 0 without
 * Express); CPU per request fell by 41% at one connection and by half at 50 (bench/history/2026-11.md). Changing an object's
 * prototype gives it a new hidden class; why that keeps so much alive is V8's business, the effect is what was
 * measured. The fix is the one proposed to Express itself in expressjs/express#5998, done from the outside:
 *
 * - Node builds requests and responses from subclasses of its own IncomingMessage and ServerResponse (the
 *   `IncomingMessage` / `ServerResponse` server options), and V8 lays their objects out as it does Node's own;
 * - the subclasses' prototypes inherit from the app's prototypes, and become the app's `request` / `response`, so
 *   Express's `Object.setPrototypeOf(req, app.request)` sets the prototype the object already has: a no-op.
 *
 * Requests see exactly what they saw before (the app's methods and `req.app`, one level further up the chain).
 * Calling it again for the same app returns the same classes. The response class also closes connections once its
 * server is draining (`closeConnectionsAfterResponses`).
 */
export function expressPrototypes(app: ExpressLike): PrototypeOptions {
  const known = bound.get(app);
  if (known) return known;
  class GatewayIncomingMessage extends IncomingMessage {}
  class GatewayServerResponse extends ServerResponse {
    // Every response's headers pass through here (write() and end() without it call it too): a draining server's
    // answers, in flight or new, close their connection, without a list of responses kept per request.
    override writeHead(statusCode: number, ...rest: unknown[]): this {
      if ((this.socket as (Socket & { server?: Record<symbol, unknown> }) | null)?.server?.[DRAINING]) closeAfterThis(this, rest);
      return (super.writeHead as (this: ServerResponse, code: number, ...more: unknown[]) => this).call(this, statusCode, ...rest);
    }
  }
  Object.setPrototypeOf(GatewayIncomingMessage.prototype, app.request);
  Object.setPrototypeOf(GatewayServerResponse.prototype, app.response);
  app.request = GatewayIncomingMessage.prototype;
  app.response = GatewayServerResponse.prototype;
  const options = { IncomingMessage: GatewayIncomingMessage, ServerResponse: GatewayServerResponse as PrototypeOptions['ServerResponse'] };
  bound.set(app, options);
  return options;
}

/**
 * Creates the server for the gateway's app.
 *
 * - Requests and responses are created with the app's prototypes (`expressPrototypes`, above).
 * - `Expect: 100-continue` (RFC 9110 §10.1.1): Node would answer 100 at once, before the gateway has looked at the
 *   request, and the client would send its body to be refused. Here the request path runs first and the body is
 *   asked for only when the request is about to be proxied (`continueIfExpected`). A request refused on the way
 *   (401, 429, 410, 413, 404, ...) is answered at once, its body never sent, and Node closes that connection.
 * - `CONNECT` (a forward-proxy tunnel): there is none here. It gets `404 not_found` and the connection is closed,
 *   instead of Node's close without an answer.
 * - With `tls`, the server is node:https's (the same options, requests and responses, over TLS); its type is the
 *   http Server's, whose methods an https server has too.
 */
export function createGatewayServer(app: RequestListener & ExpressLike, options: ServerOptions = {}, tls?: ListenerTlsMaterial): Server {
  const all = { ...expressPrototypes(app), ...options };
  const server = tls ? (createHttpsServer({ ...all, ...tls }, app) as unknown as Server) : createServer(all, app);
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    awaitContinue(res);
    server.emit('request', req, res);
  });
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => {});
    const given = req.headers[H.requestId];
    const requestId = isSaneRequestId(given) ? given : randomUUID();
    const body = JSON.stringify(errorBody('not_found', 'CONNECT is not supported: this gateway is not a forward proxy.'));
    socket.end(
      'HTTP/1.1 404 Not Found\r\n' +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        'X-Content-Type-Options: nosniff\r\n' +
        `X-Request-Id: ${requestId}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  });
  return server;
}
