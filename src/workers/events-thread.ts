// The events thread, host side: webhook delivery (events/dispatcher.ts) runs on a worker thread of its own, started
// with the gateway and kept (a thread that dies is started again: thread-host.ts), so that reading the outbox,
// signing and posting events, and the queues' Redis scripts never take turns of the event loop that serves requests.
// The thread holds its own Redis connection (named tollgate-events) and reports its counters here every second, where
// they become the Prometheus metrics (tollgate_events_*). Its heap is bounded: a queue's events are in Redis, the
// thread holds only the attempts in flight.
import { defaultEventSource, type EventsConfig, type MeteringConfig } from '../config/sections/events.js';
import { configuredEndpoint, recordDeliveryCounts, type DeliveryCounts, type DeliveryEndpoint } from '../events/dispatcher.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RedisTopology } from '../storage/redis.js';
import { ThreadHost, threadEntry } from './thread-host.js';
import { recordMeteringRun, type RunSummary } from '../metering/metrics.js';

/** What the thread is started with (plain data: structured-cloned). */
export interface EventsThreadData {
  redis: RedisTopology;
  prefix: string;
  commandTimeoutMs: number;
  /** The configured webhooks. */
  webhooks: DeliveryEndpoint[];
  /** CIDRs registered endpoints may point into (events.allowTargets). */
  allowTargets: string[];
  /** events.thresholds: the percents a registered endpoint that asked for none takes. */
  thresholds: number[];
  maxPerEndpoint: number;
  /** Its heap (V8's old generation), in MB. */
  memoryMb: number;
  logLevel: string;
  /**
   * The continuous metering export (events.metering), run on this thread every `every` seconds: its settings, the
   * CloudEvents source and how far back the ledger goes (usage.retentionDays). Absent: no export.
   */
  metering?: { settings: MeteringConfig; source: string; retentionDays: number };
  /** Tests: shorter retry delays, polls and timeouts than production's. */
  tuning?: {
    delaysMs?: number[];
    pollMs?: number;
    attemptTimeoutMs?: number;
  };
}

/** Messages the thread sends of its own accord. */
export type EventsThreadEvent = { kind: 'delivery-counts'; counts: DeliveryCounts[] } | { kind: 'metering-run'; run: RunSummary };

/** The thread's Worker name; its Redis connection is named tollgate-events too. */
export const EVENTS_THREAD_NAME = 'tollgate-events';
export const EVENTS_THREAD_MEMORY_MB = 64;

/** The thread's data from the `events` section and the Redis the gateway runs on. */
export function eventsThreadData(
  events: EventsConfig,
  redis: { topology: RedisTopology; prefix: string; commandTimeoutMs: number },
  logLevel = 'info',
  usage: { retentionDays: number } = { retentionDays: 35 },
): EventsThreadData {
  return {
    ...(events.metering
      ? {
          metering: {
            settings: JSON.parse(JSON.stringify(events.metering)) as MeteringConfig,
            source: events.source ?? defaultEventSource(redis.prefix),
            retentionDays: usage.retentionDays,
          },
        }
      : {}),
    redis: redis.topology,
    prefix: redis.prefix,
    commandTimeoutMs: redis.commandTimeoutMs,
    webhooks: events.webhooks.map((w) => {
      // A configured webhook takes quota.threshold at events.thresholds only, not at the percents a consumer's own
      // endpoints asked for.
      const ep = { ...configuredEndpoint(w), thresholds: events.thresholds };
      // Plain data only across the thread boundary.
      return JSON.parse(JSON.stringify(ep)) as DeliveryEndpoint;
    }),
    allowTargets: [...events.allowTargets],
    thresholds: [...events.thresholds],
    maxPerEndpoint: events.queue.maxPerEndpoint,
    memoryMb: EVENTS_THREAD_MEMORY_MB,
    logLevel,
  };
}

export class EventsThread {
  private readonly host: ThreadHost<never, EventsThreadData>;

  constructor(data: EventsThreadData, metrics: Metrics | undefined, logger?: Logger) {
    this.host = new ThreadHost({
      name: EVENTS_THREAD_NAME,
      label: 'events thread',
      entry: threadEntry(import.meta.url, './events-worker.js'),
      data,
      mode: 'long-running',
      resourceLimits: { maxOldGenerationSizeMb: data.memoryMb, maxYoungGenerationSizeMb: 16 },
      // Attempts in flight end within their 15 s; the dispatcher stops waiting for them a little later.
      closeGraceMs: 20_000,
      logger,
      onEvent: (e) => {
        const event = e as EventsThreadEvent;
        if (event?.kind === 'delivery-counts' && metrics) recordDeliveryCounts(metrics, event.counts);
        if (event?.kind === 'metering-run' && metrics) recordMeteringRun(metrics, event.run);
      },
    });
  }

  /** Starts the thread (throws when its code is missing: the gateway was not built). */
  start(): void {
    this.host.start();
  }

  get running(): boolean {
    return this.host.running;
  }

  /** Stops delivery: the thread finishes its attempts in flight (at most graceMs) and ends. */
  stop(graceMs?: number): Promise<void> {
    return this.host.stop(graceMs);
  }
}
