// limits: whether windows refuse or only report (enforce or shadow), for every window without a mode of its own. Also
// the two shapes the window-bearing sections share (plans, routes[].limits, ban): the mode itself, and candidate limits
// tried in shadow beside an enforced window; defined once here, below those sections.
import { z } from 'zod';
import { positiveInt } from './fields.js';

export const limitMode = () => z.enum(['enforce', 'shadow'], { message: 'expected enforce or shadow' });

/**
 * Candidate limits tried beside enforced windows: checked in shadow on the enforced window's own count, never in the
 * rate-limit headers. A window that enforces nothing yet is a window of its own with mode: shadow instead.
 */
export const candidateLimits = z
  .strictObject({
    perMinute: positiveInt().optional().describe('A candidate per-minute limit, checked in shadow beside the enforced one. Default: none.'),
    perDay: positiveInt().optional().describe('A candidate per-day limit, checked in shadow beside the enforced one. Default: none.'),
  })
  .refine((l) => l.perMinute !== undefined || l.perDay !== undefined, 'expected perMinute and/or perDay');

export const limits = z.strictObject({
  mode: limitMode()
    .default('enforce')
    .describe('enforce: a window without room refuses (429). shadow: it only reports (headers, metrics, the ledger\'s shadowRefused) and the request goes through. For every window without a mode of its own.'),
});

export type LimitsConfig = z.output<typeof limits>;
