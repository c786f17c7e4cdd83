// The portal's deprecated operations: the deprecated-route report (ReportRunner.deprecatedRoutes grouped by consumer,
// on the report thread: it reads every caller of every deprecated route) over 30 and 7 days, cut down to what this
// consumer (a key session: its key) called, with each route's dates, its successor and migration link, and the
// brownouts still to come. Operations not called in 30 days are left out; nothing of another caller leaves this file.
import { Router } from 'express';
import { z } from 'zod';
import type { PortalSession } from '../access/types.js';
import { parse, queryOf } from '../admin/requests.js';
import { parseInterval } from '../config/iso-interval.js';
import type { RouteConfig } from '../config/sections/routes.js';
import { H, NO_STORE } from '../http/headers.js';
import type { DeprecatedRouteReport } from '../usage/reports.js';
import { DAY_MS } from '../util/time.js';
import { consumerOf, sessionOf, type PortalApiDeps } from './api-context.js';
import { requireScope } from './session-guard.js';

const noQuery = z.strictObject({});

export interface PortalDeprecatedOperation {
  method: string;
  path: string;
  operationId?: string;
  calls7d: number;
  calls30d: number;
  lastCall: string | null;
  deprecation?: string;
  sunset?: string;
  /** The route that replaces it (routes[].successor): a URL or a path on this gateway. */
  successor?: string;
  /** Its migration documentation (routes[].link). */
  link?: string;
  /** Brownouts scheduled that have not ended, in order. */
  brownouts: Array<{ start: string; end: string }>;
}

/** This session's calls of one route in a report: its consumer's row, or (a key session) its key's. */
function callsIn(r: DeprecatedRouteReport, session: PortalSession): { calls: number; lastSeen: string | null } {
  if (session.kind === 'key') {
    const k = r.keys.find((x) => x.id === session.keyId);
    return k ? { calls: k.calls, lastSeen: k.lastSeen } : { calls: 0, lastSeen: null };
  }
  const c = r.consumers?.find((x) => x.consumer === session.consumer);
  return c ? { calls: c.calls, lastSeen: c.lastSeen } : { calls: 0, lastSeen: null };
}

/** The route's brownouts that end after `now` (those past are history), by start. */
function comingBrownouts(route: Pick<RouteConfig, 'brownouts'>, now: number): Array<{ start: string; end: string }> {
  const out: Array<{ startMs: number; endMs: number }> = [];
  for (const text of route.brownouts ?? []) {
    const b = parseInterval(text);
    if (b.ok && b.endMs > now) out.push(b);
  }
  return out.sort((a, b) => a.startMs - b.startMs).map((b) => ({ start: new Date(b.startMs).toISOString(), end: new Date(b.endMs).toISOString() }));
}

export function deprecatedRoutes(deps: PortalApiDeps): Router {
  const router = Router();

  router.get('/deprecated', requireScope('usage:read'), async (req, res) => {
    const session = sessionOf(req);
    if (!parse(noQuery, queryOf(req, res), 'query', res)) return;
    await consumerOf(deps, session);
    const now = deps.clock.now();
    // The deprecated routes of the config in force, in its order: each report lists them in the same order.
    const routes = deps.runtime.config.routes.filter((r) => r.deprecation !== undefined || r.deprecated === true);
    const [month, week] = await Promise.all([
      deps.reports.deprecatedRoutes(now - 30 * DAY_MS, now, routes, 'consumer'),
      deps.reports.deprecatedRoutes(now - 7 * DAY_MS, now, routes, 'consumer'),
    ]);
    const operations: PortalDeprecatedOperation[] = [];
    month.forEach((r, i) => {
      const route = routes[i];
      const in30 = callsIn(r, session);
      if (!route || in30.calls === 0) return;
      const in7 = week[i] ? callsIn(week[i], session) : { calls: 0, lastSeen: null };
      operations.push({
        method: r.method,
        path: r.path,
        ...(r.operationId !== undefined ? { operationId: r.operationId } : {}),
        calls7d: in7.calls,
        calls30d: in30.calls,
        lastCall: in30.lastSeen,
        ...(r.deprecation !== undefined ? { deprecation: r.deprecation } : {}),
        ...(r.sunset !== undefined ? { sunset: r.sunset } : {}),
        ...(route.successor !== undefined ? { successor: route.successor } : {}),
        ...(r.link !== undefined ? { link: r.link } : {}),
        brownouts: comingBrownouts(route, now),
      });
    });
    res.setHeader(H.cacheControl, NO_STORE);
    res.json({ operations });
  });

  return router;
}
