// The services the gateway routes to, built from the config and kept across reloads: each service's targets (with
// their health), its balancing, timeouts, retry rules and budget, and its health checks. A reload (apply) keeps
// the Target objects whose URL stays, so health state and pools survive it; removed targets finish what is in
// flight and then close. snapshot() is the read-only view for /readyz, an admin endpoint or a dashboard page.
import { UPSTREAM_SERVICE, type Config, type ServiceConfig, type ServiceTlsConfig, type UpstreamConfig } from '../config/schema.js';
import { readTargetTls, type TargetTlsMaterial } from '../config/tls-files.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { OutboundClient } from '../outbound/client.js';
import { pickTarget, type Balance } from './balancer.js';
import { countsAsTargetFailure, mayEject, type EjectOutcome } from './ejection.js';
import { HealthChecker, type HealthCheckSettings } from './health.js';
import { RetryBudget } from './retry-budget.js';
import { Target, type TargetError } from './target.js';

export interface ServiceSettings {
  balance: Balance;
  timeoutMs: number;
  connectTimeoutMs: number;
  /** Each try of a retryable request at most this long (undefined: a try may take the whole timeoutMs). */
  perTryTimeoutMs: number | undefined;
  retries: number;
  retryOn: ReadonlySet<number>;
  healthCheck: HealthCheckSettings | undefined;
  /** Passive ejection; undefined: never (the upstream shorthand, as before services existed). */
  eject: EjectSettings | undefined;
}

export interface EjectSettings {
  consecutiveFailures: number;
  forMs: number;
  /** At most this share of the targets out at once (checks and rests together); never the last available one. */
  maxPercent: number;
  /** The outcomes that count as the target's own failure (src/routing/ejection.ts). */
  on: readonly EjectOutcome[];
}

export class Service {
  targets: Target[] = [];
  readonly budget = new RetryBudget();
  readonly checkers = new Map<Target, HealthChecker>();
  /** Its tls block, read at the last apply that could read it (undefined: plain http, or the system's CAs). */
  tls: TargetTlsMaterial | undefined;

  constructor(
    readonly name: string,
    public settings: ServiceSettings,
    /** The registry's clock: what the request path reads a target's rest and availability by. */
    readonly now: () => number,
  ) {}

  pick(now: number, avoid?: ReadonlySet<Target>): Target | undefined {
    return pickTarget(this.settings.balance, this.targets, now, avoid);
  }

  /** Whether a target is available now (by the registry's clock). */
  hasAvailable(): boolean {
    const now = this.now();
    return this.targets.some((t) => t.available(now));
  }

  /** Seconds until a target may be available again: the soonest passive rest to end, else one check interval. */
  retryAfterSeconds(): number {
    const now = this.now();
    const rests = this.targets.filter((t) => t.checkHealthy && t.ejectedUntil > now).map((t) => t.ejectedUntil - now);
    const ms = rests.length > 0 ? Math.min(...rests) : (this.settings.healthCheck?.intervalMs ?? 1000);
    return Math.max(1, Math.ceil(ms / 1000));
  }
}

export interface TargetSnapshot {
  url: string;
  weight: number;
  healthy: boolean;
  /** Why not: "health_check" (failed its active checks), "ejected" (resting after failed requests). */
  state: 'healthy' | 'health_check' | 'ejected';
  ejectedUntil: string | null;
  activeRequests: number;
  consecutiveFailures: number;
  recentErrors: TargetError[];
}

export interface ServiceSnapshot {
  name: string;
  balance: Balance;
  healthy: number;
  total: number;
  targets: TargetSnapshot[];
}

export interface ServiceRegistryOptions {
  logger: Logger;
  metrics: Metrics;
  /** The composition root's clock (Date.now() when left out): ejections, rests, retry budgets and health by it. */
  now?: () => number;
  /** false: no active checks are started (tests of the proxy alone). */
  healthChecks?: boolean;
  /** What the health checks are sent with (the composition root's; closed by its owner, not by the registry). */
  outbound: OutboundClient;
}

export class ServiceRegistry {
  private services = new Map<string, Service>();
  /** The clock every service of the registry reads: the request path's proxy reckons by it too. */
  readonly now: () => number;

  constructor(
    config: Config,
    private readonly opts: ServiceRegistryOptions,
  ) {
    this.now = opts.now ?? Date.now;
    opts.metrics.refreshTargetHealth = () => this.publishHealth();
    this.apply(config);
  }

  get(name: string): Service | undefined {
    return this.services.get(name);
  }

  all(): Service[] {
    return [...this.services.values()];
  }

  /** Builds or updates every service from a (new) config: targets whose URL stays keep their state. */
  apply(config: Config): void {
    const next = new Map<string, Service>();
    for (const [name, { settings, targets, tls }] of desiredServices(config)) {
      const service = this.services.get(name) ?? new Service(name, settings, this.now);
      service.settings = settings;
      service.tls = this.readTls(name, tls, service.tls);
      const old = new Map(service.targets.map((t) => [t.url, t]));
      service.targets = targets.map(({ url, weight }) => {
        const kept = old.get(url);
        old.delete(url);
        if (kept) {
          kept.weight = weight;
          kept.useTls(service.tls);
          return kept;
        }
        return new Target(url, weight, { maxSockets: config.upstream.maxSockets, tls: service.tls });
      });
      for (const gone of old.values()) this.removeTarget(service, gone);
      this.reconcileChecks(service);
      next.set(name, service);
    }
    for (const [name, service] of this.services) if (!next.has(name)) for (const t of service.targets) this.removeTarget(service, t);
    this.services = next;
    this.publishHealth();
  }

  /**
   * A try's outcome, for passive ejection. `failed` is the proxy's verdict (could not connect, reset, timeout, a 5xx);
   * only the outcomes eject.on lists count toward a rest, and any other outcome (an answer, its own 500 by default)
   * ends a run of failures. A target is ejected only when mayEject allows it: one customer's failing requests cannot
   * take every target of a service out.
   */
  recordResult(service: Service, target: Target, failed: boolean, kind?: string): void {
    const now = this.now();
    if (failed) target.noteError(kind ?? 'failure', now);
    const eject = service.settings.eject;
    if (!countsAsTargetFailure(kind, failed, eject?.on ?? [])) {
      target.consecutiveFailures = 0;
      return;
    }
    target.consecutiveFailures++;
    if (!eject || target.consecutiveFailures < eject.consecutiveFailures) return;
    if (!mayEject(service.targets, target, now, eject.maxPercent)) {
      // Left in: the service keeps its capacity. The count stays, so a later failure ejects it once others are back.
      if (target.consecutiveFailures === eject.consecutiveFailures && target.available(now))
        this.opts.logger.warn(
          { service: service.name, target: target.url, maxPercent: eject.maxPercent },
          'target failing requests in a row not ejected: the service would lose its last available target or more than eject.maxPercent',
        );
      return;
    }
    target.ejectedAt = now;
    target.ejectedUntil = now + eject.forMs;
    target.consecutiveFailures = 0;
    this.opts.metrics.targetEjections.inc({ service: service.name, target: target.url });
    this.opts.logger.warn({ service: service.name, target: target.url, forMs: eject.forMs }, 'target ejected after failed requests in a row');
    this.publishHealth();
  }

  snapshot(): ServiceSnapshot[] {
    const now = this.now();
    return this.all().map((s) => {
      const targets = s.targets.map((t): TargetSnapshot => {
        const state = !t.checkHealthy ? 'health_check' : t.ejectedUntil > now ? 'ejected' : 'healthy';
        return {
          url: t.url,
          weight: t.weight,
          healthy: state === 'healthy',
          state,
          ejectedUntil: t.ejectedUntil > now ? new Date(t.ejectedUntil).toISOString() : null,
          activeRequests: t.active,
          consecutiveFailures: t.consecutiveFailures,
          recentErrors: [...t.recentErrors],
        };
      });
      return { name: s.name, balance: s.settings.balance, healthy: targets.filter((t) => t.healthy).length, total: targets.length, targets };
    });
  }

  /** The health gauge per service and target (1 available, 0 not), refreshed on every change and on scrape. */
  publishHealth(): void {
    const gauge = this.opts.metrics.targetHealthy;
    gauge.reset();
    const now = this.now();
    for (const s of this.services.values()) for (const t of s.targets) gauge.set({ service: s.name, target: t.url }, t.available(now) ? 1 : 0);
  }

  close(): void {
    for (const s of this.services.values()) {
      for (const c of s.checkers.values()) c.stop();
      for (const t of s.targets) t.agent.destroy();
    }
  }

  /**
   * A service's tls files, read again on every apply (a rotated certificate under the same name is picked up). The
   * config was checked as it was loaded; files that changed since and cannot be used keep the material before.
   */
  private readTls(name: string, tls: ServiceTlsConfig | undefined, before: TargetTlsMaterial | undefined): TargetTlsMaterial | undefined {
    if (!tls) return undefined;
    const read = readTargetTls(`services.${name}.tls`, tls);
    if (read.ok) return read.value;
    this.opts.logger.error({ service: name, error: read.error }, "TLS files not reloaded: the service keeps its targets' old TLS settings");
    return before;
  }

  private removeTarget(service: Service, target: Target): void {
    service.checkers.get(target)?.stop();
    service.checkers.delete(target);
    target.retire();
  }

  private reconcileChecks(service: Service): void {
    const settings = service.settings.healthCheck;
    for (const [t, c] of service.checkers) {
      if (!settings || !service.targets.includes(t)) {
        c.stop();
        service.checkers.delete(t);
        // Without checks nothing could bring it back: the checks' verdict no longer applies.
        if (!settings) t.checkHealthy = true;
      }
    }
    if (!settings || this.opts.healthChecks === false) return;
    for (const t of service.targets) {
      const existing = service.checkers.get(t);
      if (existing) existing.update(settings);
      else {
        const checker = new HealthChecker(
          t,
          settings,
          (target, healthy, changed, restEnded, reason) => {
            if (changed)
              this.opts.logger.warn(
                { service: service.name, target: target.url, healthy, ...(reason ? { reason } : {}) },
                healthy ? 'target passed its health checks: back in' : 'target failed its health checks: taken out',
              );
            else if (restEnded) this.opts.logger.info({ service: service.name, target: target.url }, 'target passed its health check: its passive rest ends');
            if (changed || restEnded) this.publishHealth();
          },
          this.now,
          this.opts.outbound,
        );
        service.checkers.set(t, checker);
        checker.start();
      }
    }
  }
}

/** The services requests are routed to, each with its targets' URLs (the upstream shorthand only when it is one): the start-up line's. */
export function routedServices(config: Config): Record<string, string[]> {
  return Object.fromEntries([...desiredServices(config)].map(([name, s]) => [name, s.targets.map((t) => t.url)]));
}

/** The services a config asks for, the upstream shorthand included when it is one. */
interface DesiredService {
  settings: ServiceSettings;
  targets: Array<{ url: string; weight: number }>;
  tls?: ServiceTlsConfig | undefined;
}

function desiredServices(config: Config): Map<string, DesiredService> {
  const out = new Map<string, DesiredService>();
  if (config.upstreamIsService !== false)
    out.set(UPSTREAM_SERVICE, { settings: upstreamSettings(config.upstream), targets: [{ url: config.upstream.url, weight: 1 }] });
  for (const [name, s] of Object.entries(config.services ?? {})) out.set(name, { settings: serviceSettings(s), targets: s.targets, tls: s.tls });
  return out;
}

/** The upstream shorthand behaves as it always has: one target, no connect timeout of its own, no retries, no ejection. */
function upstreamSettings(u: UpstreamConfig): ServiceSettings {
  return {
    balance: 'round-robin',
    timeoutMs: u.timeoutMs,
    connectTimeoutMs: u.timeoutMs,
    perTryTimeoutMs: undefined,
    retries: 0,
    retryOn: new Set(),
    healthCheck: undefined,
    eject: undefined,
  };
}

function serviceSettings(s: ServiceConfig): ServiceSettings {
  return {
    balance: s.balance,
    timeoutMs: s.timeoutMs,
    connectTimeoutMs: s.connectTimeoutMs,
    perTryTimeoutMs: s.perTryTimeoutMs,
    retries: s.retries,
    retryOn: new Set(s.retryOn),
    healthCheck: s.healthCheck,
    eject: s.eject,
  };
}
