// The quota.threshold percents in force for each consumer: events.thresholds, plus the percents the consumer's own
// registered endpoints asked for (POST /consumers/{id}/webhooks `thresholds`). The producer runs on the request path
// and must not ask Redis which percents apply, so they are kept here: read from the registry at start, again on every
// registry change (events:endpoints:changed, published by each registration and deletion), and every 10 s as the
// fallback for a change message lost while the subscriber reconnected.
import type { Logger } from '../observability/logger.js';
import type { RedisConnection, RedisSubscriber } from '../storage/redis.js';
import { listenOn } from '../storage/change-feed.js';

/** How often the registry is read again in any case. */
export const THRESHOLDS_REFRESH_MS = 10_000;

export interface ThresholdSource {
  /** Every registered endpoint (its consumer and its own percents, if it set any). */
  all(): Promise<ReadonlyArray<{ consumer: string; thresholds?: readonly number[] | undefined }>>;
}

export class ConsumerThresholds {
  private byConsumer = new Map<string, readonly number[]>();
  private timer: NodeJS.Timeout | undefined;
  private sub: RedisSubscriber | undefined;
  private reading: Promise<void> | undefined;
  private again = false;

  constructor(
    /** events.thresholds: every subject's percents. */
    private readonly base: readonly number[],
    private readonly source: ThresholdSource,
    private readonly logger?: Logger,
  ) {}

  /** The percents a decision of this consumer's (or of a key without one) is checked against. */
  of(consumer: string | undefined): readonly number[] {
    return (consumer !== undefined ? this.byConsumer.get(consumer) : undefined) ?? this.base;
  }

  /** Reads the registry; a change arriving meanwhile makes it read once more when done. Never rejects. */
  refresh(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = this.read().finally(() => {
      this.reading = undefined;
      if (this.again) {
        this.again = false;
        void this.refresh();
      }
    });
    return this.reading;
  }

  /** Reads now, then on every registry change (with `feed`) and every `everyMs`. */
  start(feed: { connection: Pick<RedisConnection, 'subscriber'>; channel: string } | undefined, everyMs = THRESHOLDS_REFRESH_MS): Promise<void> {
    if (feed) {
      const changed = (): void => void this.refresh();
      this.sub = listenOn(feed.connection, feed.channel, { onMessage: changed, onReset: changed });
    }
    this.timer = setInterval(() => void this.refresh(), everyMs);
    this.timer.unref();
    return this.refresh();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    const sub = this.sub;
    this.sub = undefined;
    sub?.disconnect();
    await this.reading;
  }

  private async read(): Promise<void> {
    try {
      const sets = new Map<string, Set<number>>();
      for (const e of await this.source.all()) {
        if (!e.thresholds || e.thresholds.length === 0) continue;
        const set = sets.get(e.consumer) ?? new Set(this.base);
        for (const p of e.thresholds) set.add(p);
        sets.set(e.consumer, set);
      }
      this.byConsumer = new Map([...sets].map(([c, s]) => [c, [...s].sort((a, b) => a - b)]));
    } catch (err) {
      // The percents read last stay in force: a Redis blip must not silence a consumer's own alerts.
      this.logger?.warn({ err: { message: String((err as Error)?.message ?? err) } }, 'registered thresholds not read');
    }
  }
}
