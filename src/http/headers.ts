// Names and formats of every header Tollgate writes itself, in one place, tested against the RFC examples.
import { holdsKeyShape } from './credentials.js';

export const H = {
  requestId: 'x-request-id',
  consumerId: 'x-consumer-id',
  consumerPlan: 'x-consumer-plan',
  credentialId: 'x-credential-id',
  deprecation: 'deprecation',
  sunset: 'sunset',
  link: 'link',
  apiStability: 'x-api-stability',
  retryAfter: 'retry-after',
  rateLimitLimit: 'x-ratelimit-limit',
  rateLimitRemaining: 'x-ratelimit-remaining',
  rateLimitReset: 'x-ratelimit-reset',
  rateLimitPolicy: 'ratelimit-policy',
  rateLimit: 'ratelimit',
  cacheControl: 'cache-control',
} as const;

/** For an answer that carries a secret (a plaintext key): no cache, shared or private, may keep a copy. */
export const NO_STORE = 'no-store';

/** RFC 9745: `Deprecation: @<unix-seconds>` (a Structured Fields date). */
export function formatDeprecation(epochMs: number): string {
  return `@${Math.floor(epochMs / 1000)}`;
}

/** RFC 8594: `Sunset: <IMF-fixdate>`, e.g. `Tue, 01 Jun 2027 00:00:00 GMT`. */
export function formatSunset(epochMs: number): string {
  return new Date(epochMs).toUTCString();
}

/**
 * RFC 8288 link with a relation type, e.g. `<https://example.com/m>; rel="deprecation"`. The target is the URL as
 * WHATWG URL serialises it (space, `"`, `<`, `>` and controls percent-encoded, the host in ASCII), then every character
 * RFC 3986 does not allow in a URI, and `,` and `;` (which naive Link parsers split on), percent-encoded on top: nothing
 * in it can close the `<...>` or start another link or parameter, so the header carries exactly one relation.
 * A target starting with a single `/` is a path on this gateway (`</v2/pets>`), serialised and encoded the same way.
 */
export function formatLink(url: string, rel: string): string {
  return `<${linkTarget(url)}>; rel="${rel}"`;
}

/** A Link target as formatLink writes it between `<` and `>`: an absolute URL, or a path (see formatLink). */
export function linkTarget(url: string): string {
  let href: string;
  if (url.startsWith('/') && !url.startsWith('//')) {
    const u = new URL(url, RELATIVE_BASE);
    // The config refuses paths the URL parser could read as another host; a target that still did would not be a path.
    if (u.origin !== RELATIVE_BASE) throw new Error(`not a path on this host: ${JSON.stringify(url)}`);
    href = u.pathname + u.search + u.hash;
  } else href = new URL(url).href;
  return href.replace(/[^A-Za-z0-9\-._~:/?#[\]@!$&'()*+=%]/g, (c) => encodeURIComponent(c));
}

const RELATIVE_BASE = 'http://gateway.invalid';

/** RFC 9110 Retry-After as delay-seconds: a whole number, never a fraction, at least 1. */
export function formatRetryAfter(ms: number): string {
  return String(Math.max(1, Math.ceil(ms / 1000)));
}

/**
 * A caller's X-Request-Id is kept only when it is short and made of safe characters (so it cannot inject log lines
 * or headers) and holds nothing shaped like a key (a key pasted there would be echoed, forwarded and logged as the
 * id); otherwise a fresh one is made.
 */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;
export function isSaneRequestId(value: unknown): value is string {
  return typeof value === 'string' && SANE_REQUEST_ID.test(value) && !holdsKeyShape(value);
}

/** The upstream headers that carry a consumer's metadata (consumers.forwardMetadata): this prefix and the field. */
export const CONSUMER_METADATA_PREFIX = 'x-consumer-metadata-';

/**
 * The upstream header of a consumer metadata field: `X-Consumer-Metadata-` and the field lower-cased, with `_` and `.`
 * written `-` (`billing_id` -> `x-consumer-metadata-billing-id`). A metadata name (1-64 of A-Z a-z 0-9 _ . -) is a
 * header token as it is, but nginx drops header names holding `_` or `.` unless told otherwise (underscores_in_headers,
 * ignore_invalid_headers), and CGI/WSGI/PHP fold `-` and `_` into one variable name: with only letters, digits and
 * dashes the header reaches every backend, and the config refuses two fields that would name one header.
 */
export function consumerMetadataHeader(field: string): string {
  return CONSUMER_METADATA_PREFIX + field.toLowerCase().replace(/[_.]/g, '-');
}

/** The longest consumer metadata value forwarded upstream (a metadata value's own bound). */
export const FORWARDED_METADATA_VALUE_MAX = 256;

/**
 * Printable ASCII, neither starting nor ending with a space. No CR, LF or other control character (header injection),
 * nothing outside ASCII (Node writes header values as latin1: UTF-8 text would arrive garbled, and a character above
 * U+00FF would throw), no edge space (a parser strips it: the backend would read another value).
 */
const FORWARDABLE_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/** Whether a consumer metadata value goes upstream as it is; one that cannot is left out, never altered. */
export function forwardableMetadataValue(value: unknown): value is string {
  return typeof value === 'string' && value.length <= FORWARDED_METADATA_VALUE_MAX && FORWARDABLE_VALUE.test(value);
}

/**
 * Whether a client header (its lower-case name) would reach the upstream as one the gateway owns: its caller's
 * headers (X-Consumer-*: the consumer's id, plan and forwarded metadata; X-Credential-Id), forwarding headers
 * (X-Forwarded-*, X-Real-IP, Forwarded) and X-Request-Id. A client's X-Consumer-Metadata-* is dropped whatever
 * consumers.forwardMetadata lists: only the consumer's record speaks for it.
 * Those come only from the gateway. An underscore counts as a dash: CGI/WSGI, PHP-FPM and nginx with underscores_in_headers
 * fold `X_Consumer_Id` into X-Consumer-Id, which would join the gateway's own value (`key_real,key_VICTIM`).
 */
export function claimsGatewayHeader(name: string): boolean {
  // Every owned name but Forwarded starts with "x": most headers are passed on after one character check.
  if (name.charCodeAt(0) !== 120 /* x */) return name === 'forwarded';
  const folded = name.includes('_') ? name.replaceAll('_', '-') : name;
  return folded.startsWith('x-consumer-') || folded.startsWith('x-forwarded-') || folded === H.requestId || folded === 'x-real-ip' || folded === H.credentialId;
}

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1): a proxy removes every header named in Connection, Connection itself, and these
 * (Proxy-Authorization: the credentials of a client for the proxy it chose, never for the backend). Trailer is not one
 * (RFC 9110 §6.6.2, unlike RFC 2616's list): it announces trailer fields, and goes with them where they go
 * (http/intermediary.ts).
 */
export const HOP_BY_HOP = ['connection', 'keep-alive', 'te', 'transfer-encoding', 'upgrade', 'proxy-connection', 'proxy-authorization'];

/** The header names a Connection header lists (RFC 9110 §7.6.1), lower-cased; undefined when it lists none. */
export function connectionTokens(connection: unknown): ReadonlySet<string> | undefined {
  // Nearly every message says just "keep-alive" or "close": nothing to split or allocate.
  if (connection === undefined || connection === 'keep-alive') return undefined;
  if (connection === 'close') return JUST_CLOSE;
  const listed = Array.isArray(connection) ? connection.join(',') : typeof connection === 'string' ? connection : '';
  let names: Set<string> | undefined;
  for (const token of listed.split(',')) {
    const name = token.trim().toLowerCase();
    if (name && !HOP_BY_HOP_SET.has(name)) (names ??= new Set()).add(name);
  }
  return names;
}

const HOP_BY_HOP_SET = new Set(HOP_BY_HOP);
const JUST_CLOSE: ReadonlySet<string> = new Set(['close']);

/** Whether a (lower-case) header name is one of the standard hop-by-hop headers (HOP_BY_HOP). */
export function isHopByHop(name: string): boolean {
  return HOP_BY_HOP_SET.has(name);
}

/** Removes the hop-by-hop headers: the standard ones (HOP_BY_HOP) and those Connection lists. */
export function stripHopByHop(headers: Record<string, unknown>): void {
  const listed = connectionTokens(headers.connection);
  for (const name in headers) if (HOP_BY_HOP_SET.has(name) || listed?.has(name)) delete headers[name];
}

/** One rate-limit window as reported to the client. */
export interface RateWindow {
  /** "minute", "day", "<route>:minute", "<route>:day" (the anonymous limit: "minute"). */
  name: string;
  limit: number;
  remaining: number;
  /** Milliseconds until the window resets. */
  resetMs: number;
  windowSeconds: number;
}

/**
 * A window name as a Structured Fields string (RFC 8941 §3.3.3): quoted, with `"` and `\` escaped. Route names are
 * restricted by the config schema, but a default name is the route's path, which may hold any of them.
 */
function sfString(name: string): string {
  return /["\\]/.test(name) ? `"${name.replace(/["\\]/g, (c) => `\\${c}`)}"` : `"${name}"`;
}

/** IETF httpapi RateLimit-Policy, e.g. `"minute";q=60;w=60, "day";q=1000;w=86400`. Depends only on the limits, so callers cache it. */
export function formatRateLimitPolicy(windows: readonly Pick<RateWindow, 'name' | 'limit' | 'windowSeconds'>[]): string {
  return windows.map((w) => `${sfString(w.name)};q=${w.limit};w=${w.windowSeconds}`).join(', ');
}

/**
 * The window a client should pace itself by: the one with the fewest points left; of those, the shorter window (it
 * frees first); of those, the first listed.
 */
export function bindingWindow<W extends Pick<RateWindow, 'remaining' | 'windowSeconds'>>(windows: readonly W[]): W {
  let binding = windows[0]!;
  for (const w of windows) {
    if (w.remaining < binding.remaining || (w.remaining === binding.remaining && w.windowSeconds < binding.windowSeconds)) binding = w;
  }
  return binding;
}

/**
 * A window's item in the RateLimit header up to its remaining points (`"minute";r=`). It depends only on the window's
 * name, so callers with fixed windows work it out once (LimitRequest.rateLimitItems) and pass it to
 * setRateLimitHeaders.
 */
export function rateLimitItemStart(name: string): string {
  return `${sfString(name)};r=`;
}

/**
 * Writes X-RateLimit-Limit/Remaining/Reset for the binding window (bindingWindow) and the draft's RateLimit for
 * every window (`t` = seconds until it frees, a delta). `itemStarts[i]`, when given, is rateLimitItemStart of
 * windows[i]'s name, worked out beforehand; the policy is the caller's (formatRateLimitPolicy, cached).
 */
export function setRateLimitHeaders(
  res: { setHeader(name: string, value: string): unknown },
  windows: readonly RateWindow[],
  policy: string,
  nowMs: number,
  itemStarts?: readonly string[],
): void {
  const binding = bindingWindow(windows);
  let rateLimit = '';
  for (let i = 0; i < windows.length; i++) {
    const w = windows[i]!;
    const start = itemStarts?.[i] ?? rateLimitItemStart(w.name);
    rateLimit += `${i === 0 ? '' : ', '}${start}${Math.max(0, w.remaining)};t=${Math.max(0, Math.ceil(w.resetMs / 1000))}`;
  }
  res.setHeader(H.rateLimitLimit, `${binding.limit}`);
  res.setHeader(H.rateLimitRemaining, `${Math.max(0, binding.remaining)}`);
  res.setHeader(H.rateLimitReset, `${Math.ceil((nowMs + binding.resetMs) / 1000)}`);
  res.setHeader(H.rateLimitPolicy, policy);
  res.setHeader(H.rateLimit, rateLimit);
}
