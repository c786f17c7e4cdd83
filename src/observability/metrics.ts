// Prometheus metrics, on a registry of the app's own (not prom-client's global), so several apps can live in one process.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();

  readonly requests = new Counter({
    name: 'tollgate_http_requests_total',
    help: 'Requests answered by the gateway, by route pattern, method and status.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });

  readonly requestDuration = new Histogram({
    name: 'tollgate_http_request_duration_seconds',
    help: 'Time from request arrival to the end of the response, by route pattern.',
    labelNames: ['route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly upstreamDuration = new Histogram({
    name: 'tollgate_upstream_duration_seconds',
    help: 'Time from sending the request upstream to its response headers, by upstream status (or error).',
    labelNames: ['status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly upstreamErrors = new Counter({
    name: 'tollgate_upstream_errors_total',
    help: 'Upstream failures answered by the gateway, by kind (refused, reset, timeout, upgrade: a 101 nobody asked for, too_large, body_idle: a body that stopped arriving); client_idle: a response cut off because its client stopped reading.',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly serviceRequests = new Counter({
    name: 'tollgate_service_requests_total',
    help: "Tries sent to a service's targets, by service, target and outcome (2xx..5xx: the status class it answered; refused, connect_timeout, reset, timeout: no answer).",
    labelNames: ['service', 'target', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly serviceRetries = new Counter({
    name: 'tollgate_service_retries_total',
    help: 'Tries repeated on another target, by service and reason (connect, reset, status, timeout: perTryTimeoutMs); budget_exhausted: a retry the retry budget refused.',
    labelNames: ['service', 'reason'] as const,
    registers: [this.registry],
  });

  /** Refreshes tollgate_target_healthy at scrape time (set by the services: a rest ends with time, not an event). */
  refreshTargetHealth: (() => void) | undefined = undefined;

  readonly targetHealthy = new Gauge({
    name: 'tollgate_target_healthy',
    help: '1 while a target may be picked (passing its health checks, not ejected), 0 while it is out; by service and target.',
    labelNames: ['service', 'target'] as const,
    registers: [this.registry],
    collect: () => this.refreshTargetHealth?.(),
  });

  readonly targetEjections = new Counter({
    name: 'tollgate_target_ejections_total',
    help: 'Targets taken out for a rest after failed requests in a row (passive ejection), by service and target.',
    labelNames: ['service', 'target'] as const,
    registers: [this.registry],
  });

  readonly configReloads = new Counter({
    name: 'tollgate_config_reloads_total',
    help: 'SIGHUP configuration reloads, by result (applied, rejected).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly limitDecisions = new Counter({
    name: 'tollgate_ratelimit_decisions_total',
    help: "Rate-limit decisions for keyed requests, by plan, decision (admitted, refused, shadow_refused: admitted though a shadow-mode window or a candidate limit had no room, cost_exceeds_limit: refused 403, the cost is above a window's whole limit) and window (the short windows: minute, day, both, month, key (a key's cap inside its consumer's pool), route; ban; none).",
    labelNames: ['plan', 'decision', 'window'] as const,
    registers: [this.registry],
  });

  readonly shadowRefusals = new Counter({
    name: 'tollgate_ratelimit_shadow_refusals_total',
    help: 'Admitted keyed requests a window in shadow mode ("store:minute") or a candidate limit ("minute:shadow") would have refused, by plan and window name (one count per such window).',
    labelNames: ['plan', 'window'] as const,
    registers: [this.registry],
  });

  readonly anonymousDecisions = new Counter({
    name: 'tollgate_anonymous_decisions_total',
    help: 'Per-IP limit decisions for requests without a valid key (admitted to the 401, or refused with 429).',
    labelNames: ['decision'] as const,
    registers: [this.registry],
  });

  readonly bans = new Counter({
    name: 'tollgate_bans_total',
    help: 'Bans started, by plan and escalation level.',
    labelNames: ['plan', 'level'] as const,
    registers: [this.registry],
  });

  readonly wouldBans = new Counter({
    name: 'tollgate_ban_would_ban_total',
    help: 'Bans the ladder would have started while bans run in shadow mode (no request was refused for them), by plan and escalation level.',
    labelNames: ['plan', 'level'] as const,
    registers: [this.registry],
  });

  readonly validationFailures = new Counter({
    name: 'tollgate_validation_failures_total',
    help: "Requests that do not match their operation's OpenAPI description, by service, operation (its operationId, else method and path template: never a key) and mode (shadow: proxied all the same; enforce: refused 400).",
    labelNames: ['service', 'operation', 'mode'] as const,
    registers: [this.registry],
  });

  readonly publicRouteDecisions = new Counter({
    name: 'tollgate_public_route_decisions_total',
    help: 'Requests without a valid key on a public route with limits of its own, by route window name and decision (admitted, refused).',
    labelNames: ['route', 'decision'] as const,
    registers: [this.registry],
  });

  readonly degraded = new Gauge({
    name: 'tollgate_redis_degraded',
    help: '1 while Redis is unreachable and limits run on per-instance memory (failMode open) or answer 503 (closed).',
    registers: [this.registry],
  });

  readonly degradedTransitions = new Counter({
    name: 'tollgate_redis_degraded_transitions_total',
    help: 'Switches into (to="degraded") and out of (to="normal") degraded mode.',
    labelNames: ['to'] as const,
    registers: [this.registry],
  });

  readonly evictionUnsafe = new Gauge({
    name: 'tollgate_redis_eviction_unsafe',
    help: "1 when Redis's maxmemory-policy may evict keys (anything but noeviction: key records, bans or rate windows can vanish); 0 with noeviction, or while the policy cannot be read (see the log).",
    registers: [this.registry],
  });

  readonly persistenceDisabled = new Gauge({
    name: 'tollgate_redis_persistence_disabled',
    help: '1 when the Redis holding the keys has neither AOF nor RDB snapshots: a restart of it deletes every key; 0 when it persists, or while that cannot be read.',
    registers: [this.registry],
  });

  readonly redisErrors = new Counter({
    name: 'tollgate_redis_errors_total',
    help: 'Redis calls on the request path that failed or timed out, by operation.',
    labelNames: ['op'] as const,
    registers: [this.registry],
  });

  readonly keyRecordsInvalid = new Counter({
    name: 'tollgate_key_records_invalid_total',
    help: 'Requests whose key record in Redis was unreadable (not a JSON object), by where it was found (lookup, limit_check): the key is refused with 401, and its id logged.',
    labelNames: ['seen_by'] as const,
    registers: [this.registry],
  });

  readonly redisTimeouts = new Counter({
    name: 'tollgate_redis_timeouts_total',
    help: "Redis calls on the request path that timed out, by cause: redis (Redis did not answer in time; the breaker opens) or overload (this process's event loop ran late while Redis was answering; the breaker stays closed).",
    labelNames: ['cause'] as const,
    registers: [this.registry],
  });

  readonly logLinesDropped = new Counter({
    name: 'tollgate_log_lines_dropped_total',
    help: 'Log lines dropped because stdout was not taking them and log.maxBufferBytes were already queued.',
    registers: [this.registry],
  });

  readonly adminChanges = new Counter({
    name: 'tollgate_admin_changes_total',
    help: 'Key and consumer changes made through the admin API (source "api") or by this process for the CLI (source "cli"), by action (consumer.<action> for a consumer).',
    labelNames: ['action', 'source'] as const,
    registers: [this.registry],
  });

  readonly adminAuthFailures = new Counter({
    name: 'tollgate_admin_auth_failures_total',
    help: 'Admin API requests refused for their token: missing, invalid, or throttled (too many failures from one address).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  // Webhook delivery (src/events/dispatcher.ts): counted on the events thread, reported to this registry by the main
  // thread (recordDeliveryCounts). The endpoint label is a configured webhook's or a registered endpoint's id.
  readonly eventsQueued = new Gauge({
    name: 'tollgate_events_queued',
    help: "Webhook events waiting in an endpoint's queue (retries and leased ones included), as this instance last saw it, by endpoint.",
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });

  // The metering export's runs, reported by the events thread (metering/metrics.ts). The destination label is the
  // checkpoint's id (events.metering.id, or the format and a hash of where it goes): one per config.
  readonly meteringEvents = new Counter({
    name: 'tollgate_metering_events_total',
    help: 'Metering events a destination acknowledged, by destination and kind (hour: usage.hour, correction).',
    labelNames: ['destination', 'kind'] as const,
    registers: [this.registry],
  });

  readonly meteringNotSent = new Counter({
    name: 'tollgate_metering_not_sent_total',
    help: 'Metering events not acknowledged, by destination and why: refused by it (sent again next run), or skipped (it cannot take them).',
    labelNames: ['destination', 'why'] as const,
    registers: [this.registry],
  });

  readonly meteringRuns = new Counter({
    name: 'tollgate_metering_runs_total',
    help: 'Metering export runs, by destination and outcome: complete, or stopped (the destination could not be reached).',
    labelNames: ['destination', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly meteringMark = new Gauge({
    name: 'tollgate_metering_mark_seconds',
    help: "The hour (unix time of its end) through which a destination acknowledged every key's usage: its lag behind now is how far billing is behind.",
    labelNames: ['destination'] as const,
    registers: [this.registry],
  });

  readonly eventsDelivered = new Counter({
    name: 'tollgate_events_delivered_total',
    help: 'Webhook events a receiver accepted (2xx), by endpoint.',
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });

  readonly eventsFailed = new Counter({
    name: 'tollgate_events_failed_total',
    help: 'Webhook events given up after the last attempt of the retry schedule (moved to the dead set, replayable), by endpoint.',
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });

  readonly eventsDropped = new Counter({
    name: 'tollgate_events_dropped_total',
    help: "Webhook events dropped unsent because the endpoint's queue was full (events.queue.maxPerEndpoint; the oldest go first), by endpoint.",
    labelNames: ['endpoint'] as const,
    registers: [this.registry],
  });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'tollgate_' });
  }
}
