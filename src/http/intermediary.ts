// What the gateway owes the HTTP messages it forwards, as an intermediary (RFC 9110 §6.5, §7.6, §15.2; RFC 9112 §6-7):
// transfer codings it cannot undo refused, its own Via added, the backend's 1xx passed on, trailers carried where the
// recipient takes them, and the fields meant for a proxy hop kept off the other hop. Plain functions of the messages;
// the request path (pipeline/stages/, pipeline/proxy.ts) calls them.
import { STATUS_CODES, type InformationEvent, type ServerResponse } from 'node:http';
import { connectionTokens, isHopByHop } from './headers.js';

/** The name this gateway gives itself in Via (a pseudonym, RFC 9110 §7.6.3: no host or port is disclosed). */
export const VIA_PSEUDONYM = 'tollgate';

/** The comma-separated elements of a list header (RFC 9110 §5.6.1), each up to its first `;`, trimmed, lower-cased. */
function listTokens(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  const text = Array.isArray(value) ? value.join(',') : value;
  const tokens: string[] = [];
  for (const element of text.split(',')) {
    const semi = element.indexOf(';');
    const token = (semi < 0 ? element : element.slice(0, semi)).trim().toLowerCase();
    if (token) tokens.push(token);
  }
  return tokens;
}

/**
 * The transfer codings of a request's Transfer-Encoding that the gateway does not implement, in order: every one but
 * a single final `chunked`. Node's parser takes the chunked framing off and hands the rest (`gzip, chunked` leaves
 * gzip bytes) on as if it were the body: forwarded, the backend would read gzip bytes as plain content. RFC 9112 §6.1:
 * a server answers 501 to a transfer coding it does not understand.
 */
export function unimplementedCodings(transferEncoding: string | string[] | undefined): string[] {
  const codings = listTokens(transferEncoding);
  return codings.at(-1) === 'chunked' ? codings.slice(0, -1) : codings;
}

/**
 * The Via a forwarded request carries (RFC 9110 §7.6.3): the one it came with, then this hop, named by the protocol
 * version it was received with (`1.1 tollgate`; the protocol name HTTP left out, as the RFC allows).
 */
export function viaValue(prior: string | string[] | undefined, httpVersion: string): string {
  const hop = `${httpVersion} ${VIA_PSEUDONYM}`;
  const before = Array.isArray(prior) ? prior.join(', ') : prior?.trim();
  return before ? `${before}, ${hop}` : hop;
}

/** Whether a TE header says its sender keeps trailer fields: it lists `trailers` (RFC 9110 §10.1.4). */
export function acceptsTrailers(te: string | string[] | undefined): boolean {
  return te !== undefined && listTokens(te).includes('trailers');
}

/**
 * Response fields for the hop between a client and the proxy it chose (RFC 9110 §11.7): a backend's Proxy-Authenticate
 * would ask the client for credentials for a proxy it never chose (and send them to the gateway in
 * Proxy-Authorization, which is not forwarded either). Trailer is set by the relay itself, only when the trailers it
 * announces will be passed on (relayedTrailers).
 */
const NOT_RELAYED_RESPONSE = new Set(['proxy-authenticate', 'proxy-authentication-info', 'trailer']);

/** Whether a response header (lower-case) stays off the client's hop besides hop-by-hop ones: NOT_RELAYED_RESPONSE. */
export function isProxyHopResponseField(name: string): boolean {
  return NOT_RELAYED_RESPONSE.has(name);
}

/**
 * Fields never passed on as trailers whatever they hold (RFC 9110 §6.5.1): framing, routing, request modifiers,
 * authentication, and how to read the content. A recipient that merged one into the header section (RFC 9110 forbids
 * it, some servers do) would take a credential, a length or a host the gateway never judged.
 */
const NEVER_A_TRAILER = new Set([
  'authorization',
  'cache-control',
  'content-encoding',
  'content-length',
  'content-range',
  'content-type',
  'cookie',
  'expect',
  'host',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'if-unmodified-since',
  'max-forwards',
  'pragma',
  'proxy-authenticate',
  'proxy-authentication-info',
  'range',
  'set-cookie',
  'trailer',
  'www-authenticate',
]);

/** Header field characters (RFC 9110 §5.5): what Node's writer accepts, so a passed-on field can never throw. */
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Trailer fields worth passing on, from a message's raw trailers (name, value, name, value...): each keeps its
 * spelling and order; hop-by-hop ones, those its Connection header listed, NEVER_A_TRAILER, malformed ones, and those
 * `refused` names (lower-case) stay behind. Undefined when none is left.
 */
export function passedTrailers(
  rawTrailers: readonly string[],
  connection: string | string[] | undefined,
  refused: (lowerName: string) => boolean,
): Array<[string, string]> | undefined {
  let kept: Array<[string, string]> | undefined;
  const listed = connectionTokens(connection);
  for (let i = 0; i + 1 < rawTrailers.length; i += 2) {
    const name = rawTrailers[i]!;
    const value = rawTrailers[i + 1]!;
    const lower = name.toLowerCase();
    if (isHopByHop(lower) || listed?.has(lower) || NEVER_A_TRAILER.has(lower) || refused(lower)) continue;
    if (!FIELD_NAME.test(name) || !FIELD_VALUE.test(value)) continue;
    (kept ??= []).push([name, value]);
  }
  return kept;
}

/**
 * Whether the client gets this response's trailers: it said it keeps them (`TE: trailers`), and the response goes to it
 * chunked, the only HTTP/1.1 framing that carries trailers. Node writes chunked when the response has a body and no
 * Content-Length to an HTTP/1.1 client; a `Trailer` header on any other response makes it throw as the headers are
 * written, so this is also the only case in which the relay sets one.
 */
export function clientTakesTrailers(res: ServerResponse, upstreamHeaders: { 'content-length'?: string; 'transfer-encoding'?: string }): boolean {
  const req = res.req;
  if (!acceptsTrailers(req.headers.te) || req.httpVersionMajor !== 1 || req.httpVersionMinor < 1 || req.method === 'HEAD') return false;
  const status = res.statusCode;
  if (status < 200 || status === 204 || status === 304) return false;
  return upstreamHeaders['content-length'] === undefined && upstreamHeaders['transfer-encoding'] !== undefined;
}

/**
 * The trailers of a relayed response: when the client takes them (clientTakesTrailers), its `Trailer` header is set
 * from the backend's and the returned function, called once the backend's body has ended, adds the backend's trailers
 * to the response, but none by the name of a header the gateway set itself (rate limits, request id, security headers:
 * one whose value on the response is not the backend's), which win as they do over the backend's headers; a trailer
 * repeating one of the backend's own headers (Server-Timing) passes. Undefined when the client does not get them:
 * both stay behind, as before.
 */
export function relayedTrailers(
  res: ServerResponse,
  upstream: { headers: Record<string, string | string[] | undefined>; rawTrailers: string[] },
): (() => void) | undefined {
  const h = upstream.headers as { 'content-length'?: string; 'transfer-encoding'?: string; trailer?: string; connection?: string };
  if (!clientTakesTrailers(res, h)) return undefined;
  if (h.trailer !== undefined && FIELD_VALUE.test(h.trailer)) res.setHeader('trailer', h.trailer);
  return () => {
    const fromBackend = upstream.headers;
    const kept = passedTrailers(upstream.rawTrailers, h.connection, (name) => res.hasHeader(name) && res.getHeader(name) !== fromBackend[name]);
    if (kept) res.addTrailers(kept);
  };
}

/** Bytes that may wait unsent to a client before its backend's further 1xx responses are dropped (forwardInformational). */
const MAX_UNREAD_INFORMATIONAL = 64 * 1024;

/**
 * Passes a backend's informational (1xx) response on to the client, as it came (RFC 9110 §15.2: a proxy forwards 1xx
 * responses unless it asked for them itself): `103 Early Hints` lets the client fetch what the Link lines name while
 * the backend is still working, `102 Processing` keeps it from giving up. Not passed on: `100 Continue` (the gateway
 * answers Expect itself and never forwards it, so a backend's 100 is not for the client), 101 (never a 1xx event),
 * anything to an HTTP/1.0 client (it cannot take one), once the final response has begun, or while 64 KB already wait
 * for a client that is not reading. Hop-by-hop fields and malformed ones stay behind. Written raw, as Node's own writeEarlyHints and writeProcessing write theirs (behind any
 * response still being written on a pipelined connection): writeEarlyHints would refuse a Link line holding several
 * links or a quoted parameter with a space, both valid, and writes nothing but Link. True when it was written.
 */
export function forwardInformational(res: ServerResponse, info: InformationEvent): boolean {
  const status = info.statusCode;
  if (status <= 101 || status > 199) return false;
  const req = res.req;
  if (req.httpVersionMajor !== 1 || req.httpVersionMinor < 1) return false;
  if (res.headersSent || res.writableEnded || res.destroyed) return false;
  // Advisory, and written without backpressure: a client that reads none of them gets no more once this much waits.
  if (res.writableLength > MAX_UNREAD_INFORMATIONAL) return false;
  const raw = res as unknown as { _writeRaw?: (data: string, encoding: BufferEncoding) => boolean };
  if (typeof raw._writeRaw !== 'function') return false;
  const reason = FIELD_VALUE.test(info.statusMessage) ? info.statusMessage : (STATUS_CODES[status] ?? '');
  let head = `HTTP/1.1 ${status} ${reason}\r\n`;
  const listed = connectionTokens(info.headers.connection);
  const fields = info.rawHeaders;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    const lower = name.toLowerCase();
    if (isHopByHop(lower) || listed?.has(lower) || NOT_RELAYED_RESPONSE.has(lower) || lower === 'content-length') continue;
    if (!FIELD_NAME.test(name) || !FIELD_VALUE.test(value)) continue;
    head += `${name}: ${value}\r\n`;
  }
  raw._writeRaw.call(res, `${head}\r\n`, 'latin1');
  return true;
}
