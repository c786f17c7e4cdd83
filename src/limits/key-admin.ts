// A key's windows and ban, for administrators: read them as they stand, lift a ban, empty the windows. Key
// administration (src/keys/admin.ts) owns the key records; this owns what the limit check keeps about a key, and
// announces each change through its KeyChanges so every instance drops its cached copy and the audit hears of it.
import type { KeyAdmin } from '../keys/admin.js';
import type { Actor, Replication } from '../keys/key-changes.js';
import { effectiveLimits, type Limits } from '../keys/rules.js';
import type { KeyRecord } from '../keys/types.js';
import { keySubject } from './subject.js';
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

/** A key's limits as they stand, read without counting a request. */
export interface KeyLiveState {
  /** Null when the key's plan is not configured (its requests are refused with 503 until it is). */
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
  /** The ban ladder in force, for the level reset. */
  ban(): BanPolicy;
}

export class KeyLimitAdmin {
  constructor(
    private readonly keys: Pick<KeyAdmin, 'listing' | 'changes'>,
    private readonly bans: BanStore,
    private readonly policy: KeyLimitAdminPolicy,
  ) {}

  /** The key's windows and ban as they stand (one read-only store call): nothing is counted. */
  async liveState(k: KeyRecord): Promise<KeyLiveState> {
    const limits = effectiveLimits(k, this.policy.plans()[k.plan] as Limits | undefined);
    // The plan's two windows (a route's windows are shown by the quota endpoint, which knows the plan's routes).
    const s = await this.bans.snapshot(keySubject(k.id), limits ? planWindows(limits) : [], this.policy.ban());
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

  /** The key's ban now, as the limit check sees it (the store's clock). */
  async banState(id: string): Promise<BanView> {
    const s = await this.bans.snapshot(keySubject(id), [], this.policy.ban());
    return { bannedUntil: s.banMs > 0 ? new Date(s.now + s.banMs).toISOString() : null, banLevel: s.banLevel };
  }

  /** Lifts the key's ban and resets its escalation level; every instance forgets the ban it remembered. */
  async unban(id: string, actor?: Actor): Promise<{ replication: Replication }> {
    await this.keys.listing.require(id);
    await this.bans.unban(keySubject(id));
    await this.keys.changes.announce(id, 'unban', actor);
    return { replication: await this.keys.changes.replicated(id, []) };
  }

  /**
   * Empties the key's windows (its plan's minute and day, every configured route's) and its strikes (a ban in force
   * stays: unban lifts it), so a customer whose quota was spent by mistake is admitted again; every instance drops its
   * own copy of the key's windows.
   */
  async resetWindows(id: string, actor?: Actor): Promise<void> {
    await this.keys.listing.require(id);
    await this.bans.resetWindows(keySubject(id));
    await this.keys.changes.announce(id, 'reset', actor, 'windows');
  }
}
