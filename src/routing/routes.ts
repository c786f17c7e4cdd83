// Routes: where a request goes (its service, host and method, stripPrefix, auth) and its policy (deprecation and
// sunset, RFC 9745, RFC 8594) and what the key limits need of it (its cost, its windows: src/limits/windows.ts turns
// them into a request's windows), as a decision with no Express. Route patterns are compiled once per config load
// (Runtime) with path-to-regexp; per request the compiled matchers run in file order and the first match wins (a
// plain scan: file order is the rule, and a config's few dozen routes cost microseconds).
import type { IncomingHttpHeaders } from 'node:http';
import { addressRouteLimits, planRouteLimits, UPSTREAM_SERVICE, type Config, type RouteConfig, type RouteWindowLimitsConfig } from '../config/schema.js';
import { isUnderUpstreamPrefix, routeMatcher, UPSTREAM_PREFIX } from '../http/paths.js';
import { H, formatDeprecation, formatLink, formatSunset, linkTarget } from '../http/headers.js';
import { compileKeySources, type KeySources } from '../http/credentials.js';
import type { LoadedDocuments, OpenApiOperation } from '../openapi/operations.js';
import { parseInterval } from '../config/iso-interval.js';
import { stabilityPlans, type StabilityMaps } from './stability.js';
import { compileRequestValidator, operationName, type RequestValidator } from '../validation/validator.js';

export interface CompiledRoute {
  readonly method: string;
  readonly pattern: string;
  readonly matches: (path: string) => unknown;
  /** Lower-case host name the Host header must carry (port and a trailing dot ignored); undefined: any host. */
  readonly host: string | undefined;
  /** The service the route goes to (UPSTREAM_SERVICE for routes that name none). */
  readonly service: string;
  readonly stripPrefix: string | undefined;
  /** "none": no key needed; without a valid key the anonymous limit (and addressLimits) apply. */
  readonly auth: 'key' | 'none';
  /** Matched against the path exactly as sent (the upstream shorthand's /v1/*: `//v1/x` is not under /v1). */
  readonly asSent?: boolean;
  /** A route of the upstream shorthand: it applies only to requests under /v1 as sent, as it did before services. */
  readonly upstreamRoute: boolean;
  readonly sunsetMs: number | undefined;
  readonly gone: boolean;
  /**
   * Whether answering needs the time (unservedAt): a sunset with afterSunset: gone, or brownouts. Routes without
   * them never read the clock.
   */
  readonly timed: boolean;
  /** routes[].brownouts in milliseconds, in order of their start; undefined: none. */
  readonly brownouts?: ReadonlyArray<{ readonly startMs: number; readonly endMs: number }>;
  /** routes[].successor as its Link carries it (percent-encoded), for the brownout's message. */
  readonly successor?: string;
  /** routes[].stability: sent as X-API-Stability on every answer once the route is matched. */
  readonly stability?: string;
  /**
   * The plans whose keys may call the route, from its service's openapi.stability for its stability; undefined: every
   * plan (no stability, or a value the map does not list).
   */
  readonly stabilityPlans?: ReadonlySet<string>;
  /**
   * For a deprecated route (a deprecation date, or `deprecated: true` from its OpenAPI operation), its name in the usage
   * report ("<METHOD> <pattern>"): keyed calls of it are counted.
   */
  readonly deprecatedAs: string | undefined;
  /** Response headers this route adds, formatted once. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  /** Points a request of this route takes from every window that applies (1 by default). */
  readonly cost: number;
  /** The name of its windows: routes[].name, else its path. */
  readonly limitName: string;
  /**
   * What a key's scopes may name to reach this route, worked out once per config: its routes[].name when it has one,
   * `service:<its service>`, and `operation:<operationId>` when it has one (identity/access.ts matches them).
   */
  readonly scopeNames: readonly string[];
  /** A keyed route's windows by plan name (and "default"), if any. */
  readonly limits: Readonly<Record<string, RouteWindowLimitsConfig>> | undefined;
  /** A public route's windows per client address (requests without a valid key), if any. */
  readonly addressLimits: { readonly perMinute?: number; readonly perDay?: number } | undefined;
  /** Its windows' own mode, if set. */
  readonly mode: RouteConfig['mode'];
  /** The OpenAPI operation a document route was made from (src/openapi/); undefined for a hand-written route. */
  readonly operation?: OpenApiOperation;
  readonly operationId?: string;
  /** Where a document route reads its key (its operation's security schemes); undefined: the config's auth.sources. */
  readonly keySources?: KeySources;
  /**
   * Requests checked against the operation's description (its validate mode, when not off): `operation` names it in
   * metrics and reports (its operationId, else "<METHOD> <template>").
   */
  readonly validation?: { readonly mode: 'shadow' | 'enforce'; readonly validator: RequestValidator; readonly operation: string };
}

/** The routes of a config (compiled, in file order), and last the upstream shorthand's catch-all /v1/* when it is a service. */
export function withUpstreamCatchAll(routes: readonly CompiledRoute[], config: Pick<Config, 'upstreamIsService'>): CompiledRoute[] {
  if (config.upstreamIsService === false) return [...routes];
  return [...routes, { ...compileRoutes([{ method: '*', path: `${UPSTREAM_PREFIX}/*`, afterSunset: 'pass', cost: 1 }])[0]!, asSent: true }];
}

/**
 * A validated config's routes compiled in file order; `maps` (the config's services and upstream) gives each route's
 * stability its plans from its service's openapi.stability, `documents`
 * what OpenAPI documents add to each route, by index (config.openapi.routes).
 */
export function compileRoutes(routes: readonly RouteConfig[], maps: StabilityMaps = {}, documents?: LoadedDocuments['routes']): CompiledRoute[] {
  return routes.map((r, i) => {
    const fromDocument = documents?.[i];
    const op = fromDocument?.operation;
    const headers: Array<[string, string]> = [];
    const links: string[] = [];
    if (r.deprecation) headers.push([H.deprecation, formatDeprecation(Date.parse(r.deprecation))]);
    if (r.sunset) headers.push([H.sunset, formatSunset(Date.parse(r.sunset))]);
    if (r.link && r.deprecation) links.push(formatLink(r.link, 'deprecation'));
    if (r.link && r.sunset && !r.deprecation) links.push(formatLink(r.link, 'sunset'));
    if (r.successor) links.push(formatLink(r.successor, 'successor-version'));
    if (links.length > 0) headers.push([H.link, links.join(', ')]);
    const brownouts = compileBrownouts(r.brownouts);
    const plans = stabilityPlans(r, maps);
    return {
      method: r.method,
      pattern: r.path,
      matches: routeMatcher(r.path),
      host: r.host === undefined ? undefined : withoutTrailingDot(r.host),
      service: r.service ?? UPSTREAM_SERVICE,
      upstreamRoute: r.service === undefined,
      stripPrefix: r.stripPrefix,
      auth: r.auth ?? 'key',
      sunsetMs: r.sunset ? Date.parse(r.sunset) : undefined,
      gone: r.afterSunset === 'gone',
      timed: (r.afterSunset === 'gone' && r.sunset !== undefined) || brownouts !== undefined,
      ...(brownouts ? { brownouts } : {}),
      ...(r.successor ? { successor: linkTarget(r.successor) } : {}),
      ...(r.stability !== undefined ? { stability: r.stability } : {}),
      ...(plans ? { stabilityPlans: plans } : {}),
      deprecatedAs: r.deprecation || r.deprecated ? deprecatedRouteName(r) : undefined,
      headers,
      cost: r.cost,
      limitName: r.name ?? r.path,
      scopeNames: scopeNamesOf(r.name, r.service ?? UPSTREAM_SERVICE, r.operationId ?? op?.operationId),
      limits: planRouteLimits(r),
      addressLimits: addressRouteLimits(r),
      mode: r.mode,
      ...(op ? { operation: op } : {}),
      ...(r.operationId !== undefined ? { operationId: r.operationId } : {}),
      ...(fromDocument?.keySources ? { keySources: compileKeySources(fromDocument.keySources) } : {}),
      // The validator is made once per operation object (per config load); its schemas compile on first use.
      ...(op && op.validate !== 'off' ? { validation: { mode: op.validate, validator: compileRequestValidator(op), operation: operationName(op) } } : {}),
    };
  });
}

/** The scope names a route answers to (CompiledRoute.scopeNames); a request no route takes answers to its service's. */
export function scopeNamesOf(name: string | undefined, service: string, operationId?: string): string[] {
  return [...(name !== undefined ? [name] : []), `service:${service}`, ...(operationId !== undefined ? [`operation:${operationId}`] : [])];
}

/** A deprecated route's name in the usage report and its Redis keys: "<METHOD> <pattern>". */
export function deprecatedRouteName(r: Pick<RouteConfig, 'method' | 'path'>): string {
  return `${r.method} ${r.path}`;
}

export function findRoute(routes: readonly CompiledRoute[], method: string, path: string, host?: string, asSent = path): CompiledRoute | undefined {
  for (const r of routes) if (routeTakes(r, method, path, host, asSent)) return r;
  return undefined;
}

/** Whether a route takes a request: its method (GET takes HEAD), its host if it names one, and its pattern. */
export function routeTakes(r: CompiledRoute, method: string, path: string, host: string | undefined, asSent: string): boolean {
  if (r.method !== '*' && r.method !== method && !(r.method === 'GET' && method === 'HEAD')) return false;
  if (r.host !== undefined && r.host !== host) return false;
  if (r.upstreamRoute && !isUnderUpstreamPrefix(asSent)) return false;
  return r.matches(r.asSent ? asSent : path) !== false;
}

/** A request target's path: everything before the query. */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query >= 0 ? url.slice(0, query) : url;
}

/**
 * The path as route patterns are matched against it. The path goes upstream byte for byte, and an upstream may read
 * `/v1//pets/1` or `/v1/p%65ts/1` as `/v1/pets/1`: so the policy sees what such an upstream would see, or a retired
 * route could be reached by spelling it differently. Repeated slashes are merged and percent-encoded unreserved
 * characters (RFC 3986 §2.3, equivalent to their decoded form by §6.2.2.2) are decoded; other escapes stay as they
 * are. Dot segments never get here (refused with 400 before authentication).
 */
export function policyPath(path: string): string {
  let p = path.includes('//') ? path.replace(/\/{2,}/g, '/') : path;
  if (p.includes('%'))
    p = p.replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
      const c = String.fromCharCode(parseInt(hex, 16));
      return /[A-Za-z0-9\-._~]/.test(c) ? c : encoded;
    });
  return p;
}

/**
 * The route policy decision for one request: the configured route it matches (the first, in config order), if any,
 * and whether that route is retired (afterSunset: gone, and its sunset has passed). The routePolicy stage
 * (src/pipeline/stages/policy.ts) adds the route's headers and answers 410 for a retired one.
 */
export function matchRoute(routes: readonly CompiledRoute[], method: string, requestPath: string, hostHeader?: string): CompiledRoute | undefined {
  // Patterns are full paths ("/v1/pets/:petId"), matched against the path as the client sent it.
  const path = pathOf(requestPath);
  return findRoute(routes, method, policyPath(path), hostHeader === undefined ? undefined : hostName(hostHeader), path);
}

/**
 * Method overrides: what Express's method-override, ASP.NET Core, Rails, Laravel and Symfony read to run a POST as
 * another method. A backend that honours them runs the method they name, so the route (its cost, limits, deprecation,
 * sunset) is matched on that method: never matched as POST and run as DELETE.
 */
export const METHOD_OVERRIDE_HEADERS = ['x-http-method-override', 'x-http-method', 'x-method-override'] as const;
const METHOD_OVERRIDE_HEADER_NAMES = ['X-HTTP-Method-Override', 'X-HTTP-Method', 'X-Method-Override'] as const;
export const METHOD_OVERRIDE_PARAM = '_method';
const QUERY_MAY_OVERRIDE = /[_%]/;
/** The methods an override may name: the route methods. TRACE, CONNECT and unknown tokens are refused. */
const OVERRIDE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Methods whose request content has no defined meaning (RFC 9110 §9.3.1, §9.3.2, §9.3.5: a client SHOULD NOT send one
 * unless the origin said it has a purpose): a POST overridden to one of them goes upstream without its body.
 */
export const NO_BODY_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'DELETE']);

/** The method a request is routed as, or why it is refused (400 invalid_method_override). */
export type RoutingMethod = { method: string; refused?: undefined } | { refused: string };

/**
 * The method routes are matched on: the request's own, or the one its override names. Refused: overrides that
 * disagree (two headers, a header and the parameter, a list in one header), a method outside the route methods, an
 * override on a request that is not a POST (the frameworks honour them on POST only, so the gateway could not tell
 * what the backend runs), HEAD (the answer to a POST has a body), and with mode "refuse" (backends that do not honour
 * overrides) any override. An override
 * that names the request's own method changes nothing. Values are read as the frameworks read them: trimmed,
 * upper-cased, the parameter percent-decoded; an empty one is no override.
 */
export function routingMethod(method: string, headers: IncomingHttpHeaders, url: string, mode: 'match' | 'refuse'): RoutingMethod {
  const found: Array<{ from: string; value: string }> = [];
  METHOD_OVERRIDE_HEADERS.forEach((name, i) => {
    const raw = headers[name];
    if (raw === undefined) return;
    for (const part of (Array.isArray(raw) ? raw.join(',') : raw).split(','))
      if (part.trim() !== '') found.push({ from: METHOD_OVERRIDE_HEADER_NAMES[i]!, value: part.trim().toUpperCase() });
  });
  const q = url.indexOf('?');
  // Any spelling of the parameter's name (`_method`, `%5Fmethod`, `_%6Dethod`) holds a "_" or a "%".
  if (q !== -1 && QUERY_MAY_OVERRIDE.test(url.slice(q))) {
    for (const value of new URLSearchParams(url.slice(q + 1)).getAll(METHOD_OVERRIDE_PARAM))
      if (value.trim() !== '') found.push({ from: METHOD_OVERRIDE_PARAM, value: value.trim().toUpperCase() });
  }
  if (found.length === 0) return { method };
  const sources = [...new Set(found.map((f) => f.from))].join(' and ');
  const methods = new Set(found.map((f) => f.value));
  if (methods.size > 1) return { refused: `The request carries method overrides that disagree (${sources}); send one method, once.` };
  const named = found[0]!.value;
  if (!OVERRIDE_METHODS.has(named))
    return { refused: `${sources} names a method this gateway does not route (expected one of ${[...OVERRIDE_METHODS].join(', ')}).` };
  if (named === method) return { method };
  if (mode === 'refuse') return { refused: `This gateway does not take method overrides (${sources}): send ${named} as the request's method.` };
  if (method !== 'POST') return { refused: `A method override (${sources}) is taken on a POST only; this request is a ${method}.` };
  // Sent upstream as a HEAD, its answer would come back with a length and no body, to a client that sent a POST and
  // reads one.
  if (named === 'HEAD') return { refused: `${sources} names HEAD, which cannot answer a POST (its answer has no body); send a HEAD request.` };
  return { method: named };
}

/**
 * A Host header's name, lower-case, without its port ("[::1]:8080" -> "[::1]") and without the trailing dot of a
 * fully qualified name ("api.example.com." is the same host as "api.example.com", and DNS resolves both alike).
 */
export function hostName(host: string): string {
  const h = host.toLowerCase();
  if (h.startsWith('[')) return h.slice(0, h.indexOf(']') + 1);
  const colon = h.indexOf(':');
  return withoutTrailingDot(colon === -1 ? h : h.slice(0, colon));
}

function withoutTrailingDot(name: string): string {
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/**
 * The path a route sends to its service: with stripPrefix, the path as matched (policyPath) less the prefix (at
 * least "/"), the query kept as sent; without, the request target as the client sent it.
 */
export function forwardedTarget(route: Pick<CompiledRoute, 'stripPrefix'>, url: string): string {
  if (route.stripPrefix === undefined) return url;
  const q = url.indexOf('?');
  const rest = policyPath(q === -1 ? url : url.slice(0, q)).slice(route.stripPrefix.length);
  return (rest === '' ? '/' : rest) + (q === -1 ? '' : url.slice(q));
}

/** Why a route is not served at a moment: retired (its sunset passed, afterSunset: gone), or in a brownout until untilMs. */
export type Unserved = { kind: 'retired' } | { kind: 'brownout'; untilMs: number };

/**
 * The one decision of whether a route is served now: undefined (served), retired (afterSunset: gone and its sunset
 * has passed), or browned out (inside one of its brownouts, which all end by the sunset). The routePolicy stage
 * answers both with 410 gone. Read only for a route that is `timed`.
 */
export function unservedAt(route: CompiledRoute, nowMs: number): Unserved | undefined {
  if (route.gone && route.sunsetMs !== undefined && nowMs >= route.sunsetMs) return RETIRED;
  if (route.brownouts)
    for (const b of route.brownouts) {
      if (nowMs < b.startMs) break;
      if (nowMs < b.endMs) return { kind: 'brownout', untilMs: b.endMs };
    }
  return undefined;
}

const RETIRED: Unserved = Object.freeze({ kind: 'retired' });

export function isRetired(route: CompiledRoute, nowMs: number): boolean {
  return unservedAt(route, nowMs)?.kind === 'retired';
}

/**
 * Brownout intervals (validated by the schema) in milliseconds, sorted by start, overlapping or touching ones merged
 * (so a brownout's "until" is when the route is served again); undefined for none.
 */
function compileBrownouts(texts: readonly string[] | undefined): CompiledRoute['brownouts'] {
  if (!texts || texts.length === 0) return undefined;
  const sorted = texts
    .map((t) => {
      const b = parseInterval(t);
      if (!b.ok) throw new Error(`routes[].brownouts: ${b.message}`);
      return { startMs: b.startMs, endMs: b.endMs };
    })
    .sort((a, b) => a.startMs - b.startMs);
  const out: Array<{ startMs: number; endMs: number }> = [];
  for (const b of sorted) {
    const last = out[out.length - 1];
    if (last && b.startMs <= last.endMs) last.endMs = Math.max(last.endMs, b.endMs);
    else out.push(b);
  }
  return Object.freeze(out.map((b) => Object.freeze(b)));
}
