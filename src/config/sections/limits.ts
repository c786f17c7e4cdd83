// limits: whether windows refuse or only report (enforce or shadow), for every window without a mode of its own. Also
// the two shapes the window-bearing sections share (plans, routes[].limits, ban): the mode itself, and candidate limits
// tried in shadow beside an enforced window; defined once here, below those sections.
import { z } from 'zod';
import { positiveInt } from './fields.js';

export const limitMode = () => z.enum(['enforce', 'shadow'], { message: 'expected enforce or shadow' });

const candidateNumbers = {
  perMinute: positiveInt().optional().describe('A candidate per-minute limit, checked in shadow beside the enforced one. Default: none.'),
  perDay: positiveInt().optional().describe('A candidate per-day limit, checked in shadow beside the enforced one. Default: none.'),
};

const someCandidate = (l: { perMinute?: number | undefined; perDay?: number | undefined }) => l.perMinute !== undefined || l.perDay !== undefined;

/**
 * Candidate limits tried beside enforced windows: checked in shadow on the enforced window's own count, never in the
 * rate-limit headers. A window that enforces nothing yet is a window of its own with mode: shadow instead.
 */
export const candidateLimits = z.strictObject(candidateNumbers).refine(someCandidate, 'expected perMinute and/or perDay');

/**
 * A plan's candidate limits, which may also say when they are announced to be enforced (enforceFrom): a date for the
 * consumer portal and for the warning once it is past, never read on the request path.
 */
export const planCandidateLimits = z
  .strictObject({
    ...candidateNumbers,
    enforceFrom: z
      .union([z.iso.date(), z.iso.datetime({ offset: true })], {
        error: 'expected an ISO-8601 date such as 2027-01-15, or a date-time such as 2027-01-15T00:00:00Z',
      })
      .optional()
      .describe(
        'When these candidate limits are announced to be enforced: an ISO-8601 date (2027-01-15, midnight UTC) or date-time. Descriptive only: it changes nothing on the request path, and the candidates stay in shadow until their numbers are moved into the plan; the consumer portal says "a limit coming on <date>", and config check and a (re)start warn once it is past. Default: none.',
      ),
  })
  .refine(someCandidate, 'expected perMinute and/or perDay');

export const limits = z.strictObject({
  mode: limitMode()
    .default('enforce')
    .describe('enforce: a window without room refuses (429). shadow: it only reports (headers, metrics, the ledger\'s shadowRefused) and the request goes through. For every window without a mode of its own.'),
});

export type LimitsConfig = z.output<typeof limits>;
