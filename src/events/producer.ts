// The producer: subscribes to the catalogue (observability/catalogue.ts) and turns the facts other rooms publish into
// events for the outbox. A limit decision that crossed a threshold becomes quota.threshold (or quota.shadow_threshold
// for a candidate limit), one that started a ban key.banned; a suspension consumer.suspended; a keyed call of a
// deprecated route deprecated.called, once per subject, operation and UTC day. It runs inside the publisher's call,
// on the request path, so it never waits: each event is handed to the outbox and its promise left running (bounded by
// the Redis command deadline), its failure logged, never thrown into the request. A decision that crossed nothing
// costs a few comparisons and no Redis command.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { CHANNELS, type ConsumerChangedMessage, type DecidedMessage, type DeprecatedCalledMessage } from '../observability/catalogue.js';
import type { Logger } from '../observability/logger.js';
import { toCloudEvent } from './cloudevent.js';
import { outboxEntry, type EventSink } from './outbox.js';
import { crossings } from './thresholds.js';
import { eventIds, subjectOf, utcDay, type EventDraft } from './types.js';

export interface ProducerDeps {
  sink: EventSink;
  /** The CloudEvents source (events.source, or its default). */
  source: string;
  /**
   * The percents in force for a consumer (or, undefined, a key without one): events.thresholds, and for a consumer
   * also those its registered endpoints asked for (consumer-thresholds.ts).
   */
  thresholds: (consumer: string | undefined) => readonly number[];
  logger: Logger;
  /** Deprecated-call event ids remembered in memory at most, so Redis is asked once per instance and day (default 10,000). */
  seenLimit?: number;
}

/** The events of a limit decision: its thresholds crossed (only the shared store's, which counts atomically) and a ban it started. */
export function decidedDrafts(m: DecidedMessage, percents: readonly number[]): EventDraft[] {
  const out: EventDraft[] = [];
  const facts = { key: m.keyId, ...(m.consumer !== undefined ? { consumer: m.consumer } : {}), plan: m.plan };
  // Memory's decisions are this instance's alone: another instance may cross the same threshold in its own memory.
  if (m.shared && m.outcome === 'admitted') {
    for (const c of crossings(m, percents)) {
      const w = m.windows[c.window]!;
      // A key's cap inside its consumer's pool is the key's own: its events are the key's, not the pool's.
      const subject = w.cap ? `key:${m.keyId}` : subjectOf(m.keyId, m.consumer);
      const resetsAt = new Date(c.endsAt).toISOString();
      if (c.kind === 'threshold') {
        out.push({
          id: eventIds.threshold(subject, c.name, c.period, c.percent),
          type: 'quota.threshold',
          subject,
          at: m.at,
          ...facts,
          percent: c.percent,
          data: {
            ...facts,
            window: c.name,
            percent: c.percent,
            limit: c.limit,
            used: c.used,
            threshold: Math.ceil((c.limit * c.percent) / 100),
            period: c.period,
            resetsAt,
          },
        });
      } else {
        out.push({
          id: eventIds.shadowThreshold(subject, c.name, c.period),
          type: 'quota.shadow_threshold',
          subject,
          at: m.at,
          ...facts,
          data: { ...facts, limitName: c.name, window: w.name, limit: c.limit, used: c.used, period: c.period, resetsAt },
        });
      }
    }
  }
  if (m.outcome === 'banned_now') {
    const until = m.at + m.retryMs;
    out.push({
      id: eventIds.banned(m.keyId, m.banLevel, until),
      type: 'key.banned',
      subject: subjectOf(m.keyId, m.consumer),
      at: m.at,
      ...facts,
      data: { ...facts, level: m.banLevel, until: new Date(until).toISOString(), seconds: Math.round(m.retryMs / 1000) },
    });
  }
  return out;
}

/** consumer.suspended for a suspension; nothing for a consumer active again or deleted. */
export function suspendedDraft(m: ConsumerChangedMessage): EventDraft | undefined {
  if (m.status !== 'suspended') return undefined;
  return {
    id: eventIds.suspended(m.consumer, m.at),
    type: 'consumer.suspended',
    subject: `consumer:${m.consumer}`,
    at: m.at,
    consumer: m.consumer,
    data: { consumer: m.consumer, ...(m.reason !== undefined ? { reason: m.reason } : {}), suspendedAt: new Date(m.at).toISOString() },
  };
}

/** deprecated.called of one keyed call: its id names the subject, the operation and the UTC day. */
export function deprecatedDraft(m: DeprecatedCalledMessage): EventDraft<'deprecated.called'> {
  const subject = subjectOf(m.keyId, m.consumer);
  const day = utcDay(m.at);
  return {
    id: eventIds.deprecated(subject, m.operation, day),
    type: 'deprecated.called',
    subject,
    at: m.at,
    key: m.keyId,
    ...(m.consumer !== undefined ? { consumer: m.consumer } : {}),
    data: {
      key: m.keyId,
      ...(m.consumer !== undefined ? { consumer: m.consumer } : {}),
      operation: m.operation,
      route: m.route,
      ...(m.sunset !== undefined ? { sunset: m.sunset } : {}),
      ...(m.successor !== undefined ? { successor: m.successor } : {}),
      day,
      firstCallAt: new Date(m.at).toISOString(),
    },
  };
}

export class EventProducer {
  private started = false;
  /** Publishes in flight: stop() waits for them. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Deprecated-call ids this instance has handed to the outbox (insertion order: the oldest goes first past the bound). */
  private readonly seen = new Set<string>();
  private readonly seenLimit: number;

  private readonly onDecided = (m: unknown): void =>
    this.guard(() => this.emitAll(decidedDrafts(m as DecidedMessage, this.deps.thresholds((m as DecidedMessage).consumer))));
  private readonly onConsumerChanged = (m: unknown): void =>
    this.guard(() => {
      const d = suspendedDraft(m as ConsumerChangedMessage);
      if (d) this.emit(d);
    });
  private readonly onDeprecatedCalled = (m: unknown): void => this.guard(() => this.deprecated(m as DeprecatedCalledMessage));

  constructor(private readonly deps: ProducerDeps) {
    this.seenLimit = deps.seenLimit ?? 10_000;
  }

  /** Subscribes to the catalogue's channels: from here on every publisher builds its messages. */
  start(): void {
    if (this.started) return;
    this.started = true;
    subscribe(CHANNELS.decided, this.onDecided);
    subscribe(CHANNELS.consumerChanged, this.onConsumerChanged);
    subscribe(CHANNELS.deprecatedCalled, this.onDeprecatedCalled);
  }

  /** Unsubscribes, then waits for the publishes in flight (each bounded by the command deadline). */
  async stop(): Promise<void> {
    if (this.started) {
      this.started = false;
      unsubscribe(CHANNELS.decided, this.onDecided);
      unsubscribe(CHANNELS.consumerChanged, this.onConsumerChanged);
      unsubscribe(CHANNELS.deprecatedCalled, this.onDeprecatedCalled);
    }
    await this.settled();
  }

  /** Waits for every publish in flight (tests; stop). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /**
   * Publishes one event and says whether the outbox took it (true) or had its id already (false); rejects when Redis
   * does not answer. For callers off the request path (the key.expiring scan); the request path's facts use emit().
   */
  async publish(draft: EventDraft): Promise<boolean> {
    const entry = outboxEntry(draft, toCloudEvent(draft, this.deps.source));
    return (await this.deps.sink.publish(entry)) !== null;
  }

  /** Hands the event to the outbox without waiting: a failure is logged. */
  emit(draft: EventDraft, onFail?: () => void): void {
    const p = this.publish(draft).then(
      () => undefined,
      (err: unknown) => {
        onFail?.();
        this.deps.logger.warn({ eventId: draft.id, type: draft.type, err: { message: String((err as Error)?.message ?? err) } }, 'event not published');
      },
    );
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  private emitAll(drafts: readonly EventDraft[]): void {
    for (const d of drafts) this.emit(d);
  }

  /** Once per subject, operation and UTC day per instance (the outbox dedupes across instances). */
  private deprecated(m: DeprecatedCalledMessage): void {
    const draft = deprecatedDraft(m);
    if (this.seen.has(draft.id)) return;
    this.seen.add(draft.id);
    if (this.seen.size > this.seenLimit) this.seen.delete(this.seen.values().next().value!);
    // Not in the outbox after all: the next call tries again.
    this.emit(draft, () => this.seen.delete(draft.id));
  }

  /** A subscriber's error must never reach the publisher (diagnostics_channel would rethrow it in the process). */
  private guard(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.deps.logger.error({ err: { message: String((err as Error)?.message ?? err) } }, 'event producer failed on a message');
    }
  }
}
