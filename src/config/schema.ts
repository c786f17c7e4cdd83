// The configuration schema: every field, its default and its meaning, declared once.
// Types are derived from it; unknown keys are errors; cross-field rules are named functions below.
import { match } from 'path-to-regexp';
import { z } from 'zod';

const positiveInt = () => z.number().int().positive();
const isoInstant = () => z.iso.datetime({ offset: true, message: 'expected an ISO-8601 date-time such as 2027-06-01T00:00:00Z' });

const server = z.strictObject({
  /** Address to listen on. */
  host: z.string().min(1).default('127.0.0.1'),
  /** TCP port to listen on (0 picks a free one). */
  port: z.number().int().min(0).max(65535).default(8080),
  /**
   * Express "trust proxy": false, true, a hop count, or addresses/subnets whose X-Forwarded-For to believe. The
   * anonymous limit takes the address it yields only when that is an IP address, else the peer's (limits/client-address.ts).
   */
  trustProxy: z.union([z.boolean(), z.number().int().min(0), z.string().min(1), z.array(z.string().min(1))]).default(false),
  /** Request bodies larger than this get 413 before (or while) reaching the upstream. */
  maxBodyBytes: z.number().int().min(0).default(1_048_576),
  /** Gateway processes sharing the port (node:cluster): a number, or "auto" for one per core. */
  workers: z.union([z.number().int().min(1).max(64), z.literal('auto')]).default(1),
  /**
   * How far V8's old generation may grow past the live heap before a full collection, in percent (0: V8's own
   * dynamic choice, which reaches 300 on 64-bit hosts). Bounds the gateway's resident memory; applied at start-up
   * (src/server/heap.ts).
   */
  heapGrowthPercent: z.number().int().min(0).max(1000).default(35),
  /** On SIGTERM/SIGINT, how long in-flight requests may take to finish before the process exits anyway. */
  drainTimeoutMs: z.number().int().min(0).default(10_000),
  /** A client must send its full request headers within this time (slowloris guard). */
  headersTimeoutMs: z.number().int().positive().default(10_000),
  /** A client must send its full request (headers and body) within this time. */
  requestTimeoutMs: z.number().int().positive().default(30_000),
  /** Idle keep-alive connections from clients are closed after this time. */
  keepAliveTimeoutMs: z.number().int().positive().default(5_000),
});

const upstream = z.strictObject({
  /** Base URL of the service behind the gateway. Only this origin is ever contacted. */
  url: z.url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' }).default('http://127.0.0.1:8081'),
  /** No response headers from the upstream within this time: 504. */
  timeoutMs: positiveInt().default(10_000),
  /** Strip Authorization before forwarding, so the upstream never sees the API key. */
  hideCredentials: z.boolean().default(true),
  /** Path /readyz requests on the upstream; any HTTP answer (even 404) counts as up. */
  healthPath: z.string().startsWith('/').default('/healthz'),
  /** Most keep-alive sockets held open to the upstream. */
  maxSockets: positiveInt().default(256),
});

const redisUrl = z.string().regex(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL');

const redisTls = z.strictObject({
  /** PEM file of the CA certificate(s) that signed the servers' certificates; else the system's trusted CAs. */
  caFile: z.string().min(1).optional(),
  /** Client certificate and key (PEM files), for a Redis that requires clients to present one (mutual TLS). */
  certFile: z.string().min(1).optional(),
  keyFile: z.string().min(1).optional(),
  /** The name the servers' certificates must carry, when it is not the host in the URLs (SNI and verification). */
  servername: z.string().min(1).optional(),
  /** false accepts any certificate: for a test setup only, never across a network you do not control. */
  rejectUnauthorized: z.boolean().default(true),
});

const redis = z
  .strictObject({
    /** A standalone Redis (or a proxy in front of one): redis:// or rediss:// URL. */
    url: redisUrl.optional(),
    /** A Redis Cluster: seed nodes; the others are discovered from them. */
    cluster: z.strictObject({ nodes: z.array(redisUrl).min(1) }).optional(),
    /** A primary with replicas behind Sentinel: the monitored primary's name and the sentinels to ask. */
    sentinel: z.strictObject({ masterName: z.string().min(1), sentinels: z.array(redisUrl).min(1) }).optional(),
    /** ACL user and password (REDIS_USERNAME / REDIS_PASSWORD override them); they win over credentials in URLs. */
    username: z.string().min(1).optional(),
    password: z.string().min(1).optional(),
    /** TLS options for rediss:// URLs. */
    tls: redisTls.optional(),
    /** Prepended to every Redis key Tollgate writes. */
    prefix: z.string().default('tollgate:'),
    /** Redis unreachable: "open" serves on per-instance memory limits, "closed" answers 503. */
    failMode: z.enum(['open', 'closed']).default('open'),
    /** No request waits longer than this on Redis in total. */
    commandTimeoutMs: positiveInt().default(100),
    /**
     * Accept a Redis whose maxmemory-policy may evict keys (anything but noeviction): eviction deletes key records
     * (customers get 401) or bans and rate windows (bans and quotas reset), so by default such a Redis makes /readyz
     * answer 503. true keeps the gateway ready and only warns, for an operator who knows the data fits.
     */
    allowEviction: z.boolean().default(false),
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
  /** Address of the operations listener. Loopback by default: metrics and readiness are for the platform, not clients. */
  host: z.string().min(1).default('127.0.0.1'),
  /** Port of the operations listener (0 picks a free one); must differ from server.port. */
  port: z.number().int().min(0).max(65535),
});

const adminToken = z.strictObject({
  /** Named in audit lines; never the token. */
  id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected 1-64 characters of A-Z a-z 0-9 _ . -'),
  /** SHA-256 of the token (`tollgate admin token` prints both). */
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits (SHA-256 of the token)'),
});

const admin = z.strictObject({
  /** Loopback by default: the admin API issues keys; expose it only to the portal's network. */
  host: z.string().min(1).default('127.0.0.1'),
  /** Port of the admin listener (0 picks a free one); must differ from server.port and ops.port. */
  port: z.number().int().min(0).max(65535).default(8079),
  /** Without a token (here or in TOLLGATE_ADMIN_TOKEN) the admin API does not start. */
  tokens: z.array(adminToken).default([]),
  /** Failed token checks one client address may make per minute; past it, 429 until the minute ends. */
  maxFailuresPerMinute: positiveInt().default(10),
});

/** Paths the gateway port answers itself: the quota endpoint may not take one of them, nor one under /v1. */
const RESERVED_PATHS = ['/healthz', '/readyz', '/metrics'];

const selfService = z.strictObject({
  /** GET <path> on the gateway port: the caller's own plan, windows and ban, counting nothing. */
  enabled: z.boolean().default(true),
  path: z
    .string()
    .regex(/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/, 'expected an absolute path such as /ratelimit')
    .refine((p) => !/^\/v1(\/|$)/i.test(p), 'must not be under /v1 (those requests go to the upstream)')
    .refine((p) => !RESERVED_PATHS.includes(p.toLowerCase()), `must not be one of ${RESERVED_PATHS.join(', ')}`)
    .default('/ratelimit'),
});

const usage = z.strictObject({
  /** The per-key, per-hour usage ledger and the deprecated-route report (Redis only). */
  enabled: z.boolean().default(true),
  /** How many days of usage are kept (each day expires this long after it ends). */
  retentionDays: positiveInt().max(3660).default(35),
  /** How often each instance writes what it counts locally (ban-cache refusals, deprecated-route calls). */
  flushIntervalMs: positiveInt().min(100).max(60_000).default(5000),
});

const log = z.strictObject({
  level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Most bytes of log lines queued for stdout; past it new lines are dropped and counted (read at start-up). */
  maxBufferBytes: z.number().int().min(1_048_576).max(1_073_741_824).default(16_777_216),
});

const plan = z.strictObject({
  perMinute: positiveInt(),
  perDay: positiveInt(),
});

const DEFAULT_PLANS = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
  enterprise: { perMinute: 10_000, perDay: 10_000_000 },
};

const anonymous = z.strictObject({
  /** Requests per minute per client IP for requests without a valid key. */
  perMinute: positiveInt().default(30),
});

const ban = z.strictObject({
  /** This many 429s for one key within windowSeconds bans it. */
  threshold: positiveInt().default(10),
  windowSeconds: positiveInt().default(60),
  /** Ban lengths: 1st ban, 2nd, 3rd and later. */
  durationsSeconds: z.array(positiveInt()).min(1).default([60, 600, 3600]),
  /** The escalation level is forgotten this long after the last ban ended. */
  resetAfterSeconds: positiveInt().default(86_400),
});

const HTTP_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', '*'] as const;

const route = z.strictObject({
  /** HTTP method, or "*" for any. */
  method: z
    .string()
    .transform((m) => m.toUpperCase())
    .pipe(z.enum(HTTP_METHODS))
    .default('*'),
  /** Express-style path under /v1, e.g. /v1/pets/:petId. */
  path: z
    .string()
    .regex(/^\/v1(\/|$)/, 'expected a path under /v1/, such as /v1/pets/:petId')
    .superRefine(validRoutePattern),
  /** When the route became deprecated (Deprecation header, RFC 9745). */
  deprecation: isoInstant().optional(),
  /** When the route stops being served (Sunset header, RFC 8594). */
  sunset: isoInstant().optional(),
  /** Migration documentation, sent as Link: <url>; rel="deprecation". */
  link: z.url().optional(),
  /** After the sunset: "gone" answers 410 without calling the upstream, "pass" keeps proxying. */
  afterSunset: z.enum(['gone', 'pass']).default('pass'),
});

const staticKey = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected 1-64 characters of A-Z a-z 0-9 _ . -'),
  plan: z.string().min(1),
  /** SHA-256 of the plaintext key, 64 lowercase hex digits. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits (SHA-256 of the key)'),
  name: z.string().optional(),
  perMinute: positiveInt().optional(),
  perDay: positiveInt().optional(),
  expiresAt: isoInstant().optional(),
});

export const configSchema = z
  .strictObject({
    server: server.prefault({}),
    upstream: upstream.prefault({}),
    redis: redis.optional(),
    /** A separate listener for /readyz and /metrics; leave out to serve them on the gateway port. */
    ops: ops.optional(),
    /** The admin HTTP API (keys, plans), on a listener of its own. */
    admin: admin.prefault({}),
    /** The quota endpoint key holders call on the gateway port. */
    selfService: selfService.prefault({}),
    /** Usage per key and deprecated-route callers, kept in Redis. */
    usage: usage.prefault({}),
    log: log.prefault({}),
    plans: z.record(z.string().regex(/^[a-z0-9][a-z0-9_-]*$/, 'plan names are lowercase a-z 0-9 _ -'), plan).default(DEFAULT_PLANS),
    anonymous: anonymous.prefault({}),
    ban: ban.prefault({}),
    routes: z.array(route).default([]),
    keys: z.array(staticKey).default([]),
  })
  .superRefine(sunsetNotBeforeDeprecation)
  .superRefine(afterSunsetNeedsSunset)
  .superRefine(staticKeysUseKnownPlans)
  .superRefine(staticKeyIdsUnique)
  .superRefine(workersNeedRedis)
  .superRefine(opsPortDiffers)
  .superRefine(adminPortDiffers)
  .superRefine(adminTokenIdsUnique);

// Refinements only add issues, so any context will do for their signatures.
type Ctx = z.RefinementCtx<unknown>;

function validRoutePattern(path: string, ctx: Ctx): void {
  try {
    match(path);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: `not a valid route pattern (${(err as Error).message.split(';')[0]})`, input: path });
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

function sunsetNotBeforeDeprecation(cfg: { routes: RouteConfig[] }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (r.deprecation && r.sunset && Date.parse(r.sunset) < Date.parse(r.deprecation)) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'sunset'], message: 'sunset must not be earlier than deprecation (RFC 8594)', input: r.sunset });
    }
  });
}

function afterSunsetNeedsSunset(cfg: { routes: RouteConfig[] }, ctx: Ctx): void {
  cfg.routes.forEach((r, i) => {
    if (r.afterSunset === 'gone' && !r.sunset) {
      ctx.addIssue({ code: 'custom', path: ['routes', i, 'afterSunset'], message: 'afterSunset: gone needs a sunset date', input: r.afterSunset });
    }
  });
}

function staticKeysUseKnownPlans(cfg: { keys: StaticKeyConfig[]; plans: Record<string, unknown> }, ctx: Ctx): void {
  cfg.keys.forEach((k, i) => {
    if (!Object.hasOwn(cfg.plans, k.plan)) {
      ctx.addIssue({ code: 'custom', path: ['keys', i, 'plan'], message: `unknown plan; expected one of ${Object.keys(cfg.plans).join(', ')}`, input: k.plan });
    }
  });
}

function staticKeyIdsUnique(cfg: { keys: StaticKeyConfig[] }, ctx: Ctx): void {
  const seen = new Set<string>();
  cfg.keys.forEach((k, i) => {
    if (seen.has(k.id)) ctx.addIssue({ code: 'custom', path: ['keys', i, 'id'], message: 'duplicate key id', input: k.id });
    seen.add(k.id);
  });
}

export type Config = z.output<typeof configSchema>;
export type RouteConfig = z.output<typeof route>;
export type StaticKeyConfig = z.output<typeof staticKey>;
export type PlanConfig = z.output<typeof plan>;
export type RedisConfig = z.output<typeof redis>;
export type OpsConfig = z.output<typeof ops>;
export type AdminConfig = z.output<typeof admin>;
export type UsageConfig = z.output<typeof usage>;
