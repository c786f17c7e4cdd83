// What an instance counts itself and writes in batches: refusals it decides without the limit script (a ban it
// already knows, limits in memory while Redis is away; every decision of a Redis-less gateway) and calls of
// deprecated routes by key, and requests that did not match their operation's OpenAPI description (by key and hour
// in the ledger, by operation, key and day for the invalid-request report). Counts are summed in memory and written every usage.flushIntervalMs, and once more on
// close: a crash loses at most one interval of them, on that instance. The limit script counts everything it
// decides itself (src/limits/redis-store.ts), so admitted requests on Redis never wait for this.
// Also the ledger's peakMinute: per key and hour, the highest minute-window count a check reported (Redis's reply
// carries the fleet-wide count, so this costs the request path a map update and no command); the maxima are written
// with the same batches, raised where larger, since every instance writes its own.
// Every count carries the consumer the request was counted under when it was decided (none for a key without one):
// a refund or an upstream failure written a flush later still goes to the ledger the request was counted in, even if
// the key moved meanwhile.
import type { Logger } from '../observability/logger.js';
import type { Clock } from '../util/clock.js';
import { type DeprecatedCall, type InvalidRequests, type MinutePeak, type UsageEntry, type UsageStore } from './store.js';
import type { UsageKind } from '../limits/types.js';
import { dayOf, HOUR_MS } from '../util/time.js';

export interface UsageRecorderOptions {
  store: UsageStore;
  clock: Clock;
  logger: Logger;
  flushIntervalMs: number;
  /** How long a day of counts is kept (read at each flush: a reload applies). */
  ttlMs: () => number;
}

/** Most distinct entries held between flushes; past it new ones are dropped and counted (a flood of ids). */
const MAX_PENDING = 100_000;

/** How often a timer's flush writes the open hour's peakMinute figures (a maximum: written late, never lost). */
const OPEN_HOUR_PEAKS_EVERY_MS = 60_000;

/** The map name of a key under a consumer ('' or absent: none). */
const owner = (id: string, consumer: string | undefined): string => (consumer ? `${id}\u0000${consumer}` : id);

export class UsageRecorder {
  private counts = new Map<string, UsageEntry>();
  private calls = new Map<string, DeprecatedCall>();
  private invalids = new Map<string, InvalidRequests>();
  /**
   * Per key (and consumer): the hour being watched, its highest count, and the highest already written (a flush writes
   * only a key whose figure grew since, so a key in steady use costs one write per hour, not one per flush). An hour
   * that ends with a figure not yet written is moved to `closedPeaks`.
   */
  private peaks = new Map<string, { id: string; consumer: string | undefined; hour: number; peak: number; written: number }>();
  private closedPeaks: MinutePeak[] = [];
  /** When a flush last wrote the open hour's figures (see flush). */
  private openPeaksWrittenAt = -Infinity;
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | undefined;
  /** Entries dropped because MAX_PENDING were already waiting (Redis unreachable for long, or a flood of ids). */
  dropped = 0;

  constructor(private readonly o: UsageRecorderOptions) {
    this.timer = setInterval(() => void this.flush(false), o.flushIntervalMs);
    this.timer.unref();
  }

  /**
   * One decision made outside the limit script: `a` admitted (Redis-less only), `r` refused by a window, `b` by a ban,
   * `s` admitted though a shadow window had no room; `consumer`: the consumer the key's request was counted under.
   */
  count(id: string, kind: UsageKind, consumer?: string): void {
    this.add(id, consumer, kind, this.o.clock.now(), 1);
  }

  private add(id: string, consumer: string | undefined, kind: UsageKind, atMs: number, n: number): void {
    const hour = Math.floor(atMs / HOUR_MS);
    const key = `${owner(id, consumer)}\u0001${kind}\u0001${hour}`;
    const e = this.counts.get(key);
    if (e) e.n += n;
    else if (this.counts.size < MAX_PENDING) this.counts.set(key, { id, ...(consumer ? { consumer } : {}), kind, atMs: hour * HOUR_MS, n });
    else this.dropped++;
  }

  /**
   * A request counted admitted here (at `atMs`, under `consumer`) that never reached a target: taken out of admitted
   * in the hour and ledger it was admitted in (a count of -1 that the flush adds up with the one already counted).
   * Not billed.
   */
  notReached(id: string, atMs: number, consumer?: string): void {
    this.add(id, consumer, 'a', atMs, -1);
  }

  /**
   * An admitted request (counted at `atMs` under `consumer`, here or by the limit script) that reached a target and
   * got no complete answer: counted upstreamFailed in that hour and ledger, beside admitted (which keeps it).
   */
  upstreamFailed(id: string, atMs: number, consumer?: string): void {
    this.add(id, consumer, 'f', atMs, 1);
  }

  /**
   * A check reported the key's minute window at `count` (after its decision) in UTC hour `hour` (hours since 1970),
   * the key's request counted under `consumer`. On the request path: one map lookup, no allocation while the key stays
   * in the same hour (and consumer).
   */
  minuteCount(id: string, count: number, hour: number, consumer?: string): void {
    const name = owner(id, consumer);
    const e = this.peaks.get(name);
    if (e && e.hour === hour) {
      if (count > e.peak) e.peak = count;
      return;
    }
    if (count <= 0) return;
    const c = consumer ? { consumer } : {};
    if (e) {
      // A new hour for this key (or a reply from an earlier one, arriving late): the other hour is kept for the flush.
      if (hour < e.hour) return this.closePeak({ id, ...c, atMs: hour * HOUR_MS, peak: count });
      if (e.peak > e.written) this.closePeak({ id, ...c, atMs: e.hour * HOUR_MS, peak: e.peak });
      e.hour = hour;
      e.peak = count;
      e.written = 0;
    } else if (this.peaks.size < MAX_PENDING) this.peaks.set(name, { id, consumer: consumer || undefined, hour, peak: count, written: 0 });
    else this.dropped++;
  }

  private closePeak(p: MinutePeak): void {
    if (this.closedPeaks.length < MAX_PENDING) this.closedPeaks.push(p);
    else this.dropped++;
  }

  /** A keyed call of a deprecated route (`route` as "<METHOD> <pattern>"), counted under `consumer` if the key has one. */
  deprecatedCall(route: string, id: string, consumer?: string): void {
    const now = this.o.clock.now();
    const day = dayOf(now);
    const key = `${route}\u0001${owner(id, consumer)}\u0001${day}`;
    const e = this.calls.get(key);
    if (e) {
      e.n++;
      e.lastMs = now;
    } else if (this.calls.size < MAX_PENDING) this.calls.set(key, { route, id, ...(consumer ? { consumer } : {}), day, n: 1, lastMs: now });
    else this.dropped++;
  }

  /**
   * A keyed request that did not match its operation's description (`operation` as metrics name it), whose first
   * problem was at `pointer`: validationFailed in the ledger's hour, and a call in the invalid-request report. On the
   * request path: two map updates, no command. `consumer`: the consumer the key's request was counted under.
   */
  invalidRequest(operation: string, id: string, pointer: string, consumer?: string): void {
    this.count(id, 'v', consumer);
    const now = this.o.clock.now();
    const day = dayOf(now);
    const key = `${operation}\u0001${owner(id, consumer)}\u0001${day}`;
    const e = this.invalids.get(key);
    if (e) {
      e.n++;
      e.lastMs = now;
      e.pointer = pointer;
    } else if (this.invalids.size < MAX_PENDING) this.invalids.set(key, { operation, id, ...(consumer ? { consumer } : {}), day, n: 1, lastMs: now, pointer });
    else this.dropped++;
  }

  /**
   * Writes what was counted since the last flush; what fails to be written is kept for the next one. A timer's flush
   * (`all` false) writes the open hour's peakMinute figures at most once a minute: under steady traffic nearly every
   * active key's minute count grows between two flushes, and writing each at every flush cost Redis a third of a command
   * per request (bench scenario c, 10,000 keys in use); a closed hour's figure goes at the next flush. An explicit flush
   * (and close) writes everything.
   */
  flush(all = true): Promise<void> {
    if (this.flushing) return all ? this.flushing.then(() => this.flush(true)) : this.flushing;
    this.flushing = (async () => {
      const counts = [...this.counts.values()];
      const calls = [...this.calls.values()];
      const invalids = [...this.invalids.values()];
      const peaks = this.closedPeaks;
      const now = this.o.clock.now();
      const hourNow = Math.floor(now / HOUR_MS);
      const openHourDue = all || now - this.openPeaksWrittenAt >= OPEN_HOUR_PEAKS_EVERY_MS;
      if (openHourDue) this.openPeaksWrittenAt = now;
      for (const [name, e] of this.peaks) {
        if (e.peak > e.written && (openHourDue || e.hour < hourNow)) {
          peaks.push({ id: e.id, ...(e.consumer ? { consumer: e.consumer } : {}), atMs: e.hour * HOUR_MS, peak: e.peak });
          e.written = e.peak;
        }
        // A key not seen this hour: its figure is written (or in `peaks`, kept on failure); its entry is done.
        if (e.hour < hourNow) this.peaks.delete(name);
      }
      this.counts = new Map();
      this.calls = new Map();
      this.invalids = new Map();
      this.closedPeaks = [];
      // Only what was not written is kept for the next flush: an entry written is never sent again (a count added
      // twice would bill twice), and a batch with one failed entry does not come back whole.
      let unwritten: typeof counts;
      try {
        unwritten = counts.length ? await this.o.store.add(counts, this.o.ttlMs()) : [];
      } catch (err) {
        unwritten = counts;
        this.o.logger.warn({ err: { message: String((err as Error)?.message ?? err) }, entries: counts.length }, 'usage counts not written');
      }
      if (unwritten.length) {
        this.restore(unwritten, []);
        this.o.logger.warn({ entries: unwritten.length, of: counts.length }, 'usage counts not written yet: kept for the next flush');
      }
      // As for counts: only what was not written comes back (a call counted twice would show a customer calling a
      // deprecated route more than they did).
      let callsUnwritten: typeof calls;
      try {
        callsUnwritten = calls.length ? await this.o.store.addDeprecated(calls, this.o.ttlMs()) : [];
      } catch (err) {
        callsUnwritten = calls;
        this.o.logger.warn({ err: { message: String((err as Error)?.message ?? err) }, entries: calls.length }, 'deprecated-route calls not written');
      }
      if (callsUnwritten.length) {
        this.restore([], callsUnwritten);
        this.o.logger.warn({ entries: callsUnwritten.length, of: calls.length }, 'deprecated-route calls not written yet: kept for the next flush');
      }
      let invalidsUnwritten: InvalidRequests[];
      try {
        invalidsUnwritten = invalids.length ? await this.o.store.addInvalid(invalids, this.o.ttlMs()) : [];
      } catch (err) {
        invalidsUnwritten = invalids;
        this.o.logger.warn({ err: { message: String((err as Error)?.message ?? err) }, entries: invalids.length }, 'invalid-request counts not written');
      }
      if (invalidsUnwritten.length) {
        for (const c of invalidsUnwritten) this.restoreInvalid(c);
        this.o.logger.warn({ entries: invalidsUnwritten.length, of: invalids.length }, 'invalid-request counts not written yet: kept for the next flush');
      }
      let peaksUnwritten: MinutePeak[];
      try {
        peaksUnwritten = peaks.length ? await this.o.store.raisePeaks(peaks, this.o.ttlMs()) : [];
      } catch (err) {
        peaksUnwritten = peaks;
        this.o.logger.warn({ err: { message: String((err as Error)?.message ?? err) }, entries: peaks.length }, 'usage peakMinute not written');
      }
      if (peaksUnwritten.length) {
        // Only the keys of the calls that failed are kept for the next flush (a maximum written twice changes nothing,
        // but 10,000 keys re-sent for one failed call would be 10,000 writes for nothing).
        for (const p of peaksUnwritten) this.closePeak(p);
        this.o.logger.warn({ entries: peaksUnwritten.length, of: peaks.length }, 'usage peakMinute not written yet: kept for the next flush');
      }
    })().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flushing;
    await this.flush();
  }

  private restoreInvalid(c: InvalidRequests): void {
    const key = `${c.operation}\u0001${owner(c.id, c.consumer)}\u0001${c.day}`;
    const e = this.invalids.get(key);
    if (e) {
      e.n += c.n;
      if (c.lastMs > e.lastMs) Object.assign(e, { lastMs: c.lastMs, pointer: c.pointer });
    } else if (this.invalids.size < MAX_PENDING) this.invalids.set(key, c);
    else this.dropped += c.n;
  }

  private restore(counts: readonly UsageEntry[], calls: readonly DeprecatedCall[]): void {
    for (const c of counts) {
      const key = `${owner(c.id, c.consumer)}\u0001${c.kind}\u0001${c.atMs / HOUR_MS}`;
      const e = this.counts.get(key);
      if (e) e.n += c.n;
      else if (this.counts.size < MAX_PENDING) this.counts.set(key, c);
      else this.dropped += c.n;
    }
    for (const c of calls) {
      const key = `${c.route}\u0001${owner(c.id, c.consumer)}\u0001${c.day}`;
      const e = this.calls.get(key);
      if (e) {
        e.n += c.n;
        e.lastMs = Math.max(e.lastMs, c.lastMs);
      } else if (this.calls.size < MAX_PENDING) this.calls.set(key, c);
      else this.dropped += c.n;
    }
  }
}
