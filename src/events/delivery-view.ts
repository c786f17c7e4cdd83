// What the operator sees of and does to each endpoint's delivery queue (src/events/endpoint-queue.ts): its figures,
// its undelivered (dead) events a page at a time, oldest first, a replay of all or some of them, and enabling a
// disabled endpoint. The admin API's /events/endpoints routes read the queues through this.
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';
import type { Clock } from '../util/clock.js';
import { EndpointQueue, type QueueStats } from './endpoint-queue.js';

/** One endpoint's delivery as the operator reads it. */
export interface DeliveryState {
  queued: number;
  delivered: number;
  /** Events given up after their last attempt (since the queue was first used). */
  failed: number;
  dropped: number;
  /** Events in the dead set now: replayable. */
  undelivered: number;
  disabled: boolean;
  disabledReason?: string;
  lastError?: string;
  lastStatus?: number;
  /** When the earliest queued event is due (ms). */
  oldestDueAt?: number;
}

export interface UndeliveredEvent {
  id: string;
  type: string;
  subject?: string;
  time?: string;
  attempts: number;
  firstAttemptAt?: number;
  deadAt?: number;
  lastError?: string;
}

/** A page's cursor: where the last event of the page before stood in the dead set (its time given up, its id). */
interface Cursor {
  at: number;
  id: string;
}

const encode = (c: Cursor): string => Buffer.from(JSON.stringify([c.at, c.id])).toString('base64url');

/** The cursor, or RangeError when it is not one this gave. */
function decode(text: string): Cursor {
  try {
    const [at, id] = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof at === 'number' && Number.isFinite(at) && typeof id === 'string' && encode({ at, id }) === text) return { at, id };
  } catch {
    // below
  }
  throw new RangeError('not a cursor this API gave');
}

/** Dead events sharing one time given up that a page can step over (ties past this are rare: ms resolution). */
const TIE_ROOM = 100;

export class DeliveryView {
  constructor(
    private readonly client: RedisCommands,
    private readonly ks: Keyspace,
    private readonly opts: { clock: Clock; maxPerEndpoint: () => number },
  ) {}

  private queue(endpoint: string): EndpointQueue {
    return new EndpointQueue(this.client, this.ks, endpoint, { maxPerEndpoint: this.opts.maxPerEndpoint() });
  }

  async state(endpoint: string): Promise<DeliveryState> {
    return stateOf(await this.queue(endpoint).stats(0));
  }

  /** Dead events, oldest given up first, after the cursor; `next` while more remain. */
  async undelivered(endpoint: string, page: { limit: number; cursor?: string }): Promise<{ events: UndeliveredEvent[]; next?: string }> {
    const after = page.cursor === undefined ? undefined : decode(page.cursor);
    const flat = (await this.client.zrange(
      this.ks.endpointDead(endpoint),
      after === undefined ? '-inf' : String(after.at),
      '+inf',
      'BYSCORE',
      'LIMIT',
      0,
      page.limit + 1 + TIE_ROOM,
      'WITHSCORES',
    )) as string[];
    const entries: Cursor[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const e = { id: flat[i]!, at: Number(flat[i + 1]) };
      // Same time as the cursor: ZRANGE orders ties by id, so those up to the cursor's id were on earlier pages.
      if (after && e.at === after.at && e.id <= after.id) continue;
      entries.push(e);
    }
    const shown = entries.slice(0, page.limit);
    const records = shown.length ? await this.client.hmget(this.ks.endpointEvents(endpoint), ...shown.map((e) => e.id)) : [];
    const events = shown.map((e, i) => eventOf(e, records[i] ?? null));
    const last = shown[shown.length - 1];
    return { events, ...(entries.length > shown.length && last ? { next: encode(last) } : {}) };
  }

  /** Every dead event (no ids) or those named, queued again, due now; ids not in the dead set are listed. */
  async replay(endpoint: string, ids?: readonly string[]): Promise<{ replayed: number; notFound: string[] }> {
    const queue = this.queue(endpoint);
    const now = this.opts.clock.now();
    if (ids === undefined) return { replayed: await queue.replay(now), notFound: [] };
    let replayed = 0;
    const notFound: string[] = [];
    for (const id of new Set(ids)) {
      if ((await queue.replay(now, id)) === 1) replayed++;
      else notFound.push(id);
    }
    return { replayed, notFound };
  }

  enable(endpoint: string): Promise<void> {
    return this.queue(endpoint).enable();
  }
}

function stateOf(s: QueueStats): DeliveryState {
  return {
    queued: s.queued,
    delivered: s.delivered,
    failed: s.failed,
    dropped: s.dropped,
    undelivered: s.dead,
    disabled: s.disabled,
    ...(s.disabledReason !== undefined ? { disabledReason: s.disabledReason } : {}),
    ...(s.lastError !== undefined ? { lastError: s.lastError } : {}),
    ...(s.lastStatus !== undefined ? { lastStatus: s.lastStatus } : {}),
    ...(s.nextDueAt !== undefined ? { oldestDueAt: s.nextDueAt } : {}),
  };
}

/** A dead event from its record (the CloudEvent inside it read for type, subject and time); what cannot be read is left out. */
function eventOf(e: Cursor, raw: string | null): UndeliveredEvent {
  const out: UndeliveredEvent = { id: e.id, type: 'unknown', attempts: 0, deadAt: e.at };
  if (!raw) return out;
  try {
    const r = JSON.parse(raw) as { event?: string; attempts?: number; firstAt?: number; lastError?: string; diedAt?: number };
    out.attempts = Number(r.attempts ?? 0);
    if (typeof r.firstAt === 'number') out.firstAttemptAt = r.firstAt;
    if (typeof r.diedAt === 'number') out.deadAt = r.diedAt;
    if (typeof r.lastError === 'string' && r.lastError !== '') out.lastError = r.lastError;
    const ce = JSON.parse(String(r.event)) as { type?: unknown; subject?: unknown; time?: unknown };
    if (typeof ce.type === 'string') out.type = ce.type;
    if (typeof ce.subject === 'string') out.subject = ce.subject;
    if (typeof ce.time === 'string') out.time = ce.time;
  } catch {
    // A record these scripts did not write: shown by its id alone.
  }
  return out;
}
