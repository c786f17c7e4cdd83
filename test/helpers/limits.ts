// Helpers for the plans, limits and bans tests: an in-process gateway built the way `tollgate serve` builds it
// (composeGateway, on a loopback port), a logger whose lines the test can read, Prometheus
// text parsing, and Redis command counting (INFO and MONITOR) for round-trip assertions.
import type { Server } from 'node:http';
import { createGatewayServer } from '../../src/server/http-server.js';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Clock } from '../../src/util/clock.js';
import type { Config } from '../../src/config/schema.js';
import { createLogger, type Logger } from '../../src/observability/logger.js';
import { logRedaction } from '../../src/http/credentials.js';
import { Metrics } from '../../src/observability/metrics.js';
import type { Runtime } from '../../src/routing/runtime.js';
import { composeGateway, type ComposedGateway } from '../../src/compose.js';
import { silentLogger } from './gateway.js';
import type { LimiterStore } from '../../src/limits/types.js';

export { waitFor } from './wait.js';

export interface LimitsGateway {
  url: string;
  port: number;
  server: Server;
  gateway: ComposedGateway;
  runtime: Runtime;
  metrics: Metrics;
  /** Issues a key in the gateway's key store (memory or Redis); returns its id and plaintext. */
  createKey(input: { plan?: string; perMinute?: number; perDay?: number }): Promise<{ id: string; key: string }>;
  close(): Promise<void>;
}

/** A gateway in process, composed exactly like `tollgate serve` composes it (composeGateway) but on a port of its own. */
export async function startLimitsGateway(
  config: Config,
  opts: { logger?: Logger; clock?: Clock; metrics?: Metrics; memoryPolicyCheckMs?: number; delivery?: boolean } = {},
): Promise<LimitsGateway> {
  const gateway = await composeGateway({
    config,
    logger: opts.logger ?? silentLogger,
    metrics: opts.metrics ?? new Metrics(),
    upstreamCheckTimeoutMs: 500,
    ...(opts.clock ? { clock: opts.clock } : {}),
    ...(opts.memoryPolicyCheckMs ? { memoryPolicyCheckMs: opts.memoryPolicyCheckMs } : {}),
    ...(opts.delivery === false ? { delivery: false } : {}),
  });
  const server = createGatewayServer(gateway.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    gateway,
    runtime: gateway.runtime,
    metrics: gateway.metrics,
    async createKey(input) {
      const { key, record } = await gateway.admin.issuer.create({
        plan: input.plan ?? 'free',
        ...(input.perMinute ? { perMinute: input.perMinute } : {}),
        ...(input.perDay ? { perDay: input.perDay } : {}),
      });
      return { id: record.id, key };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await gateway.close();
    },
  };
}

/** A pino logger (src/observability/logger.ts) writing into memory, redacting as the gateway's does, for assertions on log lines. */
export function captureLogger(level: 'info' | 'debug' | 'warn' = 'info'): { logger: Logger; lines: Array<Record<string, unknown>>; messages(): string[] } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger(
    level,
    {
      write(chunk: string) {
        for (const line of chunk.split('\n')) {
          if (!line.trim()) continue;
          try {
            lines.push(JSON.parse(line) as Record<string, unknown>);
          } catch {
            lines.push({ msg: line });
          }
        }
      },
    },
    logRedaction(),
  );
  return { logger, lines, messages: () => lines.map((l) => String(l.msg ?? '')) };
}

/**
 * The value of one sample in Prometheus text, or undefined when absent. `labels` must all match
 * (other labels on the sample are allowed).
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map<string, string>();
    for (const pair of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) have.set(pair[1]!, pair[2]!);
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) return Number(m[4]);
  }
  return undefined;
}

/** Redis INFO stats: total_commands_processed. Note it counts the commands a Lua script runs, and the INFO itself. */
export async function totalCommands(client: Redis): Promise<number> {
  const info = await client.info('stats');
  const m = /total_commands_processed:(\d+)/.exec(info);
  if (!m) throw new Error('no total_commands_processed in INFO stats');
  return Number(m[1]);
}

/** Redis INFO commandstats as command -> calls (includes commands run inside scripts). */
export async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const info = await client.info('commandstats');
  const out = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

export interface MonitoredCommand {
  args: string[];
  /** "lua" for commands a script ran, else the client's address. */
  source: string;
}

/**
 * Records every command Redis runs (MONITOR) on a dedicated connection. `stop()` waits (bounded) for the stream
 * to catch up with a marker command so the recording is complete, then closes the connection.
 */
export async function monitorRedis(admin: Redis): Promise<{ commands: MonitoredCommand[]; stop(): Promise<MonitoredCommand[]> }> {
  const monitor = await admin.monitor();
  const commands: MonitoredCommand[] = [];
  let markerSeen = false;
  const marker = `limits-test-marker-${Math.random().toString(36).slice(2)}`;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) {
      markerSeen = true;
      return;
    }
    if (!markerSeen) commands.push({ args, source });
  });
  return {
    commands,
    async stop() {
      await admin.echo(marker);
      const deadline = Date.now() + 2000;
      while (!markerSeen && Date.now() < deadline) await sleep(10);
      monitor.disconnect();
      if (!markerSeen) throw new Error('MONITOR did not catch up within 2 s');
      return commands;
    },
  };
}

/** Addresses ("ip:port") of the Redis connections whose CLIENT SETNAME is `name` (e.g. "tollgate-gateway"). */
export async function clientAddresses(admin: Redis, name: string): Promise<Set<string>> {
  const list = (await admin.client('LIST')) as string;
  const out = new Set<string>();
  for (const line of list.split('\n')) {
    const fields = new Map(
      line
        .trim()
        .split(' ')
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as const),
    );
    if (fields.get('name') === name && fields.get('addr')) out.add(fields.get('addr')!);
  }
  return out;
}

/** A limit store for tests that only decide: none of them reads a snapshot or refunds, so asking for one fails loudly. */
export function checkOnlyStore(check: LimiterStore['check']): LimiterStore {
  return {
    check,
    snapshot: () => Promise.reject(new Error('snapshot: not used by this test')),
    refund: () => Promise.reject(new Error('refund: not used by this test')),
  };
}
