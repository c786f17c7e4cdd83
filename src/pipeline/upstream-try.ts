// One try of a proxied request: the upstream request on its target's keep-alive pool (node:http), its connect timer,
// and its outcome reported once: response headers, or how it failed. Every listener is on the try's own upstream
// request or socket, so a retry adds none to the client's request or response. Why this is not http-proxy-middleware:
// docs/architecture.md, "Dependencies".
import { request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import type { Target } from '../routing/target.js';
import type { TryFailure, TryOutcome } from './proxy-rules.js';

export interface TryRequest {
  target: Target;
  method: string;
  /** The path and query as forwarded (the target's base path is prepended here). */
  url: string;
  headers: OutgoingHttpHeaders;
  connectTimeoutMs: number;
}

/** A target URL taken apart once, not per try. */
interface Origin {
  https: boolean;
  hostname: string;
  port: number;
  host: string;
  basePath: string;
}

const origins = new WeakMap<Target, Origin>();

function originOf(target: Target): Origin {
  let o = origins.get(target);
  if (!o) {
    const u = new URL(target.url);
    const https = u.protocol === 'https:';
    const basePath = u.pathname === '/' ? '' : u.pathname.replace(/\/$/, '');
    o = { https, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port) || (https ? 443 : 80), host: u.host, basePath };
    origins.set(target, o);
  }
  return o;
}

/** Methods Node sends without a body unless told one comes (ClientRequest's useChunkedEncodingByDefault false). */
const BODILESS_BY_DEFAULT = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

/**
 * The try's request headers as node:http takes them: a flat [name, value, ...] array, written into the request head
 * at once (one validation per header) instead of each set through setHeader (a copy of the object, a validated,
 * lower-cased [name, value] entry per header, then the head written from those). The upstream sees its own authority
 * in Host (the client's is in X-Forwarded-Host). The head is the same bytes either way, except for a request of a
 * method that has a body by default (POST, PUT, ...) with neither Content-Length nor Transfer-Encoding: Node makes its
 * `Content-Length: 0` only on the object path (the array one would announce a chunked body), so it keeps that path.
 */
function upstreamHeaders(method: string, headers: OutgoingHttpHeaders, host: string): OutgoingHttpHeaders | string[] {
  if (headers['content-length'] === undefined && headers['transfer-encoding'] === undefined && !BODILESS_BY_DEFAULT.has(method)) return { ...headers, host };
  // Host first, where the client's stood (prepareUpstreamHeaders puts it first).
  const flat: Array<string | string[]> = ['host', host];
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || name === 'host') continue;
    flat.push(name, typeof value === 'number' ? String(value) : value);
  }
  // A value that is a list (Cookie, Set-Cookie) stays one: Node writes it as the object path does (a Cookie's joined).
  return flat as string[];
}

/**
 * The code of an error of the TLS layer: a certificate the gateway could not verify (UNABLE_TO_VERIFY_LEAF_SIGNATURE,
 * ERR_TLS_CERT_ALTNAME_INVALID, CERT_HAS_EXPIRED, ...), an alert from the target (ERR_SSL_..., e.g. it wanted a client
 * certificate), or no TLS at all on the other end (EPROTO). Undefined for any other error (refused, reset, ...).
 */
export function tlsErrorCode(err: NodeJS.ErrnoException): string | undefined {
  const code = err.code;
  if (!code) return undefined;
  return /CERT|SELF_SIGNED|^UNABLE_TO_|^ERR_SSL_|^ERR_TLS_|^EPROTO$|^HOSTNAME_MISMATCH$/.test(code) ? code : undefined;
}

export interface TryEvents {
  /** The try has its connection (a fresh one, or one from the pool). */
  onReached: () => void;
  /** Once: response headers (with the response) or how the try failed. */
  onOutcome: (outcome: TryOutcome, res?: IncomingMessage) => void;
  /** Once: the upstream request closed (its connection back in the pool, or closed), or was withdrawn from the pool's queue. */
  onClose: () => void;
}

/** The try an upstream request belongs to, for the listeners below (shared by every try, none made per try). */
const TRY = Symbol('upstreamTry');
type TryRequestOf = ClientRequest & { [TRY]: UpstreamTry };
const tryOf = (req: ClientRequest): UpstreamTry => (req as TryRequestOf)[TRY];

function onSocket(this: ClientRequest, socket: Socket): void {
  tryOf(this).gotSocket(socket);
}
function onResponse(this: ClientRequest, res: IncomingMessage): void {
  tryOf(this).settle({ type: 'status', status: res.statusCode ?? 502 }, res);
}
// A 101 to a request that did not ask to upgrade: without this listener Node drops the socket and says nothing, and
// the client would wait for an answer forever.
function onUpgrade(this: ClientRequest, res: IncomingMessage, socket: Socket): void {
  socket.destroy();
  tryOf(this).settle({ type: 'status', status: 101 });
}
function onError(this: ClientRequest, err: NodeJS.ErrnoException): void {
  tryOf(this).failed(err);
}
function onClose(this: ClientRequest): void {
  tryOf(this).requestClosed();
}

export class UpstreamTry {
  readonly req: ClientRequest;
  /** The try has a connection to its target (nothing of the request can have reached it before). */
  reached = false;
  /** It went out on a pooled keep-alive socket. */
  reusedSocket = false;
  /** Response headers arrived (or the try failed): the outcome has been reported. */
  settled = false;
  private abortedAs: TryFailure | undefined;
  private isClosed = false;
  private connectTimer: NodeJS.Timeout | undefined;
  private readonly https: boolean;
  private readonly connectTimeoutMs: number;

  constructor(
    o: TryRequest,
    private readonly on: TryEvents,
  ) {
    const origin = originOf(o.target);
    const path = origin.basePath + (o.url.startsWith('/') ? o.url : `/${o.url}`);
    const headers = upstreamHeaders(o.method, o.headers, origin.host);
    this.https = origin.https;
    this.connectTimeoutMs = o.connectTimeoutMs;
    const request = origin.https ? httpsRequest : httpRequest;
    const req = request({ agent: o.target.agent, hostname: origin.hostname, port: origin.port, method: o.method, path, headers });
    this.req = req;
    (req as TryRequestOf)[TRY] = this;
    // Each of these comes at most once per upstream request: plain listeners, without once()'s wrapper per try.
    req.on('socket', onSocket);
    req.on('response', onResponse);
    req.on('upgrade', onUpgrade);
    req.on('error', onError);
    req.on('close', onClose);
  }

  /** @internal The upstream request's 'socket': a pooled connection is reached at once, a fresh one once it connects. */
  gotSocket(socket: Socket): void {
    if (!socket.connecting) return this.connected(this.req.reusedSocket);
    this.connectTimer = setTimeout(() => this.abort('connect_timeout'), this.connectTimeoutMs);
    // Over TLS, nothing of the request is sent before the handshake: a try that fails it reached no target.
    socket.once(this.https ? 'secureConnect' : 'connect', () => this.connected(false));
  }

  /** @internal The upstream request's 'error'. */
  failed(err: NodeJS.ErrnoException): void {
    if (this.settled) return;
    const failure = this.abortedAs ?? (this.reached ? 'reset' : 'refused');
    const tlsError = this.https ? tlsErrorCode(err) : undefined;
    this.settle({ type: 'failed', failure, reached: this.reached, reusedSocket: this.reusedSocket, ...(tlsError ? { tlsError } : {}) });
  }

  /** @internal The upstream request's 'close'. */
  requestClosed(): void {
    clearTimeout(this.connectTimer);
    // Closed with neither a response nor an error (destroyed without one): still a failure to report.
    if (!this.settled) this.settle({ type: 'failed', failure: this.abortedAs ?? 'reset', reached: this.reached, reusedSocket: this.reusedSocket });
    this.closed();
  }

  /** Ends the try as `failure` (its timers, the client's behaviour): the upstream request is destroyed, its connection freed. */
  abort(failure: TryFailure): void {
    if (this.settled) return;
    this.abortedAs = failure;
    const queued = !this.req.socket;
    this.req.destroy();
    // Still waiting for a pooled connection: Node reports a destroyed request only once the pool hands it a socket
    // (which then goes to the next request in line), so its outcome is reported now, not when a connection frees.
    if (!queued) return;
    this.settle({ type: 'failed', failure, reached: false, reusedSocket: false, queued: true });
    // Nothing is in flight on the target any more (least-requests counts, a removed target's pool closing).
    this.closed();
  }

  private closed(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.on.onClose();
  }

  private connected(reused: boolean): void {
    clearTimeout(this.connectTimer);
    this.reached = true;
    this.reusedSocket = reused;
    this.on.onReached();
  }

  /** @internal Reports the outcome, once. */
  settle(outcome: TryOutcome, res?: IncomingMessage): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.connectTimer);
    this.on.onOutcome(outcome, res);
  }
}
