// What every command that talks to the shared Redis shares (`keys ...`, `consumers ...`, `usage`, `plans simulate`):
// its two options, the config and connection it opens, the key and consumer administration it builds on them
// (audited to stderr as "cli"), and the one-line error (exit 1) a refused change becomes. A command is then only its
// own options and answer.
import { sessionEnder, withPortalSessions } from '../access/consumer-dependents.js';
import { RedisAccessStore } from '../access/redis-store.js';
import type { Command } from 'commander';
import { pino } from 'pino';
import { systemClock } from '../util/clock.js';
import { loadConfigFile, resolveConfigPath } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { logRedaction } from '../http/credentials.js';
import { KeyAdmin } from '../keys/admin.js';
import { KeyAdminError } from '../keys/admin-errors.js';
import { RedisKeyStore } from '../keys/redis-store.js';
import { allRouteSuffixes } from '../limits/windows.js';
import { RedisBanStore } from '../limits/redis-store.js';
import { KeyLimitAdmin } from '../limits/key-admin.js';
import { Keyspace } from '../storage/keyspace.js';
import { connectRedis, topologyMismatch, type RedisConnection, type RedisTopology } from '../storage/redis.js';
import { auditConsumerChanges, auditEndpointChanges, auditKeyChanges } from '../admin/audit.js';
import { ConsumerAdmin } from '../consumers/admin.js';
import { EndpointRegistry, RedisEndpointStore } from '../events/endpoints.js';
import { AddressGuard } from '../outbound/address-guard.js';
import { EventProducer } from '../events/producer.js';
import { RedisOutbox } from '../events/outbox.js';
import { defaultEventSource } from '../config/schema.js';
import { ConsumerAttach } from '../consumers/attach.js';
import { RedisConsumerStore } from '../consumers/redis-store.js';
import type { ConsumerStore } from '../consumers/types.js';
import { createLogger } from '../observability/logger.js';
import { readLimit } from '../storage/read-limit.js';
import { replayPools } from '../usage/attach-refusals.js';
import { RedisUsageStore } from '../usage/store.js';
import { CliError } from './cli-error.js';
import { beforeRedis } from './touches.js';

export interface CommonOpts {
  config?: string;
  redis?: string;
}

export interface Session {
  config: Config;
  redis: RedisConnection;
  keyspace: Keyspace;
  store: RedisKeyStore;
  keys: KeyAdmin;
  keyLimits: KeyLimitAdmin;
  consumers: ConsumerAdmin;
  /** The consumers' records as stored (what reports read of them). */
  consumerStore: ConsumerStore;
  /**
   * With an events section: the producer, so a change this command makes (a consumer suspended) is an event as it is
   * from the admin API; its publishes are awaited before the session's Redis connection closes.
   */
  events: EventProducer | undefined;
}

const CONNECT_TIMEOUT_MS = 3000;

/** The options every command that talks to the key store takes. */
export const common = (cmd: Command): Command =>
  cmd
    .option('--config <file>', 'config file for plans and the Redis prefix (else TOLLGATE_CONFIG, else config/gateway.yaml)')
    .option('--redis <url>', 'a standalone Redis URL (else REDIS_URL, else the redis section of the config)');

/**
 * Loads the config and connects to Redis (--redis URL, else REDIS_URL, else the config's redis section: a standalone
 * URL, a cluster or Sentinel, with its credentials and TLS), or fails with one clear line.
 */
async function openSession(opts: CommonOpts): Promise<Session> {
  const path = resolveConfigPath(opts.config, process.env);
  // REDIS_URL is applied below with its own precedence, so the file is read without env overrides here.
  const loaded = await loadConfigFile(path, { ...process.env, REDIS_URL: undefined });
  if (!loaded.ok) throw new CliError(`${loaded.path}: invalid configuration: ${loaded.errors.join('; ')}`);
  const config = loaded.config;
  const url = opts.redis ?? (process.env.REDIS_URL || undefined);
  const target: RedisTopology | undefined = url !== undefined ? { ...config.redis, url, cluster: undefined, sentinel: undefined } : config.redis;
  if (!target) throw new CliError('no Redis to talk to: pass --redis URL, set REDIS_URL, or set a redis section in the config file');
  beforeRedis(opts, path, target);
  const mismatch = await topologyMismatch(target, CONNECT_TIMEOUT_MS);
  if (mismatch) throw new CliError(mismatch);
  const redis = connectRedis({ redis: target, commandTimeoutMs: 5000, purpose: 'cli' });
  try {
    await redis.waitForReady(CONNECT_TIMEOUT_MS, { failOnError: redis.topology === 'standalone' });
  } catch {
    await redis.close();
    throw new CliError(`Redis unreachable at ${redis.where}`);
  }
  const keyspace = new Keyspace(config.redis?.prefix ?? 'tollgate:');
  const store = new RedisKeyStore(redis, keyspace);
  // Synchronous: the process exits right after the command, and the audit line must not be lost with it.
  const audit = createLogger(config.log.level, pino.destination({ dest: 2, sync: true }), logRedaction());
  const consumerStore = new RedisConsumerStore(redis, keyspace);
  const consumerAudit = auditConsumerChanges(audit);
  const policy = {
    plans: () => config.plans,
    issuedPrefix: () => config.auth.issuedPrefix,
    keyShape: () => config.auth,
    keySources: () => config.auth.sources,
    routes: () => config.routes,
    consumers: new ConsumerAttach(consumerStore, store, {
      clock: systemClock,
      onChange: consumerAudit,
      plans: () => config.plans,
      // The attach previews' estimate of what the keys would have been refused in their pool, from the ledger.
      replay: replayPools(new RedisUsageStore(redis.client, keyspace, readLimit()), systemClock),
    }),
  };
  const keys = new KeyAdmin(store, systemClock, policy, auditKeyChanges(audit));
  // `consumers delete` deletes the consumer's webhook endpoints with it, as the admin API's does.
  const endpoints = new EndpointRegistry(new RedisEndpointStore(redis.client, keyspace), {
    clock: systemClock,
    guard: () => new AddressGuard({ allow: [] }),
    onChange: auditEndpointChanges(audit),
  });
  // `consumers suspend` and `consumers delete` end the consumer's portal sessions, as the admin API's do.
  const portalSessions = sessionEnder(new RedisAccessStore(redis.client, keyspace), systemClock);
  const consumers = new ConsumerAdmin(consumerStore, store, keys, systemClock, policy, consumerAudit, withPortalSessions(endpoints, portalSessions));
  const keyLimits = new KeyLimitAdmin(
    keys,
    // `keys reset` empties the key's route windows too: every one this config file has.
    new RedisBanStore(redis.client, keyspace, () => allRouteSuffixes(config)),
    { plans: () => config.plans, ban: () => config.ban },
  );
  const events = config.events
    ? new EventProducer({
        sink: new RedisOutbox(redis.client, keyspace),
        source: config.events.source ?? defaultEventSource(config.redis?.prefix),
        // A CLI session's only events are consumer.suspended: no threshold is crossed here.
        thresholds: () => config.events?.thresholds ?? [],
        logger: audit,
      })
    : undefined;
  events?.start();
  return { config, redis, keyspace, store, keys, keyLimits, consumers, consumerStore, events };
}

/** Runs one command's work in a session; a KeyAdminError is the command's one-line error (exit 1). */
export async function withSession<T>(opts: CommonOpts, fn: (s: Session) => Promise<T>): Promise<T> {
  const s = await openSession(opts);
  try {
    return await fn(s);
  } catch (err) {
    if (err instanceof KeyAdminError) throw new CliError(err.message);
    throw err;
  } finally {
    await s.events?.stop();
    await s.redis.close();
  }
}
