// What the consumers commands print: a consumer's limits in force as a person reads them, and its table row.
import type { Config } from '../../config/schema.js';
import type { ConsumerRecord } from '../../consumers/types.js';

/** Whether the consumer's own limits are in force at nowMs (none given, or past limitsExpiresAt: the plan's apply). */
export function ownLimitsInForce(c: ConsumerRecord, nowMs: number): boolean {
  const given = c.perMinute !== undefined || c.perDay !== undefined || c.perMonth !== undefined;
  return given && (c.limitsExpiresAt === undefined || nowMs < Date.parse(c.limitsExpiresAt));
}

/** "100/min 1000/day (own until 2027-01-01T00:00:00.000Z)": the pool's limits in force, the own ones where they apply. */
export function consumerLimitsOf(c: ConsumerRecord, config: Config, nowMs: number): string {
  const plan = config.plans[c.plan] as { perMinute?: number; perDay?: number; perMonth?: number } | undefined;
  const own = ownLimitsInForce(c, nowMs);
  const pick = (field: 'perMinute' | 'perDay' | 'perMonth') => (own ? c[field] : undefined) ?? plan?.[field];
  const parts = [`${pick('perMinute') ?? '?'}/min`, `${pick('perDay') ?? '?'}/day`];
  const month = pick('perMonth');
  if (month !== undefined) parts.push(`${month}/month`);
  return `${parts.join(' ')}${own ? ` (own${c.limitsExpiresAt ? ` until ${c.limitsExpiresAt}` : ''})` : ''}`;
}
