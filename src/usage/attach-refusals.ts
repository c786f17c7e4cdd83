// The attach preview's replay (keys/pool-refusals.ts): what keys would have been refused over the last 7 days had they
// shared a consumer's pool, read from the usage ledger alone and replayed against the pool's limits as the what-if
// replays a plan's new limits (whatif.ts). The ledger has, per key and hour, the requests admitted and the busiest
// minute window's count (peakMinute), never the requests' times, so the answer is an estimate; docs/keys-and-limits.md
// ("Attaching existing keys changes quotas") says how each figure is made and which way it errs.
//
// The pool's requests in an hour are its keys' admitted requests added up: what each joining key, and each key the
// consumer has now, was counted with no consumer (under its own limits), and what every key was counted under the
// consumer (already pooled). A joining key's hours in another consumer are left out: they were that pool's. Refused and
// banned requests are left out, as in the what-if: they may be retries that only the refusals then provoked.
// The pool's busiest minute in an hour is not in the ledger: it is estimated as the sum of the keys' own busiest
// minutes and the consumer's (its keys' checks reported the pool's window: the largest of them), as if they all fell
// in one window. Keys busy at the same time (one customer's production and staging, a burst spread over keys) make
// it exact; keys busy at different minutes of the hour make it larger than the truth, which lies between that sum and
// the largest of them. An hour's minute refusals are then the larger of: busiest minute − perMinute (that one window),
// and requests − 61 × perMinute (no more than 61 minute windows touch an hour, each admitting perMinute at most: a
// bound that holds whatever happened inside the hour, and the one that counts under steady traffic). Over the period,
// neighbouring hours' busiest windows may be one window that crossed the hour (counted once: whatif.ts's
// minuteTotal). The day window is the what-if's bound (dayAdmittedAtMost). The hour still running holds only what the
// gateways have flushed so far (usage.flushIntervalMs; its peakMinute at most once a minute): it lags.
import {
  REFUSED_HOURS,
  REFUSED_KEYS,
  type EstimatedRefusals,
  type PoolReplay,
  type PoolToReplay,
  type RefusedHour,
  type RefusedKey,
} from '../keys/pool-refusals.js';
import type { Clock } from '../util/clock.js';
import { HOUR_MS } from '../util/time.js';
import { spanOf, type UsageStore } from './store.js';
import { dayAdmittedAtMost, minuteTotal } from './whatif.js';

/** The period replayed: the last 7 days. */
export const REPLAY_DAYS = 7;

/** Minute windows (60 s each, one after another) that can touch one hour: 60 inside it and one across its start. */
const MINUTE_WINDOWS_PER_HOUR = 61;

/** Keys whose ledger is read at once (each one script call; the store's read limit bounds them too). */
const READ_AT_ONCE = 32;

/**
 * One key's hours: requests admitted and peakMinute, per hour of the period (0: its first); `pooled`: counted under the
 * consumer (its peaks are the pool's window), else with no consumer (its own window).
 */
export interface KeySeries {
  id: string;
  joining: boolean;
  pooled: boolean;
  requests: number[];
  peaks: number[];
}

/**
 * The replay over the ledger `store` (the admin connection's, reads bounded), for the last REPLAY_DAYS days to the
 * end of the hour running at `clock`'s now.
 */
export function replayPools(store: Pick<UsageStore, 'sumsUnder' | 'consumerKeys'>, clock: Clock): PoolReplay {
  return async (pools) => {
    const hour = Math.floor(clock.now() / HOUR_MS);
    const fromMs = (hour - REPLAY_DAYS * 24) * HOUR_MS;
    const toMs = (hour + 1) * HOUR_MS;
    const out: EstimatedRefusals[] = [];
    for (const pool of pools) out.push(estimate(await seriesOf(store, pool, fromMs, toMs), pool, fromMs, toMs));
    return out;
  };
}

/**
 * The pool's keys' hours: each joining key's and each member's with no consumer, and those of every key the consumer
 * ever counted (its ledger's set of keys) under it.
 */
async function seriesOf(store: Pick<UsageStore, 'sumsUnder' | 'consumerKeys'>, pool: PoolToReplay, fromMs: number, toMs: number): Promise<KeySeries[]> {
  const span = spanOf(fromMs, toMs);
  const joining = new Set(pool.joining);
  const reads: Array<{ id: string; under: string; joining: boolean }> = [
    ...[...new Set([...pool.joining, ...(pool.members ?? [])])].map((id) => ({ id, under: '', joining: joining.has(id) })),
    ...(pool.exists ? await store.consumerKeys(pool.consumer) : []).map((id) => ({ id, under: pool.consumer, joining: joining.has(id) })),
  ];
  const out: KeySeries[] = [];
  for (let i = 0; i < reads.length; i += READ_AT_ONCE) {
    const batch = reads.slice(i, i + READ_AT_ONCE);
    const sums = await Promise.all(batch.map((r) => store.sumsUnder(r.id, r.under, span, 'hour')));
    batch.forEach((r, j) => {
      const hours = sums[j]!;
      if (hours.every((h) => h.admitted === 0 && h.peakMinute === 0)) return;
      out.push({ id: r.id, joining: r.joining, pooled: r.under !== '', requests: hours.map((h) => h.admitted), peaks: hours.map((h) => h.peakMinute) });
    });
  }
  return out;
}

/** The estimate for one pool from its keys' hours (see the file's header). */
export function estimate(series: readonly KeySeries[], pool: Pick<PoolToReplay, 'limits'>, fromMs: number, toMs: number): EstimatedRefusals {
  const n = Math.round((toMs - fromMs) / HOUR_MS);
  const requests = new Array<number>(n).fill(0);
  const ownPeaks = new Array<number>(n).fill(0);
  const poolPeaks = new Array<number>(n).fill(0);
  for (const s of series)
    for (let i = 0; i < n; i++) {
      requests[i]! += s.requests[i] ?? 0;
      if (s.pooled) poolPeaks[i] = Math.max(poolPeaks[i]!, s.peaks[i] ?? 0);
      else ownPeaks[i]! += s.peaks[i] ?? 0;
    }
  const busiest = ownPeaks.map((p, i) => p + poolPeaks[i]!);
  const total = requests.reduce((a, b) => a + b, 0);

  const L = pool.limits.perMinute;
  const perHour = new Array<number>(n).fill(0);
  let minute: EstimatedRefusals['minute'] = null;
  if (L !== null) {
    const window = busiest.map((m) => Math.max(0, m - L));
    const spread = requests.map((d) => Math.max(0, d - MINUTE_WINDOWS_PER_HOUR * L));
    for (let i = 0; i < n; i++) perHour[i] = Math.max(window[i]!, spread[i]!);
    minute = {
      limit: L,
      pointsRefused: Math.max(
        minuteTotal(window),
        spread.reduce((a, b) => a + b, 0),
      ),
    };
  }
  const D = pool.limits.perDay;
  const day = D === null ? null : { limit: D, pointsRefused: Math.max(0, total - dayAdmittedAtMost(requests, D)) };
  const pointsRefused = Math.max(minute?.pointsRefused ?? 0, day?.pointsRefused ?? 0);

  const hours: Array<RefusedHour & { i: number }> = [];
  perHour.forEach((r, i) => {
    if (r > 0) hours.push({ i, start: new Date(fromMs + i * HOUR_MS).toISOString(), requests: requests[i]!, busiestMinute: busiest[i]!, pointsRefused: r });
  });
  hours.sort((a, b) => b.pointsRefused - a.pointsRefused || a.i - b.i);

  // Which requests a pool refuses depends on their order within the minute, which the ledger does not have: each key
  // gets the share of a refusing hour's refusals that its requests were of the hour's (its busiest minute's share in an
  // hour whose requests were all refused), or, when the day window refuses more, its share of the period's requests.
  const byMinute = (minute?.pointsRefused ?? 0) >= (day?.pointsRefused ?? 0);
  const weights = new Map<string, { joining: boolean; requests: number; weight: number }>();
  for (const s of series) {
    let weight = 0;
    if (byMinute)
      perHour.forEach((r, i) => {
        if (r === 0) return;
        const of = requests[i]! > 0 ? (s.requests[i] ?? 0) / requests[i]! : (s.peaks[i] ?? 0) / busiest[i]!;
        weight += r * of;
      });
    else weight = total > 0 ? s.requests.reduce((a, b) => a + b, 0) / total : 0;
    const w = weights.get(s.id) ?? { joining: false, requests: 0, weight: 0 };
    w.joining ||= s.joining;
    w.requests += s.requests.reduce((a, b) => a + b, 0);
    w.weight += weight;
    weights.set(s.id, w);
  }
  const ids = [...weights.keys()].sort();
  const shares = apportion(
    pointsRefused,
    ids.map((id) => weights.get(id)!.weight),
  );
  const keys: RefusedKey[] = ids
    .map((id, j) => ({ id, joining: weights.get(id)!.joining, requests: weights.get(id)!.requests, pointsRefused: shares[j]! }))
    .filter((k) => k.pointsRefused > 0)
    .sort((a, b) => b.pointsRefused - a.pointsRefused || (a.id < b.id ? -1 : 1));

  return {
    from: new Date(fromMs).toISOString(),
    to: new Date(toMs).toISOString(),
    requests: total,
    pointsRefused,
    minute,
    day,
    hoursAffected: hours.length,
    hours: hours.slice(0, REFUSED_HOURS).map(({ i: _i, ...h }) => h),
    keysAffected: keys.length,
    keys: keys.slice(0, REFUSED_KEYS),
  };
}

/** `total` split in whole parts by `weights` (largest remainders; ties to the earlier), adding up to `total`. */
export function apportion(total: number, weights: readonly number[]): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  if (total <= 0 || sum <= 0) return weights.map(() => 0);
  const exact = weights.map((w) => (total * w) / sum);
  const parts = exact.map(Math.floor);
  let left = total - parts.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, frac: x - Math.floor(x) })).sort((a, b) => b.frac - a.frac || a.i - b.i);
  for (const { i } of order) {
    if (left <= 0) break;
    parts[i]!++;
    left--;
  }
  return parts;
}
