// What the what-if grouped by consumer reads of each pool: the consumer's plan in force, its own perMinute, perDay
// and perMonth while they are (an own limit past limitsExpiresAt is the plan's again, as the limit check has it) and
// the billing day its pool's months run from. It answers usage/whatif.ts's ConsumerPlans; the composition roots pass
// it in (consumers/ sits below usage/).
import type { Clock } from '../util/clock.js';
import { ConsumerStoreError, type ConsumerRecord, type ConsumerStore } from './types.js';

/** A consumer's plan and the own limits in force now (absent: the plan's apply). */
export interface ConsumerLimitsInForce {
  plan: string;
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  /** The pool's months run from this day (absent: calendar months). */
  billingDay?: number;
}

/** Records read at once. */
const READ_AT_ONCE = 16;

/** The consumer's plan and own limits at `nowMs`. */
export function limitsInForce(
  c: Pick<ConsumerRecord, 'plan' | 'perMinute' | 'perDay' | 'perMonth' | 'limitsExpiresAt' | 'billingDay'>,
  nowMs: number,
): ConsumerLimitsInForce {
  const own = c.limitsExpiresAt === undefined || nowMs < Date.parse(c.limitsExpiresAt);
  return {
    plan: c.plan,
    ...(own && c.perMinute !== undefined ? { perMinute: c.perMinute } : {}),
    ...(own && c.perDay !== undefined ? { perDay: c.perDay } : {}),
    ...(own && c.perMonth !== undefined ? { perMonth: c.perMonth } : {}),
    ...(c.billingDay !== undefined ? { billingDay: c.billingDay } : {}),
  };
}

/**
 * The consumers asked for, as the store has them now, by id: one that is not there, or whose record cannot be read,
 * is left out (its keys' usage is then in no plan's pools). Any other failure to read fails the answer, so a what-if
 * is complete or fails.
 */
export function consumerPlans(store: Pick<ConsumerStore, 'get'>, clock: Clock): (ids: readonly string[]) => Promise<Map<string, ConsumerLimitsInForce>> {
  return async (ids) => {
    const out = new Map<string, ConsumerLimitsInForce>();
    const now = clock.now();
    for (let i = 0; i < ids.length; i += READ_AT_ONCE) {
      const batch = ids.slice(i, i + READ_AT_ONCE);
      const records = await Promise.all(
        batch.map((id) =>
          store.get(id).catch((err: unknown) => {
            if (err instanceof ConsumerStoreError && err.code === 'invalid_record') return undefined;
            throw err;
          }),
        ),
      );
      records.forEach((c, j) => {
        if (c) out.set(batch[j]!, limitsInForce(c, now));
      });
    }
    return out;
  };
}
