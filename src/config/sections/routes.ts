// routes: what a request is matched on (method, host, path, or an operation of an OpenAPI document), where it goes
// (service, stripPrefix) and its policy (auth, cost, windows, mode, deprecation, sunset, brownouts, stability). A list
// in file order where the first match wins, so a specific route is written before a general one. The rules after the
// route's schema read routes alone (one route's dates against each other, window names across routes); those that also
// read services, upstream or the gateway's own paths are in rules/route-destinations.ts.
import { match } from 'path-to-regexp';
import { z } from 'zod';
import { parseInterval } from '../iso-interval.js';
import { isoInstant, positiveInt, type Ctx } from './fields.js';
import { limitMode } from './limits.js';
import { STABILITY, STABILITY_SHAPE } from './openapi.js';
import { ADDRESS_WINDOWS, routeLimitsMatchAuth, routeWindowLimits, type RouteWindowLimitsConfig } from './route-limits.js';
import { SERVICE_NAME } from './services.js';

const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', '*'] as const;

/** A route window name: it goes into Redis key names and header strings. */
const ROUTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

const route = z.strictObject({
  method: z
    .string()
    .transform((m) => m.toUpperCase())
    .pipe(z.enum(HTTP_METHODS))
    .default('*')
    .describe('HTTP method, or "*" for any; a GET route also matches HEAD.'),
  path: z
    .string()
    .regex(/^\//, 'expected an absolute path such as /v1/pets/:petId or /orders/*')
    .superRefine(validRoutePattern)
    .optional()
    .describe('Exact (/status), a pattern (/v1/pets/:petId) or a prefix ending in /* (/orders/*); also the route label in metrics. Under /v1 when the route names no service. Required unless the route names an operationId.'),
  operationId: z
    .string()
    .regex(/^[^\s]{1,200}$/, 'expected an operationId of a service\'s OpenAPI document (1-200 characters, no spaces)')
    .optional()
    .describe('An operation of a service\'s OpenAPI document (services.<name>.openapi, upstream.openapi): this route\'s fields (cost, limits, mode, name, deprecation, sunset, link, afterSunset, ...) apply to that operation\'s route; it takes no method, path, host or service of its own.'),
  deprecated: z.boolean().optional().describe('true: deprecated without a date (an OpenAPI operation\'s `deprecated: true`): counted in the deprecated-route report, no Deprecation header (it needs a date). A route with deprecation is deprecated anyway.'),
  host: z
    .string()
    .regex(/^[A-Za-z0-9.-]+$/, 'expected a host name without port, such as api.example.com')
    .transform((h) => h.toLowerCase())
    .optional()
    .describe('Matches the request\'s host: the Host header, or an absolute-form target\'s authority (case-insensitive, port and trailing dot ignored); leave out for any host.'),
  service: z.string().regex(SERVICE_NAME, 'expected a service name from services').optional().describe('The service it goes to; left out, the upstream (upstream.url).'),
  stripPrefix: z.string().optional().describe('A literal leading part of path removed before proxying; the target gets X-Forwarded-Prefix with it.'),
  auth: z
    .enum(['key', 'none'])
    .optional()
    .describe('"none": a public route, no key needed: a request without a valid key is metered per client address (the anonymous limit, and the route\'s own limits if it has any); one with a valid key by its key\'s plan. Default "key".'),
  deprecation: isoInstant().optional().describe('When the route became deprecated (Deprecation header, RFC 9745).'),
  sunset: isoInstant().optional().describe('When the route stops being served (Sunset header, RFC 8594).'),
  link: z
    .url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' })
    .optional()
    .describe('Migration documentation (an http or https URL), sent as Link: <url>; rel="deprecation", percent-encoded.'),
  afterSunset: z.enum(['gone', 'pass']).default('pass').describe('After the sunset: "gone" answers 410 without calling the upstream, "pass" keeps proxying.'),
  successor: z
    .string()
    .superRefine(validSuccessor)
    .optional()
    .describe('The route that replaces this one (an http or https URL, or a path starting with /), sent as Link: <...>; rel="successor-version", percent-encoded.'),
  brownouts: z
    .array(z.string().superRefine(validInterval))
    .optional()
    .describe('ISO 8601 intervals before the sunset (<start>/<end>, <start>/<duration>, <duration>/<end>, e.g. 2027-03-01T14:00:00Z/PT1H) during which the route answers 410 gone as if retired; needs sunset.'),
  stability: z
    .string()
    .regex(STABILITY, STABILITY_SHAPE)
    .optional()
    .describe('A stability token (experimental, beta, stable, ...), sent as X-API-Stability on every answer of the route; the stability map of its service (services.<name>.openapi.stability; upstream.openapi.stability for a route without service) says which plans may call it.'),
  cost: positiveInt().default(1).describe('Points a request of this route takes from every window that applies (the plan\'s and the route\'s).'),
  name: z
    .string()
    .regex(ROUTE_NAME, 'expected 1-64 characters of A-Z a-z 0-9 _ . - (starting with a letter or digit)')
    .optional()
    .describe('Names the route\'s windows ("<name>:minute", "<name>:day"); default: its path. Unique among routes.'),
  limits: z
    .record(z.string(), z.union([routeWindowLimits, positiveInt()]))
    .optional()
    .describe('A keyed route: its windows per key, beside the plan\'s, by plan name ("default" for plans without an entry), e.g. { default: { perMinute: 20 } }. A public route (auth: none): { perMinute, perDay } counted per client address for requests without a valid key, beside the anonymous limit (both must pass).'),
  mode: limitMode().optional().describe('enforce or shadow for this route\'s windows; default: limits.mode.'),
}).superRefine(routeLimitsMatchAuth).superRefine(pathOrOperation);

export const routes = z.array(route);

/** A route gives its path, or names an operation whose document gives it (src/openapi/documents.ts merges it there). */
function pathOrOperation(r: { path?: string | undefined; operationId?: string | undefined }, ctx: Ctx): void {
  if (r.operationId === undefined && r.path === undefined)
    ctx.addIssue({ code: 'custom', path: ['path'], message: "expected a path (or an operationId of a service's OpenAPI document)", input: undefined });
}

function validInterval(text: string, ctx: Ctx): void {
  const parsed = parseInterval(text);
  if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.message, input: text });
}

/**
 * An http(s) URL, or a path on this gateway. A path must not be read as another host: `//host/...` (a network-path
 * reference), a backslash (`/\host` is `//host` to a browser), spaces and control characters (the URL parser drops tabs
 * and line breaks, so `/<LF>/host` would be `//host` too) are refused.
 */
function validSuccessor(text: string, ctx: Ctx): void {
  const bad = (message: string): void => void ctx.addIssue({ code: 'custom', message, input: text });
  if (text.startsWith('/')) {
    if (text.startsWith('//') || text.includes('\\') || /[^!-~\u00a0-\uffff]/.test(text))
      bad('a successor path starts with a single / and holds no backslash, space or control character (such as /v2/pets)');
    return;
  }
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) bad('expected an http:// or https:// URL, or a path starting with / (such as /v2/pets)');
}

function validRoutePattern(path: string, ctx: Ctx): void {
  try {
    match(path.endsWith('/*') ? path.slice(0, -2) || '/' : path);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not a valid route pattern (${(err as Error).message.split(';')[0]})`, input: path });
  }
}

/** A route's name in messages: its method (when not any), host (when given) and path. */
export function routeName(r: ParsedRouteConfig): string {
  return `${r.method === '*' ? '' : `${r.method} `}${r.host ? `${r.host}` : ''}${r.path ?? `operationId ${r.operationId}`}`;
}

export function sunsetNotBeforeDeprecation(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (r.deprecation && r.sunset && Date.parse(r.sunset) < Date.parse(r.deprecation)) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'sunset'], message: 'sunset must not be earlier than deprecation (RFC 8594)', input: r.sunset });
    }
  });
}

export function afterSunsetNeedsSunset(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (r.afterSunset === 'gone' && !r.sunset) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'afterSunset'], message: 'afterSunset: gone needs a sunset date', input: r.afterSunset });
    }
  });
}

/** Brownouts rehearse a retirement: a route without a sunset has none to rehearse, and one after it is no rehearsal. */
export function brownoutsBeforeSunset(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (!r.brownouts || r.brownouts.length === 0) return;
    if (!r.sunset) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'brownouts'], message: 'brownouts need a sunset date: they rehearse the route\'s retirement', input: r.brownouts });
      return;
    }
    const sunsetMs = Date.parse(r.sunset);
    r.brownouts.forEach((text, j) => {
      const b = parseInterval(text);
      if (b.ok && b.endMs > sunsetMs)
        ctx.addIssue({
          code: 'custom',
          path: ['routes', i, 'brownouts', j],
          message: `the brownout ends at ${new Date(b.endMs).toISOString()}, after the route's sunset (${new Date(sunsetMs).toISOString()}); a brownout ends at or before it`,
          input: text,
        });
    });
  });
}

/**
 * Route windows are stored per key under the route's name: two routes with windows under one name would share them
 * without anyone saying so. Name one of them.
 */
export function routeWindowNamesUnique(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
  const seen = new Map<string, number>();
  cfg.routes.forEach((r, i) => {
    if ((!r.limits && r.name === undefined) || r.path === undefined) return;
    const name = r.name ?? r.path;
    const first = seen.get(name);
    if (first !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['routes', i, r.name === undefined ? 'path' : 'name'],
        message: `route window name "${name}" is already used by routes[${first}]; give one of them a name of its own`,
        input: name,
      });
    } else seen.set(name, i);
  });
}

export function stripPrefixLeadsPath(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    const p = r.stripPrefix;
    if (p === undefined || r.path === undefined) return;
    const literal = /^(\/[A-Za-z0-9._~!$&'()+,=@%-]+)+$/.test(p);
    const leads = r.path === p || r.path.startsWith(`${p}/`);
    if (!literal || !leads)
      ctx.addIssue({
        code: 'custom',
        path: ['routes', i, 'stripPrefix'],
        message: `route ${routeName(r)}: stripPrefix must be a literal leading part of the path, whole segments, such as ${exampleStrip(r.path)}`,
        input: p,
      });
  });
}

function exampleStrip(path: string): string {
  const first = path.split('/')[1] ?? '';
  return /^[A-Za-z0-9._~-]+$/.test(first) ? `/${first}` : '/orders';
}

/** A route as the file gives it: a route naming an operationId has no path until its document is read. */
export type ParsedRouteConfig = z.output<typeof route>;
/** A route with its path: every route of a loaded config (those naming an operationId got theirs from the document). */
export type RouteConfig = Omit<ParsedRouteConfig, 'path'> & { path: string };

/** A keyed route's windows by plan name; undefined for a public route (its limits count per address). */
export function planRouteLimits(r: Pick<RouteConfig, 'auth' | 'limits'>): Record<string, RouteWindowLimitsConfig> | undefined {
  if (!r.limits || r.auth === 'none') return undefined;
  // The schema refuses a number under a keyed route's limits (routeLimitsMatchAuth).
  return r.limits as Record<string, RouteWindowLimitsConfig>;
}

/** A public route's limits per client address; undefined for a keyed route or a public one without limits. */
export function addressRouteLimits(r: Pick<RouteConfig, 'auth' | 'limits'>): { perMinute?: number; perDay?: number } | undefined {
  if (!r.limits || r.auth !== 'none') return undefined;
  const out: { perMinute?: number; perDay?: number } = {};
  for (const w of ADDRESS_WINDOWS) if (typeof r.limits[w] === 'number') out[w] = r.limits[w];
  return out;
}
