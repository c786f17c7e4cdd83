// The limiter store interface: one atomic check per request (key record, ban, every window that applies, strikes) of
// one subject (subject.ts). Redis runs it as one Lua script; memory runs the same rules in-process. One behaviour test
// covers both.
import type { QuotaSubject } from './subject.js';

export interface KeyLimits {
  perMinute: number;
  perDay: number;
  /** Points per monthly period (months.ts); absent: no monthly window. */
  perMonth?: number | undefined;
}

/** Whether a window refuses (enforce) or only reports what it would refuse (shadow). */
export type LimitMode = 'enforce' | 'shadow';

/** One window a request is checked and counted against (a plan's minute or day, or a route's). */
export interface WindowSpec {
  /**
   * Its name in the RateLimit headers and the quota endpoint: "minute", "day", "month", "<route>:minute",
   * "<route>:day"; a key's cap inside its consumer's pool: "key:minute", "key:day", "key:month".
   */
  readonly name: string;
  /**
   * Its Redis key under the subject's hash tag (Keyspace.limitWindow) and its memory counter: "minute",
   * "route:<route>:day", "month:<first day of the period>".
   */
  readonly suffix: string;
  readonly limit: number;
  /**
   * Its length. A monthly window's is its period's in a cached request (the RateLimit-Policy's `w`), and the time left
   * to the period's end once the request is taken at an instant (windows.ts atInstant): what its counter expires after.
   */
  readonly lengthMs: number;
  readonly mode: LimitMode;
  /**
   * A key's own limit inside its consumer's pool (a cap): counted under the key (`rl:{c:<consumer>}:key:<id>:<suffix>`),
   * not under the pool. Absent: the check's pool counts it.
   */
  readonly cap?: true;
  /** A monthly window: when its period ends (epoch ms, the gateway's clock). */
  readonly endsAt?: number;
}

/**
 * A candidate limit tried beside an enforced window (`plans.<p>.shadow`, `routes[].limits.<p>.shadow`): checked in
 * shadow on that window's own count, so it needs no counter (and no Redis command) of its own. A request it would
 * refuse is let through and counted as a shadow refusal; it never shows in the rate-limit headers.
 */
export interface CandidateSpec {
  /** "<window>:shadow": "minute:shadow", "store:day:shadow" (the quota endpoint, the shadow refusals metric). */
  readonly name: string;
  readonly limit: number;
  readonly lengthMs: number;
  /** The index in LimitRequest.windows of the window whose count it is checked on. */
  readonly of: number;
}

/**
 * Every window that applies to one request, and the points it takes from each when admitted. Built once per plan
 * limits, route and config (src/limits/windows.ts), never per request.
 */
export interface LimitRequest {
  readonly windows: readonly WindowSpec[];
  /**
   * Where the plan's minute and day windows are in `windows` (-1: not there): the fail-open memory path credits those
   * two back to Redis, and the usage ledger's peak minute reads the minute's count.
   */
  readonly plan: { readonly minute: number; readonly day: number };
  /** Bit i set: windows[i] is in shadow mode (the limit script's `shadow` argument). */
  readonly shadow: number;
  /** Candidate limits beside some of the windows; a decision's bit windows.length + j stands for candidates[j]. */
  readonly candidates: readonly CandidateSpec[];
  readonly cost: number;
  /**
   * The indices of the enforced windows: the only ones the rate-limit headers show (a client must not pace itself
   * by a limit that is not in force).
   */
  readonly shown: readonly number[];
  /** The RateLimit-Policy header of the enforced windows, formatted once ('' when none is enforced). */
  readonly policy: string;
  /** Per enforced window (in `shown`'s order), the start of its RateLimit item (rateLimitItemStart), formatted once. */
  readonly rateLimitItems: readonly string[];
  /**
   * The first enforced window whose whole limit is below the cost: the request can never be admitted, and is refused
   * (403 cost_exceeds_limit) before any store is asked.
   */
  readonly unpayable: WindowSpec | undefined;
  /**
   * The limit script's arguments after `shadow`, built once: per window its limit and length in ms; then per candidate
   * the window's position (from 1) and its limit (script-contract.ts: CHECK_CONTRACT.argv).
   */
  readonly scriptArgs: readonly number[];
  /** The indices of the monthly windows (their length is the time to their period's end: windows.ts atInstant). */
  readonly calendar: readonly number[];
}

/** Whether a ban refuses (enforce) or is only computed, counted and logged (shadow). */
export type BanMode = 'enforce' | 'shadow';

/** The limit check's ban mode for a policy: off when bans are disabled, else the ladder's mode (enforce by default). */
export function banModeOf(ban: BanPolicy): BanMode | 'off' {
  return ban.enabled === false ? 'off' : (ban.mode ?? 'enforce');
}

export interface BanPolicy {
  /** false: no ban is read, computed or written (no strikes); absent: true. */
  enabled?: boolean;
  /**
   * Whose ban a key of a consumer meets and builds: its own ('key', in its consumer's slot), or its consumer's, shared
   * by every key of it ('consumer'). A key without a consumer has its own either way. Absent: 'key'.
   */
  scope?: 'key' | 'consumer';
  /** Absent: enforce. */
  mode?: BanMode;
  threshold: number;
  windowSeconds: number;
  durationsSeconds: readonly number[];
  resetAfterSeconds: number;
}

/** A window as seen right after the check. */
export interface WindowState {
  /** Points taken in the current window (a request takes its cost). */
  used: number;
  /** Milliseconds until the window resets (a full window when it has not started). */
  resetMs: number;
}

export type Outcome =
  | 'admitted'
  /** An enforced window lacked the request's cost: Retry-After is when every such window has it again. */
  | 'limited'
  /** Already banned: the request was not counted anywhere. */
  | 'banned'
  /** This refusal reached the threshold and started a ban. */
  | 'banned_now'
  /** The key record in the store no longer accepts this key (revoked, or rotated past its grace): answer 401. */
  | 'invalid_key'
  /** The key record in the store is unreadable (not a JSON object): the key cannot be verified, answer 401. */
  | 'invalid_record';

/**
 * The usage ledger's kind of a counted request: a admitted, r refused by a window, b by a ban, f admitted and failed
 * by a target it reached, s refused by a window in shadow mode (proxied), w a request a ban in shadow mode would have
 * refused (beside its own kind), v a request that did not match its operation's OpenAPI description (beside its own
 * kind: counted by request validation, src/pipeline/stages/policy.ts). Defined beside the outcomes it records: the limiter decides, the
 * ledger (usage/) records its decisions.
 */
export type UsageKind = 'a' | 'r' | 'b' | 'f' | 's' | 'w' | 'v';

/** The usage ledger's kind of each outcome (a admitted, r refused by a window, b by a ban): the script's and memory's. */
export const LEDGER_KIND: Readonly<Record<Outcome, UsageKind>> = {
  admitted: 'a',
  limited: 'r',
  banned: 'b',
  banned_now: 'b',
  invalid_key: 'r',
  invalid_record: 'r',
};

export interface Decision {
  outcome: Outcome;
  /** Each window of the request (LimitRequest.windows, same order) as it stands after the decision. */
  windows: WindowState[];
  /**
   * Bit i set: window i lacked the request's cost points. On a refusal the enforced ones refused it; on an admitted
   * request only shadow windows can be short (a shadow refusal: nothing was taken from them). Bit windows.length + j:
   * candidate j would have refused it (its window took the cost all the same).
   */
  short: number;
  /** For refusals: milliseconds until a request would be admitted again (ban end, or every short window reset). */
  retryMs: number;
  /** Escalation level of the current or just-started ban (0 when none); with bans in shadow mode, the would-be ban's. */
  banLevel: number;
  /**
   * Bans in shadow mode only, absent otherwise: -1, a would-be ban in force would have refused this request; more than
   * 0, this request would have started a ban of that many ms (level banLevel). The request got what its windows said.
   */
  wouldBan?: number;
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
  /** Points (costs) owed to the plan's minute window, and how long the memory window still runs. */
  minute: number;
  minuteMs: number;
  /** Points owed to the plan's day window. */
  day: number;
  dayMs: number;
  /** Requests those points came from (the usage ledger counts requests, not points). */
  requests: number;
}

/**
 * A refund: one admitted request given back to the windows it was counted in (it never reached a target). Only a
 * window that is still the one the check counted in is given it back (a window that reset since is left alone), never
 * below zero; the ban ladder (strikes, bans, levels) is not touched.
 */
export interface Refund {
  /**
   * The windows the request took points from (a shadow window that was short took none), each with how long it runs
   * from now as the check saw it (its reset less the time since).
   */
  windows: ReadonlyArray<{ suffix: string; remainingMs: number; lengthMs: number; cap?: true }>;
  /** The points to give back to each: the request's cost. */
  cost: number;
  /** Decision.ledgerHour: the hour whose admitted count goes down by one (absent: the store did not count it). */
  ledgerHour?: number;
}

/** What an admitted request was charged, kept in its context until its response (KeyLimiter.refund). */
export interface Charge {
  /** The key's id (the usage ledger's). */
  id: string;
  /**
   * Whose windows it was counted in; for a key of a consumer its pool is the consumer whose ledger day counted it, so
   * a refund or an upstream failure goes to that ledger even after the key moved.
   */
  subject: QuotaSubject;
  /** Which store counted it: the shared one, memory alone (no Redis), or memory while Redis failed (failMode open). */
  by: 'shared' | 'memory' | 'fallback';
  decision: Decision;
  /** The windows and cost it was checked against. */
  request: LimitRequest;
  /** The gateway's clock when the store answered. */
  at: number;
}

export interface LimiterStore {
  /**
   * `keyHash`, when given, is re-checked against the key's record in the same atomic call, so a revoke or a
   * rotation takes effect on the next request on every instance, whatever the key cache holds. `keyRevision`,
   * when given with it, is compared with the record too (Decision.keyRecord), so the cache knows its copy is current;
   * the caller gives it only for a copy it has judged the key valid against as its current hash, so a record that is
   * still that revision is accepted without being decoded again.
   * `credit`, when given, is added to the windows before the decision (the shared store; memory ignores it).
   */
  check(subject: QuotaSubject, request: LimitRequest, ban: BanPolicy, keyHash?: string, keyRevision?: string, credit?: WindowCredit): Promise<Decision>;
  /**
   * The subject's windows and ban without counting anything (no window, strike or ban is written). With `keyHash`, the
   * key's record is checked to accept it in the same call, as check() does.
   */
  snapshot(subject: QuotaSubject, windows: readonly WindowSpec[], ban: BanPolicy, keyHash?: string): Promise<LimitSnapshot>;
  /** Gives one admitted request back (see Refund): one call, made only when the request reached no target. */
  refund(subject: QuotaSubject, refund: Refund): Promise<void>;
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
  /** Each window asked for, in order: points counted so far; resetMs: until it ends (a full window when not started). */
  windows: WindowState[];
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
  snapshot(subject: QuotaSubject, windows: readonly WindowSpec[], ban: BanPolicy): Promise<LimitSnapshot>;
  /**
   * Lifts the subject's ban (the ban holder's: subject.ts banHolder), and resets the escalation level and the strikes
   * toward the next one.
   */
  unban(subject: QuotaSubject): Promise<void>;
  /**
   * Empties the subject's windows (its plan's minute and day, every configured route's, the monthly ones whose suffixes
   * `months` names) and its strikes toward a ban, so its next request starts them afresh. For a key of a consumer these
   * are its caps: the pool is the consumer's. A ban in force stays (unban lifts it); the usage ledger keeps what was
   * counted.
   */
  resetWindows(subject: QuotaSubject, months?: readonly string[]): Promise<void>;
}
