// A key's windows and ban, for administrators: read them as they stand, lift a ban, empty the windows. Key
// administration (src/keys/admin.ts) owns the key records; this owns what the limit check keeps about a key, and
// announces each change through its KeyChanges so every instance drops its cached copy and the audit hears of it.
import type { KeyAdmin } from '../keys/admin.js';
import type { Actor, Replication } from '../keys/key-changes.js';
import { effectiveLimits, type Limits } from '../keys/rules.js';
import type { KeyRecord } from '../keys/types.js';
import { monthPeriod } from './months.js';
import { limitsInForce, type LimitedConsumer, type PlanLimits } from './quota.js';
import { banHolder, consumerSubject, keySubject, type QuotaSubject } from './subject.js';
import type { BanPolicy, BanStore, WindowState } from './types.js';
import { planWindows } from './windows.js';

/** A window of a key as it stands: requests counted, the limit, and when it resets (ISO-8601). */
export interface WindowView {
  name: 'minute' | 'day';
  used: number;
  limit: number;
  remaining: number;
  resetAt: string;
}

/** A window of a consumer's pool as it stands: its plan's minute and day, and its month when it has a monthly limit. */
export interface PoolWindowView {
  name: 'minute' | 'day' | 'month';
  used: number;
  limit: number;
  remaining: number;
  /** When the window ends (ISO-8601): a monthly one at its period's end, however little it has counted. */
  resetAt: string;
}

/** A key's limits as they stand, read without counting a request. */
export interface KeyLiveState {
  /**
   * Null when the key's plan is not configured (its requests are refused with 503 until it is), or when the key belongs
   * to a consumer: its plan windows are then its consumer's pool (the quota endpoint lists them, with its caps).
   */
  windows: WindowView[] | null;
  ban: { until: string; level: number } | null;
  /** The escalation level the next ban builds on (0 once resetAfter has passed since the last ban). */
  banLevel: number;
}

export interface BanView {
  /** ISO-8601, or null when the key is not banned. */
  bannedUntil: string | null;
  banLevel: number;
}

export interface KeyLimitAdminPolicy {
  /** The plans in force (the config's, read per call: a reload applies at once). */
  plans(): Readonly<Record<string, unknown>>;
  /** The ban ladder in force, for the level reset and its scope. */
  ban(): BanPolicy;
  /** The clock (epoch ms): which monthly period a reset empties. Absent: the system clock. */
  now?(): number;
}

/** A key record as the limits read it: with the consumer it belongs to, if any. */
type LimitedKeyRecord = KeyRecord & { consumer?: string | undefined };

/** The key's subject: in its consumer's slot when it has one. */
const subjectOf = (k: LimitedKeyRecord): QuotaSubject => keySubject(k.id, k.consumer);

/** The suffixes of the monthly windows now in force, whatever the billing day (at most 31 names, most the same). */
function monthSuffixes(now: number): string[] {
  const names = new Set<string>();
  for (let day = 1; day <= 31; day++) names.add(`month:${monthPeriod(now, day).name}`);
  return [...names];
}

export class KeyLimitAdmin {
  constructor(
    private readonly keys: Pick<KeyAdmin, 'listing' | 'changes'>,
    private readonly bans: BanStore,
    private readonly policy: KeyLimitAdminPolicy,
  ) {}

  /** The key's windows and ban as they stand (one read-only store call): nothing is counted. */
  async liveState(k: LimitedKeyRecord): Promise<KeyLiveState> {
    const subject = subjectOf(k);
    const limits = subject.pool ? undefined : effectiveLimits(k, this.policy.plans()[k.plan] as Limits | undefined);
    // The plan's two windows (a route's windows are shown by the quota endpoint, which knows the plan's routes).
    const s = await this.bans.snapshot(subject, limits ? planWindows(limits) : [], this.policy.ban());
    const view = (name: 'minute' | 'day', w: WindowState, limit: number): WindowView => ({
      name,
      used: w.used,
      limit,
      remaining: Math.max(0, limit - w.used),
      resetAt: new Date(s.now + w.resetMs).toISOString(),
    });
    return {
      windows: limits ? [view('minute', s.windows[0]!, limits.perMinute), view('day', s.windows[1]!, limits.perDay)] : null,
      ban: s.banMs > 0 ? { until: new Date(s.now + s.banMs).toISOString(), level: s.banLevel } : null,
      banLevel: s.banLevel,
    };
  }

  /**
   * A consumer's pool windows as they stand (the plan in force with the consumer's own limits that have not ended, as
   * the limit check counts its keys), read in one read-only store call: nothing is counted. Null when its plan is not
   * configured. Its keys' caps are theirs (GET /ratelimit lists them beside the pool).
   */
  async poolWindows(c: LimitedConsumer): Promise<PoolWindowView[] | null> {
    const now = this.policy.now?.() ?? Date.now();
    const plans = this.policy.plans();
    const pool = limitsInForce(c, Object.hasOwn(plans, c.plan) ? (plans[c.plan] as PlanLimits | undefined) : undefined, now);
    if (!pool) return null;
    const month = pool.limits.perMonth !== undefined ? monthPeriod(now, c.billingDay) : undefined;
    const windows = planWindows(pool.limits, 'enforce', month);
    const s = await this.bans.snapshot(consumerSubject(c.id), windows, this.policy.ban());
    return windows.map((w, i) => {
      const state = s.windows[i]!;
      return {
        name: w.name as PoolWindowView['name'],
        used: state.used,
        limit: w.limit,
        remaining: Math.max(0, w.limit - state.used),
        resetAt: new Date(w.endsAt ?? s.now + state.resetMs).toISOString(),
      };
    });
  }

  /** The key's ban now, as the limit check sees it (the store's clock). */
  async banState(id: string): Promise<BanView> {
    const k: LimitedKeyRecord | undefined = await this.keys.listing.get(id);
    const s = await this.bans.snapshot(k ? subjectOf(k) : keySubject(id), [], this.policy.ban());
    return { bannedUntil: s.banMs > 0 ? new Date(s.now + s.banMs).toISOString() : null, banLevel: s.banLevel };
  }

  /**
   * Lifts the key's ban and resets its escalation level; every instance forgets the ban it remembered. With
   * ban.scope consumer, a key of a consumer's ban is its consumer's: lifted for every key of it.
   */
  async unban(id: string, actor?: Actor): Promise<{ replication: Replication }> {
    const k: LimitedKeyRecord = await this.keys.listing.require(id);
    await this.bans.unban(banHolder(subjectOf(k), this.policy.ban().scope));
    await this.keys.changes.announce(id, 'unban', actor);
    return { replication: await this.keys.changes.replicated(id, []) };
  }

  /**
   * Empties the key's windows (its plan's minute, day and month, every configured route's) and its strikes (a ban in
   * force stays: unban lifts it), so a customer whose quota was spent by mistake is admitted again; every instance drops
   * its own copy of the key's windows. A key of a consumer: its caps inside the pool (the pool is the consumer's).
   */
  async resetWindows(id: string, actor?: Actor): Promise<void> {
    const k: LimitedKeyRecord = await this.keys.listing.require(id);
    await this.bans.resetWindows(subjectOf(k), monthSuffixes(this.policy.now?.() ?? Date.now()));
    await this.keys.changes.announce(id, 'reset', actor, 'windows');
  }
}
