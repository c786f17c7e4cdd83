// One webhook endpoint's delivery queue in Redis: the events still to deliver (with when each is due next), the dead
// ones (given up after the schedule's last attempt, kept for a replay), and the endpoint's status and counters. Every
// change is one Lua script (src/events/lua/, each documenting its KEYS, ARGV and reply) over the endpoint's five keys,
// which share the hash tag {ep:<endpoint id>}: atomic across every gateway instance, one slot on Redis Cluster.
//
// The queue is bounded (events.queue.maxPerEndpoint): an endpoint that is down for days must not fill Redis, so past
// the bound the oldest queued event is dropped, counted and logged. A claimed event's due time moves to the end of its
// lease (now + 60 s), so another instance does not send it meanwhile; the lease's end is also the token its outcome is
// settled with, so a late outcome from an instance whose lease ran out changes nothing.
import { readFileSync } from 'node:fs';
import type { Logger } from '../observability/logger.js';
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';

const lua = (name: string): string => readFileSync(new URL(`./lua/${name}`, import.meta.url), 'utf8');
const SCRIPTS = {
  tollgateEventsEnqueue: lua('enqueue.lua'),
  tollgateEventsClaim: lua('claim.lua'),
  tollgateEventsSettle: lua('settle.lua'),
  tollgateEventsReplay: lua('replay.lua'),
  tollgateEventsStats: lua('stats.lua'),
} as const;
type ScriptName = keyof typeof SCRIPTS;
type ScriptCommand = (...args: string[]) => Promise<unknown>;
type WithScripts = RedisCommands & Record<ScriptName, ScriptCommand>;

/** Events queued per endpoint at most, by default (events.queue.maxPerEndpoint). */
export const DEFAULT_MAX_PER_ENDPOINT = 10_000;
/** Dead events kept per endpoint at most, by default: the oldest are forgotten past it. */
export const DEFAULT_MAX_DEAD = 1_000;
/** How long a claimed event is held for its attempt (15 s at most) before another instance may send it. */
export const LEASE_MS = 60_000;

/** The scripts on a client, all defined at its first use (see limits/redis-store.ts's withCheck for why never later). */
function withScripts(redis: RedisCommands): WithScripts {
  if (!('tollgateEventsClaim' in redis)) {
    for (const [name, script] of Object.entries(SCRIPTS)) redis.defineCommand(name, { lua: script, numberOfKeys: 5 });
  }
  return redis as WithScripts;
}

/** What the queue keeps of an event (the `ev` hash's value, JSON). */
export interface QueuedRecord {
  /** The CloudEvent as JSON text, sent byte for byte on every attempt. */
  event: string;
  /** Attempts made. */
  attempts: number;
  /** When it was queued (or replayed): the schedule counts from here (ms). */
  firstAt: number;
  lastError?: string;
  lastStatus?: number;
  /** When the last attempt ended (ms). */
  lastAt?: number;
  /** When it was given up (ms): dead events only. */
  diedAt?: number;
}

/** An event claimed for one attempt. */
export interface ClaimedEvent extends QueuedRecord {
  id: string;
  /** The claim's lease end (ms): the token its outcome is settled with. */
  lease: number;
}

export interface Claim {
  events: ClaimedEvent[];
  /** The earliest due time left (ms), if anything is queued. */
  nextDueAt: number | undefined;
  queued: number;
  disabled: boolean;
}

export interface DeadEvent extends QueuedRecord {
  id: string;
}

/** An endpoint's queue for the dashboard and the admin API. */
export interface QueueStats {
  endpoint: string;
  /** Events waiting (leased ones included). */
  queued: number;
  /** Events in the dead set (replayable). */
  dead: number;
  /** Counters since the queue was first used: events queued, delivered, given up (failed), dropped by the bound. */
  enqueued: number;
  delivered: number;
  failed: number;
  dropped: number;
  disabled: boolean;
  disabledReason?: string;
  disabledAt?: number;
  lastError?: string;
  lastErrorAt?: number;
  lastStatus?: number;
  lastDeliveredAt?: number;
  /** The earliest due time (ms). */
  nextDueAt?: number;
  /** When the oldest queued event was queued (ms). */
  oldestQueuedAt?: number;
  /** The most recently dead events, newest first (as many as asked for). */
  recentDead: DeadEvent[];
}

export interface EndpointQueueOptions {
  maxPerEndpoint?: number;
  maxDead?: number;
  logger?: Logger;
  /** Told of every event dropped by the bound (the dispatcher counts them for the metrics). */
  onDropped?: (count: number) => void;
}

/** How an attempt failed, as the queue records it. */
export interface Failure {
  now: number;
  /** What the dashboard shows: "HTTP 500", "timeout after 15 s", ... */
  error: string;
  /** The HTTP status answered, when one was. */
  status?: number | undefined;
}

function parseRecord(text: string): QueuedRecord {
  const r = JSON.parse(text) as Partial<QueuedRecord>;
  // cjson writes an integer-valued number as such, but a record read back is still checked for its one needed field.
  if (typeof r.event !== 'string') throw new Error('webhook queue record without its event');
  return { ...r, event: r.event, attempts: Number(r.attempts ?? 0), firstAt: Number(r.firstAt ?? 0) };
}

/** A record's firstAt, or undefined for one that is unreadable (the figures are shown all the same). */
function firstAtOf(text: string): number | undefined {
  try {
    return parseRecord(text).firstAt;
  } catch {
    return undefined;
  }
}

const num = (v: string | undefined): number | undefined => (v === undefined || v === '' ? undefined : Number(v));

export class EndpointQueue {
  private readonly redis: WithScripts;
  private readonly keys: string[];
  readonly maxPerEndpoint: number;
  readonly maxDead: number;

  constructor(
    redis: RedisCommands,
    ks: Keyspace,
    readonly endpoint: string,
    private readonly opts: EndpointQueueOptions = {},
  ) {
    // Its names carry {ep:<id>}: braces or control characters in the id would move or break the hash tag.
    if (!/^[^{}\s\p{Cc}]{1,200}$/u.test(endpoint)) throw new Error(`webhook endpoint id not usable in a Redis name: ${JSON.stringify(endpoint)}`);
    this.redis = withScripts(redis);
    this.keys = [ks.endpointDue(endpoint), ks.endpointEvents(endpoint), ks.endpointDead(endpoint), ks.endpointState(endpoint), ks.endpointQueued(endpoint)];
    this.maxPerEndpoint = Math.max(1, opts.maxPerEndpoint ?? DEFAULT_MAX_PER_ENDPOINT);
    this.maxDead = Math.max(0, opts.maxDead ?? DEFAULT_MAX_DEAD);
  }

  /**
   * Queues an event, due now. False when it is already queued or dead here (an outbox entry read twice). Past the
   * bound the oldest queued events are dropped: counted in the state's `dropped`, logged, and told to onDropped.
   */
  async enqueue(id: string, event: string, now: number): Promise<boolean> {
    const record: QueuedRecord = { event, attempts: 0, firstAt: now };
    const reply = (await this.redis.tollgateEventsEnqueue(...this.keys, id, JSON.stringify(record), String(now), String(this.maxPerEndpoint))) as [
      number,
      ...string[],
    ];
    this.dropped(reply.slice(1) as string[]);
    return reply[0] === 1;
  }

  /** Claims up to `limit` due events, each leased until now + leaseMs. Nothing while the endpoint is disabled. */
  async claim(now: number, limit: number, leaseMs = LEASE_MS): Promise<Claim> {
    const lease = now + leaseMs;
    const reply = (await this.redis.tollgateEventsClaim(...this.keys, String(now), String(lease), String(limit))) as [string, number, number, ...string[]];
    const events: ClaimedEvent[] = [];
    for (let i = 3; i + 1 < reply.length; i += 2) {
      const id = reply[i] as string;
      try {
        events.push({ ...parseRecord(reply[i + 1] as string), id, lease });
      } catch (err) {
        // Not a record these scripts wrote: given up at once rather than claimed again every minute.
        this.opts.logger?.error({ endpoint: this.endpoint, event: id, err }, 'webhook queue record unreadable: given up');
        await this.settle({ id, lease }, 'dead', { now, error: 'record unreadable' });
      }
    }
    return { events, nextDueAt: num(reply[0]), queued: Number(reply[1]), disabled: reply[2] === 1 };
  }

  /** The event reached its receiver (2xx): removed, counted delivered. */
  async delivered(e: Pick<ClaimedEvent, 'id' | 'lease'>, now: number, status: number): Promise<void> {
    await this.settle(e, 'delivered', { now, error: '', status });
  }

  /** The attempt failed: due again at dueAt, the attempt counted. False when the lease was no longer this attempt's. */
  retry(e: Pick<ClaimedEvent, 'id' | 'lease'>, failure: Failure & { dueAt: number }): Promise<boolean> {
    return this.settle(e, 'retry', failure);
  }

  /** The schedule is over: the event moves to the dead set (bounded), counted failed. */
  dead(e: Pick<ClaimedEvent, 'id' | 'lease'>, failure: Failure): Promise<boolean> {
    return this.settle(e, 'dead', failure);
  }

  /**
   * The receiver said 410 Gone: the endpoint is disabled (with the reason and time) until enabled again; the event
   * stays queued, due first.
   */
  disabledBy(e: Pick<ClaimedEvent, 'id' | 'lease'>, failure: Failure & { reason: string }): Promise<boolean> {
    return this.settle(e, 'disable', failure);
  }

  private async settle(
    e: Pick<ClaimedEvent, 'id' | 'lease'>,
    outcome: 'delivered' | 'retry' | 'dead' | 'disable',
    f: Failure & { dueAt?: number; reason?: string },
  ): Promise<boolean> {
    const reply = await this.redis.tollgateEventsSettle(
      ...this.keys,
      e.id,
      String(e.lease),
      outcome,
      String(f.now),
      String(f.dueAt ?? ''),
      f.error,
      f.status === undefined ? '' : String(f.status),
      String(this.maxDead),
      f.reason ?? '',
    );
    return reply === 1;
  }

  /**
   * Dead events back in the queue, due now, their schedule started over: one (by id) or all. Returns how many; the
   * bound applies as on enqueue.
   */
  async replay(now: number, id?: string): Promise<number> {
    const reply = (await this.redis.tollgateEventsReplay(...this.keys, String(now), String(this.maxPerEndpoint), id ?? '')) as [number, ...string[]];
    this.dropped(reply.slice(1) as string[]);
    return reply[0];
  }

  /** Disables the endpoint (an admin's decision, or a 410): nothing is sent until enable(); events still queue. */
  async disable(reason: string, now: number): Promise<void> {
    await this.redis.hset(this.keys[3]!, 'disabled', '1', 'disabledReason', reason, 'disabledAt', String(now));
  }

  /** Enables the endpoint again: its queued events are sent as they fall due. */
  async enable(): Promise<void> {
    await this.redis.hdel(this.keys[3]!, 'disabled', 'disabledReason', 'disabledAt');
  }

  /** The queue's figures at one instant, with the `recentDead` most recently dead events. */
  async stats(recentDead = 0): Promise<QueueStats> {
    const [flat, queued, dead, nextDue, oldest, recent] = (await this.redis.tollgateEventsStats(...this.keys, String(recentDead))) as [
      string[],
      number,
      number,
      string,
      string,
      string[],
    ];
    const state: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) state[flat[i]!] = flat[i + 1]!;
    const recentDeadEvents: DeadEvent[] = [];
    for (let i = 0; i + 1 < recent.length; i += 2) {
      try {
        recentDeadEvents.push({ ...parseRecord(recent[i + 1]!), id: recent[i]! });
      } catch {
        // Unreadable: not listed (claim gives such records up).
      }
    }
    const stats: QueueStats = {
      endpoint: this.endpoint,
      queued,
      dead,
      enqueued: num(state.enqueued) ?? 0,
      delivered: num(state.delivered) ?? 0,
      failed: num(state.failed) ?? 0,
      dropped: num(state.dropped) ?? 0,
      disabled: state.disabled === '1',
      recentDead: recentDeadEvents,
    };
    const optional = {
      disabledReason: state.disabledReason,
      disabledAt: num(state.disabledAt),
      lastError: state.lastError,
      lastErrorAt: num(state.lastErrorAt),
      lastStatus: num(state.lastStatus),
      lastDeliveredAt: num(state.lastDeliveredAt),
      nextDueAt: num(nextDue),
      oldestQueuedAt: oldest ? firstAtOf(oldest) : undefined,
    };
    for (const [k, v] of Object.entries(optional)) if (v !== undefined) Object.assign(stats, { [k]: v });
    return stats;
  }

  private dropped(ids: string[]): void {
    if (ids.length === 0) return;
    this.opts.onDropped?.(ids.length);
    this.opts.logger?.warn(
      { endpoint: this.endpoint, dropped: ids.length, events: ids.slice(0, 10), maxPerEndpoint: this.maxPerEndpoint },
      'webhook queue full: the oldest events dropped',
    );
  }
}
