// Webhook delivery, on the events thread: the dispatcher reads the outbox stream (events:{outbox}) as consumer group
// `dispatch`, puts each entry into the queue of every endpoint it is for (types, filter; a registered endpoint only
// gets its own consumer's events), and acknowledges it once every queue has it. Then one loop per endpoint claims
// that endpoint's due events and attempts them, a few at a time (4 by default), so a receiver that is down or slow
// holds up only its own events. Entries another instance read and never acknowledged (it died) are claimed after 60 s
// idle (XAUTOCLAIM); events an instance claimed and never settled come back when their lease ends. Delivery is at least
// once: a receiver dedupes by webhook-id.
import { hostname } from 'node:os';
import type { Logger } from '../observability/logger.js';
import type { AddressGuard } from '../outbound/address-guard.js';
import type { Metrics } from '../observability/metrics.js';
import type { Keyspace } from '../storage/keyspace.js';
import { listenOn } from '../storage/change-feed.js';
import type { RedisCommands, RedisConnection, RedisSubscriber } from '../storage/redis.js';
import { systemClock, type Clock } from '../util/clock.js';
import { ATTEMPT_TIMEOUT_MS, attemptDelivery, type AttemptOutcome, type WebhookPoster } from './attempt.js';
import { EndpointQueue, LEASE_MS, type ClaimedEvent } from './endpoint-queue.js';
import { OUTBOX_GROUP } from './outbox.js';
import { DEFAULT_SCHEDULE, nextAttemptDelay, type RetrySchedule } from './schedule.js';
import { WebhookSigner } from './signing.js';

/** Attempts in flight per endpoint at most. */
export const DEFAULT_CONCURRENCY = 4;
/**
 * An endpoint whose last `concurrency` attempts all failed rests this long before it is tried again, with one event
 * (a probe); each probe that fails doubles the rest, up to MAX_BACKOFF_MS. A delivery ends the rest.
 */
export const BACKOFF_MS = 1_000;
export const MAX_BACKOFF_MS = 30_000;
/** An outbox entry read by an instance and not acknowledged for this long is taken over (its reader is gone). */
export const CLAIM_IDLE_MS = 60_000;

/** An endpoint id as config/sections/events.ts allows it: it names the endpoint's Redis keys and its metrics. */
const ENDPOINT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Where events go: a configured webhook, or one a consumer registered (events:endpoints). */
export interface DeliveryEndpoint {
  id: string;
  url: string;
  /** Active signing secrets (whsec_...), newest first: each signs every delivery. */
  secrets: readonly string[];
  /** Event types it takes; undefined: every type. */
  types?: readonly string[] | undefined;
  /** Only events matching every list given. */
  filter?: { consumers?: readonly string[] | undefined; plans?: readonly string[] | undefined; keys?: readonly string[] | undefined } | undefined;
  /** A registered endpoint: the consumer it belongs to (it gets that consumer's events only), checked by the address guard. */
  consumer?: string | undefined;
  /**
   * The quota.threshold percents (the entry's `percent`) it takes: a configured webhook's are events.thresholds, a
   * registered endpoint's its own or else events.thresholds (the dispatcher's defaultThresholds); undefined: every one.
   * The producer also crosses percents other consumers' endpoints asked for: nobody else receives those.
   */
  thresholds?: readonly number[] | undefined;
}

/** One outbox stream entry as read (outbox.ts's OutboxEntry, with its stream id and percent as a number). */
export interface StreamEntry {
  /** The stream entry's id (for XACK). */
  streamId: string;
  /** The event id (the CloudEvent's). */
  id: string;
  type: string;
  consumer: string;
  key: string;
  plan: string;
  /** quota.threshold: the percent crossed. */
  percent?: number | undefined;
  /** The CloudEvent, JSON text. */
  ce: string;
}

/** Whether an outbox entry goes to an endpoint. */
export function endpointTakes(ep: DeliveryEndpoint, e: StreamEntry): boolean {
  if (ep.types && !ep.types.includes(e.type)) return false;
  if (ep.consumer !== undefined && e.consumer !== ep.consumer) return false;
  if (ep.thresholds && e.type === 'quota.threshold' && (e.percent === undefined || !ep.thresholds.includes(e.percent))) return false;
  const f = ep.filter;
  if (f?.consumers && !f.consumers.includes(e.consumer)) return false;
  if (f?.plans && !f.plans.includes(e.plan)) return false;
  if (f?.keys && !f.keys.includes(e.key)) return false;
  return true;
}

/** A configured webhook (events.webhooks[]) as an endpoint. */
export function configuredEndpoint(w: {
  id: string;
  url: string;
  secret?: string | undefined;
  secrets?: readonly string[] | undefined;
  types?: readonly string[] | undefined;
  filter?: DeliveryEndpoint['filter'];
}): DeliveryEndpoint {
  return { id: w.id, url: w.url, secrets: w.secrets ?? (w.secret ? [w.secret] : []), types: w.types, filter: w.filter };
}

/**
 * A registered endpoint's record (events:endpoints, id -> JSON): `{consumer, url, secrets | secret, types?,
 * thresholds?}`. Undefined for a record that lacks what delivery needs (logged by the caller).
 */
export function registeredEndpoint(id: string, json: string): DeliveryEndpoint | undefined {
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const strings = (v: unknown): string[] | undefined => (Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : undefined);
  const secrets = strings(r.secrets) ?? (typeof r.secret === 'string' ? [r.secret] : undefined);
  if (typeof r.consumer !== 'string' || typeof r.url !== 'string' || !secrets?.length || !ENDPOINT_ID.test(id)) return undefined;
  const thresholds = Array.isArray(r.thresholds) && r.thresholds.every((x) => typeof x === 'number') ? (r.thresholds as number[]) : undefined;
  return { id, url: r.url, secrets, consumer: r.consumer, types: strings(r.types), thresholds };
}

/** Per endpoint, what changed since the last report: the counters' increments, and the queue's length as last seen. */
export interface DeliveryCounts {
  endpoint: string;
  delivered: number;
  failed: number;
  dropped: number;
  /** Events queued, as the endpoint's last claim saw them (undefined: not seen since). */
  queued?: number;
}

/** Adds a report of the events thread to the Prometheus metrics (on the main thread). */
export function recordDeliveryCounts(metrics: Metrics, counts: readonly DeliveryCounts[]): void {
  for (const c of counts) {
    const labels = { endpoint: c.endpoint };
    if (c.delivered) metrics.eventsDelivered.inc(labels, c.delivered);
    if (c.failed) metrics.eventsFailed.inc(labels, c.failed);
    if (c.dropped) metrics.eventsDropped.inc(labels, c.dropped);
    if (c.queued !== undefined) metrics.eventsQueued.set(labels, c.queued);
  }
}

export interface DispatcherOptions {
  redis: RedisCommands;
  keyspace: Keyspace;
  /** The configured webhooks. */
  endpoints: readonly DeliveryEndpoint[];
  /** The percents (events.thresholds) a registered endpoint that asked for none takes. Absent: every percent. */
  defaultThresholds?: readonly number[];
  /** Whether endpoints registered in events:endpoints are read (and delivered to through `guard`). Default true. */
  registered?: boolean;
  poster: WebhookPoster;
  /** The address guard registered endpoints are called through (events.allowTargets). */
  guard?: AddressGuard;
  /** This instance's name in the consumer group: default host and process id. */
  consumerName?: string;
  maxPerEndpoint?: number;
  maxDead?: number;
  schedule?: RetrySchedule;
  random?: () => number;
  clock?: Clock;
  logger?: Logger;
  concurrency?: number;
  leaseMs?: number;
  attemptTimeoutMs?: number;
  claimIdleMs?: number;
  /** How long an idle loop sleeps at most before it looks again (another instance may have queued or settled). */
  pollMs?: number;
  /** The first rest of an endpoint whose attempts all fail (BACKOFF_MS), and the longest (MAX_BACKOFF_MS). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /**
   * Where to listen for registry changes (events:endpoints:changed, published by each registration and deletion): a
   * message makes the next turn read the registered endpoints again at once. Without it, or for a message lost while
   * the subscriber reconnects, the periodic read (registeredEveryMs) still catches up.
   */
  registryFeed?: Pick<RedisConnection, 'subscriber'>;
  /** How often the registered endpoints are read again in any case (default 10 s). */
  registeredEveryMs?: number;
  /** How often counts are reported (onCounts). */
  countsEveryMs?: number;
  onCounts?: (counts: DeliveryCounts[]) => void;
  /** How long stop() waits for attempts in flight (each is bounded by attemptTimeoutMs anyway). */
  stopTimeoutMs?: number;
}

/** A sleep that wake() or stop ends early. */
class Waker {
  private pending = false;
  private resolve: (() => void) | undefined;
  wake(): void {
    this.pending = true;
    this.resolve?.();
  }
  async sleep(ms: number): Promise<void> {
    if (this.pending || ms <= 0) {
      this.pending = false;
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref?.();
      this.resolve = done;
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
    });
    this.resolve = undefined;
    this.pending = false;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class Dispatcher {
  readonly consumerName: string;
  private readonly clock: Clock;
  private readonly loops = new Map<string, EndpointLoop>();
  /** Loops of endpoints no longer registered, finishing their attempts in flight. */
  private readonly retiring = new Set<Promise<void>>();
  private readonly counts = new Map<string, DeliveryCounts>();
  private readonly outboxWaker = new Waker();
  private stopped = false;
  private running: Promise<void> | undefined;
  private countsTimer: NodeJS.Timeout | undefined;
  private registeredAt = -Infinity;
  private registered: DeliveryEndpoint[] = [];
  private registrySub: RedisSubscriber | undefined;
  private lastErrorLog = 0;

  constructor(readonly opts: DispatcherOptions) {
    this.consumerName = opts.consumerName ?? `${hostname()}:${process.pid}`;
    this.clock = opts.clock ?? systemClock;
  }

  /** Starts reading the outbox and delivering; stop() ends it. */
  start(): void {
    if (this.running) return;
    for (const ep of this.opts.endpoints) this.loopFor(ep);
    if (this.opts.registryFeed && this.opts.registered !== false) {
      const changed = (): void => this.registryChanged();
      this.registrySub = listenOn(this.opts.registryFeed, this.opts.keyspace.eventEndpointsChanged(), { onMessage: changed, onReset: changed });
    }
    this.running = this.readOutbox();
    const every = this.opts.countsEveryMs ?? 1000;
    if (this.opts.onCounts) {
      this.countsTimer = setInterval(() => this.flushCounts(), every);
      this.countsTimer.unref?.();
    }
  }

  /** Stops reading, lets the attempts in flight end (at most stopTimeoutMs), and reports the last counts. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.registrySub?.disconnect();
    this.outboxWaker.wake();
    await this.running;
    await Promise.all([...this.loops.values()].map((l) => l.stop()));
    await Promise.all([...this.retiring]);
    if (this.countsTimer) clearInterval(this.countsTimer);
    this.flushCounts();
  }

  /**
   * The registry changed (an endpoint registered or deleted, on this instance or another): read it again before the
   * next outbox entries are queued. A read already under way started before the change, so it does not count.
   */
  registryChanged(): void {
    this.registeredAt = -Infinity;
    this.outboxWaker.wake();
  }

  /** The queue of an endpoint (the admin API's replay, enable and stats go through the same class). */
  queueOf(endpoint: string): EndpointQueue {
    return this.loops.get(endpoint)?.queue ?? this.newQueue(endpoint);
  }

  /** Counts one endpoint's change for the next report. */
  count(endpoint: string, what: 'delivered' | 'failed' | 'dropped', n = 1): void {
    this.countsOf(endpoint)[what] += n;
  }

  seenQueued(endpoint: string, queued: number): void {
    this.countsOf(endpoint).queued = queued;
  }

  private countsOf(endpoint: string): DeliveryCounts {
    let c = this.counts.get(endpoint);
    if (!c) this.counts.set(endpoint, (c = { endpoint, delivered: 0, failed: 0, dropped: 0 }));
    return c;
  }

  private flushCounts(): void {
    if (this.counts.size === 0 || !this.opts.onCounts) return;
    const counts = [...this.counts.values()];
    this.counts.clear();
    this.opts.onCounts(counts);
  }

  private newQueue(endpoint: string): EndpointQueue {
    return new EndpointQueue(this.opts.redis, this.opts.keyspace, endpoint, {
      maxPerEndpoint: this.opts.maxPerEndpoint,
      maxDead: this.opts.maxDead,
      logger: this.opts.logger,
      onDropped: (n) => this.count(endpoint, 'dropped', n),
    });
  }

  private loopFor(ep: DeliveryEndpoint): EndpointLoop {
    let loop = this.loops.get(ep.id);
    if (!loop) {
      loop = new EndpointLoop(this, ep, this.newQueue(ep.id));
      this.loops.set(ep.id, loop);
      loop.start();
    } else loop.endpoint = ep;
    return loop;
  }

  /** Logs a Redis or other failure of a loop, at most once every 10 s across the dispatcher. */
  logFailure(what: string, err: unknown, endpoint?: string): void {
    const now = Date.now();
    if (now - this.lastErrorLog < 10_000) return;
    this.lastErrorLog = now;
    this.opts.logger?.error({ err: errorText(err), ...(endpoint ? { endpoint } : {}) }, `webhook delivery: ${what}`);
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  get now(): number {
    return this.clock.now();
  }

  // --- the outbox ---

  private get pollMs(): number {
    return this.opts.pollMs ?? 1000;
  }

  private async readOutbox(): Promise<void> {
    const { redis, keyspace } = this.opts;
    const stream = keyspace.eventsOutbox();
    let groupReady = false;
    // After a restart under the same name: what this consumer read and never acknowledged, first (from this id on, so
    // an entry that cannot be queued now is not read again at once: autoclaim brings it back once idle).
    let ownPendingFrom: string | undefined = '0';
    let lastAutoclaim = -Infinity;
    const claimIdleMs = this.opts.claimIdleMs ?? CLAIM_IDLE_MS;
    while (!this.stopped) {
      try {
        if (!groupReady) {
          await redis.xgroup('CREATE', stream, OUTBOX_GROUP, '0', 'MKSTREAM').catch((err: unknown) => {
            if (!/BUSYGROUP/.test(errorText(err))) throw err;
          });
          groupReady = true;
        }
        await this.refreshRegistered();
        let entries: Array<[string, string[] | null]>;
        if (ownPendingFrom !== undefined) {
          entries = await this.readGroup(stream, ownPendingFrom);
          ownPendingFrom = entries.length === 0 ? undefined : entries[entries.length - 1]![0];
        } else if (Date.now() - lastAutoclaim >= claimIdleMs / 2) {
          lastAutoclaim = Date.now();
          entries = await this.autoclaim(stream, claimIdleMs);
          if (entries.length === 0) entries = await this.readGroup(stream, '>');
        } else {
          entries = await this.readGroup(stream, '>');
        }
        if (entries.length > 0) {
          // A change message may have come while the entries were read: they are queued by the registry after it.
          await this.refreshRegistered();
          await this.fanOut(stream, entries);
        } else await this.outboxWaker.sleep(this.pollMs);
      } catch (err) {
        if (/NOGROUP/.test(errorText(err))) groupReady = false;
        this.logFailure('reading the outbox failed', err);
        await this.outboxWaker.sleep(this.pollMs);
      }
    }
  }

  /** Entries of the group: new ones ('>'), or this consumer's pending ones after an id. */
  private async readGroup(stream: string, from: string): Promise<Array<[string, string[] | null]>> {
    const reply = (await this.opts.redis.xreadgroup('GROUP', OUTBOX_GROUP, this.consumerName, 'COUNT', 100, 'STREAMS', stream, from)) as Array<
      [string, Array<[string, string[] | null]>]
    > | null;
    return reply?.[0]?.[1] ?? [];
  }

  /** Entries idle past claimIdleMs in other consumers' hands (at most 10 pages of 100 per call). */
  private async autoclaim(stream: string, claimIdleMs: number): Promise<Array<[string, string[] | null]>> {
    const out: Array<[string, string[] | null]> = [];
    let cursor = '0-0';
    for (let page = 0; page < 10; page++) {
      const reply = (await this.opts.redis.xautoclaim(stream, OUTBOX_GROUP, this.consumerName, claimIdleMs, cursor, 'COUNT', 100)) as [
        string,
        Array<[string, string[] | null] | null>,
        string[]?,
      ];
      for (const e of reply[1] ?? []) if (e) out.push(e);
      cursor = reply[0];
      if (cursor === '0-0') break;
    }
    return out;
  }

  private async fanOut(stream: string, entries: Array<[string, string[] | null]>): Promise<void> {
    const endpoints = [...this.opts.endpoints, ...this.registered];
    const done: string[] = [];
    for (const [streamId, fields] of entries) {
      const entry = fields ? parseEntry(streamId, fields) : undefined;
      if (!entry) {
        // Trimmed away meanwhile (no fields), or not an entry the producer wrote: nothing to deliver.
        if (fields) this.opts.logger?.warn({ streamId }, 'webhook delivery: outbox entry without id, type or ce skipped');
        done.push(streamId);
        continue;
      }
      const targets = endpoints.filter((ep) => endpointTakes(ep, entry));
      try {
        const now = this.now;
        for (const ep of targets) {
          const loop = this.loopFor(ep);
          if (await loop.queue.enqueue(entry.id, entry.ce, now)) loop.wake();
        }
        done.push(streamId);
      } catch (err) {
        // Not acknowledged: read again once idle past claimIdleMs (autoclaim takes this consumer's own, too).
        this.logFailure('queueing an outbox entry failed', err);
      }
    }
    if (done.length > 0) await this.opts.redis.xack(stream, OUTBOX_GROUP, ...done);
  }

  private async refreshRegistered(): Promise<void> {
    if (this.opts.registered === false) return;
    const now = Date.now();
    if (now - this.registeredAt < (this.opts.registeredEveryMs ?? 10_000)) return;
    this.registeredAt = now;
    const records = await this.opts.redis.hgetall(this.opts.keyspace.eventEndpoints());
    const found: DeliveryEndpoint[] = [];
    for (const [id, json] of Object.entries(records)) {
      const ep = registeredEndpoint(id, json);
      if (ep && ep.thresholds === undefined && this.opts.defaultThresholds) ep.thresholds = this.opts.defaultThresholds;
      if (ep && !this.opts.endpoints.some((c) => c.id === id)) found.push(ep);
      else if (!ep) this.logFailure('a registered endpoint record is unreadable', new Error(`events:endpoints ${id}`), id);
    }
    const ids = new Set(found.map((e) => e.id));
    for (const old of this.registered) {
      const loop = this.loops.get(old.id);
      if (!ids.has(old.id) && loop) {
        // Unregistered: its loop ends (its queue stays in Redis, for a replay or until it is deleted).
        this.loops.delete(old.id);
        const stopping = loop.stop().finally(() => this.retiring.delete(stopping));
        this.retiring.add(stopping);
      }
    }
    this.registered = found;
    for (const ep of found) this.loopFor(ep);
  }
}

function parseEntry(streamId: string, fields: string[]): StreamEntry | undefined {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
  if (!f.id || !f.type || !f.ce) return undefined;
  const percent = f.percent === undefined || f.percent === '' ? undefined : Number(f.percent);
  return { streamId, id: f.id, type: f.type, consumer: f.consumer ?? '', key: f.key ?? '', plan: f.plan ?? '', percent, ce: f.ce };
}

/**
 * One endpoint's loop: claims its due events and attempts them, `concurrency` at a time. An endpoint that fails every
 * attempt (down, refusing, answering 5xx) is not sent each of its due events in turn, which for a full queue would be
 * thousands of attempts in every retry wave, each a connection, a signature and two scripts: once `concurrency`
 * attempts in a row have failed it rests (BACKOFF_MS, doubling up to MAX_BACKOFF_MS), then one event is tried; the
 * first delivery brings back full speed. Its events stay due meanwhile, so they are attempted later than their schedule
 * says, never earlier, and no event is given up sooner for it.
 */
class EndpointLoop {
  private readonly waker = new Waker();
  private readonly inFlight = new Set<Promise<void>>();
  /** Attempts that failed since the last delivery. */
  private failedInARow = 0;
  /** While failing: no claim before this time (ms, the dispatcher's clock), and the next rest's length. */
  private restUntil = 0;
  private nextRestMs = 0;
  private stopping = false;
  private running: Promise<void> | undefined;

  private ep: DeliveryEndpoint;
  private signer: WebhookSigner;

  constructor(
    private readonly d: Dispatcher,
    endpoint: DeliveryEndpoint,
    readonly queue: EndpointQueue,
  ) {
    this.ep = endpoint;
    this.signer = new WebhookSigner(endpoint.secrets);
  }

  get endpoint(): DeliveryEndpoint {
    return this.ep;
  }

  /** A registered endpoint read again: its URL, secrets or filters may have changed. */
  set endpoint(ep: DeliveryEndpoint) {
    if (ep.secrets.join(' ') !== this.ep.secrets.join(' ')) this.signer = new WebhookSigner(ep.secrets);
    this.ep = ep;
  }

  start(): void {
    this.running = this.run();
  }

  wake(): void {
    this.waker.wake();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.waker.wake();
    await this.running;
  }

  private get done(): boolean {
    return this.stopping || this.d.isStopped;
  }

  private async run(): Promise<void> {
    const o = this.d.opts;
    const concurrency = o.concurrency ?? DEFAULT_CONCURRENCY;
    const pollMs = o.pollMs ?? 1000;
    while (!this.done) {
      const failing = this.failedInARow >= concurrency;
      if (failing && this.d.now < this.restUntil) {
        // Resting: a new event's wake() ends this sleep early, and the loop goes back to it.
        await this.waker.sleep(this.restUntil - this.d.now);
        continue;
      }
      // While failing, one probe at a time: its outcome decides the next rest.
      const free = (failing ? 1 : concurrency) - this.inFlight.size;
      let wait = pollMs;
      if (free > 0) {
        try {
          const now = this.d.now;
          const claim = await this.queue.claim(now, free, o.leaseMs ?? LEASE_MS);
          this.d.seenQueued(this.endpoint.id, claim.queued);
          for (const e of claim.events) this.track(this.attempt(e));
          if (claim.events.length === free) wait = 0;
          else if (claim.nextDueAt !== undefined) wait = Math.min(pollMs, Math.max(0, claim.nextDueAt - this.d.now));
        } catch (err) {
          this.d.logFailure('claiming due events failed', err, this.endpoint.id);
        }
      }
      // All slots busy (or the probe out): an attempt's end wakes the loop.
      await this.waker.sleep(this.inFlight.size >= concurrency || free <= 0 ? pollMs : wait);
    }
    await this.drain(o.stopTimeoutMs ?? (o.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS) + 5_000);
  }

  private track(p: Promise<void>): void {
    this.inFlight.add(p);
    void p.finally(() => {
      this.inFlight.delete(p);
      this.waker.wake();
    });
  }

  private async drain(timeoutMs: number): Promise<void> {
    if (this.inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }

  private async attempt(e: ClaimedEvent): Promise<void> {
    const o = this.d.opts;
    const ep = this.endpoint;
    const outcome = await attemptDelivery({
      poster: o.poster,
      url: ep.url,
      signer: this.signer,
      eventId: e.id,
      body: e.event,
      guard: ep.consumer !== undefined ? o.guard : undefined,
      now: this.d.now,
      timeoutMs: o.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS,
    });
    this.failedOrNot(outcome);
    try {
      await this.settle(e, outcome);
    } catch (err) {
      // Redis failed: the lease ends and the event is attempted again (at least once).
      this.d.logFailure('settling an attempt failed', err, ep.id);
    }
  }

  /** Counts an attempt's outcome towards the endpoint's rest (see the class). */
  private failedOrNot(outcome: AttemptOutcome): void {
    const o = this.d.opts;
    if (outcome.kind === 'delivered' || outcome.kind === 'disable') {
      if (this.failedInARow >= (o.concurrency ?? DEFAULT_CONCURRENCY)) o.logger?.info({ endpoint: this.endpoint.id }, 'webhook endpoint answering again');
      this.failedInARow = 0;
      this.restUntil = 0;
      return;
    }
    const concurrency = o.concurrency ?? DEFAULT_CONCURRENCY;
    this.failedInARow++;
    // Below the threshold; or resting already (an attempt of the last batch failing late does not extend the rest).
    if (this.failedInARow < concurrency || this.d.now < this.restUntil) return;
    const first = o.backoffMs ?? BACKOFF_MS;
    if (this.failedInARow === concurrency) {
      this.nextRestMs = first;
      o.logger?.warn(
        { endpoint: this.endpoint.id, failed: this.failedInARow, error: outcome.error },
        'webhook endpoint failing: tried one event at a time, resting between',
      );
    }
    this.restUntil = this.d.now + this.nextRestMs;
    this.nextRestMs = Math.min(o.maxBackoffMs ?? MAX_BACKOFF_MS, this.nextRestMs * 2);
  }

  private async settle(e: ClaimedEvent, outcome: AttemptOutcome): Promise<void> {
    const o = this.d.opts;
    const now = this.d.now;
    const ep = this.endpoint.id;
    switch (outcome.kind) {
      case 'delivered':
        await this.queue.delivered(e, now, outcome.status);
        this.d.count(ep, 'delivered');
        return;
      case 'disable':
        if (await this.queue.disabledBy(e, { now, error: outcome.error, status: outcome.status, reason: 'the receiver answered 410 Gone' }))
          o.logger?.warn({ endpoint: ep, event: e.id }, 'webhook endpoint answered 410 Gone: disabled until enabled again');
        return;
      default: {
        const status = 'status' in outcome ? outcome.status : undefined;
        const retryAfterMs = outcome.kind === 'retry-after' ? outcome.retryAfterMs : undefined;
        const delay = nextAttemptDelay({
          attempts: e.attempts + 1,
          firstAt: e.firstAt,
          now,
          retryAfterMs,
          random: o.random,
          schedule: o.schedule ?? DEFAULT_SCHEDULE,
        });
        if (delay !== undefined) {
          await this.queue.retry(e, { now, dueAt: now + delay, error: outcome.error, status });
        } else if (await this.queue.dead(e, { now, error: outcome.error, status })) {
          this.d.count(ep, 'failed');
          o.logger?.warn({ endpoint: ep, event: e.id, attempts: e.attempts + 1, error: outcome.error }, 'webhook event given up after its last attempt');
        }
      }
    }
  }
}
