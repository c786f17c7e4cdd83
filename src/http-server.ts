// The gateway's HTTP server: Node's, with two request shapes handled the way a gateway should rather than the way
// Node does by default.
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { errorBody } from './errors.js';
import { H, isSaneRequestId } from './headers.js';

const AWAITING_CONTINUE = Symbol('tollgate.awaitingContinue');
type MaybeAwaiting = ServerResponse & { [AWAITING_CONTINUE]?: boolean };

/**
 * Creates the server for the gateway's app.
 *
 * - `Expect: 100-continue` (RFC 9110 §10.1.1): Node would answer 100 at once, before the gateway has looked at the
 *   request, and the client would send its body to be refused. Here the request path runs first and the body is
 *   asked for only when the request is about to be proxied (`continueIfExpected`). A request refused on the way
 *   (401, 429, 410, 413, 404, ...) is answered at once, its body never sent, and Node closes that connection.
 * - `CONNECT` (a forward-proxy tunnel): there is none here. It gets `404 not_found` and the connection is closed,
 *   instead of Node's close without an answer.
 */
export function createGatewayServer(app: RequestListener, options: ServerOptions = {}): Server {
  const server = createServer(options, app);
  server.on('checkContinue', (req: IncomingMessage, res: MaybeAwaiting) => {
    res[AWAITING_CONTINUE] = true;
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

/** Sends `100 Continue` if the client asked for it and it has not been sent: call when the body is about to be read. */
export function continueIfExpected(res: ServerResponse): void {
  const r = res as MaybeAwaiting;
  if (!r[AWAITING_CONTINUE]) return;
  r[AWAITING_CONTINUE] = false;
  if (!res.headersSent) res.writeContinue();
}
