// What the usage ledger says keys would have been refused, had they shared a consumer's pool over the last 7 days: the
// part of the attach preview that reads the ledger. The estimate is made in usage/attach-refusals.ts; it is declared
// here, beside the limits it is compared with (limit-sums.ts), so that key administration (an import's dry run) and
// consumer administration (the attach preview) can ask for it without depending on usage/, which sits above both:
// the composition roots pass it in (KeyConsumers.replay).
import type { WindowLimits } from './limit-sums.js';

/** One pool to replay: the keys that would join it, and the limits they would share. */
export interface PoolToReplay {
  consumer: string;
  /** The consumer exists: what its keys were counted under it is in the pool too. */
  exists: boolean;
  /** The keys that would join, by id: what each was counted with no consumer (under its own limits). */
  joining: readonly string[];
  /**
   * The keys the consumer has now: what each was counted with no consumer (before it joined) is in the pool too, as a
   * joining key's, beside what every key was counted under the consumer.
   */
  members?: readonly string[];
  /** The pool's limits (the preview's "after"). */
  limits: WindowLimits;
}

/** One hour the pool would have refused in. */
export interface RefusedHour {
  start: string;
  /** Requests the pool's keys had admitted in the hour. */
  requests: number;
  /** Points: the pool's busiest minute window in the hour, as estimated (see usage/attach-refusals.ts). */
  busiestMinute: number;
  /** Points the minute window would have refused in the hour, about. */
  pointsRefused: number;
}

/** A key of the pool and its share of what the pool would have refused. */
export interface RefusedKey {
  id: string;
  /** False: a key the consumer has already (or had). */
  joining: boolean;
  /** Requests it had admitted in the period. */
  requests: number;
  /** Points of it refused, about: its share of each refusing hour's (or, for the day window, the period's) requests. */
  pointsRefused: number;
}

/** What a pool would have refused over the period: an estimate from the ledger's hourly counts and peak minutes. */
export interface EstimatedRefusals {
  /** The period replayed: whole hours, the hour still running included (its counts as flushed so far). */
  from: string;
  to: string;
  /** Requests the pool's keys had admitted in the period (refused ones are not offered again). */
  requests: number;
  /** Points refused, about: the larger of the windows' figures (one request may be refused by both). */
  pointsRefused: number;
  /** null: the pool has no such limit. */
  minute: { limit: number; pointsRefused: number } | null;
  day: { limit: number; pointsRefused: number } | null;
  /** Hours the minute window would have refused in (all of them); `hours`: the REFUSED_HOURS most refused, most first. */
  hoursAffected: number;
  hours: RefusedHour[];
  /** Keys with a share of the refusals (all of them); `keys`: the REFUSED_KEYS most refused, most first. */
  keysAffected: number;
  keys: RefusedKey[];
}

/** Hours and keys listed per pool at most (a bulk attach of thousands of keys would otherwise list them all). */
export const REFUSED_HOURS = 10;
export const REFUSED_KEYS = 100;

/** The replay of pools against the ledger: one answer per pool, in order. */
export type PoolReplay = (pools: readonly PoolToReplay[]) => Promise<EstimatedRefusals[]>;
