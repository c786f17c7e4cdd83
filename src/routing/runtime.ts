// The configuration in force, swapped whole on SIGHUP. Request handlers read `runtime.current` per request,
// so a reload applies to the next request without dropping any connection.
import type { Config } from '../config/schema.js';
import { compileRoutes, withUpstreamCatchAll, type CompiledRoute } from './routes.js';

export interface RuntimeConfig {
  readonly config: Config;
  /** The configured routes in file order, compiled once per config. */
  readonly routes: readonly CompiledRoute[];
  /** What requests are matched against: the routes, then the upstream shorthand's /v1/* when it is a service. */
  readonly routing: readonly CompiledRoute[];
}

function compiled(config: Config): RuntimeConfig {
  const routes = compileRoutes(config.routes);
  return { config, routes, routing: withUpstreamCatchAll(routes, config) };
}

/**
 * What a reload cannot change in a running process, because sockets, pools, clients or timers are built from it at
 * start-up: whole sections, and single fields of sections that otherwise reload. A reload keeps their old values and
 * names those that differ (the "needsRestart" of its log line). Every other field applies to the next request:
 * selfService, usage.retentionDays, log.level, plans, anonymous, ban, services, routes, defaultService (targets that
 * stay keep their health; requests in flight to a removed one finish: src/routing/services.ts), auth.sources,
 * auth.foreignKeys, admin.tokens and admin.maxFailuresPerMinute (a removed admin token, and the dashboard sessions it
 * opened, are refused at once).
 */
const RESTART_ONLY_SECTIONS = ['server', 'upstream', 'redis', 'ops', 'keys', 'tracing'] as const;
const RESTART_ONLY_FIELDS = [
  // The admin listener's address: the socket is bound at start-up.
  ['admin', 'host'],
  ['admin', 'port'],
  // Whether the usage recorder exists and its flush timer are decided at start-up; half a switch (the limit script's
  // ledger on, the recorder's counts off) would make the ledger wrong.
  ['usage', 'enabled'],
  ['usage', 'flushIntervalMs'],
  // The report thread's heap limit is given when the thread is made (from the config read at start-up).
  ['usage', 'reportMemoryMb'],
  // The log queue's bound belongs to the stream built at start-up.
  ['log', 'maxBufferBytes'],
  // The logs redact text shaped like an issued key by the prefix the logger was built with at start-up.
  ['auth', 'issuedPrefix'],
] as const;

export class Runtime {
  private state: RuntimeConfig;
  private readonly listeners: Array<(next: RuntimeConfig, prev: RuntimeConfig) => void> = [];

  constructor(config: Config) {
    this.state = compiled(config);
  }

  get current(): RuntimeConfig {
    return this.state;
  }

  get config(): Config {
    return this.state.config;
  }

  onChange(fn: (next: RuntimeConfig, prev: RuntimeConfig) => void): void {
    this.listeners.push(fn);
  }

  /**
   * Applies a new, already validated config. Returns the restart-only sections that differ
   * (they keep their old values until a restart) so the caller can log them.
   */
  apply(next: Config): string[] {
    const now = this.state.config;
    const ignored: string[] = [];
    const merged: Record<string, unknown> = { ...next };
    for (const section of RESTART_ONLY_SECTIONS) {
      if (JSON.stringify(next[section]) !== JSON.stringify(now[section])) ignored.push(section === 'keys' ? 'keys' : `${section}.*`);
      merged[section] = now[section];
    }
    for (const [section, field] of RESTART_ONLY_FIELDS) {
      const kept = (now[section] as Record<string, unknown>)[field];
      if (JSON.stringify((next[section] as Record<string, unknown>)[field]) !== JSON.stringify(kept)) ignored.push(`${section}.${field}`);
      merged[section] = { ...(merged[section] as object), [field]: kept };
    }
    Object.freeze(merged);
    const prev = this.state;
    this.state = compiled(merged as Config);
    for (const fn of this.listeners) fn(this.state, prev);
    return ignored;
  }
}
