// The events thread's own code (started by events-thread.ts through thread-host.ts): its own Redis connection, the
// outbound client, and the webhook dispatcher on them. Counters go to the host every second (thread-side emit()),
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
  maxPerEndpoint: data.maxPerEndpoint,
  schedule: tuning.delaysMs ? { delaysMs: tuning.delaysMs, minSpanMs: 0 } : DEFAULT_SCHEDULE,
  ...(tuning.pollMs !== undefined ? { pollMs: tuning.pollMs } : {}),
  ...(tuning.attemptTimeoutMs !== undefined ? { attemptTimeoutMs: tuning.attemptTimeoutMs } : {}),
  logger,
  onCounts: (counts) => thread.emit({ kind: 'delivery-counts', counts } satisfies EventsThreadEvent),
});
dispatcher.start();

thread.serve<never>({
  answer: () => {
    throw new Error('the events thread takes no calls');
  },
  close: async () => {
    await dispatcher.stop();
    await client.close();
    await connection.close();
  },
});
