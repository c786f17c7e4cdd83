// The configuration in force, swapped whole on SIGHUP. Request handlers read `runtime.current` per request,
// so a reload applies to the next request without dropping any connection.
import type { Config } from '../config/schema.js';
import { compileKeySources } from '../http/credentials.js';
import { RouteTable } from './route-table.js';
import { compileRoutes, withUpstreamCatchAll, type CompiledRoute } from './routes.js';

export interface RuntimeConfig {
  readonly config: Config;
  /** The configured routes in file order, compiled once per config. */
  readonly routes: readonly CompiledRoute[];
  /** What requests are matched against: the routes, then the upstream shorthand's /v1/* when it is a service. */
  readonly routing: readonly CompiledRoute[];
  /** The same, indexed for lookup: what the request path matches with (src/routing/route-table.ts). */
  readonly table: RouteTable;
  /** Every query parameter a key may come in (auth.sources and the OpenAPI documents' apiKey schemes): the access log redacts them. */
  readonly keyParams: readonly string[];
}

function keyParamsOf(config: Config, routes: readonly CompiledRoute[]): readonly string[] {
  const names = new Set(compileKeySources(config.auth.sources).params);
  for (const r of routes) for (const p of r.keySources?.params ?? []) names.add(p);
  return [...names];
}

function compiled(config: Config): RuntimeConfig {
  const routes = compileRoutes(config.routes, config, config.openapi?.routes);
  const routing = withUpstreamCatchAll(routes, config);
  return { config, routes, routing, table: new RouteTable(routing), keyParams: keyParamsOf(config, routes) };
}

/**
 * What a reload cannot change in a running process, because sockets, pools, clients or timers are built from it at
 * start-up: whole sections, and single fields of sections that otherwise reload. A reload keeps their old values and
 * names those that differ (the "needsRestart" of its log line). Every other field applies to the next request:
 * selfService, usage.retentionDays, log.level, plans, anonymous, ban, consumers, services, routes, defaultService (targets that
 * stay keep their health; requests in flight to a removed one finish: src/routing/services.ts), auth.sources,
 * auth.foreignKeys, admin.tokens and admin.maxFailuresPerMinute (a removed admin token, and the dashboard sessions it
 * opened, are refused at once), the listeners' tls blocks (below), and upstream.openapi (below).
 */
// events: the producer (its channel subscriptions, the outbox script on the Redis client) is started with the process.
const RESTART_ONLY_SECTIONS = ['server', 'upstream', 'redis', 'ops', 'keys', 'tracing', 'events'] as const;
const RESTART_ONLY_FIELDS = [
  // The admin listener's address: the socket is bound at start-up.
  ['admin', 'host'],
  ['admin', 'port'],
  // The portal listener's address, and the base of the links the admin API hands out for it, are bound at start-up.
  ['portal', 'host'],
  ['portal', 'port'],
  ['portal', 'publicUrl'],
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

/**
 * Listeners whose tls block reloads inside a section that otherwise does not: new files (a rotated certificate) and
 * minVersion apply to new connections (setSecureContext). Turning TLS on or off, or mutual TLS (caFile), changes what
 * the socket is and needs a restart.
 */
const LISTENER_TLS_SECTIONS = ['server', 'admin', 'ops', 'portal'] as const;

type TlsShape = { caFile?: string | undefined } | undefined;

function withoutTls(section: unknown): unknown {
  return section && typeof section === 'object' ? { ...section, tls: undefined } : section;
}

/**
 * The upstream's OpenAPI block reloads inside a section that otherwise does not, as services.<name>.openapi does: the
 * routes it makes are read from the new file on every reload, and its stability map must gate them as written then.
 */
function withoutOpenapi(section: unknown): unknown {
  return section && typeof section === 'object' ? { ...section, openapi: undefined } : section;
}

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
    const tlsApart = (section: string): boolean => (LISTENER_TLS_SECTIONS as readonly string[]).includes(section);
    for (const section of RESTART_ONLY_SECTIONS) {
      const apart = (v: unknown): unknown => (tlsApart(section) ? withoutTls(v) : section === 'upstream' ? withoutOpenapi(v) : v);
      if (JSON.stringify(apart(next[section])) !== JSON.stringify(apart(now[section]))) ignored.push(section === 'keys' ? 'keys' : `${section}.*`);
      merged[section] = now[section];
    }
    if (next.upstream.openapi !== now.upstream.openapi) {
      const { openapi: _dropped, ...kept } = now.upstream;
      merged.upstream = next.upstream.openapi === undefined ? kept : { ...kept, openapi: next.upstream.openapi };
    }
    for (const [section, field] of RESTART_ONLY_FIELDS) {
      const kept = (now[section] as Record<string, unknown>)[field];
      if (JSON.stringify((next[section] as Record<string, unknown>)[field]) !== JSON.stringify(kept)) ignored.push(`${section}.${field}`);
      merged[section] = { ...(merged[section] as object), [field]: kept };
    }
    for (const section of LISTENER_TLS_SECTIONS) {
      const kept = merged[section] as Record<string, unknown> | undefined;
      if (!kept || next[section] === undefined) continue;
      const was = (now[section] as { tls?: TlsShape } | undefined)?.tls;
      const given = (next[section] as { tls?: TlsShape }).tls;
      if (was === undefined && given === undefined) continue;
      const sameShape = (was === undefined) === (given === undefined) && (was?.caFile === undefined) === (given?.caFile === undefined);
      merged[section] = { ...kept, tls: sameShape ? given : was };
      if (!sameShape && JSON.stringify(was) !== JSON.stringify(given)) ignored.push(`${section}.tls`);
    }
    Object.freeze(merged);
    const prev = this.state;
    this.state = compiled(merged as Config);
    for (const fn of this.listeners) fn(this.state, prev);
    return ignored;
  }
}
