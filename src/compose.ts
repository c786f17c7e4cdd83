// The composition root: composeGateway() builds the whole gateway from its config, the one way `serve`, `dev`, every
// cluster worker and the tests build it. It picks the backends the config names (Redis or memory) once at start-up,
// builds the decisions of the request path on them, the request path itself and the Express app around it.
// Everything the gateway holds open is released by close(); listening is src/server/gateway-server.ts's job.
import type express from 'express';
import { systemClock, type Clock } from './util/clock.js';
import type { Config } from './config/schema.js';
import { ApiKeyScheme } from './identity/api-key-scheme.js';
import type { ConsumerLookup } from './identity/consumer-lookup.js';
import { followKeySources } from './http/credentials.js';
import { accessLog, requestMetrics } from './pipeline/observers.js';
import { httpUpstreamCheck, servicesCheck } from './observability/ops.js';
import { createProxy } from './pipeline/proxy.js';
import { OutboundClient } from './outbound/client.js';
import { ServiceRegistry } from './routing/services.js';
import { buildGatewayApp } from './server/app.js';
import { MemoryKeyStore } from './keys/memory-store.js';
import { RedisKeyStore } from './keys/redis-store.js';
import { KeyAdmin } from './keys/admin.js';
import { KEY_REPLICATION_WAIT_MS } from './keys/key-changes.js';
import { KeyVerifier, staticKeyMap } from './keys/verifier.js';
import { isAcceptableKey } from './keys/format.js';
import type { KeyStore } from './keys/types.js';
import type { Logger } from './observability/logger.js';
import { Metrics } from './observability/metrics.js';
import type { ReadinessCheck } from './observability/ops.js';
import { Keyspace } from './storage/keyspace.js';
import { connectRedis, topologyMismatch, type RedisConnection } from './storage/redis.js';
import { Breaker } from './storage/breaker.js';
import { InvalidKeyRecords } from './keys/invalid-records.js';
import { MemoryPolicyWatcher, redisReadiness, writeRefusal } from './storage/memory-policy.js';
import { PersistenceWatcher } from './storage/persistence.js';
import { AnonymousLimiter } from './limits/anonymous.js';
import { PublicRouteLimiter } from './limits/public-limits.js';
import { KeyLimiter } from './limits/key-limits.js';
import { KeyLimitAdmin } from './limits/key-admin.js';
import { memoryBanStore, MemoryLimiterStore } from './limits/memory-store.js';
import { RedisBanStore, RedisLimiterStore } from './limits/redis-store.js';
import { allRouteSuffixes } from './limits/windows.js';
import type { BanStore } from './limits/types.js';
import { Runtime } from './routing/runtime.js';
import { readFileSync } from 'node:fs';
import { LRUCache } from 'lru-cache';
import type { Tracing } from './observability/tracing.js';
import { buildAdminApp } from './admin/app.js';
import { auditConsumerChanges, auditEndpointChanges, auditKeyChanges } from './admin/audit.js';
import type { EndpointDelivery } from './admin/events-routes.js';
import { ConsumerAdmin } from './consumers/admin.js';
import { ConsumerAttach } from './consumers/attach.js';
import { ConsumerCache } from './consumers/cache.js';
import { consumerPlans } from './consumers/limits-in-force.js';
import { MemoryConsumerStore } from './consumers/memory-store.js';
import { RedisConsumerStore } from './consumers/redis-store.js';
import type { ConsumerStore } from './consumers/types.js';
import { DeliveryView } from './events/delivery-view.js';
import { DEFAULT_MAX_PER_ENDPOINT } from './events/endpoint-queue.js';
import { ConsumerThresholds } from './events/consumer-thresholds.js';
import { EndpointRegistry, MemoryEndpointStore, RedisEndpointStore } from './events/endpoints.js';
import { AddressGuard, type Lookup } from './outbound/address-guard.js';
import { adminOpenApi } from './admin/openapi.js';
import { AdminTokens } from './admin/tokens.js';
import { UsageRecorder } from './usage/recorder.js';
import { UsageReports } from './usage/reports.js';
import { replayPools } from './usage/attach-refusals.js';
import { OverviewCache } from './usage/overview.js';
import { InProcessReports, type ReportRunner } from './usage/report-runner.js';
import { REPORT_THREAD_NICE, REPORT_THREAD_READ_REST, REPORT_THREAD_READS_IN_FLIGHT, ReportThread } from './workers/report-thread.js';
import { readLimit } from './storage/read-limit.js';
import { MemoryUsageStore, RedisUsageStore } from './usage/store.js';
import { DAY_MS } from './util/time.js';
import { defaultEventSource } from './config/schema.js';
import { EventProducer } from './events/producer.js';
import { RedisOutbox } from './events/outbox.js';
import { expiringKeys } from './events/expiring.js';
import { EventsThread, eventsThreadData } from './workers/events-thread.js';
import { sessionEnder, withPortalSessions } from './access/consumer-dependents.js';
import { MemoryAccessStore } from './access/memory-store.js';
import { PortalAccess } from './access/portal-access.js';
import { RedisAccessStore } from './access/redis-store.js';
import { SignInLimit } from './access/sign-in-limit.js';
import type { AccessStore } from './access/types.js';
import { auditPortalChanges } from './admin/audit.js';
import { portalApiRouter } from './portal/api-routes.js';
import { buildPortalApp } from './portal/app.js';

export interface ComposeOptions {
  config: Config;
  logger: Logger;
  /** The config holder; made from `config` when not given. */
  runtime?: Runtime;
  metrics?: Metrics;
  clock?: Clock;
  /** Period of the maxmemory-policy re-check (default one minute; tests shorten it). */
  memoryPolicyCheckMs?: number;
  /** How long /readyz waits for the upstream's health path (default 1000 ms). */
  upstreamCheckTimeoutMs?: number;
  /**
   * false leaves the key stages (authenticate, anonymousLimit, requireApiKey, keyLimits) out of the request path.
   * Only for tests of the proxy and route policy; the gateway itself always has them.
   */
  keyStages?: boolean;
  /** The key store to use instead of the one the config names (tests: a store that counts or fails its reads). */
  keyStore?: KeyStore;
  /** false: no active health checks are started (tests that drive target health themselves). */
  healthChecks?: boolean;
  /** Where TOLLGATE_ADMIN_TOKEN is read (default process.env). */
  env?: NodeJS.ProcessEnv;
  /**
   * Where a key's consumer is found instead of the consumers' cache the gateway builds on its consumer store (tests
   * of the request path give a lookup of their own).
   */
  consumers?: ConsumerLookup;
  /** Where registered webhook endpoints' host names are resolved (default: the system's resolver; tests give their own). */
  webhookLookup?: Lookup;
  /**
   * false: webhook delivery (the events thread) and the hourly key.expiring pass are not started with an events section
   * (tests of the producer alone).
   */
  delivery?: boolean;
}

export interface ComposedGateway {
  app: express.Express;
  runtime: Runtime;
  metrics: Metrics;
  /** What /readyz checks (the upstream, Redis). */
  readiness: ReadinessCheck[];
  /** The request path's key verifier (the cache). */
  keys: KeyVerifier;
  /**
   * The consumers' store the request path reads (Redis's, on the request path's connection; else in memory, where it
   * is the only one: whatever changes consumers in a Redis-less gateway changes them here).
   */
  consumerStore: ConsumerStore;
  /** The request path's copy of the consumers, kept current by their change feed; absent when `consumers` was given. */
  consumers: ConsumerCache | undefined;
  /** Key administration on the gateway's stores (tollgate dev issues its demo keys through it; the admin API uses it). */
  admin: KeyAdmin;
  /** Consumer administration on the gateway's stores (the admin API's /consumers). */
  consumerAdmin: ConsumerAdmin;
  /** Webhook endpoints registered for consumers (the admin API's /consumers/{id}/webhooks). */
  endpoints: EndpointRegistry;
  /** The keys' windows and bans, administered (read, unban, reset) on the same stores. */
  keyLimits: KeyLimitAdmin;
  /** The admin API's app, for its own listener; undefined when no admin token is configured (the API is off). */
  adminApp: express.Express | undefined;
  /** The consumer portal's links and sessions (on the admin Redis connection, or in memory). */
  portalAccess: PortalAccess;
  /** The consumer portal's app, for its own listener; undefined unless portal.port is set. */
  portalApp?: express.Express;
  /**
   * Tells the admin API where this instance's portal listens, once it does: the base of its sign-in links when
   * portal.publicUrl is not set (src/server/gateway-server.ts calls it).
   */
  portalListening(url: string): void;
  /** The usage ledger and deprecated-route report, read (the admin API answers a key's usage from it). */
  usage: UsageReports;
  /** Reports over every key, where they run (a thread of their own on Redis: workers/report-thread.ts). */
  reports: ReportRunner;
  /** Writes what this instance counted itself (ban-cache refusals, deprecated-route calls) now, not at the next flush. */
  flushUsage(): Promise<void>;
  /**
   * The services and their targets' health. Its snapshot() is the read-only view (per service: healthy and total
   * targets; per target: state, in-flight requests, failures in a row, recent errors) for /readyz, an admin endpoint
   * or a dashboard page.
   */
  services: ServiceRegistry;
  /** The request path's Redis connection (absent without Redis): for diagnostics and tests that wrap it. */
  redis: RedisConnection | undefined;
  /** The admin API's and reports' own Redis connection (absent without Redis). */
  adminRedis: RedisConnection | undefined;
  /**
   * The events producer and the key.expiring pass, when the config has an events section (and so Redis). The producer
   * subscribes to the process's diagnostics_channel catalogue: one per process (each cluster worker is one).
   */
  events: ComposedEvents | undefined;
  /** Releases everything the gateway holds (the upstream pool, Redis connections, the key and consumer change subscriptions). */
  close(): Promise<void>;
}

export interface ComposedEvents {
  producer: EventProducer;
  /** Webhook delivery on the events thread (absent when ComposeOptions.delivery is false). */
  delivery: EventsThread | undefined;
  /** key.expiring for every key expiring within 7 days of `now` (run hourly with delivery, and once soon after start). */
  expiringKeys(now: number): Promise<{ expiring: number; published: number }>;
  /** Stops the hourly key.expiring pass and the registered thresholds' reads (close() calls it), waiting for a pass in progress. */
  stopExpiring(): Promise<void>;
}

/** How long the Redis breaker stays open before one request probes Redis again. */
const BREAKER_COOLDOWN_MS = 1000;
/** Key administration's command budget: room for a WAIT that sits out its whole time, and the change before it. */
const ADMIN_COMMAND_TIMEOUT_MS = KEY_REPLICATION_WAIT_MS + 1000;

/** Overload is logged at most this often (a flood of late timeouts is one condition, not one line each). */
const OVERLOAD_LOG_EVERY_MS = 1000;

/**
 * Counts every request-path Redis timeout by cause, and warns about overload: it trips nothing (degraded mode is
 * for Redis trouble), so this line and tollgate_redis_timeouts_total{cause="overload"} are how it shows.
 */
function reportTimeouts(breaker: Breaker, metrics: Metrics, logger: Logger, clock: Clock): void {
  let loggedAt = -Infinity;
  let since = 0;
  breaker.onTimeout((cause, lateMs, budgetMs) => {
    metrics.redisTimeouts.inc({ cause });
    if (cause !== 'overload') return;
    since++;
    const now = clock.now();
    if (now - loggedAt < OVERLOAD_LOG_EVERY_MS) return;
    logger.warn(
      { lateMs: Math.round(lateMs), budgetMs, overloadTimeouts: since },
      'event loop overloaded: a redis call ran out of time while this process was running late (not a redis failure)',
    );
    loggedAt = now;
    since = 0;
  });
}

/** This package's version (package.json sits one level above src/ and dist/). */
function packageVersion(): string {
  try {
    return String((JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string }).version ?? '0.0.0');
  } catch {
    return '0.0.0';
  }
}

/** What every builder below is given: the config holder, the clock, logs and metrics, and the caller's options. */
interface Base {
  opts: ComposeOptions;
  runtime: Runtime;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  /** Every HTTP call the gateway makes on its own account (health checks, the readiness probe) goes through it. */
  outbound: OutboundClient;
}

/** The gateway's Redis, when the config names one: both connections and what watches them. */
interface RedisBackend {
  /** The request path's connection. */
  connection: RedisConnection;
  /** The admin API's and reports' own connection: their reads never queue on the request path's socket. */
  admin: RedisConnection;
  keyspace: Keyspace;
  breaker: Breaker;
  readiness: ReadinessCheck;
  /** Stops the watchers; from here on a closed connection is our own quit, not an outage. */
  stop(): void;
}

/** The stores the decisions stand on: Redis's or memory's, chosen once here. */
interface Stores {
  keyStore: KeyStore;
  /** The request path's consumer store (the cache reads it) and administration's (on the admin connection). */
  consumerStore: ConsumerStore;
  adminConsumerStore: ConsumerStore;
  memoryLimits: MemoryLimiterStore;
  usageStore: MemoryUsageStore | RedisUsageStore;
  /** What this instance counts itself, flushed to the ledger (absent when usage is off). */
  recorder: UsageRecorder | undefined;
  bans: BanStore;
  /** The same stores on the admin connection (absent without Redis, or with a key store the caller gave). */
  adminStores: { keys: RedisKeyStore; bans: RedisBanStore; usage: RedisUsageStore } | undefined;
  adminReads: ReturnType<typeof readLimit>;
  /** How long a ledger day is kept (0 when usage is off), read from the config in force. */
  ledgerTtlMs: () => number;
  invalidRecords: InvalidKeyRecords;
}

/** The request path's decisions and their administration. */
interface Decisions {
  admin: KeyAdmin;
  consumerAdmin: ConsumerAdmin;
  portalAccess: PortalAccess;
  endpoints: EndpointRegistry;
  keyLimits: KeyLimitAdmin;
  keys: KeyVerifier;
  /** Where authentication finds a key's consumer: the consumers' cache, or the lookup the caller gave. */
  consumerLookup: ConsumerLookup;
  consumers: ConsumerCache | undefined;
  keyLimiter: KeyLimiter;
  anonymous: AnonymousLimiter;
  publicLimits: PublicRouteLimiter;
}

/**
 * Connects the Redis the config names and the watchers on it (breaker, maxmemory-policy, persistence), and waits for
 * it at most a start-up's while: a Redis that is down at start-up does not stop the gateway, which starts degraded.
 */
async function connectRedisBackend(base: Base, redisCfg: NonNullable<Config['redis']>): Promise<RedisBackend> {
  const { opts, logger, metrics, clock } = base;
  // A topology that does not match the server fails the start with the field to fix, never MOVED at request time.
  const mismatch = await topologyMismatch(redisCfg, Math.max(1000, redisCfg.commandTimeoutMs * 10));
  if (mismatch) throw new Error(`invalid configuration: ${mismatch}`);
  const connection = connectRedis({ redis: redisCfg, commandTimeoutMs: redisCfg.commandTimeoutMs, purpose: 'gateway', logger });
  const { client, where } = connection;
  let closing = false;
  const keyspace = new Keyspace(redisCfg.prefix);
  const breaker = new Breaker(clock, BREAKER_COOLDOWN_MS, connection.isReady, { budgetMs: redisCfg.commandTimeoutMs, bytesRead: connection.bytesRead });
  reportTimeouts(breaker, metrics, logger, clock);
  breaker.onChange((state, reason) => {
    metrics.degraded.set(state === 'open' ? 1 : 0);
    metrics.degradedTransitions.inc({ to: state === 'open' ? 'degraded' : 'normal' });
    // A full Redis (OOM) or a replica answers at once but refuses the limit script's writes: not "unreachable".
    const why = (reason !== undefined && writeRefusal(reason)) || 'redis unreachable';
    if (state === 'open')
      logger.warn(
        { redis: where, failMode: redisCfg.failMode, reason },
        `${why}: degraded mode (${redisCfg.failMode === 'open' ? 'per-instance memory limits' : 'answering 503'})`,
      );
    else logger.info({ redis: where }, 'redis answering again: degraded mode over');
  });
  const policy = new MemoryPolicyWatcher({
    client,
    primaries: connection.primaries,
    allowEviction: redisCfg.allowEviction,
    logger,
    metrics,
    where,
    ...(opts.memoryPolicyCheckMs ? { intervalMs: opts.memoryPolicyCheckMs } : {}),
  });
  const persistence = new PersistenceWatcher({ primaries: connection.primaries, logger, metrics, where });
  connection.onReady(() => {
    logger.info({ redis: where }, 'redis connected');
    // A reconnect may have reached another server (a failover): read its policy and persistence too.
    void policy.check();
    // Read until Redis answers: at start-up on a loaded machine the first read can miss the command timeout.
    void persistence.check();
    // A (re)connection passed ioredis's ready check: Redis answers, so end degraded mode now rather than after
    // the next cool-down probe (a reconnect during start-up would otherwise leave it degraded for a while).
    breaker.close();
  });
  // Our own quit at shutdown is not an outage: no degraded-mode switch for it.
  connection.onClose(() => closing || breaker.trip('connection closed'));
  // Commands fail at once until the client is ready (enableOfflineQueue: false), so serve only once it is; a Redis
  // that is down at start-up does not stop the gateway: it starts degraded and recovers when Redis answers.
  await connection.waitForReady(Math.max(1000, redisCfg.commandTimeoutMs * 10)).then(
    // Read before serving, so a start-up on an evicting Redis is logged (and in the gauge) from the start. (The
    // ready event, above, already read its persistence.)
    () => policy.check(),
    () => logger.warn({ redis: where }, 'redis not ready at start-up: starting in degraded mode'),
  );
  policy.start();
  // Same topology, credentials and TLS, its own timeout and no breaker: a slow report neither trips the request
  // path into degraded mode nor waits on the request path's 100 ms budget. Key changes wait up to a second for a
  // replica (WAIT), and a connection waiting in WAIT answers nothing else meanwhile: on this connection no limit
  // check queues behind it. Not awaited: its commands wait for the connection, so a Redis down at start-up delays
  // nothing.
  const admin = connectRedis({ redis: redisCfg, commandTimeoutMs: Math.max(redisCfg.adminCommandTimeoutMs, ADMIN_COMMAND_TIMEOUT_MS), purpose: 'admin' });
  return {
    connection,
    admin,
    keyspace,
    breaker,
    readiness: redisReadiness(client, keyspace, policy, connection.silentPrimaries),
    stop() {
      closing = true;
      policy.stop();
      persistence.stop();
    },
  };
}

/** The key, limit and usage stores: on Redis when there is one (the admin's on its own connection), else in memory. */
function buildStores(base: Base, redis: RedisBackend | undefined): Stores {
  const { opts, runtime, logger, metrics, clock } = base;
  const invalidRecords = new InvalidKeyRecords(logger, metrics);
  const keyStore =
    opts.keyStore ??
    (redis
      ? new RedisKeyStore(redis.connection, redis.keyspace, redis.breaker, (id) => invalidRecords.report(id, 'lookup'))
      : new MemoryKeyStore(() => clock.now()));
  // Consumers are read on the request path's connection through its breaker, as keys are: while Redis is known to be
  // down a read fails at once, and the cache serves the copy it has.
  const consumerStore: ConsumerStore = redis ? new RedisConsumerStore(redis.connection, redis.keyspace, redis.breaker) : new MemoryConsumerStore();
  const adminConsumerStore: ConsumerStore = redis ? new RedisConsumerStore(redis.admin, redis.keyspace) : consumerStore;
  const memoryLimits = new MemoryLimiterStore(clock);
  // The usage ledger: counted by the limit script on Redis, by this instance for what it decides itself.
  // The flush's scripts put many keys in a call on one server, only one slot's keys on a cluster.
  const usageStore = redis
    ? new RedisUsageStore(redis.connection.client, redis.keyspace, undefined, { scriptKeys: redis.connection.topology === 'cluster' ? 'slot' : 'any' })
    : new MemoryUsageStore();
  const ledgerTtlMs = (): number => (runtime.config.usage.enabled ? (runtime.config.usage.retentionDays + 1) * DAY_MS : 0);
  const { usage } = runtime.config;
  const recorder = usage.enabled
    ? new UsageRecorder({ store: usageStore, clock, logger, flushIntervalMs: usage.flushIntervalMs, ttlMs: ledgerTtlMs })
    : undefined;
  // `keys reset` empties the key's route windows too: every one the config in force has.
  const routeSuffixes = (): string[] => allRouteSuffixes(runtime.config);
  const bans: BanStore = redis ? new RedisBanStore(redis.connection.client, redis.keyspace, routeSuffixes) : memoryBanStore(memoryLimits);
  // Key administration and reports read through the admin connection, their reads in flight bounded together.
  const adminReads = readLimit();
  const adminStores =
    redis && !opts.keyStore
      ? {
          keys: new RedisKeyStore(redis.admin, redis.keyspace),
          bans: new RedisBanStore(redis.admin.client, redis.keyspace, routeSuffixes),
          usage: new RedisUsageStore(redis.admin.client, redis.keyspace, adminReads),
        }
      : undefined;
  return { keyStore, consumerStore, adminConsumerStore, memoryLimits, usageStore, recorder, bans, adminStores, adminReads, ledgerTtlMs, invalidRecords };
}

/**
 * The decisions of the request path (who calls: the key verifier with its cache and filter; may it: the key and
 * anonymous limiters) and their administration (KeyAdmin, KeyLimitAdmin), on the stores. Starts the verifier.
 */
async function buildDecisions(base: Base, stores: Stores, redis: RedisBackend | undefined): Promise<Decisions> {
  const { runtime, logger, metrics, clock } = base;
  const config = runtime.config;
  const redisCfg = config.redis;
  const adminKeyStore = stores.adminStores?.keys ?? stores.keyStore;
  const consumerAudit = auditConsumerChanges(logger, metrics);
  const policy = {
    plans: () => runtime.config.plans,
    issuedPrefix: () => runtime.config.auth.issuedPrefix,
    keyShape: () => runtime.config.auth,
    keySources: () => runtime.config.auth.sources,
    routes: () => runtime.config.routes,
    consumers: new ConsumerAttach(stores.adminConsumerStore, adminKeyStore, {
      clock,
      onChange: consumerAudit,
      plans: () => runtime.config.plans,
      // The attach previews' estimate of what the keys would have been refused in their pool, from the ledger.
      replay: replayPools(stores.adminStores?.usage ?? stores.usageStore, clock),
    }),
  };
  const admin = new KeyAdmin(adminKeyStore, clock, policy, auditKeyChanges(logger, metrics), stores.adminReads);
  const endpoints = webhookEndpoints(base, redis);
  // The portal's links and sessions, on the admin connection: suspending or deleting a consumer ends its sessions.
  const accessStore: AccessStore = redis ? new RedisAccessStore(redis.admin.client, redis.keyspace) : new MemoryAccessStore(clock);
  const dependents = withPortalSessions(endpoints, sessionEnder(accessStore, clock));
  const consumerAdmin = new ConsumerAdmin(stores.adminConsumerStore, adminKeyStore, admin, clock, policy, consumerAudit, dependents);
  const keyLimits = new KeyLimitAdmin(admin, stores.adminStores?.bans ?? stores.bans, {
    plans: () => runtime.config.plans,
    ban: () => runtime.config.ban,
    now: () => clock.now(),
  });
  const keys = new KeyVerifier(
    stores.keyStore,
    clock,
    { lookupTimeoutMs: redisCfg?.commandTimeoutMs ?? 1000 },
    staticKeyMap(config.keys, new Date(clock.now()).toISOString()),
    {
      source: stores.adminStores?.keys,
      onBuilt: (built) => {
        if ('error' in built)
          logger.warn({ err: built.error }, 'key filter could not be built (tried again shortly): unknown keys from refused clients are looked up meanwhile');
        else logger.info({ hashes: built.hashes, bytes: built.bytes, ms: Math.round(built.ms) }, 'key filter built');
      },
    },
    // Read per key: a reload's foreignKeys applies at once (issuedPrefix needs a restart and keeps its value).
    (token) => isAcceptableKey(token, runtime.config.auth),
  );
  await keys.start();
  // A key sign-in is judged as the gateway judges the key; sessions read the key and consumer records as stored now.
  const portalAccess = new PortalAccess({
    store: accessStore,
    clock,
    verifyKey: (token) => keys.verify(token),
    keyRecord: (id) => adminKeyStore.get(id),
    consumer: (id) => stores.adminConsumerStore.get(id),
    sessionHours: () => runtime.config.portal.sessionHours,
  });
  const consumers = base.opts.consumers ? undefined : await startConsumerCache(base, stores.consumerStore);
  const consumerLookup: ConsumerLookup = base.opts.consumers ?? { get: (id) => consumers!.current(id) };

  const { recorder, invalidRecords } = stores;
  const keyLimiter = new KeyLimiter({
    runtime,
    clock,
    logger,
    metrics,
    memory: stores.memoryLimits,
    onInvalidKey: (id) => keys.forget(id),
    onInvalidRecord: (id) => invalidRecords.report(id, 'limit_check'),
    onKeyRecordChecked: (hash, revision, current) => keys.recordChecked(hash, revision, current),
    ...(recorder ? { usage: recorder } : {}),
    ...(redis && redisCfg
      ? {
          shared: {
            store: new RedisLimiterStore(redis.connection.client, redis.keyspace, stores.ledgerTtlMs, redis.connection.clientForSlotOf),
            breaker: redis.breaker,
            failMode: redisCfg.failMode,
            commandTimeoutMs: redisCfg.commandTimeoutMs,
          },
        }
      : {}),
  });
  keys.onChange((id, change) => keyLimiter.forget(id, change));
  const anonymous = new AnonymousLimiter({
    runtime,
    clock,
    metrics,
    ...(redis ? { redis: { client: redis.connection.client, keyspace: redis.keyspace, breaker: redis.breaker } } : {}),
  });
  // Public routes' address windows: the limit script without a ledger (addresses have none), and a memory store of
  // their own, so a flood of addresses cannot evict the keys' fallback windows.
  const publicLimits = new PublicRouteLimiter({
    runtime,
    clock,
    metrics,
    memory: new MemoryLimiterStore(clock),
    ...(redis
      ? { shared: { store: new RedisLimiterStore(redis.connection.client, redis.keyspace, () => 0, redis.connection.clientForSlotOf), breaker: redis.breaker } }
      : {}),
  });
  return { admin, consumerAdmin, portalAccess, endpoints, keyLimits, keys, consumerLookup, consumers, keyLimiter, anonymous, publicLimits };
}

/**
 * The registry of webhook endpoints registered for consumers, on the admin connection (or in memory without Redis):
 * each URL judged by the address guard with events.allowTargets of the config in force; every change audited.
 */
function webhookEndpoints(base: Base, redis: RedisBackend | undefined): EndpointRegistry {
  const { runtime, logger, metrics, clock } = base;
  return new EndpointRegistry(redis ? new RedisEndpointStore(redis.admin.client, redis.keyspace) : new MemoryEndpointStore(), {
    clock,
    guard: () => new AddressGuard({ allow: allowTargetsOf(runtime.config), ...(base.opts.webhookLookup ? { lookup: base.opts.webhookLookup } : {}) }),
    onChange: auditEndpointChanges(logger, metrics),
  });
}

/** events.allowTargets of a config: the ranges registered endpoints may point into. */
const allowTargetsOf = (config: Config): string[] => [...(config.events?.allowTargets ?? [])];

/** Delivery as seen while no queue stands behind it: every endpoint idle, nothing to replay. */
const NO_DELIVERY: EndpointDelivery = {
  state: async () => ({ queued: 0, delivered: 0, failed: 0, dropped: 0, undelivered: 0, disabled: false }),
  undelivered: async () => ({ events: [] }),
  replay: async (_ep, ids) => ({ replayed: 0, notFound: [...(ids ?? [])] }),
  enable: async () => {},
};

/** The endpoints' queues, in Redis: without it (and so without the events section) nothing is queued. */
function deliveryOf(base: Base, redis: RedisBackend | undefined): EndpointDelivery {
  const { runtime, clock } = base;
  return redis
    ? new DeliveryView(redis.admin.client, redis.keyspace, {
        clock,
        maxPerEndpoint: () => runtime.config.events?.queue.maxPerEndpoint ?? DEFAULT_MAX_PER_ENDPOINT,
      })
    : NO_DELIVERY;
}

/** A consumer whose record stays unreadable is logged again after this long, as a reminder. */
const INVALID_CONSUMER_LOG_AGAIN_MS = 10 * 60_000;

/**
 * The consumers' cache on the store, listening to its change feed (consumers:events on Redis): a change made on any
 * instance (suspend, resume, a new plan, scopes, a delete) drops the copy everywhere and is read again before the next
 * request, and after a reconnect of the feed every copy is read again at its next use, as the key cache does. Reads
 * wait at most redis.commandTimeoutMs; while Redis fails, a consumer read in the last hour keeps being served and one
 * never read cannot be verified (503), exactly as keys are.
 */
async function startConsumerCache(base: Base, store: ConsumerStore): Promise<ConsumerCache> {
  const { runtime, logger, clock } = base;
  const logged = new LRUCache<string, true>({ max: 1000, ttl: INVALID_CONSUMER_LOG_AGAIN_MS });
  const cache = new ConsumerCache(store, clock, { lookupTimeoutMs: runtime.config.redis?.commandTimeoutMs ?? 1000 }, (id) => {
    if (logged.has(id)) return;
    logged.set(id, true);
    logger.error({ consumerId: id }, 'consumer record is not a valid consumer record: its keys are refused (401) until it is repaired or deleted in Redis');
  });
  await cache.start();
  return cache;
}

/**
 * The request path: the services and their targets, the proxy to them, and the gateway's Express app with its stages
 * (the key stages on the decisions), observers and tracing. `readiness` gains the services' check.
 */
async function buildRequestPath(
  base: Base,
  decisions: Decisions,
  recorder: UsageRecorder | undefined,
  readiness: ReadinessCheck[],
): Promise<{ app: express.Express; services: ServiceRegistry; tracing: Tracing | undefined }> {
  const { opts, runtime, logger, metrics, clock } = base;
  const config = runtime.config;
  const { keys, anonymous, keyLimiter, publicLimits } = decisions;
  // Who is calling: the API key from the sources of the config in force (auth.sources, or a route's own).
  const apiKeyScheme = new ApiKeyScheme(keys, {
    refused: anonymous,
    sources: followKeySources(() => runtime.config.auth.sources),
    consumers: decisions.consumerLookup,
  });
  // OpenTelemetry traces only when a collector is named: otherwise nothing of it is on the request path.
  const { otlpEndpoint } = config.tracing;
  // Loaded only then: OpenTelemetry's packages take about 17 MB of memory.
  const tracing: Tracing | undefined = otlpEndpoint
    ? new (await import('./observability/tracing.js')).Tracing({ ...config.tracing, otlpEndpoint }, packageVersion())
    : undefined;
  const services = new ServiceRegistry(config, {
    logger,
    metrics,
    outbound: base.outbound,
    now: () => clock.now(),
    ...(opts.healthChecks === false ? { healthChecks: false } : {}),
  });
  // Services and routes apply on reload: targets that stay keep their health and pools, removed ones finish.
  runtime.onChange((next) => services.apply(next.config));
  readiness.push(
    servicesCheck(
      () => services.snapshot(),
      () => runtime.config.services !== undefined,
    ),
  );
  const proxy = createProxy({
    services,
    maxBodyBytes: config.server.maxBodyBytes,
    responseIdleTimeoutMs: config.server.responseIdleTimeoutMs,
    // Read from the config in force, so a reload applies (the service's other settings are its registry's).
    logger,
    metrics,
    // The request never reached a target: what the key was charged is given back, and it is not billed.
    onNotReached: (ctx) => keyLimiter.refund(ctx),
    // It reached one that gave no complete answer: it keeps its points, counted upstreamFailed beside admitted.
    onReachedFailed: (ctx) => keyLimiter.upstreamFailed(ctx),
  });
  const app = buildGatewayApp({
    runtime,
    clock,
    logger,
    metrics,
    readiness,
    opsOnGatewayPort: !config.ops,
    observers: [requestMetrics(metrics)],
    accessLog: accessLog(logger, () => runtime.current.keyParams),
    ...(tracing ? { tracing } : {}),
    ...(opts.keyStages === false ? {} : { keys: { auth: apiKeyScheme, anonymous, limiter: keyLimiter, publicLimits } }),
    proxyToUpstream: proxy.handler,
    services,
    ...(recorder ? { usage: recorder } : {}),
  });
  return { app, services, tracing };
}

/**
 * The admin side: the usage reports (on Redis on a thread of their own), the overview, and the admin API's app when
 * an admin token is configured (undefined otherwise: the API is off).
 */
function buildAdmin(
  base: Base,
  decisions: Decisions,
  stores: Stores,
  redis: RedisBackend | undefined,
  services: ServiceRegistry,
  portalUrl: () => string | undefined,
): { usage: UsageReports; reports: ReportRunner; adminApp: express.Express | undefined } {
  const { opts, runtime, logger, metrics, clock } = base;
  const config = runtime.config;
  const redisCfg = config.redis;
  const { admin, keyLimits } = decisions;
  // The what-if grouped by consumer simulates each pool under its consumer's plan and own limits, read when it runs.
  const usage = new UsageReports(stores.adminStores?.usage ?? stores.usageStore, admin.records, consumerPlans(stores.adminConsumerStore, clock));
  // On Redis, reports over every key run on a thread of their own, off the request path's event loop; a Redis-less
  // gateway's ledger is in this process's memory, so its reports run here.
  const reports: ReportRunner =
    stores.adminStores && redisCfg
      ? new ReportThread(
          {
            redis: redisCfg,
            prefix: redisCfg.prefix,
            commandTimeoutMs: Math.max(redisCfg.adminCommandTimeoutMs, ADMIN_COMMAND_TIMEOUT_MS),
            readsInFlight: REPORT_THREAD_READS_IN_FLIGHT,
            readRest: REPORT_THREAD_READ_REST,
            nice: REPORT_THREAD_NICE,
            memoryMb: config.usage.reportMemoryMb,
          },
          logger,
        )
      : new InProcessReports(usage);
  const overview = new OverviewCache(reports, () => clock.now());

  const redisState = async (): Promise<'ok' | 'degraded' | 'none'> =>
    !redis ? 'none' : (await metrics.degraded.get()).values[0]?.value === 1 ? 'degraded' : 'ok';
  const tokens = new AdminTokens(config.admin.tokens, (opts.env ?? process.env).TOLLGATE_ADMIN_TOKEN || undefined);
  const adminApp = tokens.any
    ? buildAdminApp({
        keys: admin,
        consumers: decisions.consumerAdmin,
        keyLimits,
        runtime,
        tokens,
        metrics,
        logger,
        openapi: adminOpenApi(),
        usage,
        reports,
        overview,
        redisState,
        services: () => services.snapshot(),
        endpoints: decisions.endpoints,
        delivery: deliveryOf(base, redis),
        configuredEndpoints: () => (runtime.config.events?.webhooks ?? []).map((w) => ({ id: w.id, url: w.url, types: w.types })),
        onDeliveryChange: auditEndpointChanges(logger, metrics),
        portal: {
          access: decisions.portalAccess,
          // portal.publicUrl is restart-only: the one read at start-up stands.
          linkBase: () => config.portal.publicUrl ?? portalUrl(),
          onChange: auditPortalChanges(logger, metrics),
        },
      })
    : undefined;
  return { usage, reports, adminApp };
}

/**
 * The consumer portal's app when portal.port is set: its sign-ins limited per client address on the admin Redis
 * connection (in memory without Redis), its pages and API on the stores the admin API uses; its reports over many keys
 * on the admin API's report runner (the report thread, with Redis).
 */
function buildPortal(
  base: Base,
  decisions: Decisions,
  stores: Stores,
  redis: RedisBackend | undefined,
  read: { reports: ReportRunner },
): express.Express | undefined {
  const { runtime, logger, clock } = base;
  const config = runtime.config;
  if (config.portal.port === undefined) return undefined;
  const signIns = new SignInLimit(() => runtime.config.portal.signInsPerMinute, redis ? { client: redis.admin.client, keyspace: redis.keyspace } : undefined);
  // The windows the portal shows are read with the limit script as GET /ratelimit reads them, but on the admin
  // connection behind a breaker of its own: a portal's reads never queue on the request path's socket nor trip its
  // breaker. Failing closed: a figure Redis did not give is not made up from this instance's memory.
  const redisCfg = config.redis;
  const limiter =
    redis && redisCfg
      ? new KeyLimiter({
          runtime,
          clock,
          logger,
          metrics: base.metrics,
          memory: stores.memoryLimits,
          shared: {
            store: new RedisLimiterStore(redis.admin.client, redis.keyspace, stores.ledgerTtlMs, redis.admin.clientForSlotOf),
            breaker: new Breaker(clock, BREAKER_COOLDOWN_MS, redis.admin.isReady),
            failMode: 'closed',
            commandTimeoutMs: redisCfg.adminCommandTimeoutMs,
          },
        })
      : decisions.keyLimiter;
  return buildPortalApp({
    access: decisions.portalAccess,
    signIns,
    runtime,
    consumers: { get: (id) => stores.adminConsumerStore.get(id) },
    logger,
    // The data and action routes: keys, windows, usage, refusals, deprecated operations, webhooks.
    api: portalApiRouter({
      runtime,
      clock,
      logger,
      consumers: decisions.consumerAdmin,
      keys: decisions.admin,
      keyStore: stores.adminStores?.keys ?? stores.keyStore,
      limiter,
      keyLimits: decisions.keyLimits,
      reports: read.reports,
      endpoints: decisions.endpoints,
      ...(redis ? { delivery: deliveryOf(base, redis) } : {}),
    }),
    tls: config.portal.tls !== undefined,
    ...(config.portal.publicUrl !== undefined ? { publicUrl: config.portal.publicUrl } : {}),
  });
}

/**
 * The events producer on the request path's Redis connection: a publish is one EVAL there, fire-and-forget, bounded by
 * that connection's command deadline (redis.commandTimeoutMs) like a limit check; a request that crosses nothing sends
 * nothing more. The key.expiring pass reads the key records on the admin connection, as reports do.
 */
function startEvents(base: Base, cfg: NonNullable<Config['events']>, redis: RedisBackend, admin: KeyAdmin, endpoints: EndpointRegistry): ComposedEvents {
  const { runtime, logger } = base;
  // The section is restart-only (routing/runtime.ts): events.thresholds is the one it started with; a consumer's own
  // endpoints add their percents, kept current from the registry's change channel.
  const thresholds = new ConsumerThresholds(cfg.thresholds, endpoints, logger);
  void thresholds.start({ connection: redis.connection, channel: redis.keyspace.eventEndpointsChanged() });
  const producer = new EventProducer({
    sink: new RedisOutbox(redis.connection.client, redis.keyspace),
    source: cfg.source ?? defaultEventSource(runtime.config.redis?.prefix),
    thresholds: (consumer) => thresholds.of(consumer),
    logger,
  });
  producer.start();
  // Delivery reads the outbox on a thread of its own (one consumer of the group per process: every instance, and every
  // cluster worker, shares the work); its counters come back as this registry's tollgate_events_* metrics.
  const redisCfg = runtime.config.redis!;
  const delivery =
    base.opts.delivery === false
      ? undefined
      : new EventsThread(
          // With events.metering the thread runs the metering export too (one instance at a time: a lock per destination).
          eventsThreadData(cfg, { topology: redisCfg, prefix: redisCfg.prefix, commandTimeoutMs: redisCfg.adminCommandTimeoutMs }, runtime.config.log.level, {
            retentionDays: runtime.config.usage.retentionDays,
          }),
          base.metrics,
          logger,
        );
  delivery?.start();
  const scan = (now: number) => expiringKeys(now, { records: admin.records, producer });
  // The key.expiring pass runs here, not on the events thread: the key records and the producer are this process's.
  // Every instance runs it; the outbox keeps one event per key and expiry, whichever instance finds it first.
  const expiring = delivery ? expiringPass(scan, base.clock, logger) : undefined;
  return { producer, delivery, expiringKeys: scan, stopExpiring: async () => Promise.all([expiring?.stop(), thresholds.stop()]).then(() => {}) };
}

/** The key.expiring pass's first run after start (off the start-up itself), then its period. */
export const EXPIRING_FIRST_MS = 5_000;
export const EXPIRING_EVERY_MS = 60 * 60_000;

/**
 * Runs the key.expiring pass EXPIRING_FIRST_MS after start and every EXPIRING_EVERY_MS after that, one at a time, on
 * unref'd timers (they never keep a process alive). A pass that fails is logged; the next one finds what it missed.
 */
function expiringPass(scan: (now: number) => Promise<{ expiring: number; published: number }>, clock: Clock, logger: Logger): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  let stopped = false;
  const run = (): void => {
    if (stopped || running) return;
    running = scan(clock.now())
      .then(
        (r) => {
          if (r.published > 0) logger.info(r, 'key.expiring events published');
        },
        (err: unknown) => logger.warn({ err: { message: String((err as Error)?.message ?? err) } }, 'key.expiring pass failed'),
      )
      .finally(() => (running = undefined));
  };
  const first = setTimeout(run, EXPIRING_FIRST_MS);
  const every = setInterval(run, EXPIRING_EVERY_MS);
  first.unref();
  every.unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(first);
      clearInterval(every);
      await running;
    },
  };
}

export async function composeGateway(opts: ComposeOptions): Promise<ComposedGateway> {
  const runtime = opts.runtime ?? new Runtime(opts.config);
  const base: Base = {
    opts,
    runtime,
    logger: opts.logger,
    metrics: opts.metrics ?? new Metrics(),
    clock: opts.clock ?? systemClock,
    outbound: new OutboundClient(),
  };
  const { config } = runtime;
  // The upstream shorthand alone keeps its HTTP check (upstream.healthPath); with services, their health decides
  // (the config in force says which: a reload may add services).
  const readiness: ReadinessCheck[] = [
    httpUpstreamCheck(base.outbound, config.upstream.url, config.upstream.healthPath, opts.upstreamCheckTimeoutMs ?? 1000, () => !runtime.config.services),
  ];
  const redis = config.redis ? await connectRedisBackend(base, config.redis) : undefined;
  if (redis) readiness.push(redis.readiness);
  const stores = buildStores(base, redis);
  const decisions = await buildDecisions(base, stores, redis);
  const { app, services, tracing } = await buildRequestPath(base, decisions, stores.recorder, readiness);
  let portalUrl: string | undefined;
  const { usage, reports, adminApp } = buildAdmin(base, decisions, stores, redis, services, () => portalUrl);
  const portalApp = buildPortal(base, decisions, stores, redis, { reports });
  const { recorder } = stores;
  const { keys, consumers } = decisions;
  const events = config.events && redis ? startEvents(base, config.events, redis, decisions.admin, decisions.endpoints) : undefined;

  return {
    app,
    runtime,
    metrics: base.metrics,
    readiness,
    keys,
    consumerStore: stores.consumerStore,
    consumers,
    admin: decisions.admin,
    consumerAdmin: decisions.consumerAdmin,
    endpoints: decisions.endpoints,
    keyLimits: decisions.keyLimits,
    adminApp,
    portalAccess: decisions.portalAccess,
    ...(portalApp ? { portalApp } : {}),
    portalListening(url) {
      portalUrl = url;
    },
    usage,
    reports,
    flushUsage: async () => recorder?.flush(),
    services,
    redis: redis?.connection,
    adminRedis: redis?.admin,
    events,
    async close() {
      // First: no event is started once closing begins, and those in flight finish on a connection still open.
      await events?.stopExpiring();
      await events?.producer.stop();
      await events?.delivery?.stop();
      redis?.stop();
      services.close();
      await recorder?.close();
      await tracing?.shutdown();
      await keys.close();
      await (consumers ? consumers.close() : stores.consumerStore.close());
      if (stores.adminConsumerStore !== stores.consumerStore) await stores.adminConsumerStore.close();
      await Promise.all([redis?.connection.close(), redis?.admin.close(), reports.close(), base.outbound.close()]);
    },
  };
}
