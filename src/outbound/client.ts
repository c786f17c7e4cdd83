// Every HTTP call the gateway makes on its own account (health checks, the readiness probe, webhooks, metering
// exports), as opposed to the proxied request, which stays on node:http (pipeline/upstream-try.ts). One attempt per
// call, bounded as a whole: connecting, waiting for the headers and reading the body all end within timeoutMs, and
// the body is kept only up to maxBodyBytes. Redirects are never followed (a 3xx is an answer like any other: a
// webhook that redirects is misconfigured, and following it would send the payload somewhere nobody checked). Each
// origin gets a keep-alive pool of its own; TLS material (a CA, a client certificate) becomes one secure context
// shared by every pool that uses it. With an AddressGuard, the host is resolved and judged first and the connection
// goes to the address judged, not to a second lookup's answer (which a hostile DNS server could point elsewhere).
import { createHash } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { Pool, buildConnector } from 'undici';
import type { AddressGuard, CheckedAddress } from './address-guard.js';
import { OutboundError, classifyError } from './errors.js';

export { OutboundError, type OutboundErrorKind } from './errors.js';

export interface OutboundTls {
  /** Replaces the system's CAs (as in node:tls). */
  ca?: Buffer;
  /** A client certificate and its key, for targets that ask for one. */
  cert?: Buffer;
  key?: Buffer;
  /** The name sent in SNI and checked against the certificate; default the URL's host. */
  servername?: string;
  /** false: any certificate is accepted. Default true. */
  rejectUnauthorized?: boolean;
}

export interface OutboundRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** The whole attempt: address check, connect, headers and body. */
  timeoutMs: number;
  /** Used for https: URLs only. */
  tls?: OutboundTls;
  /** Resolve the host, refuse addresses it does not allow, connect to the address it checked. */
  guard?: AddressGuard;
  /** Default 64 KiB; a longer body is cut there and its connection closed. 0: the body is not read. */
  maxBodyBytes?: number;
  /** 'close': sent with Connection: close, and its connection closed after the answer. Default 'keep-alive'. */
  connection?: 'keep-alive' | 'close';
}

export interface OutboundResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface OutboundClientOptions {
  /** Pools kept at once (one per origin, TLS material and pinned address); the least recently used is closed past it. */
  maxPools?: number;
  /** Connections one pool opens at most. */
  connectionsPerPool?: number;
  /** How long an idle keep-alive connection is kept (a server's keep-alive hint may shorten it). */
  keepAliveTimeoutMs?: number;
}

const DEFAULT_MAX_BODY = 64 * 1024;

/**
 * undici, loaded on the first call: the whole package costs a process about 7 MB of heap and 50 ms or more to load,
 * which a gateway with no health checks and no webhooks should not pay at start-up.
 */
let undici: Promise<typeof import('undici')> | undefined;
const loadUndici = () => (undici ??= import('undici'));
/**
 * A connect attempt's own bound. The attempt's timer abandons the request much sooner; this only ends a socket that
 * is still connecting after that (a black-holed address), so it does not linger.
 */
const CONNECT_TIMEOUT_MS = 30_000;

export class OutboundClient {
  private readonly pools = new Map<string, Pool>();
  /** Each TLS block's identity, computed once per object (the services hand the same object to every check). */
  private readonly tlsIds = new WeakMap<OutboundTls, string>();
  private readonly contexts = new Map<string, SecureContext>();
  private closed = false;
  private readonly maxPools: number;
  private readonly connections: number;
  private readonly keepAliveTimeout: number;

  constructor(options: OutboundClientOptions = {}) {
    this.maxPools = options.maxPools ?? 256;
    this.connections = options.connectionsPerPool ?? 16;
    this.keepAliveTimeout = options.keepAliveTimeoutMs ?? 4000;
  }

  /** One attempt. Resolves with any HTTP answer (3xx, 4xx and 5xx included); rejects with an OutboundError. */
  async request(r: OutboundRequest): Promise<OutboundResponse> {
    if (this.closed) throw new OutboundError('other', 'the outbound client is closed', 'ERR_CLIENT_CLOSED');
    const url = parseUrl(r.url);
    // Loaded before the attempt's timer starts: a one-off cost, not the remote end's slowness.
    const lib = await loadUndici();
    if (this.closed) throw new OutboundError('other', 'the outbound client is closed', 'ERR_CLIENT_CLOSED');
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new OutboundError('timeout', `no complete answer within ${r.timeoutMs} ms`, 'ETIMEDOUT'));
    }, r.timeoutMs);
    try {
      const pinned = r.guard ? await untilAborted(r.guard.check(url.href), controller.signal) : undefined;
      const pool = this.poolFor(lib, url, r.tls, pinned);
      const res = await pool.request({
        path: url.pathname + url.search,
        method: (r.method ?? 'GET') as 'GET',
        ...(r.headers ? { headers: r.headers } : {}),
        ...(r.body !== undefined ? { body: r.body } : {}),
        ...(r.connection === 'close' ? { reset: true } : {}),
        signal: controller.signal,
        // Within the attempt's timer; undici's own timers name the phase that was slow.
        headersTimeout: r.timeoutMs,
        bodyTimeout: r.timeoutMs,
      });
      const body = await readBounded(res.body, r.maxBodyBytes ?? DEFAULT_MAX_BODY);
      return { status: res.statusCode, headers: res.headers, body };
    } catch (err) {
      throw classifyError(err, timedOut);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes every pool at once; calls in flight fail. */
  async close(): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    this.contexts.clear();
    await Promise.all(pools.map((p) => p.destroy().catch(() => undefined)));
  }

  private poolFor(lib: typeof import('undici'), url: URL, tls: OutboundTls | undefined, pinned: CheckedAddress | undefined): Pool {
    // close() may have run while the guard resolved the host: a pool made now would never be closed.
    if (this.closed) throw new OutboundError('other', 'the outbound client is closed', 'ERR_CLIENT_CLOSED');
    const https = url.protocol === 'https:';
    const tlsId = https && tls ? this.tlsId(tls) : '-';
    const key = `${url.origin} ${tlsId} ${pinned?.address ?? ''}`;
    const existing = this.pools.get(key);
    if (existing) {
      // Most recently used last: the oldest entry is the one closed when there are too many.
      this.pools.delete(key);
      this.pools.set(key, existing);
      return existing;
    }
    const base = lib.buildConnector({ timeout: CONNECT_TIMEOUT_MS, ...(https && tls ? this.tlsOptions(tlsId, tls) : {}) });
    // The pinned address replaces only where the socket goes: undici still takes the SNI name and the Host header
    // from the URL's host.
    const connect: buildConnector.connector = pinned ? (opts, callback) => base({ ...opts, hostname: pinned.address }, callback) : base;
    const pool = new lib.Pool(url.origin, { connect, connections: this.connections, keepAliveTimeout: this.keepAliveTimeout });
    this.pools.set(key, pool);
    while (this.pools.size > this.maxPools) {
      const [oldestKey, oldest] = this.pools.entries().next().value!;
      this.pools.delete(oldestKey);
      void oldest.close().catch(() => undefined);
    }
    return pool;
  }

  private tlsId(tls: OutboundTls): string {
    let id = this.tlsIds.get(tls);
    if (id === undefined) {
      const hash = createHash('sha256');
      for (const part of [tls.ca, tls.cert, tls.key, tls.servername, String(tls.rejectUnauthorized ?? true)]) hash.update(part ?? '-').update('\0');
      id = hash.digest('hex');
      this.tlsIds.set(tls, id);
    }
    return id;
  }

  private tlsOptions(id: string, tls: OutboundTls): buildConnector.BuildOptions {
    let secureContext = this.contexts.get(id);
    if (!secureContext) {
      secureContext = createSecureContext({ ...(tls.ca ? { ca: tls.ca } : {}), ...(tls.cert ? { cert: tls.cert } : {}), ...(tls.key ? { key: tls.key } : {}) });
      this.contexts.set(id, secureContext);
      // Rotated certificates leave their contexts behind: the oldest go (a pool made with one keeps its own reference).
      while (this.contexts.size > this.maxPools) this.contexts.delete(this.contexts.keys().next().value!);
    }
    return { secureContext, rejectUnauthorized: tls.rejectUnauthorized ?? true, ...(tls.servername ? { servername: tls.servername } : {}) };
  }
}

function parseUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OutboundError('other', 'not a valid URL', 'ERR_INVALID_URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundError('other', `${url.protocol} URLs are not supported`, 'ERR_INVALID_URL');
  return url;
}

/** A promise that also rejects with the signal's reason once it aborts (a DNS lookup cannot be cancelled, only left). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e as Error);
      },
    );
  });
}

/**
 * The body up to max bytes. Leaving the loop early destroys the stream, and undici closes a connection whose
 * response was not read to its end, so what was not read costs neither memory nor time. undici's body reports its
 * own destruction before the end as an 'error' event (RequestAbortedError): with nobody listening any more, that would
 * be an uncaught exception, so a listener takes it.
 */
async function readBounded(
  body: AsyncIterable<Buffer> & { destroy(): unknown; on(event: 'error', listener: () => void): unknown },
  max: number,
): Promise<Buffer> {
  body.on('error', ignore);
  if (max <= 0) {
    body.destroy();
    return Buffer.alloc(0);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const room = max - size;
    if (chunk.length >= room) {
      chunks.push(chunk.subarray(0, room));
      size = max;
      break;
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return Buffer.concat(chunks, size);
}

function ignore(): void {}
