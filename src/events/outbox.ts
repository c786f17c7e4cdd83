// The outbox: where every event is written once, on Redis, for the dispatcher to fan out to the endpoints. One script
// (lua/publish.lua) sets the event id's seen marker only if absent (kept 40 days) and appends the entry to the stream
// (XADD MAXLEN ~) in the same atomic step, so two instances, or a retry, that publish the same deterministic id
// (types.ts) leave one entry. The stream's consumer group is the dispatcher's.
import { readFileSync } from 'node:fs';
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';
import { DAY_MS } from '../util/time.js';
import type { CloudEvent, EventDraft } from './types.js';

// Copied next to the build by `npm run build`, like src/limits/lua/; read once when this module loads.
const PUBLISH_SCRIPT = readFileSync(new URL('./lua/publish.lua', import.meta.url), 'utf8');

/** The outbox stream's consumer group, the dispatcher's. */
export const OUTBOX_GROUP = 'dispatch';
/** The stream's approximate bound (XADD MAXLEN ~). */
export const OUTBOX_MAX_LEN = 100_000;
/** How long an event id is remembered: a publish of the same id within it appends nothing. */
export const SEEN_TTL_MS = 40 * DAY_MS;

/**
 * One outbox entry's fields (the stream entry, in this order): the event id and type, what the dispatcher filters
 * endpoints by (consumer, key, plan: '' when none), the CloudEvent as JSON text, and for quota.threshold its percent.
 */
export interface OutboxEntry {
  id: string;
  type: string;
  consumer: string;
  key: string;
  plan: string;
  ce: string;
  percent?: string;
}

/** The entry of a draft and its CloudEvent. */
export function outboxEntry(draft: EventDraft, ce: CloudEvent): OutboxEntry {
  return {
    id: draft.id,
    type: draft.type,
    consumer: draft.consumer ?? '',
    key: draft.key ?? '',
    plan: draft.plan ?? '',
    ce: JSON.stringify(ce),
    ...(draft.percent !== undefined ? { percent: String(draft.percent) } : {}),
  };
}

/** Where the producer hands events: the Redis outbox, or a test's own. */
export interface EventSink {
  /** Appends the entry unless its id was published before: the stream entry's id, or null when it was. */
  publish(entry: OutboxEntry): Promise<string | null>;
}

export class RedisOutbox implements EventSink {
  /**
   * `redis`: a connection whose commands have their deadline (storage/command-deadline.ts): the request path's, with
   * redis.commandTimeoutMs, since a publish must never wait longer than a limit check would.
   */
  constructor(
    private readonly redis: RedisCommands,
    private readonly ks: Keyspace,
    private readonly opts: { maxLen?: number; seenTtlMs?: number } = {},
  ) {}

  async publish(entry: OutboxEntry): Promise<string | null> {
    const fields: string[] = [];
    for (const [name, value] of Object.entries(entry)) if (value !== undefined) fields.push(name, value);
    // EVAL, not a script command defined on the client: the client is the request path's, auto-pipelined, and a
    // command defined on it while a batch is pending breaks that batch (limits/redis-store.ts, withCheck). Events are
    // rare (a threshold, a ban), so sending the script's text with each costs little.
    const added = (await this.redis.eval(
      PUBLISH_SCRIPT,
      2,
      this.ks.eventsOutbox(),
      this.ks.eventSeen(entry.id),
      this.opts.seenTtlMs ?? SEEN_TTL_MS,
      this.opts.maxLen ?? OUTBOX_MAX_LEN,
      ...fields,
    )) as string | null;
    return added ?? null;
  }
}
