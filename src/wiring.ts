// The composition root: picks the backends the config names (Redis or memory) once at start-up and builds
// the request-path stages on them. Everything the gateway holds open is released by close().
import type { RequestHandler } from 'express';
import type { Redis } from 'ioredis';
import type { Clock } from './util/clock.js';
import { MemoryKeyStore } from './keys/memory-store.js';
import { RedisKeyStore } from './keys/redis-store.js';
import { KeyService, staticKeyMap } from './keys/service.js';
import type { KeyStore } from './keys/types.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import type { ReadinessCheck } from './observability/ops.js';
import { authenticate, requireConsumer } from './pipeline/authenticate.js';
import { Keyspace } from './storage/keyspace.js';
import { createRedisClient, redactRedisUrl, waitForReady } from './storage/redis.js';
import { Breaker } from './storage/breaker.js';
import { InvalidKeyRecords } from './keys/invalid-records.js';
import { MemoryPolicyWatcher, redisReadiness, writeRefusal } from './storage/memory-policy.js';
import { AnonymousLimiter } from './limits/anonymous.js';
import { KeyLimiter } from './limits/key-limits.js';
import { MemoryLimiterStore } from './limits/memory-store.js';
import { RedisLimiterStore } from './limits/redis-store.js';
import type { Runtime } from './config/runtime.js';

export interface GatewayParts {
  stages: RequestHandler[];
  readiness: ReadinessCheck[];
  keys: KeyService;
  redis: Redis | undefined;
  close(): Promise<void>;
}

/** How long the Redis breaker stays open before one request probes Redis again. */
const BREAKER_COOLDOWN_MS = 1000;

export interface BuildPartsOptions {
  /** Period of the maxmemory-policy re-check (default one minute; tests shorten it). */
  memoryPolicyCheckMs?: number;
}

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
      'event loop overloaded: redis answered, but too late for this process to read it in time (not a redis failure)',
    );
    loggedAt = now;
    since = 0;
  });
}

export async function buildParts(runtime: Runtime, logger: Logger, metrics: Metrics, clock: Clock, opts: BuildPartsOptions = {}): Promise<GatewayParts> {
  const config = runtime.config;
  const redisCfg = config.redis;
  let redis: Redis | undefined;
  let closing = false;
  let keyStore: KeyStore;
  let shared: { client: Redis; keyspace: Keyspace; breaker: Breaker } | undefined;
  let memoryPolicy: MemoryPolicyWatcher | undefined;
  const readiness: ReadinessCheck[] = [];
  const invalidRecords = new InvalidKeyRecords(logger, metrics);
  if (redisCfg) {
    const client = createRedisClient({ url: redisCfg.url, commandTimeoutMs: redisCfg.commandTimeoutMs, failFast: true, name: 'tollgate-gateway' });
    redis = client;
    const keyspace = new Keyspace(redisCfg.prefix);
    const breaker = new Breaker(clock, BREAKER_COOLDOWN_MS, () => client.status === 'ready', {
      budgetMs: redisCfg.commandTimeoutMs,
      // The socket is replaced on every reconnect; before the first connection there is none.
      bytesRead: () => (client.stream as { bytesRead?: number } | undefined)?.bytesRead ?? 0,
    });
    const where = redactRedisUrl(redisCfg.url);
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
      allowEviction: redisCfg.allowEviction,
      logger,
      metrics,
      where,
      ...(opts.memoryPolicyCheckMs ? { intervalMs: opts.memoryPolicyCheckMs } : {}),
    });
    memoryPolicy = policy;
    client.on('ready', () => {
      logger.info({ redis: where }, 'redis connected');
      // A reconnect may have reached another server (a failover): read its policy too.
      void policy.check();
      // A (re)connection passed ioredis's ready check: Redis answers, so end degraded mode now rather than after
      // the next cool-down probe (a reconnect during start-up would otherwise leave it degraded for a while).
      breaker.close();
    });
    // Our own quit at shutdown is not an outage: no degraded-mode switch for it.
    client.on('close', () => closing || breaker.trip('connection closed'));
    // Commands fail at once until the client is ready (enableOfflineQueue: false), so serve only once it is; a Redis
    // that is down at start-up does not stop the gateway: it starts degraded and recovers when Redis answers.
    await waitForReady(client, Math.max(1000, redisCfg.commandTimeoutMs * 10)).then(
      // Read before serving, so a start-up on an evicting Redis is logged (and in the gauge) from the start.
      () => policy.check(),
      () => logger.warn({ redis: where }, 'redis not ready at start-up: starting in degraded mode'),
    );
    policy.start();
    keyStore = new RedisKeyStore(client, keyspace, breaker, (id) => invalidRecords.report(id, 'lookup'));
    shared = { client, keyspace, breaker };
    readiness.push(redisReadiness(client, keyspace, policy));
  } else {
    keyStore = new MemoryKeyStore(() => clock.now());
  }

  const keys = new KeyService(
    keyStore,
    clock,
    { lookupTimeoutMs: redisCfg?.commandTimeoutMs ?? 1000 },
    staticKeyMap(config.keys, new Date(clock.now()).toISOString()),
  );
  await keys.start();

  const memoryLimits = new MemoryLimiterStore(clock);
  const keyLimiter = new KeyLimiter({
    runtime,
    clock,
    logger,
    metrics,
    memory: memoryLimits,
    onInvalidKey: (id) => keys.forget(id),
    onInvalidRecord: (id) => invalidRecords.report(id, 'limit_check'),
    onKeyRecordChecked: (hash, revision, current) => keys.recordChecked(hash, revision, current),
    ...(shared && redisCfg
      ? {
          shared: {
            store: new RedisLimiterStore(shared.client, shared.keyspace),
            breaker: shared.breaker,
            failMode: redisCfg.failMode,
            commandTimeoutMs: redisCfg.commandTimeoutMs,
          },
        }
      : {}),
  });
  keys.onChange((id) => keyLimiter.forget(id));
  const anonymous = new AnonymousLimiter({ runtime, clock, metrics, ...(shared ? { redis: shared } : {}) });

  return {
    // CONTRACT §3: authenticate; requests without a valid key meet the per-IP limit, then 401; keyed ones meet
    // the ban check and plan limits.
    stages: [authenticate(keys, logger, anonymous), anonymous.stage(), requireConsumer, keyLimiter.stage()],
    readiness,
    keys,
    redis,
    async close() {
      closing = true;
      memoryPolicy?.stop();
      await keys.close();
      if (redis) await redis.quit().catch(() => redis?.disconnect());
    },
  };
}
