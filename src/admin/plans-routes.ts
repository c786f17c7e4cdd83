// The admin API's plans: the plans in force (GET /plans, and in GET /status beside the Redis state), and the what-if
// (POST /plans/simulate: a plan's new limits against the ledger). Plans are read per request, so a reload applies at once.
import { Router } from 'express';
import { sendError } from '../http/errors.js';
import type { Runtime } from '../routing/runtime.js';
import type { ReportRunner } from '../usage/report-runner.js';
import { decodeWhatIfCursor, type WhatIfCursor } from '../usage/whatif-pages.js';
import type { SimulateInput } from '../usage/whatif.js';
import { DAY_MS } from '../util/time.js';
import { parse, periodOf, periodView, sendProblems } from './requests.js';
import { simulateBody } from './schemas.js';

export interface PlansRoutesOptions {
  runtime: Runtime;
  /** Runs the what-if over every key (usage/report-runner.ts). */
  reports: ReportRunner;
  /** Whether the gateway's Redis answers ('ok'), is being worked around ('degraded'), or there is none ('none'). */
  redisState: () => Promise<'ok' | 'degraded' | 'none'>;
}

export function plansRoutes(o: PlansRoutesOptions): Router {
  const { runtime } = o;
  const router = Router();

  router.get('/status', async (_req, res) => {
    res.json({
      redis: await o.redisState(),
      usageRetentionDays: runtime.config.usage.retentionDays,
      plans: plansView(runtime),
    });
  });

  router.get('/plans', (_req, res) => {
    res.json({ plans: plansView(runtime) });
  });

  // A read, though a POST: the question has a body. Nothing is changed, so nothing is audited. The answer is bounded:
  // totals, the keys most refused (each with its most refused hours), the rest of the keys by cursor.
  router.post('/plans/simulate', async (req, res) => {
    const body = parse(simulateBody, req.body ?? {}, 'body', res);
    if (!body) return;
    let first: SimulateInput | WhatIfCursor;
    if (body.cursor !== undefined) {
      const at = decodeWhatIfCursor(body.cursor);
      if (!at) return sendProblems(res, [{ path: 'body.cursor', message: 'not a cursor this API gave out (use nextCursor from a previous answer)' }]);
      first = at;
    } else {
      const plan = body.plan!;
      const current = Object.hasOwn(runtime.config.plans, plan) ? runtime.config.plans[plan] : undefined;
      if (!current) return sendError(res, 'unknown_plan', `no plan named "${plan}" (configured: ${Object.keys(runtime.config.plans).join(', ')})`);
      const p = periodOf(body, 7 * DAY_MS, runtime.config.usage.retentionDays, res, 'body.from');
      if (!p) return;
      first = {
        plan,
        current: { perMinute: current.perMinute, perDay: current.perDay, ...(current.perMonth !== undefined ? { perMonth: current.perMonth } : {}) },
        perMinute: body.perMinute,
        perDay: body.perDay,
        ...(body.perMonth !== undefined ? { perMonth: body.perMonth } : {}),
        ...p,
        ...(body.groupBy === 'consumer' ? { groupBy: 'consumer' as const } : {}),
      };
    }
    const page = await o.reports.simulate(first, body.limit);
    const q = page.input;
    res.json({
      plan: q.plan,
      ...periodView(q),
      current: q.current,
      simulated: {
        ...(q.perMinute !== undefined ? { perMinute: q.perMinute } : {}),
        ...(q.perDay !== undefined ? { perDay: q.perDay } : {}),
        ...(q.perMonth !== undefined ? { perMonth: q.perMonth } : {}),
      },
      unit: 'points',
      totals: page.totals,
      // Grouped by consumer: the plan's consumers' pools (and their totals) instead of its keys.
      ...(q.groupBy === 'consumer' ? { groupBy: 'consumer', consumers: page.consumers ?? [] } : { keys: page.keys }),
      nextCursor: page.next,
    });
  });

  return router;
}

/**
 * The plans in force, as the API lists them (read per call: a reload applies at once): their windows' mode, and their
 * candidate limits (checked in shadow) when they have some, with the date they are announced to be enforced from if given.
 */
function plansView(runtime: Runtime): Array<{
  name: string;
  perMinute: number;
  perDay: number;
  mode: 'enforce' | 'shadow';
  shadow?: { perMinute?: number; perDay?: number; enforceFrom?: string };
}> {
  const { plans, limits } = runtime.config;
  return Object.keys(plans).map((name) => {
    const p = plans[name]!;
    return { name, perMinute: p.perMinute, perDay: p.perDay, mode: p.mode ?? limits.mode, ...(p.shadow ? { shadow: { ...p.shadow } } : {}) };
  });
}
