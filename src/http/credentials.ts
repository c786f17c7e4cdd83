// The credentials a request may carry, as HTTP sees them: where its API key is read (auth.sources), the bearer
// token's syntax, and the shapes of an issued key and an admin token (so logs, request ids and the config can tell
// one at a glance). Below config/, keys/ and observability/, which all need these and nothing else of each other.
//
// Sources: the bearer token, a header, a query parameter, in the configured order. The first source that carries a
// key gives it; every other source that carries one must carry the same key, or the request is refused (a client
// that sends two different keys is confused or probing). The same rules say which header and which query parameter
// the proxy removes (hideCredentials) and the access log redacts: whatever a configured source names, whatever the
// key's shape. Nothing else: a credential no source reads (a backend's own users' bearer tokens, when keys come from
// a header) is the backend's, and passes.
import type { IncomingMessage } from 'node:http';

export type KeySource = { kind: 'bearer' } | { kind: 'header'; name: string; label: string } | { kind: 'query'; name: string };

/** What was found in a request's sources: no key, a key in a bad shape, two different keys, or the key. */
export type PresentedKey = { kind: 'missing' } | { kind: 'malformed' } | { kind: 'conflict' } | { kind: 'token'; token: string };

const MISSING: PresentedKey = Object.freeze({ kind: 'missing' });
const MALFORMED: PresentedKey = Object.freeze({ kind: 'malformed' });
const CONFLICT: PresentedKey = Object.freeze({ kind: 'conflict' });

/** An HTTP field name (RFC 9110 §5.1: a token), at most 64 characters. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
/** A query parameter name: RFC 3986's unreserved characters, so it reads the same escaped or not. */
const PARAM_NAME = /^[A-Za-z0-9._~-]{1,64}$/;

/**
 * Headers that cannot carry a key: the framing and routing of the message (Host, Content-Length, ...), hop-by-hop
 * headers (removed by every proxy on the way), Authorization (that is the `bearer` source), Cookie (one line holding
 * every cookie, not one key), and the headers the gateway sets for the upstream (X-Forwarded-*, X-Consumer-*,
 * X-Credential-Id, X-Request-Id, trace context), which would either be overwritten or echoed.
 */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'content-encoding',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'upgrade',
  'proxy-connection',
  'proxy-authorization',
  'expect',
  'authorization',
  'cookie',
  'forwarded',
  'x-real-ip',
  'x-request-id',
  'x-credential-id',
  'traceparent',
  'tracestate',
]);
const RESERVED_HEADER_PREFIXES = ['x-forwarded-', 'x-consumer-'];

/** A source's text parsed, or why it is not one (a config error's message). */
export function parseKeySource(text: string): KeySource | string {
  if (text === 'bearer') return { kind: 'bearer' };
  const colon = text.indexOf(':');
  const kind = colon === -1 ? text : text.slice(0, colon);
  const name = colon === -1 ? '' : text.slice(colon + 1);
  if (kind === 'header') {
    if (!HEADER_NAME.test(name)) return `"${text}": a header name is 1-64 token characters (A-Z a-z 0-9 and !#$%&'*+-.^_\`|~), e.g. header:X-API-Key`;
    const lower = name.toLowerCase();
    if (RESERVED_HEADERS.has(lower) || RESERVED_HEADER_PREFIXES.some((p) => lower.startsWith(p)))
      return `"${text}": ${name} cannot carry an API key (${lower === 'authorization' ? 'use the "bearer" source' : 'a reserved, hop-by-hop or gateway-set header'})`;
    return { kind: 'header', name: lower, label: name };
  }
  if (kind === 'query') {
    if (!PARAM_NAME.test(name)) return `"${text}": a query parameter name is 1-64 characters of A-Z a-z 0-9 . _ ~ -, e.g. query:api_key`;
    return { kind: 'query', name };
  }
  return `"${text}": expected "bearer", "header:<Name>" or "query:<param>"`;
}

/** The configured sources, parsed once per config, with what the proxy and the logs need of them. */
export interface KeySources {
  readonly list: readonly KeySource[];
  /** Lower-case names of header sources. */
  readonly headers: readonly string[];
  /** Names of query sources. */
  readonly params: readonly string[];
  /** `bearer` is among them: an `Authorization: Bearer` header carries the gateway's key (and is removed upstream). */
  readonly bearer: boolean;
  /** Only `bearer`: the request path reads the Authorization header and nothing else (the default). */
  readonly bearerOnly: boolean;
  /** How to send a key, for the 401 without one: `"Authorization: Bearer <key>" or "X-API-Key: <key>"`. */
  readonly howToSend: string;
}

const compiled = new WeakMap<readonly string[], KeySources>();

/**
 * Every header name a source has named in this process, the config in force or an earlier one: the logger redacts
 * them wherever request headers are logged. It only grows: redacting a header that no longer carries keys costs
 * nothing, forgetting one that did could leak a key logged late.
 */
const everKeyHeaders = new Set<string>();
export function keyHeaderNames(): ReadonlySet<string> {
  return everKeyHeaders;
}

/** `texts` as validated by the config schema; parsed once per array (a reload brings a new one). */
export function compileKeySources(texts: readonly string[]): KeySources {
  let made = compiled.get(texts);
  if (made) return made;
  const list = texts.map(parseKeySource).filter((s): s is KeySource => typeof s !== 'string');
  const how = list.map((s) =>
    s.kind === 'bearer' ? '"Authorization: Bearer <key>"' : s.kind === 'header' ? `"${s.label}: <key>"` : `the query parameter "${s.name}"`,
  );
  made = Object.freeze({
    list,
    headers: list.flatMap((s) => (s.kind === 'header' ? [s.name] : [])),
    params: list.flatMap((s) => (s.kind === 'query' ? [s.name] : [])),
    bearer: list.some((s) => s.kind === 'bearer'),
    bearerOnly: list.length === 1 && list[0]!.kind === 'bearer',
    howToSend: how.join(' or '),
  });
  for (const name of made.headers) everKeyHeaders.add(name);
  compiled.set(texts, made);
  return made;
}

export const DEFAULT_KEY_SOURCES = compileKeySources(['bearer']);

/**
 * The sources of whichever config is in force, `texts()` read per call (a reload's sources apply to the next
 * request): parsed once per config, and the last config's kept here, so a request compares one array reference
 * instead of looking its sources up.
 */
export function followKeySources(texts: () => readonly string[]): () => KeySources {
  let seen: readonly string[] | undefined;
  let current = DEFAULT_KEY_SOURCES;
  return () => {
    const now = texts();
    if (now !== seen) {
      current = compileKeySources(now);
      seen = now;
    }
    return current;
  };
}

type UrlRequest = IncomingMessage & { originalUrl?: string };

/** The key a request presents through `sources`. Reads no URL unless a query source is configured. */
export function readPresentedKey(req: UrlRequest, sources: KeySources): PresentedKey {
  if (sources.bearerOnly) return parseBearer(req.headers.authorization);
  let found: string | undefined;
  let malformed = false;
  const offer = (value: string): boolean => {
    if (found === undefined) found = value;
    return found === value;
  };
  for (const s of sources.list) {
    if (s.kind === 'bearer') {
      const b = parseBearer(req.headers.authorization);
      if (b.kind === 'malformed') malformed = true;
      else if (b.kind === 'token' && !offer(b.token)) return CONFLICT;
    } else if (s.kind === 'header') {
      for (const value of headerValues(req, s.name)) if (!offer(value)) return CONFLICT;
    } else {
      const values = paramValues(req.originalUrl ?? req.url ?? '/', s.name);
      if (values === undefined) malformed = true;
      else for (const value of values) if (!offer(value)) return CONFLICT;
    }
  }
  if (malformed) return MALFORMED;
  return found === undefined ? MISSING : { kind: 'token', token: found };
}

/** A header's non-empty values; repeated header lines count as separate values (Node joins them with ", "). */
function headerValues(req: IncomingMessage, name: string): string[] {
  const joined = req.headers[name];
  if (joined === undefined || joined === '') return [];
  if (typeof joined === 'string' && !joined.includes(',')) return [joined];
  return (req.headersDistinct[name] ?? []).filter((v) => v !== '');
}

/** Decodes a query component as forms do ("+" is a space); undefined for a broken %-escape. */
function decodeComponent(text: string): string | undefined {
  if (!text.includes('%') && !text.includes('+')) return text;
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return undefined;
  }
}

/**
 * The query segments (between "&") of `url` whose name, decoded, `wanted` accepts, as [start, end) offsets. A name
 * that is not decodable is given as sent (`API%ZZKEY` is no spelling of a key parameter anyway) unless `exact`.
 */
function* paramSegments(url: string, wanted: (name: string) => boolean, exact = true): Generator<[number, number]> {
  const q = url.indexOf('?');
  if (q === -1) return;
  let start = q + 1;
  while (start <= url.length) {
    let end = url.indexOf('&', start);
    if (end === -1) end = url.length;
    const eq = url.indexOf('=', start);
    const nameEnd = eq === -1 || eq > end ? end : eq;
    const raw = url.slice(start, nameEnd);
    const decoded = decodeComponent(raw) ?? (exact ? undefined : raw);
    if (decoded !== undefined && wanted(decoded)) yield [start, end];
    start = end + 1;
  }
}

/** The non-empty values of query parameter `name`; undefined when one of them is not decodable. */
function paramValues(url: string, name: string): string[] | undefined {
  const values: string[] = [];
  for (const [start, end] of paramSegments(url, (n) => n === name)) {
    const eq = url.indexOf('=', start);
    if (eq === -1 || eq >= end) continue;
    const value = decodeComponent(url.slice(eq + 1, end));
    if (value === undefined) return undefined;
    if (value !== '') values.push(value);
  }
  return values;
}

/**
 * `url` without the query parameters named (every occurrence), the rest of the query byte for byte as sent; a query
 * left empty loses its "?". The same string when none is there.
 */
export function withoutParams(url: string, names: readonly string[]): string {
  const q = names.length === 0 ? -1 : url.indexOf('?');
  if (q === -1) return url;
  const parts = url.slice(q + 1).split('&');
  const kept = parts.filter((part) => {
    const eq = part.indexOf('=');
    const name = decodeComponent(eq === -1 ? part : part.slice(0, eq));
    return name === undefined || !names.includes(name);
  });
  if (kept.length === parts.length) return url;
  const query = kept.join('&');
  return query === '' ? url.slice(0, q) : `${url.slice(0, q)}?${query}`;
}

/**
 * The name a client may have meant by a query parameter's name, for redaction only: lower-cased, without the array
 * suffixes frameworks add (`api_key[]`, `api_key[0]`, `api_key[a][b]`). The gateway reads a key from the exact name
 * alone; a key sent under another spelling is refused as missing, but its value must not reach a log either.
 */
function loggedName(decoded: string): string {
  const bracket = decoded.indexOf('[');
  return (bracket > 0 && decoded.endsWith(']') ? decoded.slice(0, bracket) : decoded).toLowerCase();
}

/**
 * `url` with the values of the query parameters named replaced by `[redacted]` (for logs): the names matched
 * case-insensitively and with their array forms (`API_KEY=`, `api_key[]=`, `api_key%5B0%5D=`), so a key sent under
 * another spelling of a configured source is not logged in clear either.
 */
export function redactParams(url: string, names: readonly string[]): string {
  if (names.length === 0 || !url.includes('?')) return url;
  let out = '';
  let from = 0;
  const lowerNames = names.map((n) => n.toLowerCase());
  for (const [s, e] of paramSegments(url, (n) => lowerNames.includes(loggedName(n)), false)) {
    const eq = url.indexOf('=', s);
    if (eq === -1 || eq >= e) continue;
    out += `${url.slice(from, eq + 1)}[redacted]`;
    from = e;
  }
  return from === 0 ? url : out + url.slice(from);
}

/**
 * Whether `text` (a caller's X-Request-Id) holds a key the request presents in any source, or a part of one: such an
 * id would be echoed, forwarded and logged, so the request gets a fresh one.
 */
export function mentionsPresentedKey(req: UrlRequest, sources: KeySources, text: string): boolean {
  // Fewer than 8 characters is no secret, and matching them would replace ids for nothing.
  const hit = (value: string): boolean => (value.length >= 8 && text.includes(value)) || (text.length >= 8 && value.includes(text));
  for (const s of sources.list) {
    if (s.kind === 'bearer') {
      const b = parseBearer(req.headers.authorization);
      if (b.kind === 'token' && hit(b.token)) return true;
    } else if (s.kind === 'header') {
      if (headerValues(req, s.name).some(hit)) return true;
    } else if ((paramValues(req.originalUrl ?? req.url ?? '/', s.name) ?? []).some(hit)) return true;
  }
  return false;
}

// Bearer tokens (RFC 6750).
/** Scheme case-insensitive; the token is token68 (RFC 6750 §2.1). */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const BEARER_SCHEME = /^Bearer(?: |$)/i;

/**
 * Whether an Authorization header is of the Bearer scheme (well-formed or not): what the `bearer` source reads as the
 * gateway's key. Another scheme (Basic, Digest, a backend's own) carries no gateway key.
 */
export function isBearerScheme(header: string | undefined): boolean {
  return header !== undefined && BEARER_SCHEME.test(header);
}

export type BearerParse = { kind: 'missing' } | { kind: 'malformed' } | { kind: 'token'; token: string };

const NO_BEARER: BearerParse = Object.freeze({ kind: 'missing' });
const BAD_BEARER: BearerParse = Object.freeze({ kind: 'malformed' });

export function parseBearer(header: string | undefined): BearerParse {
  // No Authorization, or another scheme (Basic, ...): no bearer credentials were offered.
  if (!header || !BEARER_SCHEME.test(header)) return NO_BEARER;
  const m = BEARER.exec(header);
  return m?.[1] ? { kind: 'token', token: m[1] } : BAD_BEARER;
}

// Key shapes: what an issued key and an admin token look like, so logs and request ids never carry one.
export const KEY_PREFIX = 'tg_';

/**
 * What an issued prefix may be made of: RFC 3986's unreserved characters, which are also HTTP token and bearer
 * token68 characters, so an issued key travels unescaped in a header, a bearer token and a query string alike.
 */
export const ISSUED_PREFIX_SHAPE = /^[A-Za-z0-9._~-]{1,32}$/;

/** Admin tokens are told apart from API keys (tg_...) at a glance, and a gateway key never has this shape. */
export const ADMIN_TOKEN_PREFIX = 'tga_';

/**
 * Text shaped like an issued key, or like the start of one (a key cut short is still most of a secret): the prefix
 * and 20 or more base62 characters, anywhere. Logs never carry it and a request id may not be one. "tg_" is always
 * looked for, as well as a configured prefix: keys issued before the prefix changed stay secrets.
 */
export interface KeyShapeText {
  holds(text: string): boolean;
  /** The text with everything shaped like a key replaced by `<prefix>[redacted]`; the same string when there is none. */
  redact(text: string): string;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

const shapeTexts = new Map<string, KeyShapeText>();

/** The matcher of key-shaped text for an issued prefix (made once per prefix). */
export function keyShapeText(prefix: string = KEY_PREFIX): KeyShapeText {
  let made = shapeTexts.get(prefix);
  if (made) return made;
  const prefixes = prefix === KEY_PREFIX ? [KEY_PREFIX] : [KEY_PREFIX, prefix];
  const one = new RegExp(`(${prefixes.map(escapeRegExp).join('|')})[0-9A-Za-z]{20,}`);
  const all = new RegExp(one.source, 'g');
  const mentioned = (text: string): boolean => prefixes.some((p) => text.includes(p));
  made = {
    holds: (text) => mentioned(text) && one.test(text),
    redact: (text) => (mentioned(text) ? text.replace(all, '$1[redacted]') : text),
  };
  shapeTexts.set(prefix, made);
  return made;
}

const DEFAULT_SHAPE_TEXT = keyShapeText(KEY_PREFIX);

export function holdsKeyShape(text: string): boolean {
  return DEFAULT_SHAPE_TEXT.holds(text);
}

/**
 * Prefixes the key stores' records carry (an imported key's recorded prefix, `sk_live_`, which `keys rotate
 * --keep-prefix` gives its new key too): text that starts with one, at a word's start, followed by 12 or more
 * characters a key is made of, is a key as surely as `tg_...` is, wherever it turns up (a path segment, a parameter no
 * source names). Learnt as the stores read and write records (the key filter reads every record at start-up), and
 * kept for the process's life, as key header names are; bounded, so a line's cost stays one `includes` per prefix.
 */
const recordedPrefixes = new Set<string>();
const RECORDED_PREFIXES_MAX = 64;
/** What a recorded prefix is (keys/key-prefix.ts): visible ASCII ending in a separator, 2-32 characters. */
const RECORDED_PREFIX = /^[\x21-\x7e]{1,31}[_-]$/;
let recordedShapes: KeyShapeText | undefined;

/** A record's prefix, remembered so that text shaped like its keys is redacted from logs (logRedaction). */
export function rememberKeyPrefix(prefix: string | undefined): void {
  if (prefix === undefined || recordedPrefixes.has(prefix) || recordedPrefixes.size >= RECORDED_PREFIXES_MAX || !RECORDED_PREFIX.test(prefix)) return;
  recordedPrefixes.add(prefix);
  recordedShapes = undefined;
}

/** Text shaped like a key with a recorded prefix: the prefix at a word's start, then 12 or more key characters. */
export function recordedKeyShapes(): KeyShapeText {
  if (recordedShapes) return recordedShapes;
  const prefixes = [...recordedPrefixes];
  if (prefixes.length === 0) return (recordedShapes = { holds: () => false, redact: (text) => text });
  const one = new RegExp(`(?<![0-9A-Za-z])(${prefixes.map(escapeRegExp).join('|')})[0-9A-Za-z._~-]{12,}`);
  const all = new RegExp(one.source, 'g');
  const mentioned = (text: string): boolean => prefixes.some((p) => text.includes(p));
  return (recordedShapes = {
    holds: (text) => mentioned(text) && one.test(text),
    redact: (text) => (mentioned(text) ? text.replace(all, '$1[redacted]') : text),
  });
}

/**
 * What the logs must keep out, for src/observability/logger.ts (LogRedaction), which the composition roots build
 * every logger with: every header a key source has named in this process (keyHeaderNames, read as it grows), and text
 * shaped like a key issued with `issuedPrefix` (or "tg_") or carrying a recorded prefix (rememberKeyPrefix) anywhere
 * in a line. One `includes` per prefix per line when there is none.
 */
export function logRedaction(issuedPrefix: string = KEY_PREFIX): { headers: ReadonlySet<string>; line: (text: string) => string } {
  const issued = keyShapeText(issuedPrefix).redact;
  return { headers: everKeyHeaders, line: (text) => recordedKeyShapes().redact(issued(text)) };
}

/** The text with everything shaped like a "tg_" key replaced by `tg_[redacted]`; the same string when there is none. */
export function redactKeyShapes(text: string): string {
  return DEFAULT_SHAPE_TEXT.redact(text);
}
