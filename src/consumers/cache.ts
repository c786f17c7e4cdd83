// The gateway's copy of the consumers its keys belong to: read once from the store, kept in process, dropped when any
// instance announces a change (consumers:events) and read again in the background, so a suspension or a new plan
// reaches every instance within a second while steady traffic costs the store nothing. Without the change feed (Redis
// pub/sub away) a copy is re-read once ttlMs old; while the store fails a copy serves for up to maxStaleMs.
import { LRUCache } from 'lru-cache';
import type { Clock } from '../util/clock.js';
import { withDeadline } from '../util/deadline.js';
import { ConsumerStoreError, type ConsumerRecord, type ConsumerStore } from './types.js';

export interface ConsumerCacheOptions {
  /** A copy is read again after this long without a change message (bounds staleness while pub/sub is down). */
  ttlMs: number;
  /** An unknown id is remembered this long. */
  negativeTtlMs: number;
  /** While the store fails, a copy stays usable for at most this long after it was read. */
  maxStaleMs: number;
  maxEntries: number;
  /** No read waits longer than this on the store. */
  lookupTimeoutMs: number;
}

export const DEFAULT_CONSUMER_CACHE: ConsumerCacheOptions = {
  ttlMs: 30_000,
  negativeTtlMs: 2_000,
  maxStaleMs: 3_600_000,
  maxEntries: 100_000,
  lookupTimeoutMs: 100,
};

interface Entry {
  consumer: ConsumerRecord | null;
  readAt: number;
  /** ConsumerCache.resets when read: an older value means a change may have been missed since. */
  resets: number;
}

export class ConsumerCache {
  private readonly cache: LRUCache<string, Entry>;
  private readonly inflight = new Map<string, Promise<ConsumerRecord | null>>();
  /** Bumped on every change message: a read that started before cannot cache what it read. */
  private generation = 0;
  /** Bumped when the change feed may have missed messages: every copy read before is read again at its next use. */
  private resets = 0;
  private unsubscribe: (() => Promise<void>) | undefined;
  private readonly listeners: Array<(id: string | undefined) => void> = [];
  readonly opts: ConsumerCacheOptions;

  constructor(
    private readonly store: ConsumerStore,
    private readonly clock: Clock,
    opts: Partial<ConsumerCacheOptions> = {},
    /** Hears of a consumer whose stored record cannot be read (it is then answered as unknown). */
    private readonly onInvalidRecord: (id: string) => void = () => {},
  ) {
    this.opts = { ...DEFAULT_CONSUMER_CACHE, ...opts };
    this.cache = new LRUCache({ max: this.opts.maxEntries });
  }

  /** Listens to the change feed; resolves once the subscription is asked for (not necessarily in place). */
  async start(): Promise<void> {
    this.unsubscribe = await this.store.subscribe(
      (id) => this.changed(id),
      () => this.changesMayBeMissed(),
    );
  }

  async close(): Promise<void> {
    await this.unsubscribe?.();
    await this.store.close();
  }

  /** Told with the consumer's id on each change (undefined: changes may have been missed), after the copy is dropped. */
  onChange(fn: (id: string | undefined) => void): void {
    this.listeners.push(fn);
  }

  /**
   * The consumer's record as this instance knows it now, without waiting: a fresh copy, or undefined when none is
   * cached or it is due for a re-read (then call get()). `null`: known not to exist.
   */
  peek(id: string): ConsumerRecord | null | undefined {
    const e = this.cache.get(id);
    return e && this.fresh(e) ? e.consumer : undefined;
  }

  /**
   * The consumer's record (undefined: there is none, or its record cannot be read). Rejects when the store cannot
   * answer in time and no copy young enough (maxStaleMs) is cached.
   */
  async get(id: string): Promise<ConsumerRecord | undefined> {
    const e = this.cache.get(id);
    if (e && this.fresh(e)) return e.consumer ?? undefined;
    try {
      return (await this.lookup(id)) ?? undefined;
    } catch (err) {
      if (e?.consumer && this.clock.now() - e.readAt < this.opts.maxStaleMs) return e.consumer;
      throw err;
    }
  }

  /**
   * The request path's read (identity's ConsumerLookup): the record at once when a fresh copy is cached (a map read,
   * no store command), else get()'s promise. Undefined: there is no such consumer.
   */
  current(id: string): ConsumerRecord | undefined | Promise<ConsumerRecord | undefined> {
    const known = this.peek(id);
    return known === undefined ? this.get(id) : (known ?? undefined);
  }

  /** Cached entries, for metrics and tests. */
  get size(): number {
    return this.cache.size;
  }

  private fresh(e: Entry): boolean {
    return e.resets === this.resets && this.clock.now() - e.readAt < (e.consumer ? this.opts.ttlMs : this.opts.negativeTtlMs);
  }

  /** A change message: the copy is dropped, and read again now if this instance had one (its keys are in use). */
  private changed(id: string): void {
    this.generation++;
    const had = this.cache.get(id)?.consumer;
    this.cache.delete(id);
    for (const fn of this.listeners) fn(id);
    // A read in flight may predate the change: the next one starts anew.
    this.inflight.delete(id);
    // Read ahead of the next request, so it finds the new record without waiting; a failure here is the next get()'s.
    if (had) this.lookup(id).catch(() => undefined);
  }

  /** The subscription came back after a gap: every copy is read again at its next use (served meanwhile if the store fails). */
  private changesMayBeMissed(): void {
    this.resets++;
    this.generation++;
    for (const fn of this.listeners) fn(undefined);
  }

  /** One store read per id at a time, however many requests ask. */
  private lookup(id: string): Promise<ConsumerRecord | null> {
    let p = this.inflight.get(id);
    if (!p) {
      const generation = this.generation;
      const resets = this.resets;
      const read: Promise<ConsumerRecord | null> = withDeadline(this.store.get(id), this.opts.lookupTimeoutMs, 'consumer lookup')
        .then(
          (c) => c ?? null,
          (err: unknown) => {
            if (!(err instanceof ConsumerStoreError && err.code === 'invalid_record')) throw err;
            this.onInvalidRecord(id);
            return null;
          },
        )
        .then((consumer) => {
          // A change announced while this read was in flight may postdate what it read: answer, but do not cache.
          if (generation === this.generation) this.cache.set(id, { consumer, readAt: this.clock.now(), resets });
          return consumer;
        })
        .finally(() => {
          if (this.inflight.get(id) === read) this.inflight.delete(id);
        });
      this.inflight.set(id, read);
      p = read;
    }
    return p;
  }
}
