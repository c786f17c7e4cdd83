// routes[].limits: a route's own windows, beside its plan's. A keyed route's are by plan name (per key); a public
// route's are { perMinute, perDay } per client address. Two shapes under one field, told apart by the route's auth and
// refused when mixed, since read the other way either would meter something other than what was meant.
import { z } from 'zod';
import { positiveInt, type Ctx } from './fields.js';
import { candidateLimits } from './limits.js';

/** A route's windows for one plan: perMinute and/or perDay. */
export const routeWindowLimits = z
  .strictObject({
    perMinute: positiveInt().optional().describe('Points per minute a key may spend on this route.'),
    perDay: positiveInt().optional().describe('Points per day a key may spend on this route.'),
    shadow: candidateLimits
      .optional()
      .describe('Candidate limits for these windows, checked in shadow beside them (each needs its enforced window: perMinute for shadow.perMinute). Default: none.'),
  })
  .refine((l) => l.perMinute !== undefined || l.perDay !== undefined, 'expected perMinute and/or perDay')
  .superRefine(candidatesHaveWindows);

/** A candidate limit is tried on its enforced window's count: without that window there is nothing to try it on. */
function candidatesHaveWindows(l: { perMinute?: number | undefined; perDay?: number | undefined; shadow?: { perMinute?: number | undefined; perDay?: number | undefined } | undefined }, ctx: Ctx): void {
  for (const w of ['perMinute', 'perDay'] as const) {
    if (l.shadow?.[w] !== undefined && l[w] === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['shadow', w],
        message: `a candidate ${w} needs an enforced ${w} beside it; for a window that enforces nothing yet, set ${w} with the route's mode: shadow`,
        input: l.shadow[w],
      });
    }
  }
}

/** The two shapes of routes[].limits, by the route's auth: per client address (public) or per plan (keyed). */
export const ADDRESS_WINDOWS = ['perMinute', 'perDay'] as const;

/**
 * A public route's limits count per client address ({ perMinute, perDay }); a keyed route's name plans. One shape
 * where the other belongs, or both mixed, is refused here: read either way it would meter something else than meant.
 */
export function routeLimitsMatchAuth(r: { auth?: 'key' | 'none' | undefined; cost: number; limits?: Record<string, unknown> | undefined }, ctx: Ctx): void {
  if (!r.limits) return;
  const entries = Object.entries(r.limits);
  const byAddress = entries.filter(([name]) => (ADDRESS_WINDOWS as readonly string[]).includes(name));
  if (r.auth === 'none') {
    for (const [name, value] of entries) {
      if (typeof value === 'number' && byAddress.some(([n]) => n === name)) continue;
      ctx.addIssue({
        code: 'custom',
        path: ['limits', name],
        message: byAddress.some(([n]) => n === name)
          ? `a public route's ${name} is a number: points per client address`
          : `a public route (auth: none) has limits per client address, { perMinute, perDay }; windows by plan ("${name}") need auth: key (a key on a public route is metered by its plan)`,
        input: value,
      });
    }
    if (entries.length === 0) ctx.addIssue({ code: 'custom', path: ['limits'], message: 'expected perMinute and/or perDay', input: r.limits });
    for (const [name, value] of byAddress) {
      if (typeof value === 'number' && value < r.cost) {
        ctx.addIssue({
          code: 'custom',
          path: ['limits', name],
          message: `${name} ${value} is below the route's cost ${r.cost}: no request without a key could ever be admitted`,
          input: value,
        });
      }
    }
    return;
  }
  for (const [name, value] of entries) {
    if (typeof value !== 'number') continue;
    ctx.addIssue({
      code: 'custom',
      path: ['limits', name],
      message: byAddress.length > 0
        ? `limits.${name} counts per client address, which only a public route (auth: none) has; a keyed route's windows go by plan: limits: { default: { ${name}: ${value} } }`
        : `expected the windows of plan "${name}": { perMinute, perDay }`,
      input: value,
    });
  }
}

/** A keyed route's windows for one plan (routes[].limits.<plan>). */
export type RouteWindowLimitsConfig = z.output<typeof routeWindowLimits>;
