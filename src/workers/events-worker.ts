// The events thread's own code (started by events-thread.ts through thread-host.ts): its own Redis connection, the
// outbound client, and the webhook dispatcher on them; with events.metering, the continuous metering export too (its
// runs read the ledger and key records on this connection, a few reads in flight at once). Counters go to the host every second (thread-side emit()),
// where they become Prometheus metrics. On 'close' the dispatcher stops (attempts in flight end), then the client and
// the connection close, and the thread ends.
import type { LevelWithSilent } from 'pino';
import { Dispatcher } from '../events/dispatcher.js';
import { createLogger } from '../observability/logger.js';
import { AddressGuard } from '../outbound/address-guard.js';
import { OutboundClient } from '../outbound/client.js';
import { Keyspace } from '../storage/keyspace.js';
import { connectRedis } from '../storage/redis.js';
import { DEFAULT_SCHEDULE } from '../events/schedule.js';
import type { EventsThreadData, EventsThreadEvent } from './events-thread.js';
import { threadSide } from './thread-side.js';
import { RedisConsumerStore } from '../consumers/redis-store.js';
import { KeyRecords } from '../keys/records.js';
import { RedisKeyStore } from '../keys/redis-store.js';
import { ExportBusy, startMetering } from '../metering/export.js';
import { runSummary } from '../metering/metrics.js';
import { readLimit } from '../storage/read-limit.js';
import { RedisUsageStore } from '../usage/store.js';

const thread = threadSide<EventsThreadData>();
const data = thread.data;
const logger = createLogger(data.logLevel as LevelWithSilent).child({ thread: 'events' });
const connection = connectRedis({ redis: data.redis, commandTimeoutMs: data.commandTimeoutMs, purpose: 'events', logger });
const client = new OutboundClient();
const tuning = data.tuning ?? {};
const dispatcher = new Dispatcher({
  redis: connection.client,
  keyspace: new Keyspace(data.prefix),
  endpoints: data.webhooks,
  poster: client,
  guard: new AddressGuard({ allow: data.allowTargets }),
  defaultThresholds: data.thresholds,
  // A registration or deletion on any instance is read at once (the 10 s re-read stays as the fallback).
  registryFeed: connection,
  maxPerEndpoint: data.maxPerEndpoint,
  schedule: tuning.delaysMs ? { delaysMs: tuning.delaysMs, minSpanMs: 0 } : DEFAULT_SCHEDULE,
  ...(tuning.pollMs !== undefined ? { pollMs: tuning.pollMs } : {}),
  ...(tuning.attemptTimeoutMs !== undefined ? { attemptTimeoutMs: tuning.attemptTimeoutMs } : {}),
  logger,
  onCounts: (counts) => thread.emit({ kind: 'delivery-counts', counts } satisfies EventsThreadEvent),
});
dispatcher.start();

const metering = data.metering ? startExport(data.metering) : undefined;

function startExport(m: NonNullable<typeof data.metering>): { stop(): Promise<void> } {
  const keyspace = new Keyspace(data.prefix);
  // Paced like the report thread's reads: the export shares Redis with every limit check.
  const reads = readLimit(8);
  return startMetering(
    m.settings,
    {
      redis: connection.client,
      keyspace,
      usage: new RedisUsageStore(connection.client, keyspace, reads),
      keys: new KeyRecords(new RedisKeyStore(connection, keyspace), reads),
      consumers: new RedisConsumerStore(connection, keyspace),
      source: m.source,
      retentionDays: m.retentionDays,
      poster: client,
    },
    {
      onReport: (r) => {
        thread.emit({ kind: 'metering-run', run: runSummary(r) } satisfies EventsThreadEvent);
        const line = {
          destination: r.destination,
          from: r.from,
          through: r.through,
          hours: r.hours,
          events: r.events,
          corrections: r.corrections,
          batches: r.batches,
        };
        if (r.failed) logger.warn({ ...line, error: r.failed }, 'metering export stopped; the next run goes on from the checkpoint');
        else if (r.refused.length || r.skipped.length)
          logger.warn({ ...line, refused: r.refused.slice(0, 20), skipped: r.skipped.slice(0, 20) }, 'metering export: events refused or skipped');
        else if (r.batches > 0) logger.info(line, 'metering export sent');
      },
      // Another instance's thread is sending to the destination now: one run at a time across the fleet.
      onError: (err) =>
        err instanceof ExportBusy ? logger.debug({ err: err.message }, 'metering export skipped') : logger.error({ err }, 'metering export failed'),
    },
  );
}

thread.serve<never>({
  answer: () => {
    throw new Error('the events thread takes no calls');
  },
  close: async () => {
    await metering?.stop();
    await dispatcher.stop();
    await client.close();
    await connection.close();
  },
});
