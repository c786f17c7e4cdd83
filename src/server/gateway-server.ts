// Runs the gateway: builds its dependencies from config, listens, reloads on SIGHUP, drains on SIGTERM/SIGINT.
// The only gateway file that binds a port or installs signal handlers.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Server as TlsServer } from 'node:tls';
import type { AddressInfo } from 'node:net';
import type { ComposedGateway } from '../compose.js';
import { excerpt, loadConfigFile } from '../config/load.js';
import { closeConnectionsAfterResponses, createGatewayServer } from './http-server.js';
import type { Config, ListenerTlsConfig, OpsConfig } from '../config/schema.js';
import { readListenerTls, tlsWarnings, type ListenerTlsMaterial } from '../config/tls-files.js';
import { candidateWarnings } from '../limits/candidate-warnings.js';
import { costWarnings } from '../limits/cost-warnings.js';
import { stabilityWarnings } from '../routing/stability.js';
import { isPrimary } from './cluster.js';
import { closeLogs, type Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { buildOpsApp } from '../observability/ops.js';
import type { Runtime } from '../routing/runtime.js';

export interface RunningGateway {
  server: Server;
  url: string;
  port: number;
  /** The ops listener's URL (/readyz, /metrics), when `ops` is configured. */
  opsUrl?: string;
  /** The admin API's URL, when an admin token is configured. */
  adminUrl?: string;
  /** The consumer portal's URL, when portal.port is configured. */
  portalUrl?: string;
  runtime: Runtime;
  metrics: Metrics;
  /**
   * Re-reads the config file (and the OpenAPI documents it names); a bad file is rejected and the old config stays.
   * Reloads run one after another, in the order asked: a later one never lands before an earlier one.
   */
  reload(): Promise<boolean>;
  /** Stops accepting, lets in-flight requests finish (up to drainTimeoutMs), then releases everything. */
  shutdown(): Promise<void>;
}

export interface StartOptions {
  /** What composeGateway built. */
  gateway: ComposedGateway;
  logger: Logger;
  /** The file SIGHUP re-reads; without it, reload() is refused. */
  configPath?: string;
  env?: NodeJS.ProcessEnv;
}

/** Listens with a composed gateway on server.host:server.port (and the ops listener, when configured). */
export async function startGateway(opts: StartOptions): Promise<RunningGateway> {
  const { gateway, logger } = opts;
  const { runtime, metrics, readiness } = gateway;
  const config = runtime.config;

  const server = createGatewayServer(
    gateway.app,
    {
      headersTimeout: config.server.headersTimeoutMs,
      requestTimeout: config.server.requestTimeoutMs,
      keepAliveTimeout: config.server.keepAliveTimeoutMs,
      // Node enforces headersTimeout/requestTimeout only when it sweeps its connections, by default every 30 s: a
      // slowloris client would hold its socket up to 30 s past the timeout. Sweep often enough to keep the promise.
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(config.server.headersTimeoutMs / 2))),
    },
    startTls('server.tls', config.server.tls),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.server.port, config.server.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // Responses not yet closed, so a drain can wait for their last events (below). A count, not a set of them: a Set
  // with one entry added and deleted per request kept 4 KB of every request alive into old space (bench/history/2026-11.md).
  let unanswered = 0;
  const answered = (): void => {
    unanswered--;
  };
  server.on('request', (_req, res: ServerResponse) => {
    unanswered++;
    res.once('close', answered);
  });
  const port = (server.address() as AddressInfo).port;
  const url = listenerUrl(config.server.host, port, config.server.tls !== undefined);
  // The gateway's own port is already bound when a side listener fails: release it, or the failed start would keep
  // the process alive.
  let ops: { server: Server; url: string } | undefined;
  let admin: { server: Server; url: string } | undefined;
  let portal: { server: Server; url: string } | undefined;
  const abandon = (err: unknown): never => {
    server.close();
    ops?.server.close();
    admin?.server.close();
    void gateway.close();
    throw err;
  };
  if (config.ops) ops = await listenSide(config.ops, buildOpsApp(metrics, readiness), 'ops.tls').catch(abandon);
  if (gateway.adminApp) {
    admin = await listenSide(config.admin, gateway.adminApp, 'admin.tls').catch(abandon);
    logger.info({ url: admin.url }, 'admin API listening');
  } else logger.info('admin API off: no admin token configured (admin.tokens in the config, or TOLLGATE_ADMIN_TOKEN)');
  if (gateway.portalApp && config.portal.port !== undefined) {
    portal = await listenSide({ host: config.portal.host, port: config.portal.port, tls: config.portal.tls }, gateway.portalApp, 'portal.tls').catch(abandon);
    gateway.portalListening(portal.url);
    logger.info({ url: portal.url }, 'portal listening');
  }

  runtime.onChange((next) => (logger.level = next.config.log.level));

  let reloading: Promise<boolean> = Promise.resolve(true);
  const reload = (): Promise<boolean> => (reloading = reloading.then(reloadNow, reloadNow));
  const reloadNow = async (): Promise<boolean> => {
    if (!opts.configPath) return false;
    const next = await readReloadedConfig(opts.configPath, opts.env ?? process.env, logger);
    if (!next) {
      metrics.configReloads.inc({ result: 'rejected' });
      return false;
    }
    try {
      const before = runtime.config.admin.tokens;
      const restartOnly = runtime.apply(next);
      // Tokens apply on reload to a running admin API; one that was off (no token at start-up) has no listener to
      // start until a restart.
      if (!admin && JSON.stringify(next.admin.tokens) !== JSON.stringify(before)) restartOnly.push('admin.tokens');
      // The listeners' certificates are read again on every reload (a rotated file under the same name included).
      const applied = runtime.config;
      renewTls(server, 'server.tls', applied.server.tls, logger);
      if (admin) renewTls(admin.server, 'admin.tls', applied.admin.tls, logger);
      if (ops) renewTls(ops.server, 'ops.tls', applied.ops?.tls, logger);
      if (portal) renewTls(portal.server, 'portal.tls', applied.portal.tls, logger);
      metrics.configReloads.inc({ result: 'applied' });
      logger.info({ path: opts.configPath, ...(restartOnly.length ? { needsRestart: restartOnly } : {}) }, 'config reloaded');
      return true;
    } catch (err) {
      // A config that validated but could not be applied (a listener threw): the old state is kept as far as the
      // listeners that ran allow, and the process carries on.
      metrics.configReloads.inc({ result: 'rejected' });
      logger.error(
        { path: opts.configPath, err: { message: excerpt(String((err as Error)?.message ?? err), 200) } },
        'config reload rejected: applying it failed',
      );
      return false;
    }
  };

  let stopping: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    stopping ??= (async () => {
      logger.info({ drainTimeoutMs: config.server.drainTimeoutMs }, 'draining: no new connections, finishing in-flight requests');
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      // Keep-alive connections that finish a request while draining are closed rather than kept: requests already in
      // flight and any that arrive on an open connection are answered with Connection: close, so no client sends
      // another request on a connection about to go (it would meet a reset).
      closeConnectionsAfterResponses(server);
      const idleSweep = setInterval(() => server.closeIdleConnections(), 100);
      const deadline = new Promise<void>((r) => setTimeout(r, config.server.drainTimeoutMs).unref());
      await Promise.race([closed, deadline]);
      clearInterval(idleSweep);
      server.closeAllConnections();
      // Responses' own close events (and their access-log lines) come after the server's, once the sockets
      // destroyed above are closed by libuv: wait for them (bounded), so "stopped" is the last word.
      const settleBy = Date.now() + 1000;
      while (unanswered > 0 && Date.now() < settleBy) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setImmediate(r));
      for (const side of [ops, admin, portal]) {
        if (!side) continue;
        side.server.closeAllConnections();
        await new Promise<void>((r) => side.server.close(() => r()));
      }
      await gateway.close();
      logger.info('stopped');
    })();
    return stopping;
  };

  return {
    server,
    url,
    port,
    ...(ops ? { opsUrl: ops.url } : {}),
    ...(admin ? { adminUrl: admin.url } : {}),
    ...(portal ? { portalUrl: portal.url } : {}),
    runtime,
    metrics,
    reload,
    shutdown,
  };
}

function listenerUrl(host: string, port: number, tls: boolean): string {
  return `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * A listener's TLS material at start-up. The config was checked as it was loaded (src/config/tls-files.ts), so a
 * failure here is a file changed since: said as the config error it is.
 */
function startTls(field: string, block: ListenerTlsConfig | undefined): ListenerTlsMaterial | undefined {
  if (!block) return undefined;
  const read = readListenerTls(field, block);
  if (!read.ok) throw new Error(read.error);
  return read.value;
}

/**
 * Reads a TLS listener's files again and gives them to new connections (setSecureContext: connections already open
 * keep theirs, none is dropped). Files that cannot be used leave the listener on its old certificate, and say why.
 */
function renewTls(server: Server, field: string, block: ListenerTlsConfig | undefined, logger: Logger): void {
  if (!block || !('setSecureContext' in server)) return;
  const read = readListenerTls(field, block);
  if (!read.ok) {
    logger.error({ field, error: read.error }, 'TLS files not reloaded: the listener keeps its old certificate');
    return;
  }
  const { cert, key, ca, minVersion } = read.value;
  try {
    (server as unknown as TlsServer).setSecureContext({ cert, key, ...(ca ? { ca } : {}), minVersion });
  } catch (err) {
    logger.error({ field, error: excerpt(String((err as Error)?.message ?? err), 200) }, 'TLS files not reloaded: the listener keeps its old certificate');
  }
}

/**
 * The ops, admin and portal listeners: node:http servers, or node:https with a tls block (no drain: scrapes, probes,
 * admin and portal calls are short and retried).
 */
async function listenSide(
  where: Pick<OpsConfig, 'host' | 'port' | 'tls'>,
  app: (req: IncomingMessage, res: ServerResponse) => void,
  tlsField: string,
): Promise<{ server: Server; url: string }> {
  const tls = startTls(tlsField, where.tls);
  const server = tls ? (createHttpsServer(tls, app) as unknown as Server) : createServer(app);
  // A scrape, probe or admin call that stalls must not hold a socket for long.
  server.headersTimeout = 5_000;
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(where.port, where.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, url: listenerUrl(where.host, (server.address() as AddressInfo).port, tls !== undefined) };
}

/**
 * Reads and validates the config file for a reload: the new config, or undefined after logging why it was rejected
 * (the errors name fields and quote at most a short, redacted excerpt, never the file's content). Never throws: a
 * reload is triggered by a signal, and an exception there would end the process.
 */
/**
 * Every warning about a loaded config, as `config check` prints them: the loader's (documents), costs no window can
 * hold, candidate limits whose enforceFrom is past, unused stability values, and TLS (verify off, an expired listener
 * certificate). Said at start-up and on reload.
 */
export function configWarnings(config: Config, fromLoad: readonly string[]): string[] {
  return [...fromLoad, ...costWarnings(config), ...candidateWarnings(config), ...stabilityWarnings(config), ...tlsWarnings(config)];
}

export async function readReloadedConfig(path: string, env: NodeJS.ProcessEnv, logger: Logger): Promise<Config | undefined> {
  let result: Awaited<ReturnType<typeof loadConfigFile>>;
  try {
    result = await loadConfigFile(path, env);
  } catch (err) {
    result = { ok: false, path, errors: [excerpt(String((err as Error)?.message ?? err), 200)] };
  }
  if (result.ok) {
    // What `config check` and the start-up say about the new file, said again (once: by a node:cluster primary, not
    // by each worker), so that a reload pointing a listener at an expired certificate is not reported as a plain success.
    if (isPrimary()) for (const warning of configWarnings(result.config, result.warnings)) logger.warn({ path, warning }, 'config warning');
    return result.config;
  }
  logger.error({ path, errors: result.errors }, 'config reload rejected; the old config stays in force');
  return undefined;
}

/**
 * The last word of a process that hit a bug: an uncaught exception or unhandled rejection is logged (fatal, with its
 * message and stack) and the log flushed before exiting 1, so the cause is on record. A supervisor (node:cluster's
 * primary, systemd, Kubernetes) starts a new process; carrying on after such an error could serve from broken state.
 */
export function exitOnFatalError(logger: Logger): void {
  let exiting = false;
  // One 'uncaughtException' listener covers rejections too: Node raises an unhandled rejection as an uncaught
  // exception (origin "unhandledRejection"). An 'unhandledRejection' listener of our own would not be free: with one,
  // Node's promise bookkeeping made process.nextTick about 8 µs dearer per request under load (bench/README.md,
  // "After the hardening").
  process.on('uncaughtException', (err: unknown, origin: string) => {
    if (exiting) return;
    exiting = true;
    const e = err instanceof Error ? err : new Error(String(err));
    const kind = origin === 'unhandledRejection' ? 'unhandled promise rejection' : 'uncaught exception';
    logger.fatal({ err: { type: e.name, message: e.message, stack: e.stack } }, `${kind}: exiting`);
    void closeLogs(logger).then(() => process.exit(1));
  });
}

/** Wires process signals to a running gateway: SIGHUP reloads, SIGTERM/SIGINT drain and exit 0. */
export function handleSignals(gw: RunningGateway, logger: Logger): void {
  process.on('SIGHUP', () => {
    void gw.reload();
  });
  const stop = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    gw.shutdown().then(
      () => void closeLogs(logger).then(() => process.exit(0)),
      (err: unknown) => {
        logger.error({ err: String(err) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
