// selfService: the quota endpoint key holders call on the gateway port (their plan, windows and ban, counting nothing).
// Its path is checked against /v1 and the gateway's own paths here: a clash would quietly take requests meant for the
// upstream or the probes.
import { z } from 'zod';
import { isUnderUpstreamPrefix, UPSTREAM_PREFIX } from '../../http/paths.js';

/** Paths the gateway port answers itself: the quota endpoint may not take one of them, nor one under /v1. */
const RESERVED_PATHS = ['/healthz', '/readyz', '/metrics'];

export const selfService = z.strictObject({
  enabled: z.boolean().default(true).describe('GET <path> on the gateway port: the caller\'s own plan, windows and ban, counting nothing.'),
  path: z
    .string()
    .regex(/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/, 'expected an absolute path such as /ratelimit')
    .refine((p) => !isUnderUpstreamPrefix(p), `must not be under ${UPSTREAM_PREFIX} (those requests go to the upstream)`)
    .refine((p) => !RESERVED_PATHS.includes(p.toLowerCase()), `must not be one of ${RESERVED_PATHS.join(', ')}`)
    .default('/ratelimit').describe('Its path; not under /v1, not /healthz, /readyz or /metrics.'),
});
