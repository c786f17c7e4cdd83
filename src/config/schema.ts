// The configuration schema: every field, its default and its meaning, declared once.
// Types are derived from it; unknown keys are errors; cross-field rules are named functions below.
import { match } from 'path-to-regexp';
import { z } from 'zod';
import { ADMIN_TOKEN_PREFIX, ISSUED_PREFIX_SHAPE, KEY_PREFIX, parseKeySource } from '../http/credentials.js';
import { gatewayPaths, isUnderUpstreamPrefix, routeMatcher, UPSTREAM_PREFIX } from '../http/paths.js';
import { keyInputFields, sha256HexSchema } from './key-fields.js';
import { parseInterval } from './iso-interval.js';
import type { LoadedDocuments } from '../openapi/operations.js';

const positiveInt = () => z.number().int().positive();
const isoInstant = () => z.iso.datetime({ offset: true, message: 'expected an ISO-8601 date-time such as 2027-06-01T00:00:00Z' });

/**
 * HTTPS on a listener (server, admin, ops): its certificate and key, and with caFile, mutual TLS: every client must
 * present a certificate that CA signed. The files are read when the config is loaded (src/config/tls-files.ts) and
 * again on every reload, so a rotated certificate is picked up without dropping a connection.
 */
const listenerTls = z.strictObject({
  certFile: z.string().min(1).describe('PEM file of the listener\'s certificate (and any intermediates after it).'),
  keyFile: z.string().min(1).describe('PEM file of the certificate\'s private key (unencrypted).'),
  caFile: z.string().min(1).optional().describe('PEM file of the CA certificate(s) clients\' certificates must be signed by: set, every client must present one (mutual TLS); a client without one is refused during the handshake.'),
  minVersion: z.enum(['TLSv1.2', 'TLSv1.3']).default('TLSv1.2').describe('The oldest TLS version accepted: TLSv1.2 or TLSv1.3.'),
});

const server = z.strictObject({
  host: z.string().min(1).default('127.0.0.1').describe('Address to listen on.'),
  port: z.number().int().min(0).max(65535).default(8080).describe('TCP port to listen on (0 picks a free one).'),
  trustProxy: z.union([z.boolean(), z.number().int().min(0), z.string().min(1), z.array(z.string().min(1))]).default(false).describe('Express "trust proxy": false, true, a hop count, or addresses/subnets whose X-Forwarded-For to believe. The anonymous limit takes the address it yields only when that is an IP address, else the peer\'s (limits/client-address.ts).'),
  maxBodyBytes: z.number().int().min(0).default(1_048_576).describe('Request bodies larger than this get 413 before (or while) reaching the upstream.'),
  workers: z.union([z.number().int().min(1).max(64), z.literal('auto')]).default(1).describe('Gateway processes sharing the port (node:cluster): a number, or "auto" for one per core.'),
  heapGrowthPercent: z.number().int().min(0).max(1000).default(35).describe('How far V8\'s old generation may grow past the live heap before a full collection, in percent (0: V8\'s own dynamic choice, which reaches 300 on 64-bit hosts). Bounds the gateway\'s resident memory; applied at start-up (src/server/heap.ts).'),
  drainTimeoutMs: z.number().int().min(0).default(10_000).describe('On SIGTERM/SIGINT, how long in-flight requests may take to finish before the process exits anyway.'),
  headersTimeoutMs: z.number().int().positive().default(10_000).describe('A client must send its full request headers within this time (slowloris guard).'),
  requestTimeoutMs: z.number().int().positive().default(30_000).describe('A client must send its full request (headers and body) within this time.'),
  keepAliveTimeoutMs: z.number().int().positive().default(5_000).describe('Idle keep-alive connections from clients are closed after this time.'),
  responseIdleTimeoutMs: z.number().int().positive().default(30_000).describe('A proxied response the client stops reading, or a request body it stops sending, for this long is cut off and the backend connection it held is freed.'),
  via: z.boolean().default(true).describe('Add this hop to the Via header of every request sent to a backend (`Via: 1.1 tollgate`, after any Via the request came with), as RFC 9110 §7.6.3 asks of a gateway; false: Via passes as the client sent it. Read at start-up.'),
  watchConfig: z.boolean().default(false).describe('Reload when the config file changes (also when a mounted Kubernetes ConfigMap is swapped), as SIGHUP does; `serve --watch-config` turns it on too (read at start-up).'),
  tls: listenerTls.optional().describe('Serve HTTPS on this port: { certFile, keyFile, caFile (mutual TLS), minVersion }. The files are re-read on every reload; turning TLS or caFile on or off needs a restart.'),
});


const redisUrl = z.string().regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL');

const redisTls = z.strictObject({
  caFile: z.string().min(1).optional().describe('PEM file of the CA certificate(s) that signed the servers\' certificates; else the system\'s trusted CAs.'),
  certFile: z.string().min(1).optional().describe('Client certificate and key (PEM files), for a Redis that requires clients to present one (mutual TLS).'),
  keyFile: z.string().min(1).optional().describe('The client certificate\'s private key (PEM file); goes with certFile.'),
  servername: z.string().min(1).optional().describe('The name the servers\' certificates must carry, when it is not the host in the URLs (SNI and verification).'),
  rejectUnauthorized: z.boolean().default(true).describe('false accepts any certificate: for a test setup only, never across a network you do not control.'),
});

const redis = z
  .strictObject({
    url: redisUrl.optional().describe('A standalone Redis (or a proxy in front of one): redis:// or rediss:// URL.'),
    cluster: z.strictObject({ nodes: z.array(redisUrl).min(1).describe('Seed node URLs (redis:// or rediss://); the rest are discovered.') }).optional().describe('A Redis Cluster: seed nodes; the others are discovered from them.'),
    sentinel: z.strictObject({ masterName: z.string().min(1).describe('The name the sentinels monitor the primary by.'), sentinels: z.array(redisUrl).min(1).describe('The sentinels\' URLs (credentials in them are the sentinels\' own).') }).optional().describe('A primary with replicas behind Sentinel: the monitored primary\'s name and the sentinels to ask.'),
    username: z.string().min(1).optional().describe('ACL user and password (REDIS_USERNAME / REDIS_PASSWORD override them); they win over credentials in URLs.'),
    password: z.string().min(1).optional().describe('The ACL user\'s password (REDIS_PASSWORD overrides it, so it need not sit in the file). Never logged.'),
    tls: redisTls.optional().describe('TLS options for rediss:// URLs.'),
    replicas: z.number().int().min(0).max(16).optional().describe('How many replicas the key store\'s primary (each primary of a cluster) is meant to have. Key changes wait for one to acknowledge and report `replication: {expected, acked}`; without this, expected is what the topology shows (replicas seen connected since start, the slot map, the sentinels), which forgets a replica that was already gone when the process started.'),
    prefix: z.string().default('tollgate:').describe('Prepended to every Redis key Tollgate writes.'),
    failMode: z.enum(['open', 'closed']).default('open').describe('Redis unreachable: "open" serves on per-instance memory limits, "closed" answers 503.'),
    commandTimeoutMs: positiveInt().default(100).describe('No request waits longer than this on Redis in total.'),
    adminCommandTimeoutMs: positiveInt().default(5000).describe('The command timeout of the admin connection and of the report thread\'s: the admin API\'s reads and usage reports run on Redis connections of their own, never the request path\'s, and a command there fails after this long.'),
    allowEviction: z.boolean().default(false).describe('Accept a Redis whose maxmemory-policy may evict keys (anything but noeviction): eviction deletes key records (customers get 401) or bans and rate windows (bans and quotas reset), so by default such a Redis makes /readyz answer 503. true keeps the gateway ready and only warns, for an operator who knows the data fits.'),
  })
  .superRefine(oneRedisTopology);

/** Exactly one of url, cluster and sentinel; TLS options only with rediss:// URLs, and never half a client certificate. */
function oneRedisTopology(
  r: { url?: string | undefined; cluster?: { nodes: string[] } | undefined; sentinel?: { sentinels: string[] } | undefined; tls?: { certFile?: string | undefined; keyFile?: string | undefined } | undefined },
  ctx: Ctx,
): void {
  const given = (['url', 'cluster', 'sentinel'] as const).filter((k) => r[k] !== undefined);
  if (given.length !== 1) {
    ctx.addIssue({
      code: 'custom',
      path: given.length === 0 ? [] : [given[1]!],
      message:
        given.length === 0
          ? 'expected one of url (a standalone Redis), cluster.nodes (a Redis Cluster) or sentinel (a primary behind Sentinel)'
          : `only one of url, cluster and sentinel may be set; found ${given.join(' and ')}`,
    });
    return;
  }
  const urls = r.url !== undefined ? [r.url] : (r.cluster?.nodes ?? r.sentinel?.sentinels ?? []);
  const schemes = new Set(urls.map((u) => u.slice(0, u.indexOf(':'))));
  if (schemes.size > 1) ctx.addIssue({ code: 'custom', path: [given[0]!], message: 'mixes redis:// and rediss:// URLs: TLS is all or nothing' });
  if (r.tls && !schemes.has('rediss')) ctx.addIssue({ code: 'custom', path: ['tls'], message: 'TLS options are set but no URL is rediss://' });
  if (r.tls && (r.tls.certFile === undefined) !== (r.tls.keyFile === undefined))
    ctx.addIssue({ code: 'custom', path: ['tls', r.tls.certFile === undefined ? 'certFile' : 'keyFile'], message: 'certFile and keyFile go together' });
}

const ops = z.strictObject({
  host: z.string().min(1).default('127.0.0.1').describe('Address of the operations listener. Loopback by default: metrics and readiness are for the platform, not clients.'),
  port: z.number().int().min(0).max(65535).describe('Port of the operations listener (0 picks a free one); must differ from server.port.'),
  tls: listenerTls.optional().describe('HTTPS on the operations listener, as server.tls.'),
});

const adminToken = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected 1-64 characters of A-Z a-z 0-9 _ . -').describe('Named in audit lines; never the token.'),
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits (SHA-256 of the token)').describe('SHA-256 of the token (`tollgate admin token` prints both).'),
});

const admin = z.strictObject({
  host: z.string().min(1).default('127.0.0.1').describe('Loopback by default: the admin API issues keys; expose it only to the portal\'s network.'),
  port: z.number().int().min(0).max(65535).default(8079).describe('Port of the admin listener (0 picks a free one); must differ from server.port and ops.port.'),
  tokens: z.array(adminToken).default([]).describe('Without a token (here or in TOLLGATE_ADMIN_TOKEN) the admin API does not start.'),
  maxFailuresPerMinute: positiveInt().default(10).describe('Failed token checks one client address may make per minute; past it, 429 until the minute ends.'),
  tls: listenerTls.optional().describe('HTTPS on the admin listener (and its dashboard), as server.tls.'),
});

/** Paths the gateway port answers itself: the quota endpoint may not take one of them, nor one under /v1. */
const RESERVED_PATHS = ['/healthz', '/readyz', '/metrics'];

const selfService = z.strictObject({
  enabled: z.boolean().default(true).describe('GET <path> on the gateway port: the caller\'s own plan, windows and ban, counting nothing.'),
  path: z
    .string()
    .regex(/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/, 'expected an absolute path such as /ratelimit')
    .refine((p) => !isUnderUpstreamPrefix(p), `must not be under ${UPSTREAM_PREFIX} (those requests go to the upstream)`)
    .refine((p) => !RESERVED_PATHS.includes(p.toLowerCase()), `must not be one of ${RESERVED_PATHS.join(', ')}`)
    .default('/ratelimit').describe('Its path; not under /v1, not /healthz, /readyz or /metrics.'),
});

const usage = z.strictObject({
  enabled: z.boolean().default(true).describe('The per-key, per-hour usage ledger and the deprecated-route report (Redis only).'),
  retentionDays: positiveInt().max(3660).default(35).describe('How many days of usage are kept (each day expires this long after it ends).'),
  flushIntervalMs: positiveInt().min(100).max(60_000).default(5000).describe('How often each instance writes what it counts locally (ban-cache refusals, deprecated-route calls).'),
  reportMemoryMb: positiveInt().min(32).max(16_384).default(128).describe("The report thread's heap (V8 old generation) in MB, shared by the reports running at once: a report that needs more fails alone (503 report_out_of_memory), never the gateway. Size the container's memory limit above the gateway's own use plus this (docs/kubernetes.md)."),
});

const tracing = z.strictObject({
  otlpEndpoint: z
    .url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' })
    .optional()
    .describe('OTLP/HTTP endpoint of a collector (e.g. http://otel-collector:4318): spans go to <endpoint>/v1/traces. Leave out: no tracing, and no cost.'),
  serviceName: z.string().min(1).default('tollgate').describe('service.name of the spans.'),
  exportIntervalMs: positiveInt().max(60_000).default(1000).describe('How often finished spans are sent in a batch.'),
});

const log = z.strictObject({
  level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('Log level (LOG_LEVEL overrides it; a reload applies it).'),
  maxBufferBytes: z.number().int().min(1_048_576).max(1_073_741_824).default(16_777_216).describe('Most bytes of log lines queued for stdout; past it new lines are dropped and counted (read at start-up).'),
});

const limitMode = () => z.enum(['enforce', 'shadow'], { message: 'expected enforce or shadow' });

/**
 * Candidate limits tried beside enforced windows: checked in shadow on the enforced window's own count, never in the
 * rate-limit headers. A window that enforces nothing yet is a window of its own with mode: shadow instead.
 */
const candidateLimits = z
  .strictObject({
    perMinute: positiveInt().optional().describe('A candidate per-minute limit, checked in shadow beside the enforced one. Default: none.'),
    perDay: positiveInt().optional().describe('A candidate per-day limit, checked in shadow beside the enforced one. Default: none.'),
  })
  .refine((l) => l.perMinute !== undefined || l.perDay !== undefined, 'expected perMinute and/or perDay');

const plan = z.strictObject({
  perMinute: positiveInt().describe('Points per minute a key of this plan may spend (a request takes its route\'s cost, 1 by default).'),
  perDay: positiveInt().describe('Points per day (24 hours from the window\'s first request) a key of this plan may spend.'),
  perMonth: positiveInt()
    .optional()
    .describe('Points per month a key of this plan (a consumer: all its keys together) may spend: the calendar month in UTC, or from the consumer\'s billingDay. Default: none (no monthly window).'),
  mode: limitMode().optional().describe('enforce or shadow for this plan\'s minute, day and month windows; default: limits.mode.'),
  shadow: candidateLimits
    .optional()
    .describe('Candidate limits ({ perMinute, perDay }) checked in shadow beside the enforced ones, which keep refusing: a request they would refuse is counted shadowRefused and let through. Not for a key with its own override of that window. Default: none.'),
});

const limits = z.strictObject({
  mode: limitMode()
    .default('enforce')
    .describe('enforce: a window without room refuses (429). shadow: it only reports (headers, metrics, the ledger\'s shadowRefused) and the request goes through. For every window without a mode of its own.'),
});

/** A route's windows for one plan: perMinute and/or perDay. */
const routeWindowLimits = z
  .strictObject({
    perMinute: positiveInt().optional().describe('Points per minute a key may spend on this route.'),
    perDay: positiveInt().optional().describe('Points per day a key may spend on this route.'),
    shadow: candidateLimits
      .optional()
      .describe('Candidate limits for these windows, checked in shadow beside them (each needs its enforced window: perMinute for shadow.perMinute). Default: none.'),
  })
  .refine((l) => l.perMinute !== undefined || l.perDay !== undefined, 'expected perMinute and/or perDay')
  .superRefine(candidatesHaveWindows);

/** A candidate limit is tried on its enforced window's count: without that window there is nothing to try it on. */
function candidatesHaveWindows(l: { perMinute?: number | undefined; perDay?: number | undefined; shadow?: { perMinute?: number | undefined; perDay?: number | undefined } | undefined }, ctx: Ctx): void {
  for (const w of ['perMinute', 'perDay'] as const) {
    if (l.shadow?.[w] !== undefined && l[w] === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['shadow', w],
        message: `a candidate ${w} needs an enforced ${w} beside it; for a window that enforces nothing yet, set ${w} with the route's mode: shadow`,
        input: l.shadow[w],
      });
    }
  }
}

/** A route window name: it goes into Redis key names and header strings. */
const ROUTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

const DEFAULT_PLANS = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
  enterprise: { perMinute: 10_000, perDay: 10_000_000 },
};

const anonymous = z.strictObject({
  perMinute: positiveInt().default(30).describe('Requests per minute per client IP for requests without a valid key.'),
});

const ban = z.strictObject({
  enabled: z.boolean().default(true).describe('false: no ban is computed, stored or enforced (no strikes, no ban records in Redis); 429s alone meter repeat offenders.'),
  mode: limitMode()
    .default('enforce')
    .describe('enforce: a ban refuses the key (429 api_key_banned). shadow: the ladder is computed, logged and counted (tollgate_ban_would_ban_total, the ledger\'s wouldBan) but refuses nothing; a ban started in enforce mode is not enforced while in shadow.'),
  scope: z
    .enum(['key', 'consumer'])
    .default('key')
    .describe('Whose ban a key of a consumer meets and builds: key, its own (each key its own ladder); consumer, its consumer\'s (every key of it banned together; a new or rotated key does not start a fresh ladder). A key without a consumer has its own either way.'),
  threshold: positiveInt().default(10).describe('This many 429s for one key within windowSeconds bans it.'),
  windowSeconds: positiveInt().default(60).describe('The strike window: threshold 429s within this many seconds ban the key (fixed, from the first strike).'),
  durationsSeconds: z.array(positiveInt()).min(1).default([60, 600, 3600]).describe('Ban lengths: 1st ban, 2nd, 3rd and later.'),
  resetAfterSeconds: positiveInt().default(86_400).describe('The escalation level is forgotten this long after the last ban ended.'),
});

const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', '*'] as const;

/** A backend address: http(s), an optional base path, nothing else (no credentials, query or fragment). */
const targetUrl = z
  .url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' })
  .refine((u) => {
    const url = new URL(u);
    return url.username === '' && url.password === '' && url.search === '' && url.hash === '';
  }, 'a target URL carries scheme, host, port and an optional base path only (no credentials, query or fragment)');

const target = z
  .union([
    targetUrl,
    z.strictObject({
      url: targetUrl.describe('The instance\'s URL (scheme, host, port, optional base path).'),
      weight: z.number().int().min(1).max(1000).default(1).describe('Its share of requests under round-robin (1-1000).'),
    }),
  ])
  .transform((t) => (typeof t === 'string' ? { url: t, weight: 1 } : t));

/** A status ("404") or an inclusive range of statuses ("200-399"), 100-599: what a passing health check answers. */
const STATUS_OR_RANGE = /^([1-5][0-9]{2})(?:-([1-5][0-9]{2}))?$/;
const expectedStatus = z
  .union([z.number().int().min(100).max(599), z.string().regex(STATUS_OR_RANGE, 'expected a status (404) or a range of statuses ("200-399"), 100-599')])
  .refine((e) => {
    const m = typeof e === 'string' ? STATUS_OR_RANGE.exec(e) : null;
    return !m || m[2] === undefined || Number(m[1]) <= Number(m[2]);
  }, 'a range of statuses goes from the lower to the higher ("200-399")');

/** What passive ejection counts as a target's failure: "connect", "reset", "timeout", a status 500-599, or "5xx". */
const ejectOutcome = z.union([z.enum(['connect', 'reset', 'timeout', '5xx']), z.number().int().min(500).max(599)]);

const healthCheck = z.strictObject({
  path: z.string().startsWith('/').describe('Path requested (GET) on every target; an answer in expectedStatuses, in time, passes.'),
  expectedStatuses: z
    .array(expectedStatus)
    .min(1, 'list at least one status or range, e.g. ["200-399"]')
    .default(['200-399'])
    .describe('Statuses a passing check answers: each a status (204) or an inclusive range ("200-399"). Any other answer fails.'),
  intervalMs: z.number().int().min(100).default(5000).describe('Time between two checks of one target.'),
  timeoutMs: positiveInt().default(1000).describe('A check without an answer in this time fails.'),
  unhealthyAfter: positiveInt().max(100).default(3).describe('Consecutive failed checks (no answer in time, or a status outside expectedStatuses) that take a target out.'),
  healthyAfter: positiveInt().max(100).default(2).describe('Consecutive passed checks that bring it back.'),
});

const eject = z.strictObject({
  consecutiveFailures: positiveInt().max(1000).default(5).describe('Failed requests in a row (each an outcome listed in eject.on) that make a target rest.'),
  forMs: positiveInt().default(30_000).describe('How long an ejected target rests before it is picked again (a passing active check ends it sooner).'),
  maxPercent: z
    .number()
    .int()
    .min(0)
    .max(100)
    .default(50)
    .describe('At most this share of the service\'s targets out at once, counting those out by checks or resting; the last available target is never ejected. 0: no passive ejection.'),
  on: z
    .array(ejectOutcome)
    .default(['connect', 'reset', 'timeout', 502, 503, 504])
    .describe('Outcomes that count as a failure of the target: "connect" (refused, connect timeout), "reset", "timeout", a status 500-599, or "5xx" (all). Default: the target\'s own failures, not the application\'s 500s.'),
});

/**
 * HTTPS to a service's targets with a private CA, and optionally a client certificate (mutual TLS). Every target of
 * such a service is https:// (refused otherwise: the block would silently do nothing for an http:// one).
 */
const serviceTls = z.strictObject({
  caFile: z.string().min(1).describe('PEM file of the CA certificate(s) that signed the targets\' certificates (instead of the system\'s trusted CAs).'),
  certFile: z.string().min(1).optional().describe('PEM file of the client certificate the gateway presents, for targets that require one (mutual TLS); goes with keyFile.'),
  keyFile: z.string().min(1).optional().describe('PEM file of the client certificate\'s private key (unencrypted); goes with certFile.'),
  servername: z.string().regex(/^[A-Za-z0-9.-]+$/, 'expected a host name such as orders.internal').optional().describe('The name the targets\' certificates must carry (SNI and verification), when it is not the host in their URLs.'),
  verify: z.boolean().default(true).describe('false accepts any certificate from the targets (warned about at start): for a test setup only.'),
});

/** A route's stability (routes[].stability, an OpenAPI document's x-stability): a token, sent as X-API-Stability. */
const STABILITY = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;
const STABILITY_SHAPE = 'expected a stability token of 1-64 characters of A-Z a-z 0-9 - (starting with a letter or digit), such as experimental or beta';

/**
 * A service's own OpenAPI document as its routes (src/openapi/): read when the config is loaded and on every reload;
 * and its API policy. stability: for each stability value, the plans whose keys may call the service's routes of
 * that stability (403 plan_not_allowed for others, before any quota is taken); a value not listed is open to all.
 * `file` may be left out: the stability map then applies to the service's hand-written routes alone.
 */
const serviceOpenapi = z.strictObject({
  file: z.string().min(1).optional().describe('The document (YAML or JSON, OpenAPI 3.0 or 3.1), relative to the config file; $refs to files beside it are read too. Leave out for a stability map over hand-written routes only.'),
  basePath: z
    .string()
    .regex(/^(\/[A-Za-z0-9._~!$&'()+,;=@%-]+)*$/, 'expected a path such as /v1 (or "" for none)')
    .optional()
    .describe('Where the document\'s paths are served; default: the path of its servers[0].url, else none.'),
  validate: z.enum(['off', 'shadow', 'enforce']).default('off').describe('Request validation against the operation: off, shadow (counted and logged) or enforce (400).'),
  stability: z
    .record(z.string().regex(STABILITY, STABILITY_SHAPE), z.array(z.string()))
    .default({})
    .describe('Stability value -> the plans whose keys may call this service\'s routes of that stability, e.g. { experimental: [business, enterprise] }; values not listed are open to every plan.'),
}).superRefine((o, ctx) => {
  // A stability map alone is for hand-written routes; basePath and validate describe a document.
  if (o.file === undefined && (o.basePath !== undefined || o.validate !== 'off'))
    ctx.addIssue({ code: 'custom', path: ['file'], message: 'basePath and validate describe a document: give its file, or leave them out', input: o });
});

/** The upstream shorthand: one service, named "upstream" (UPSTREAM_SERVICE), taking /v1 and the routes without a service. */
const upstream = z.strictObject({
  url: z.url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' }).default('http://127.0.0.1:8081').describe('Base URL of the service behind the gateway. Only this origin is ever contacted.'),
  timeoutMs: positiveInt().default(10_000).describe('No response headers from the upstream within this time: 504.'),
  hideCredentials: z.boolean().default(true).describe('Strip the API key before forwarding (what the key sources read: a Bearer Authorization when bearer is one, the headers and query parameters they name), so the upstream never sees it; other credentials pass.'),
  healthPath: z.string().startsWith('/').default('/healthz').describe('Path /readyz requests on the upstream; any HTTP answer (even 404) counts as up.'),
  maxSockets: positiveInt().default(256).describe('Most keep-alive sockets held open to the upstream.'),
  openapi: serviceOpenapi
    .optional()
    .describe('The upstream\'s own OpenAPI 3.0/3.1 document, as services.<name>.openapi: every operation becomes a route to the upstream (a route without service, so under /v1), and its stability map gates them. UPSTREAM_URL moves them with the rest of /v1.'),
});

/** Names appear in metrics labels and log lines. */
const SERVICE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

const service = z.strictObject({
  targets: z.array(target).min(1, 'a service needs at least one target').describe('Its instances: a URL, or { url, weight } (weight default 1).'),
  balance: z.enum(['round-robin', 'least-requests']).default('round-robin').describe('round-robin (weighted), or least-requests (the less busy of two targets picked at random).'),
  timeoutMs: positiveInt().default(10_000).describe('No response headers within this time: 504 gateway_timeout (the whole request, retries included).'),
  connectTimeoutMs: positiveInt().default(2000).describe('A try that has not connected within this time counts as "could not connect".'),
  retries: z.number().int().min(0).max(5).default(1).describe('Further tries after the first, each on another target when there is one (rules in docs/routing.md).'),
  retryOn: z.array(z.number().int().min(500).max(599)).default([]).describe('Statuses that also retry an idempotent request without a body, e.g. [502, 503].'),
  perTryTimeoutMs: positiveInt().optional().describe('No response headers within this time on one try of an idempotent request without a body: that try ends (counted a timeout) and the next goes to another target, within timeoutMs. Left out: a try may take the whole timeoutMs. Armed only while a retry is left and another available target is untried: on a single-target service a try is never cut to be sent to the same target again.'),
  healthCheck: healthCheck.optional().describe('Active checks of every target by every gateway instance; leave out for passive ejection only.'),
  eject: eject.prefault({}).describe('Passive ejection: a target that fails requests in a row rests for a while.'),
  tls: serviceTls.optional().describe('HTTPS to the targets with a private CA: { caFile, certFile, keyFile, servername, verify }; every target must then be https://. Active health checks use it too. Without it, https:// targets are verified against the system\'s CAs.'),
  openapi: serviceOpenapi.optional().describe('The service\'s OpenAPI 3.0/3.1 document (every operation becomes a route to this service, after the hand-written routes: docs/routing.md, "OpenAPI document") and its API policy: stability (which plans may call routes of each stability).'),
})
  .superRefine(perTryBelowTimeout)
  .superRefine(tlsTargetsAreHttps);

/** The two shapes of routes[].limits, by the route's auth: per client address (public) or per plan (keyed). */
const ADDRESS_WINDOWS = ['perMinute', 'perDay'] as const;

/**
 * A public route's limits count per client address ({ perMinute, perDay }); a keyed route's name plans. One shape
 * where the other belongs, or both mixed, is refused here: read either way it would meter something else than meant.
 */
function routeLimitsMatchAuth(r: { auth?: 'key' | 'none' | undefined; cost: number; limits?: Record<string, unknown> | undefined }, ctx: Ctx): void {
  if (!r.limits) return;
  const entries = Object.entries(r.limits);
  const byAddress = entries.filter(([name]) => (ADDRESS_WINDOWS as readonly string[]).includes(name));
  if (r.auth === 'none') {
    for (const [name, value] of entries) {
      if (typeof value === 'number' && byAddress.some(([n]) => n === name)) continue;
      ctx.addIssue({
        code: 'custom',
        path: ['limits', name],
        message: byAddress.some(([n]) => n === name)
          ? `a public route's ${name} is a number: points per client address`
          : `a public route (auth: none) has limits per client address, { perMinute, perDay }; windows by plan ("${name}") need auth: key (a key on a public route is metered by its plan)`,
        input: value,
      });
    }
    if (entries.length === 0) ctx.addIssue({ code: 'custom', path: ['limits'], message: 'expected perMinute and/or perDay', input: r.limits });
    for (const [name, value] of byAddress) {
      if (typeof value === 'number' && value < r.cost) {
        ctx.addIssue({
          code: 'custom',
          path: ['limits', name],
          message: `${name} ${value} is below the route's cost ${r.cost}: no request without a key could ever be admitted`,
          input: value,
        });
      }
    }
    return;
  }
  for (const [name, value] of entries) {
    if (typeof value !== 'number') continue;
    ctx.addIssue({
      code: 'custom',
      path: ['limits', name],
      message: byAddress.length > 0
        ? `limits.${name} counts per client address, which only a public route (auth: none) has; a keyed route's windows go by plan: limits: { default: { ${name}: ${value} } }`
        : `expected the windows of plan "${name}": { perMinute, perDay }`,
      input: value,
    });
  }
}

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

/** A route gives its path, or names an operation whose document gives it (src/openapi/documents.ts merges it there). */
function pathOrOperation(r: { path?: string | undefined; operationId?: string | undefined }, ctx: Ctx): void {
  if (r.operationId === undefined && r.path === undefined)
    ctx.addIssue({ code: 'custom', path: ['path'], message: "expected a path (or an operationId of a service's OpenAPI document)", input: undefined });
}

const auth = z.strictObject({
  sources: z
    .array(z.string().superRefine(validKeySource))
    .min(1, 'name at least one source (bearer, header:<Name> or query:<param>)')
    .default(['bearer'])
    .describe('Where a key is read, in order: "bearer" (Authorization: Bearer), "header:<Name>", "query:<param>". The first that carries a key is used; two different keys in one request are refused (401).'),
  foreignKeys: z.boolean().default(false).describe('true: keys of any shape (16-256 visible ASCII characters, e.g. a legacy system\'s sk_live_...) are accepted and looked up by their SHA-256. A key that starts with issuedPrefix is still checked as an issued key (its checksum) first.'),
  issuedPrefix: z
    .string()
    .regex(ISSUED_PREFIX_SHAPE, 'expected 1-32 characters of A-Z a-z 0-9 . _ ~ - (they travel unescaped in headers, bearer tokens and query strings)')
    .refine((p) => !p.startsWith(ADMIN_TOKEN_PREFIX), `must not start with ${ADMIN_TOKEN_PREFIX}: admin tokens have that prefix`)
    .default(KEY_PREFIX)
    .describe('The prefix of the keys Tollgate issues (tollgate keys create, the admin API, keys generate); needs a restart.'),
});

function validKeySource(text: string, ctx: Ctx): void {
  const parsed = parseKeySource(text);
  if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed, input: text });
}

/** A static key: a key record's fields by the rules every way in shares (key-fields.ts), with the key's SHA-256. */
const staticKey = z.strictObject({
  id: keyInputFields.id.describe('The static key\'s id (X-Consumer-Id upstream).'),
  plan: keyInputFields.plan.describe('A plan from plans.'),
  sha256: sha256HexSchema.describe('SHA-256 of the plaintext key, 64 lowercase hex digits.'),
  name: keyInputFields.name.optional().describe('A label.'),
  perMinute: keyInputFields.perMinute.optional().describe('This key\'s own limit per minute, over its plan\'s.'),
  perDay: keyInputFields.perDay.optional().describe('This key\'s own limit per day, over its plan\'s.'),
  expiresAt: keyInputFields.expiresAt.optional().describe('When the key stops working (ISO-8601).'),
  metadata: keyInputFields.metadata.optional().describe('Names and values a portal or billing system keeps on the key (at most 16), shown in usage reports.'),
});

export const configSchema = z
  .strictObject({
    server: server.prefault({}).describe('The gateway\'s listener and its timeouts.'),
    upstream: upstream.optional().describe('One backend that receives every request under /v1 (the shorthand for one service); its hideCredentials and maxSockets apply to every service. Beside services, a section without url is those settings alone, no service.'),
    redis: redis.optional().describe('The shared Redis (one of url, cluster, sentinel); leave it out for the in-memory stores (one instance only).'),
    ops: ops.optional().describe('A separate listener for /readyz and /metrics; leave out to serve them on the gateway port.'),
    admin: admin.prefault({}).describe('The admin HTTP API (keys, plans), on a listener of its own.'),
    selfService: selfService.prefault({}).describe('The quota endpoint key holders call on the gateway port.'),
    usage: usage.prefault({}).describe('Usage per key and deprecated-route callers, kept in Redis.'),
    tracing: tracing.prefault({}).describe('OpenTelemetry traces over OTLP/HTTP (off unless otlpEndpoint is set).'),
    log: log.prefault({}).describe('Logging.'),
    limits: limits.prefault({}).describe('How windows apply: enforce or shadow mode.'),
    plans: z
      .record(
        z
          .string()
          .regex(/^[a-z0-9][a-z0-9_-]*$/, 'plan names are lowercase a-z 0-9 _ -')
          .refine((p) => p !== 'default', '"default" is reserved (routes[].limits uses it for plans without an entry)'),
        plan,
      )
      .default(DEFAULT_PLANS)
      .describe('Plans by name: { perMinute, perDay, mode, shadow }. Giving plans replaces the whole default set.'),
    anonymous: anonymous.prefault({}).describe('The per-client limit for requests without a valid key.'),
    ban: ban.prefault({}).describe('The ban ladder for keys that keep hammering after a 429.'),
    services: z.record(z.string().regex(SERVICE_NAME, 'service names are 1-64 characters of A-Z a-z 0-9 _ . -'), service).optional().describe('Backends by name, each with its targets, balancing, retries and health checks (docs/routing.md).'),
    routes: z.array(route).default([]).describe('Routes to services, with their policy (auth, deprecation, sunset, cost, route windows); first match in file order wins.'),
    defaultService: z.string().regex(SERVICE_NAME, 'expected a service name from services').optional().describe('Where requests that match no route go; left out, they get 404 not_found.'),
    methodOverride: z
      .enum(['match', 'refuse'])
      .default('match')
      .describe('A POST carrying X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override or ?_method: "match" routes it as the method it names and sends it upstream as that method (override headers, _method and, for GET or DELETE, the body left out); "refuse" answers 400.'),
    keys: z.array(staticKey).default([]).describe('Static keys for Redis-less use, by the SHA-256 of the key (tollgate keys generate).'),
    auth: auth.prefault({}).describe('How API keys are read and judged: where (sources), which shapes (foreignKeys), and the prefix of issued keys.'),
  })
  .superRefine(sunsetNotBeforeDeprecation, readsClean('routes'))
  .superRefine(afterSunsetNeedsSunset, readsClean('routes'))
  .superRefine(brownoutsBeforeSunset, readsClean('routes'))
  .superRefine(stabilityPlansKnown, readsClean('services', 'upstream', 'plans'))
  .superRefine(staticKeysUseKnownPlans, readsClean('keys', 'plans'))
  .superRefine(routeLimitsUseKnownPlans, readsClean('routes', 'plans'))
  .superRefine(routeWindowNamesUnique, readsClean('routes'))
  .superRefine(staticKeyIdsUnique, readsClean('keys'))
  .superRefine(workersNeedRedis, readsClean('server', 'redis'))
  .superRefine(opsPortDiffers, readsClean('ops', 'server'))
  .superRefine(adminPortDiffers, readsClean('admin', 'server', 'ops'))
  .superRefine(adminTokenIdsUnique, readsClean('admin'))
  .superRefine(keySourcesDistinct, readsClean('auth'))
  .superRefine(routesNameKnownServices, readsClean('services', 'routes', 'defaultService', 'upstream'))
  .superRefine(routesWithoutServiceNeedUpstream, readsClean('services', 'upstream', 'routes'))
  .superRefine(routesLeaveGatewayPathsAlone, readsClean('routes', 'selfService', 'ops'))
  .superRefine(stripPrefixLeadsPath, readsClean('routes'))
  .transform(withUpstream);

/** The service the upstream section is (upstream.url): every request under /v1 and the routes that name no service. */
export const UPSTREAM_SERVICE = 'upstream';

/** The upstream section's defaults, for a config that leaves it out. */
const UPSTREAM_DEFAULTS = upstream.parse({});

/**
 * upstream.url is a service (named "upstream": it takes every request under /v1 and routes without a service) when
 * the file writes an upstream section or has no services; the section's defaults are always filled in.
 */
function withUpstream<T extends { upstream?: z.output<typeof upstream> | undefined; services?: Record<string, unknown> | undefined }>(
  cfg: T,
): Omit<T, 'upstream'> & { upstream: z.output<typeof upstream>; upstreamIsService?: boolean } {
  const { upstream: given, ...rest } = cfg;
  return { ...rest, upstream: given ?? UPSTREAM_DEFAULTS, ...(cfg.services ? { upstreamIsService: given !== undefined } : {}) };
}

// Refinements only add issues, so any context will do for their signatures.
type Ctx = z.RefinementCtx<unknown>;

/**
 * A cross-field rule runs unless a section it reads failed to parse (a wrong type: zod's aborting issues), even when
 * other sections did: `config check` then names every problem in one pass, where zod by default skips every rule after
 * one wrong type anywhere. A section with only unknown fields or out-of-range values parsed, and is read as it is.
 * Reading a section that failed to parse, a rule could only guess, so it waits for that section to be fixed.
 */
function readsClean(...sections: string[]): { when: (payload: z.core.ParsePayload) => boolean } {
  return { when: (payload) => !payload.issues.some((i) => i.continue !== true && sections.includes(String(i.path?.[0]))) };
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

type RoutingCfg = {
  services?: Record<string, unknown> | undefined;
  upstream?: unknown;
  routes: ParsedRouteConfig[];
  defaultService?: string | undefined;
  selfService: { path: string; enabled: boolean };
  ops?: unknown;
};

/** A route's name in messages: its method (when not any), host (when given) and path. */
function routeName(r: ParsedRouteConfig): string {
  return `${r.method === '*' ? '' : `${r.method} `}${r.host ? `${r.host}` : ''}${r.path ?? `operationId ${r.operationId}`}`;
}

function routesNameKnownServices(cfg: RoutingCfg, ctx: Ctx): void {
  const known = Object.keys(cfg.services ?? {});
  const expected = known.length ? `expected one of ${known.join(', ')}` : 'no services are configured';
  cfg.routes.forEach((r, i) => {
    if (r.service !== undefined && !known.includes(r.service))
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'service'], message: `route ${routeName(r)}: unknown service; ${expected}`, input: r.service });
  });
  if (cfg.defaultService !== undefined && !known.includes(cfg.defaultService))
    ctx.addIssue({ code: 'custom', path: ['defaultService'], message: `unknown service; ${expected}`, input: cfg.defaultService });
  if (cfg.services && cfg.upstream !== undefined && Object.hasOwn(cfg.services, UPSTREAM_SERVICE))
    ctx.addIssue({
      code: 'custom',
      path: ['services', UPSTREAM_SERVICE],
      message: `the name "${UPSTREAM_SERVICE}" is taken by the upstream section (its service); rename one`,
      input: UPSTREAM_SERVICE,
    });
}

/**
 * A route without a service goes to upstream.url, which takes /v1: so it must be under /v1, and with services
 * configured, an upstream section must be there to take it.
 */
function routesWithoutServiceNeedUpstream(cfg: RoutingCfg, ctx: Ctx): void {
  const upstreamIsService = !cfg.services || cfg.upstream !== undefined;
  cfg.routes.forEach((r, i) => {
    // A route naming an operationId goes where its operation's document says (a path of its own is refused there).
    if (r.service !== undefined || r.path === undefined || r.operationId !== undefined) return;
    if (!upstreamIsService)
      ctx.addIssue({
        code: 'custom',
        path: ['routes', i, 'service'],
        message: `route ${routeName(r)} names no service and there is no upstream section to take it; name one of the services`,
        input: undefined,
      });
    else if (!isUnderUpstreamPrefix(r.path))
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'path'], message: `expected a path under ${UPSTREAM_PREFIX}/, such as ${UPSTREAM_PREFIX}/pets/:petId`, input: r.path });
    else if (r.stripPrefix !== undefined)
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'stripPrefix'], message: `route ${routeName(r)}: stripPrefix needs a service (the upstream gets /v1 paths whole)`, input: r.stripPrefix });
  });
}


function routesLeaveGatewayPathsAlone(cfg: RoutingCfg, ctx: Ctx): void {
  const own = gatewayPaths(cfg);
  cfg.routes.forEach((r, i) => {
    if (r.path === undefined) return;
    let m: ((p: string) => unknown) | undefined;
    try {
      m = routeMatcher(r.path);
    } catch {
      return; // reported by validRoutePattern
    }
    const taken = own.filter((p) => m(p) || m(p.toLowerCase()));
    if (taken.length > 0)
      ctx.addIssue({
        code: 'custom',
        path: ['routes', i, 'path'],
        message: `route ${routeName(r)} would take the gateway's own ${taken.join(', ')}; those are never routed`,
        input: r.path,
      });
  });
}

function stripPrefixLeadsPath(cfg: RoutingCfg, ctx: Ctx): void {
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


/** A service's tls block is for https:// targets: with an http:// one it would do nothing, a mistake either way. */
function tlsTargetsAreHttps(
  s: { targets: Array<{ url: string }>; tls?: { certFile?: string | undefined; keyFile?: string | undefined } | undefined },
  ctx: Ctx,
): void {
  if (!s.tls) return;
  s.targets.forEach((t, i) => {
    if (t.url.startsWith('http://'))
      ctx.addIssue({
        code: 'custom',
        path: ['targets', i],
        message: 'tls is set, so every target must be https:// (write https://, or drop tls for plain HTTP)',
        input: t.url,
      });
  });
  if ((s.tls.certFile === undefined) !== (s.tls.keyFile === undefined))
    ctx.addIssue({ code: 'custom', path: ['tls', s.tls.certFile === undefined ? 'certFile' : 'keyFile'], message: 'certFile and keyFile go together (the client certificate and its key)' });
}

/** A per-try bound at or over the whole request's bound never ends a try: a mistake, not a setting. */
function perTryBelowTimeout(s: { timeoutMs: number; perTryTimeoutMs?: number | undefined }, ctx: Ctx): void {
  if (s.perTryTimeoutMs !== undefined && s.perTryTimeoutMs >= s.timeoutMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['perTryTimeoutMs'],
      message: `perTryTimeoutMs (${s.perTryTimeoutMs}) must be below the service's timeoutMs (${s.timeoutMs}), which bounds every try together`,
      input: s.perTryTimeoutMs,
    });
  }
}

function workersNeedRedis(cfg: { server: { workers: number | 'auto' }; redis?: unknown }, ctx: Ctx): void {
  if (cfg.server.workers !== 1 && !cfg.redis) {
    ctx.addIssue({
      code: 'custom',
      path: ['server', 'workers'],
      message: 'more than one worker needs a redis section: workers share keys and limits only through Redis',
      input: cfg.server.workers,
    });
  }
}

function opsPortDiffers(cfg: { server: { port: number; host: string }; ops?: { port: number; host: string } }, ctx: Ctx): void {
  if (cfg.ops && cfg.ops.port !== 0 && cfg.ops.port === cfg.server.port) {
    ctx.addIssue({ code: 'custom', path: ['ops', 'port'], message: 'the ops listener needs a port of its own, not server.port', input: cfg.ops.port });
  }
}

function adminPortDiffers(cfg: { server: { port: number }; ops?: { port: number }; admin: { port: number } }, ctx: Ctx): void {
  if (cfg.admin.port === 0) return;
  if (cfg.admin.port === cfg.server.port || cfg.admin.port === cfg.ops?.port) {
    ctx.addIssue({
      code: 'custom',
      path: ['admin', 'port'],
      message: `the admin listener needs a port of its own, not ${cfg.admin.port === cfg.server.port ? 'server.port' : 'ops.port'}`,
      input: cfg.admin.port,
    });
  }
}

function adminTokenIdsUnique(cfg: { admin: { tokens: Array<{ id: string }> } }, ctx: Ctx): void {
  const seen = new Set<string>();
  cfg.admin.tokens.forEach((t, i) => {
    // Audit lines name the CLI "cli" and TOLLGATE_ADMIN_TOKEN's token "env": a configured token may not pose as either.
    if (t.id === 'cli' || t.id === 'env')
      ctx.addIssue({ code: 'custom', path: ['admin', 'tokens', i, 'id'], message: `"${t.id}" is reserved (audit lines use it)`, input: t.id });
    if (seen.has(t.id)) ctx.addIssue({ code: 'custom', path: ['admin', 'tokens', i, 'id'], message: 'duplicate admin token id', input: t.id });
    seen.add(t.id);
  });
}

function sunsetNotBeforeDeprecation(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (r.deprecation && r.sunset && Date.parse(r.sunset) < Date.parse(r.deprecation)) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'sunset'], message: 'sunset must not be earlier than deprecation (RFC 8594)', input: r.sunset });
    }
  });
}

function afterSunsetNeedsSunset(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (r.afterSunset === 'gone' && !r.sunset) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'afterSunset'], message: 'afterSunset: gone needs a sunset date', input: r.afterSunset });
    }
  });
}

/** Brownouts rehearse a retirement: a route without a sunset has none to rehearse, and one after it is no rehearsal. */
function brownoutsBeforeSunset(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
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

function stabilityPlansKnown(
  cfg: { services?: Record<string, ServiceConfig> | undefined; upstream?: UpstreamConfig | undefined; plans: Record<string, unknown> },
  ctx: Ctx,
): void {
  for (const { at, openapi } of openapiBlocks(cfg)) {
    for (const [value, plans] of Object.entries(openapi.stability ?? {})) {
      plans.forEach((plan, j) => {
        if (!Object.hasOwn(cfg.plans, plan))
          ctx.addIssue({
            code: 'custom',
            path: [...at, 'stability', value, j],
            message: `unknown plan; expected one of ${Object.keys(cfg.plans).join(', ')}`,
            input: plan,
          });
      });
    }
  }
}

/** One openapi block of a config: a service's, or the upstream section's (its service is UPSTREAM_SERVICE). */
export interface OpenapiBlock {
  /** The service its routes go to. */
  service: string;
  /** Where it is in the config: ['services', name, 'openapi'] or ['upstream', 'openapi']. */
  at: string[];
  openapi: ServiceOpenapiConfig;
  /** The upstream section's: its operations are routes without a service, so under /v1. */
  upstream: boolean;
}

/**
 * Every openapi block of a config, the upstream section's first: whatever reads documents, stability maps or their
 * files asks this, so the upstream's document is never forgotten beside the services'.
 */
export function openapiBlocks(cfg: { services?: Readonly<Record<string, Pick<ServiceConfig, 'openapi'>>> | undefined; upstream?: Pick<UpstreamConfig, 'openapi'> | undefined }): OpenapiBlock[] {
  const out: OpenapiBlock[] = [];
  if (cfg.upstream?.openapi) out.push({ service: UPSTREAM_SERVICE, at: ['upstream', 'openapi'], openapi: cfg.upstream.openapi, upstream: true });
  for (const [name, s] of Object.entries(cfg.services ?? {}))
    if (s.openapi) out.push({ service: name, at: ['services', name, 'openapi'], openapi: s.openapi, upstream: false });
  return out;
}

function staticKeysUseKnownPlans(cfg: { keys: StaticKeyConfig[]; plans: Record<string, unknown> }, ctx: Ctx): void {
  cfg.keys.forEach((k, i) => {
    if (!Object.hasOwn(cfg.plans, k.plan)) {
      ctx.addIssue({ code: 'custom', path: ['keys', i, 'plan'], message: `unknown plan; expected one of ${Object.keys(cfg.plans).join(', ')}`, input: k.plan });
    }
  });
}

function routeLimitsUseKnownPlans(cfg: { routes: ParsedRouteConfig[]; plans: Record<string, unknown> }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (r.auth === 'none') return;
    for (const plan of Object.keys(r.limits ?? {})) {
      if (plan !== 'default' && !Object.hasOwn(cfg.plans, plan)) {
        ctx.addIssue({
          code: 'custom',
          path: ['routes', i, 'limits', plan],
          message: `unknown plan; expected default or one of ${Object.keys(cfg.plans).join(', ')}`,
          input: plan,
        });
      }
    }
  });
}

/**
 * Route windows are stored per key under the route's name: two routes with windows under one name would share them
 * without anyone saying so. Name one of them.
 */
function routeWindowNamesUnique(cfg: { routes: ParsedRouteConfig[] }, ctx: Ctx): void {
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

function staticKeyIdsUnique(cfg: { keys: StaticKeyConfig[] }, ctx: Ctx): void {
  const seen = new Set<string>();
  cfg.keys.forEach((k, i) => {
    if (seen.has(k.id)) ctx.addIssue({ code: 'custom', path: ['keys', i, 'id'], message: 'duplicate key id', input: k.id });
    seen.add(k.id);
  });
}

function keySourcesDistinct(cfg: { auth: { sources: string[] } }, ctx: Ctx): void {
  const seen = new Set<string>();
  cfg.auth.sources.forEach((text, i) => {
    const s = parseKeySource(text);
    if (typeof s === 'string') return;
    // Header names are case-insensitive; query parameter names are not.
    const id = s.kind === 'header' ? `header:${s.name}` : s.kind === 'query' ? `query:${s.name}` : 'bearer';
    if (seen.has(id)) ctx.addIssue({ code: 'custom', path: ['auth', 'sources', i], message: 'this source is listed twice', input: text });
    seen.add(id);
  });
}

/** A route as the file gives it: a route naming an operationId has no path until its document is read. */
export type ParsedRouteConfig = z.output<typeof route>;
/**
 * A loaded config: every route has its path (those naming an operationId were merged into their operation's route by
 * src/openapi/), and `openapi` holds what the documents added, by route index.
 */
export type Config = Omit<z.output<typeof configSchema>, 'routes'> & { routes: RouteConfig[]; openapi?: LoadedDocuments };
export type AuthConfig = z.output<typeof auth>;
export type ServiceConfig = z.output<typeof service>;
export type TargetConfig = z.output<typeof target>;
export type UpstreamConfig = z.output<typeof upstream>;
export type ServiceOpenapiConfig = z.output<typeof serviceOpenapi>;
export type RouteConfig = Omit<ParsedRouteConfig, 'path'> & { path: string };
/** A keyed route's windows for one plan (routes[].limits.<plan>). */
export type RouteWindowLimitsConfig = z.output<typeof routeWindowLimits>;

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
export type StaticKeyConfig = z.output<typeof staticKey>;
export type PlanConfig = z.output<typeof plan>;
export type LimitsConfig = z.output<typeof limits>;
export type RedisConfig = z.output<typeof redis>;
export type OpsConfig = z.output<typeof ops>;
export type AdminConfig = z.output<typeof admin>;
export type ListenerTlsConfig = z.output<typeof listenerTls>;
export type ServiceTlsConfig = z.output<typeof serviceTls>;
export type UsageConfig = z.output<typeof usage>;
