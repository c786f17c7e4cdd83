// plans: the plans keys belong to, by name, each with its minute and day windows, an optional mode and candidate
// limits, and whether its consumers may create keys in the portal. Giving plans replaces the whole default set
// (DEFAULT_PLANS), so a plan nobody wrote never lingers in a deployment.
import { z } from 'zod';
import { positiveInt } from './fields.js';
import { limitMode, planCandidateLimits } from './limits.js';

const plan = z.strictObject({
  perMinute: positiveInt().describe('Points per minute a key of this plan may spend (a request takes its route\'s cost, 1 by default).'),
  perDay: positiveInt().describe('Points per day (24 hours from the window\'s first request) a key of this plan may spend.'),
  perMonth: positiveInt()
    .optional()
    .describe('Points per month a key of this plan (a consumer: all its keys together) may spend: the calendar month in UTC, or from the consumer\'s billingDay. Default: none (no monthly window).'),
  mode: limitMode().optional().describe('enforce or shadow for this plan\'s minute, day and month windows; default: limits.mode.'),
  shadow: planCandidateLimits
    .optional()
    .describe('Candidate limits ({ perMinute, perDay, enforceFrom }) checked in shadow beside the enforced ones, which keep refusing: a request they would refuse is counted shadowRefused and let through. Not for a key with its own override of that window. Default: none.'),
  selfServiceKeys: z
    .boolean()
    .optional()
    .describe('Whether consumers on this plan may create keys themselves in the consumer portal (a session with keys:write). false: their keys are issued by the provider (the admin API) only, and POST /api/keys answers 403 forbidden; rotating and revoking their own keys stay allowed, so a leaked key can still be replaced or stopped at any hour without the provider. Default: true.'),
});

export const DEFAULT_PLANS = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
  enterprise: { perMinute: 10_000, perDay: 10_000_000 },
};

/** Plan names: lowercase, and never "default", which routes[].limits uses for plans without an entry of their own. */
export const plans = z.record(
  z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]*$/, 'plan names are lowercase a-z 0-9 _ -')
    .refine((p) => p !== 'default', '"default" is reserved (routes[].limits uses it for plans without an entry)'),
  plan,
);

export type PlanConfig = z.output<typeof plan>;
