// The portal's usage and refusals over the last 30 days: a link session sees its consumer's (what every key counted
// while in it: ReportRunner.consumerUsage, on the report thread), a key session its own key's counts under this
// consumer (UsageReports, one key). The month against its monthly limit; the refusals by day, the bans in force, and
// what the plan's candidate limits (plans.<plan>.shadow) would have refused.
import { Router, type Response } from 'express';
import { z } from 'zod';
import type { PortalSession } from '../access/types.js';
import { parse, queryOf } from '../admin/requests.js';
import type { ConsumerRecord } from '../consumers/types.js';
import { H, NO_STORE } from '../http/headers.js';
import { monthPeriod } from '../limits/months.js';
import { capsInForce, limitsInForce, type PlanLimits } from '../limits/quota.js';
import { planCandidates } from '../limits/windows.js';
import type { Granularity, UsageBucket, UsageCounts } from '../usage/reports.js';
import { DAY_MS, HOUR_MS } from '../util/time.js';
import { consumerOf, sessionOf, visibleKeys, type PortalApiDeps } from './api-context.js';
import { requireScope } from './session-guard.js';

/** What the portal shows of usage: the last 30 days. */
export const PORTAL_USAGE_DAYS = 30;

const usageQuery = z.strictObject({ granularity: z.enum(['hour', 'day'], 'expected hour or day').default('day') });
const noQuery = z.strictObject({});

/** The counts the portal shows (the ledger's others, such as wouldBan, are the operator's). */
export interface PortalCounts {
  admitted: number;
  rateLimited: number;
  banned: number;
  upstreamFailed: number;
  shadowRefused: number;
}

const counts = (c: UsageCounts): PortalCounts => ({
  admitted: c.admitted,
  rateLimited: c.rateLimited,
  banned: c.banned,
  upstreamFailed: c.upstreamFailed,
  shadowRefused: c.shadowRefused,
});

const ZERO: UsageCounts = { admitted: 0, rateLimited: 0, banned: 0, upstreamFailed: 0, shadowRefused: 0, wouldBan: 0, validationFailed: 0 };

/** Why a ban is: the ban ladder bans a key (or its consumer) only after repeated 429s (the `ban` section). */
const BAN_REASON = 'repeated requests past a rate limit (429s)';

/** The last 30 days in whole buckets: up to the end of the current hour (or UTC day), so hour has exactly 720. */
export function lastDays(now: number, granularity: Granularity): { fromMs: number; toMs: number } {
  const step = granularity === 'hour' ? HOUR_MS : DAY_MS;
  const toMs = Math.floor(now / step) * step + step;
  return { fromMs: toMs - PORTAL_USAGE_DAYS * DAY_MS, toMs };
}

/**
 * The session's usage in [fromMs, toMs): the consumer's (report thread) or the key's counts made under this consumer
 * (a key moved here from elsewhere brings none of what it did there).
 */
async function usageOf(
  deps: PortalApiDeps,
  session: PortalSession,
  fromMs: number,
  toMs: number,
  granularity: Granularity,
): Promise<{ buckets: UsageBucket[]; totals: UsageCounts }> {
  if (session.kind === 'link') return deps.reports.consumerUsage(session.consumer, fromMs, toMs, granularity);
  const keys = await visibleKeys(deps, session);
  const key = keys[0];
  if (!key) return { buckets: [], totals: ZERO };
  const u = await deps.reports.keyUsageByConsumer(key.id, fromMs, toMs, granularity);
  const mine = u.consumers.find((s) => s.consumer === session.consumer);
  if (mine) return mine;
  // Nothing counted under this consumer: every bucket empty.
  return { buckets: u.buckets.map((b) => ({ ...b, ...ZERO, peakMinute: 0 })), totals: ZERO };
}

/**
 * The month so far against its limit: a link session's pool (perMonth in force, the live monthly window the limit
 * check counts in), a key session's key (its own monthly cap, if it has one). Without a monthly limit, used is what
 * the ledger admitted since the period began.
 */
async function monthOf(
  deps: PortalApiDeps,
  session: PortalSession,
  c: ConsumerRecord,
  now: number,
): Promise<{ from: string; to: string; used: number; perMonth: number | null }> {
  const period = monthPeriod(now, c.billingDay);
  const head = { from: new Date(period.startMs).toISOString(), to: new Date(period.endMs).toISOString() };
  const plans = deps.runtime.config.plans as Readonly<Record<string, PlanLimits | undefined>>;
  if (session.kind === 'link') {
    const pool = limitsInForce(c, Object.hasOwn(plans, c.plan) ? plans[c.plan] : undefined, now);
    const perMonth = pool?.limits.perMonth;
    if (perMonth !== undefined) {
      const month = (await deps.keyLimits.poolWindows(c))?.find((w) => w.name === 'month');
      if (month) return { ...head, used: month.used, perMonth };
    }
    const u = await deps.reports.consumerUsage(c.id, period.startMs, now + 1, 'day');
    return { ...head, used: u.totals.admitted, perMonth: perMonth ?? null };
  }
  const key = (await visibleKeys(deps, session))[0];
  const cap = key ? capsInForce(key, now)?.perMonth : undefined;
  const u = await usageOf(deps, session, period.startMs, now + 1, 'day');
  return { ...head, used: u.totals.admitted, perMonth: cap ?? null };
}

export function usageRoutes(deps: PortalApiDeps): Router {
  const router = Router();

  router.get('/usage', requireScope('usage:read'), async (req, res) => {
    const session = sessionOf(req);
    const q = parse(usageQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const c = await consumerOf(deps, session);
    const now = deps.clock.now();
    const p = lastDays(now, q.granularity);
    const [u, month] = await Promise.all([usageOf(deps, session, p.fromMs, p.toMs, q.granularity), monthOf(deps, session, c, now)]);
    noStore(res).json({
      granularity: q.granularity,
      from: new Date(p.fromMs).toISOString(),
      to: new Date(p.toMs).toISOString(),
      buckets: u.buckets.map((b) => ({ start: b.start, ...counts(b) })),
      totals: counts(u.totals),
      month,
    });
  });

  router.get('/refusals', requireScope('usage:read'), async (req, res) => {
    const session = sessionOf(req);
    if (!parse(noQuery, queryOf(req, res), 'query', res)) return;
    const c = await consumerOf(deps, session);
    const now = deps.clock.now();
    const p = lastDays(now, 'day');
    const [u, bans] = await Promise.all([usageOf(deps, session, p.fromMs, p.toMs, 'day'), bansOf(deps, session)]);
    noStore(res).json({
      days: PORTAL_USAGE_DAYS,
      from: new Date(p.fromMs).toISOString(),
      to: new Date(p.toMs).toISOString(),
      refusals: {
        rateLimited: u.totals.rateLimited,
        banned: u.totals.banned,
        byDay: u.buckets.map((b) => ({ start: b.start, rateLimited: b.rateLimited, banned: b.banned })),
      },
      bans,
      shadow: candidatesOf(deps, c, now).map((cand) => ({ ...cand, wouldHaveRefused: u.totals.shadowRefused, since: new Date(p.fromMs).toISOString() })),
    });
  });

  return router;
}

function noStore(res: Response): Response {
  return res.setHeader(H.cacheControl, NO_STORE);
}

/** The bans in force on the session's keys (not revoked), as the limit check sees them now. */
async function bansOf(deps: PortalApiDeps, session: PortalSession): Promise<Array<{ key: string; until: string; level: number; reason: string }>> {
  const keys = (await visibleKeys(deps, session)).filter((k) => k.status !== 'revoked').sort((a, b) => a.id.localeCompare(b.id));
  const out: Array<{ key: string; until: string; level: number; reason: string }> = [];
  for (let i = 0; i < keys.length; i += BAN_READS_IN_FLIGHT) {
    const states = await Promise.all(keys.slice(i, i + BAN_READS_IN_FLIGHT).map((k) => deps.keyLimits.liveState(k)));
    states.forEach((s, j) => {
      if (s.ban) out.push({ key: keys[i + j]!.id, until: s.ban.until, level: s.ban.level, reason: BAN_REASON });
    });
  }
  return out;
}

/** Keys whose ban is read at once. */
const BAN_READS_IN_FLIGHT = 8;

/**
 * The candidate limits in force on the consumer's plan (plans.<plan>.shadow), less those its own limits override, each
 * with the date they are announced to be enforced from (plans.<plan>.shadow.enforceFrom, as configured) when there is one.
 */
function candidatesOf(deps: PortalApiDeps, c: ConsumerRecord, now: number): Array<{ window: 'minute' | 'day'; limit: number; enforceFrom?: string }> {
  const config = deps.runtime.config;
  const plans = config.plans as Readonly<Record<string, PlanLimits | undefined>>;
  const pool = limitsInForce(c, Object.hasOwn(plans, c.plan) ? plans[c.plan] : undefined, now);
  const cand = planCandidates(config, c.plan, pool?.own ?? 0);
  const enforceFrom = Object.hasOwn(config.plans, c.plan) ? config.plans[c.plan]!.shadow?.enforceFrom : undefined;
  const dated = enforceFrom === undefined ? {} : { enforceFrom };
  const out: Array<{ window: 'minute' | 'day'; limit: number; enforceFrom?: string }> = [];
  if (cand?.perMinute !== undefined) out.push({ window: 'minute', limit: cand.perMinute, ...dated });
  if (cand?.perDay !== undefined) out.push({ window: 'day', limit: cand.perDay, ...dated });
  return out;
}
