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

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

export interface LimiterStore {
  /**
   * `keyHash`, when given, is re-checked against the key's record in the same atomic call, so a revoke or a
   * rotation takes effect on the next request on every instance, whatever the key cache holds. `keyRevision`,
   * when given with it, is compared with the record too (Decision.keyRecord), so the cache knows its copy is current.
   * `credit`, when given, is added to the windows before the decision (the shared store; memory ignores it).
   */
  check(id: string, limits: KeyLimits, ban: BanPolicy, keyHash?: string, keyRevision?: string, credit?: WindowCredit): Promise<Decision>;
}

/** A key's ban as an administrator sees it. */
export interface BanState {
  /** When the current ban ends (epoch ms), or null when the key is not banned. */
  bannedUntilMs: number | null;
  /** The escalation level the next ban would build on: 0 once resetAfter has passed since the last ban ended. */
  level: number;
}

/** Where bans live, for administration (`keys show`, `keys unban`); the limit check writes them. */
export interface BanStore {
  /** The key's ban now, on the store's own clock (Redis TIME: the clock the limit script bans by). */
  banState(id: string, ban: BanPolicy): Promise<BanState>;
  /** Lifts the ban, and resets the escalation level and the strikes toward the next one. */
  unban(id: string): Promise<void>;
}
