// The key filter: a Bloom filter (the bloomfilter package) of every hash that opens a stored key, kept by each
// instance in memory. It lets the authentication decision tell a made-up key from a valid one that this instance has
// not cached yet without asking the store: a client the anonymous limit refuses gets its made-up keys answered from
// memory (429, no Redis read), and a valid key from the same address is still looked up and admitted. Built at
// start-up (and after the change feed reconnects) from the store in bounded batches, off the request path; kept in
// step by the change feed, which names every hash a create, rotation or import links. Until a build has completed
// with the feed listening throughout, the filter is not certain and every key is looked up: a valid key is never
// refused because of the filter.
import { BloomFilter } from 'bloomfilter';

/** Where the filter's hashes come from (the KeyStore). */
export interface HashSource {
  /** How many keys the store holds (sizes the filter). */
  keyCount(): Promise<number>;
  /** Every hash that may open a stored key, in batches. */
  forEachHash(each: (hashes: readonly string[]) => void): Promise<void>;
}

/** The false-positive rate the filter is sized for: one made-up key in a thousand costs a store read. */
export const FALSE_POSITIVE_RATE = 0.001;
/** Hashes a filter is sized for at least (about 180 KB), so a small or growing store rebuilds rarely. */
export const MIN_CAPACITY = 100_000;
/** Room for keys created after a build: a filter holds this much more than the store had, then it is rebuilt. */
const HEADROOM = 1.25;
/** A failed build is tried again after this long, doubling up to RETRY_MAX_MS. */
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 60_000;

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Bits and hash functions of a Bloom filter holding `capacity` entries at FALSE_POSITIVE_RATE. */
export function filterShape(capacity: number): { bits: number; hashes: number } {
  const bits = Math.ceil((-capacity * Math.log(FALSE_POSITIVE_RATE)) / Math.LN2 ** 2);
  return { bits, hashes: Math.max(1, Math.round((bits / capacity) * Math.LN2)) };
}

export class KnownHashes {
  private current: BloomFilter | undefined;
  private capacity = 0;
  private held = 0;
  /** True once a build completed with the change feed listening throughout, until the feed may have missed messages. */
  private certain = false;
  /** The filter a build is filling: the change feed's hashes go into it too, so none is lost at the swap. */
  private building: BloomFilter | undefined;
  /** Bumped whenever the change feed may have missed messages: a build that spans a bump is not certain. */
  private epoch = 0;
  private running: Promise<void> | undefined;
  private again = false;
  private retryMs = RETRY_MIN_MS;
  /** A build waiting its turn: a retry after a failure, or spacing after the last build. */
  private timer: NodeJS.Timeout | undefined;
  /** When the last build ended and how long it took: the next waits at least that long (a flapping feed would
   * otherwise keep one full read of the store running back to back). */
  private lastEndedAt = 0;
  private lastBuildMs = 0;
  private closed = false;
  /** The timer is a retry after a failed build (not the spacing after a build). */
  private retrying = false;

  constructor(
    private readonly source: HashSource,
    private readonly onBuilt: (outcome: { hashes: number; bytes: number; ms: number } | { error: unknown }) => void = () => {},
  ) {}

  /** false only when the filter is certain that no stored key has this hash; true means "look it up". */
  mayOpenAKey(hash: string): boolean {
    return !this.certain || this.current === undefined || this.current.test(hash);
  }

  /**
   * The last filter built says no stored key had this hash, certain or not: what is left to go on when the store
   * cannot be asked (it can only be wrong about a key created while the change feed was away).
   */
  saidNo(hash: string): boolean {
    return this.current !== undefined && !this.current.test(hash);
  }

  /** Whether a "no" from mayOpenAKey can be trusted right now (for metrics and tests). */
  get isCertain(): boolean {
    return this.certain;
  }

  /** Bytes of the filter in force (its bit array). */
  get bytes(): number {
    return this.current?.buckets.byteLength ?? 0;
  }

  /** A hash the change feed says now opens a key (a create, rotation or import on any instance). */
  add(hash: string): void {
    if (!SHA256_HEX.test(hash)) return;
    this.current?.add(hash);
    this.building?.add(hash);
    // Over capacity the false-positive rate climbs: rebuilt larger (once; the build counts what it finds).
    if (this.current && ++this.held > this.capacity && !this.running) this.rebuild();
  }

  /** The change feed reconnected: messages may have been lost, so "no" is not certain until the next build. */
  changesMayBeMissed(): void {
    this.epoch++;
    this.certain = false;
  }

  /**
   * Builds the filter anew from the store: now, after the build under way, or once the spacing after the last build
   * has passed. A retry waiting after a failure is not waited for: this is called when the change feed is back
   * (Redis answering again), or when the filter is full.
   */
  rebuild(): void {
    if (this.closed) return;
    if (this.timer) {
      if (!this.retrying) return;
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.running) {
      this.again = true;
      return;
    }
    const wait = this.lastBuildMs - (performance.now() - this.lastEndedAt);
    if (wait > 0) return this.later(wait);
    const started = performance.now();
    this.running = this.build().finally(() => {
      this.running = undefined;
      this.lastEndedAt = performance.now();
      this.lastBuildMs = this.lastEndedAt - started;
      if (this.again) {
        this.again = false;
        this.rebuild();
      }
    });
  }

  private later(ms: number, retrying = false): void {
    this.retrying = retrying;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.rebuild();
    }, ms);
    this.timer.unref();
  }

  /** Resolves when no build is running or waiting its spacing (tests); a retry after a failure is not waited for. */
  async settled(): Promise<void> {
    for (;;) {
      if (this.running) await this.running;
      else if (this.timer && !this.retrying) await new Promise((r) => setTimeout(r, 5));
      else return;
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async build(): Promise<void> {
    const epoch = this.epoch;
    const started = performance.now();
    try {
      const capacity = Math.max(MIN_CAPACITY, Math.ceil((await this.source.keyCount()) * HEADROOM));
      const shape = filterShape(capacity);
      const next = new BloomFilter(shape.bits, shape.hashes);
      this.building = next;
      let held = 0;
      await this.source.forEachHash((hashes) => {
        for (const h of hashes) {
          next.add(h);
          held++;
        }
      });
      if (this.closed) return;
      this.current = next;
      this.capacity = capacity;
      this.held = held;
      this.certain = epoch === this.epoch;
      this.retryMs = RETRY_MIN_MS;
      this.onBuilt({ hashes: held, bytes: next.buckets.byteLength, ms: performance.now() - started });
    } catch (error) {
      if (this.closed) return;
      this.onBuilt({ error });
      this.later(this.retryMs, true);
      this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
    } finally {
      this.building = undefined;
    }
  }
}
