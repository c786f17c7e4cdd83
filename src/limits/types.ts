// The limiter store interface: one atomic check per request (ban, minute window, day window, ban strikes).
// Redis runs it as one Lua script; memory runs the same rules in-process. One behaviour test covers both.

export interface KeyLimits {
  perMinute: number;
  perDay: number;
}

export interface BanPolicy {
  threshold: number;
  windowSeconds: number;
  durationsSeconds: readonly number[];
  resetAfterSeconds: number;
}

/** A window as seen right after the check. */
export interface WindowState {
  /** Requests admitted in the current window. */
  used: number;
  /** Milliseconds until the window resets (a full window when it has not started). */
  resetMs: number;
}

export type Outcome =
  | 'admitted'
  | 'limited_minute'
  | 'limited_day'
  /** Refused by both windows: Retry-After is the later reset. */
  | 'limited_both'
  /** Already banned: the request was not counted anywhere. */
  | 'banned'
  /** This refusal reached the threshold and started a ban. */
  | 'banned_now'
  /** The key record in the store no longer accepts this key (revoked, or rotated past its grace): answer 401. */
  | 'invalid_key'
  /** The key record in the store is unreadable (not a JSON object): the key cannot be verified, answer 401. */
  | 'invalid_record';

export interface Decision {
  outcome: Outcome;
  minute: WindowState;
  day: WindowState;
  /** For refusals: milliseconds until a request would be admitted again (ban end, or window reset). */
  retryMs: number;
  /** Escalation level of the current or just-started ban (0 when none). */
  banLevel: number;
  /**
   * Only when the check was given a record revision and the key is still valid: whether the stored record is still
   * exactly that revision ('current') or has changed since the caller read it ('changed').
   */
  keyRecord?: 'current' | 'changed';
  /**
   * With the usage ledger on Redis: the UTC hour (hours since 1970, Redis's clock) the ledger counted this decision in,
   * so a refund takes it back from the same hour.
   */
  ledgerHour?: number;
}

/**
 * Requests an instance admitted from its memory windows while Redis was out of reach, handed to the next Redis check
 * of the key so the shared windows count them too; `minuteMs`/`dayMs`: how long the memory window they were counted
 * in still runs (the length a Redis window that has lapsed meanwhile is started with).
 */
export interface WindowCredit {
  minute: number;
  minuteMs: number;
  day: number;
  dayMs: number;
}

/**
 * A refund: one admitted request given back to the windows it was counted in (the upstream gave no response). Only a
 * window that is still the one the check counted in is given it back (a window that reset since is left alone), never
 * below zero; the ban ladder (strikes, bans, levels) is not touched.
 */
export interface Refund {
  /** How long the minute window the check counted in runs from now, as the check saw it (its reset less the time since). */
  minuteMs: number;
  /** The same for the day window. */
  dayMs: number;
  /** Decision.ledgerHour: the ledger's admitted count to move to upstreamFailed (absent: the store did not count it). */
  ledgerHour?: number;
}

/** What an admitted request was charged, kept in its context until its response (KeyLimiter.refund). */
export interface Charge {
  id: string;
  /** Which store counted it: the shared one, memory alone (no Redis), or memory while Redis failed (failMode open). */
  by: 'shared' | 'memory' | 'fallback';
  decision: Decision;
  /** The gateway's clock when the store answered. */
  at: number;
}

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

export interface LimiterStore {
  /**
   * `keyHash`, when given, is re-checked against the key's record in the same atomic call, so a revoke or a
   * rotation takes effect on the next request on every instance, whatever the key cache holds. `keyRevision`,
   * when given with it, is compared with the record too (Decision.keyRecord), so the cache knows its copy is current;
   * the caller gives it only for a copy it has judged the key valid against as its current hash, so a record that is
   * still that revision is accepted without being decoded again.
   * `credit`, when given, is added to the windows before the decision (the shared store; memory ignores it).
   */
  check(id: string, limits: KeyLimits, ban: BanPolicy, keyHash?: string, keyRevision?: string, credit?: WindowCredit): Promise<Decision>;
  /**
   * The key's windows and ban without counting anything (no window, strike or ban is written). With `keyHash`, the
   * key's record is checked to accept it in the same call, as check() does.
   */
  snapshot(id: string, ban: BanPolicy, keyHash?: string): Promise<LimitSnapshot>;
  /** Gives one admitted request back (see Refund): one call, made only when the upstream failed the request. */
  refund(id: string, refund: Refund): Promise<void>;
}

/** A key's ban as an administrator sees it. */
export interface BanState {
  /** When the current ban ends (epoch ms), or null when the key is not banned. */
  bannedUntilMs: number | null;
  /** The escalation level the next ban would build on: 0 once resetAfter has passed since the last ban ended. */
  level: number;
}

/** A key's windows and ban as they stand, read without counting anything (the quota endpoint, the admin API). */
export interface LimitSnapshot {
  /**
   * 'ok'; when a key hash was given and the key's record no longer accepts it (revoked, rotated past its grace,
   * deleted), 'invalid_key'; when the record cannot be read, 'invalid_record'. Windows and ban are zero then.
   */
  key: 'ok' | 'invalid_key' | 'invalid_record';
  /** The store's clock when it read them (epoch ms; Redis TIME): resets and the ban end are relative to it. */
  now: number;
  /** Requests counted so far; resetMs: until the window ends (a full window when it has not started). */
  minute: WindowState;
  day: WindowState;
  /** Milliseconds until the ban ends; 0 when the key is not banned. */
  banMs: number;
  banLevel: number;
}

/** Where bans and windows live, for administration (`keys show`, `keys unban`, `keys reset`); the limit check writes them. */
export interface BanStore {
  /**
   * The key's windows and ban now, counting nothing (one read-only call), on the store's own clock (Redis TIME: the
   * clock the limit script bans by).
   */
  snapshot(id: string, ban: BanPolicy): Promise<LimitSnapshot>;
  /** Lifts the ban, and resets the escalation level and the strikes toward the next one. */
  unban(id: string): Promise<void>;
  /**
   * Empties the key's minute and day windows and its strikes toward a ban, so its next request starts both windows
   * afresh. A ban in force stays (unban lifts it); the usage ledger keeps what was counted.
   */
  resetWindows(id: string): Promise<void>;
}
