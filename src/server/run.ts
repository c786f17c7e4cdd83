// The long-running commands: serve (the gateway), petstore (the reference upstream) and dev (both, in memory). They
// compose and start processes, so they sit with the servers they start, above everything the gateway is built of.
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfigFile, validateConfigWithDocuments } from '../config/load.js';
import type { RedisConfig } from '../config/schema.js';
import { configWarnings, exitOnFatalError, handleSignals, readReloadedConfig, startGateway } from './gateway-server.js';
import { createLogger, logDestination, reportLogDrops, type Logger } from '../observability/logger.js';
import { logRedaction } from '../http/credentials.js';
import { watchConfigFile } from './config-watch.js';
import { startPetstore } from '../petstore/server.js';
import { Metrics } from '../observability/metrics.js';
import { composeGateway } from '../compose.js';
import { isPrimary, reportWorkerReady, runPrimary, workerCount } from './cluster.js';
import { applyHeapGrowth } from './heap.js';
import { routedServices } from '../routing/services.js';
import { CliError } from '../commands/cli-error.js';
import { generateAdminToken, hashAdminToken } from '../admin/tokens.js';
import { DAY_MS } from '../util/time.js';

export async function runServe(configPath: string, opts: { watchConfig?: boolean } = {}): Promise<void> {
  const result = await loadConfigFile(configPath, process.env);
  if (!result.ok) {
    throw new CliError(`${result.path}: invalid configuration, refusing to start:\n  ${result.errors.join('\n  ')}`);
  }
  const config = result.config;
  const logger = createLogger(config.log.level, logDestination(1, config.log.maxBufferBytes), logRedaction(config.auth.issuedPrefix));
  exitOnFatalError(logger);
  // Once per start (a node:cluster worker reads the same file: the primary has said it).
  if (isPrimary()) for (const warning of configWarnings(config, result.warnings)) logger.warn({ warning }, 'config warning');
  const workers = workerCount(config.server.workers);
  if (workers > 1 && isPrimary()) {
    reportLogDrops(logger);
    let inForce = config;
    runPrimary(config, workers, logger, async () => {
      const next = await readReloadedConfig(configPath, process.env, logger);
      if (next) inForce = next;
      return next !== undefined;
    });
    watchIfAsked(configPath, opts.watchConfig || config.server.watchConfig, logger, () => inForce.openapi?.files ?? []);
    return;
  }
  const heapGrowthPercent = applyHeapGrowth(config.server.heapGrowthPercent);
  const metrics = new Metrics({ defaultMetrics: true });
  reportLogDrops(logger, () => metrics.logLinesDropped.inc());
  const gateway = await composeGateway({ config, logger, metrics });
  const gw = await startGateway({ gateway, logger, configPath, env: process.env });
  handleSignals(gw, logger);
  // In a worker the primary watches and forwards its SIGHUP, as it does for the operator's.
  if (isPrimary()) watchIfAsked(configPath, opts.watchConfig || config.server.watchConfig, logger, () => gw.runtime.config.openapi?.files ?? []);
  reportWorkerReady();
  logger.info(
    {
      url: gw.url,
      ...(gw.opsUrl ? { opsUrl: gw.opsUrl } : {}),
      // Where requests go, as routed: every service and its targets (`upstream` only when the shorthand is a service).
      services: routedServices(config),
      store: gateway.redis?.where ?? 'memory',
      heapGrowthPercent: heapGrowthPercent ?? 'v8',
    },
    'tollgate gateway listening',
  );
}

/**
 * A changed file is handled exactly as `kill -HUP`: the process signals itself, so the handler already installed
 * (a single gateway's, or a node:cluster primary's that validates once and forwards) does the reload and its logging.
 * The watcher holds back what the operator must confirm (a file that drops whole sections); a SIGHUP, the operator's
 * or its own, makes the file as it is then the watcher's reference.
 */
function watchIfAsked(configPath: string, enabled: boolean, logger: Logger, files: () => readonly string[]): void {
  if (!enabled) return;
  const watcher = watchConfigFile(configPath, () => process.kill(process.pid, 'SIGHUP'), logger, { files });
  process.on('SIGHUP', () => watcher.rebase());
}

export async function runPetstore(opts: { port: number; host: string; config?: string }): Promise<void> {
  let redis: RedisConfig | undefined;
  if (opts.config !== undefined) {
    const loaded = await loadConfigFile(opts.config, process.env);
    if (!loaded.ok) throw new CliError(`${loaded.path}: invalid configuration, refusing to start:\n  ${loaded.errors.join('\n  ')}`);
    redis = loaded.config.redis;
  }
  const logger = createLogger((process.env.LOG_LEVEL as 'info' | undefined) ?? 'info', undefined, logRedaction());
  exitOnFatalError(logger);
  reportLogDrops(logger);
  const url = process.env.REDIS_URL || undefined;
  const ps = await startPetstore({
    host: opts.host,
    port: opts.port,
    ...(redis ? { redis, prefix: redis.prefix } : url ? { redis: { url } } : {}),
    logger,
  });
  logger.info({ url: ps.url }, 'petstore listening');
  const stop = () => {
    ps.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

/**
 * The pet store's OpenAPI document, which config/gateway.yaml and `tollgate dev` take as the upstream's routes (its
 * deprecated getPet with its dates and link among them). Shipped in the package beside dist/.
 */
const PETSTORE_DOCUMENT = fileURLToPath(new URL('../../docs/petstore.openapi.yaml', import.meta.url));
/** The document's sunset of getPet. */
const SEED_SUNSET = '2027-06-01T00:00:00Z';

export async function runDev(opts: { port: number }): Promise<void> {
  const logger = createLogger('warn', undefined, logRedaction());
  exitOnFatalError(logger);
  const petstore = await startPetstore({ host: '127.0.0.1', port: 0, logger });
  // The pet store's document as the upstream's routes, as config/gateway.yaml has it, with getPet's sunset always ahead (the
  // document's passes in 2027): `curl` shows Deprecation, Sunset and Link. And the admin API with a token of this
  // run's, for the dashboard.
  const sunset = new Date(Math.max(Date.parse(SEED_SUNSET), Math.ceil(Date.now() / DAY_MS + 180) * DAY_MS)).toISOString();
  const adminToken = generateAdminToken();
  const parsed = await validateConfigWithDocuments(
    {
      server: { port: opts.port },
      upstream: { url: petstore.url, openapi: { file: PETSTORE_DOCUMENT } },
      log: { level: 'warn' },
      admin: { port: 0, tokens: [{ id: 'dev', sha256: hashAdminToken(adminToken) }] },
      routes: [{ operationId: 'getPet', sunset }],
    },
    dirname(PETSTORE_DOCUMENT),
  );
  if (!parsed.ok) throw new CliError(parsed.errors.join('\n'));
  applyHeapGrowth(parsed.config.server.heapGrowthPercent);
  const metrics = new Metrics({ defaultMetrics: true });
  reportLogDrops(logger, () => metrics.logLinesDropped.inc());
  const gateway = await composeGateway({ config: parsed.config, logger, metrics });
  const demo: string[] = [];
  for (const plan of Object.keys(parsed.config.plans)) {
    const { key } = await gateway.admin.issuer.create({ plan, name: `demo-${plan}` });
    demo.push(`    ${plan.padEnd(11)} ${key}`);
  }
  const gw = await startGateway({ gateway, logger });
  handleSignals(gw, logger);
  const firstKey = demo[0]?.trim().split(/\s+/)[1] ?? '';
  process.stdout.write(
    [
      '',
      `  Tollgate dev: gateway ${gw.url}  ->  petstore ${petstore.url} (in-memory store)`,
      '',
      '  Demo keys (one per plan, in memory, gone when this process stops):',
      ...demo,
      '',
      '  Try it:',
      `    curl -si ${gw.url}/v1/categories -H 'Authorization: Bearer ${firstKey}'`,
      `    curl -s -X POST ${gw.url}/v1/categories -H 'Authorization: Bearer ${firstKey}' -H 'Content-Type: application/json' -d '{"name":"Dog"}'`,
      `    curl -si ${gw.url}/v1/pets/1 -H 'Authorization: Bearer ${firstKey}'      # a deprecated route: Deprecation, Sunset, Link`,
      `    curl -s ${gw.url}/ratelimit -H 'Authorization: Bearer ${firstKey}'         # your own quota, without spending it`,
      '',
      `  Dashboard and admin API: ${gw.adminUrl}/  (admin token, for this run only: ${adminToken})`,
      '',
      '  Press Ctrl-C to stop.',
      '',
    ].join('\n'),
  );
}
