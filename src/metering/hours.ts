// The usage ledger read by closed hour, for the metering export: per key, per UTC hour and per consumer the hour was
// counted under, the requests admitted, refused (by a window or a ban) and admitted but failed upstream. An hour is
// closed once graceMinutes have passed since its end on Redis' clock (TIME: the clock the limit script counts by), so
// the counts instances flush every few seconds are in before it is read. The ledger counts requests, not the cost
// points a route's `cost` takes from a window: a request of a route of cost 5 is one admitted request here.
import type { KeyRecord } from '../keys/types.js';
import type { RedisCommands } from '../storage/redis.js';
import { spanOf, type UsageStore } from '../usage/store.js';
import { HOUR_MS } from '../util/time.js';

/** One key's counts in one closed hour under one consumer ('' none). */
export interface KeyHour {
  keyId: string;
  /** The consumer the hour's requests were counted under; '' none. */
  consumer: string;
  /** The hour's start, ms (UTC, whole hour). */
  hourMs: number;
  /** Requests admitted (the ledger's a<h>; upstreamFailed ones included). */
  admitted: number;
  /** Requests refused: by a window (r<h>) and by a ban (b<h>). */
  refused: number;
  /** Requests admitted that reached a target and got no complete answer (f<h>; also in admitted). */
  upstreamFailed: number;
}

/** Redis' clock, ms. */
export async function redisNow(redis: Pick<RedisCommands, 'time'>): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** The end (exclusive) of the last closed hour at `nowMs`: every hour starting before it is closed. */
export function closedEnd(nowMs: number, graceMinutes: number): number {
  return Math.floor((nowMs - graceMinutes * 60_000) / HOUR_MS) * HOUR_MS;
}

/** The hour an instant is in, as the ids name it: `2026-11-29T07` (UTC). */
export function hourName(hourMs: number): string {
  return new Date(hourMs).toISOString().slice(0, 13);
}

/** What reading the ledger by hour needs: the ledger's per-hour sums by consumer, and every key. */
export interface LedgerReader {
  usage: Pick<UsageStore, 'sumsByConsumer'>;
  /** Every key's record, a batch at a time (KeyRecords.all): complete or failing. */
  keys: { all(what: string): AsyncGenerator<KeyRecord[]> };
}

/**
 * Each batch of keys with their non-zero closed hours in [fromMs, toMs) (whole hours), per consumer. One script call
 * per key in its slot (its own hours and its set of consumers), then one per consumer it was counted under.
 */
export async function* keyHours(reader: LedgerReader, fromMs: number, toMs: number): AsyncGenerator<{ keys: KeyRecord[]; hours: KeyHour[] }> {
  const from = Math.floor(fromMs / HOUR_MS) * HOUR_MS;
  const to = Math.floor(toMs / HOUR_MS) * HOUR_MS;
  if (to <= from) return;
  const span = spanOf(from, to);
  for await (const keys of reader.keys.all('the metering export')) {
    const hours: KeyHour[] = [];
    await Promise.all(
      keys.map(async (k) => {
        const parts = await reader.usage.sumsByConsumer(k.id, span, 'hour');
        for (const [consumer, sums] of parts)
          sums.forEach((c, i) => {
            const refused = c.rateLimited + c.banned;
            if (c.admitted === 0 && refused === 0 && c.upstreamFailed === 0) return;
            hours.push({ keyId: k.id, consumer, hourMs: from + i * HOUR_MS, admitted: c.admitted, refused, upstreamFailed: c.upstreamFailed });
          });
      }),
    );
    hours.sort((a, b) => a.hourMs - b.hourMs || (a.keyId < b.keyId ? -1 : a.keyId > b.keyId ? 1 : 0) || (a.consumer < b.consumer ? -1 : 1));
    yield { keys, hours };
  }
}
