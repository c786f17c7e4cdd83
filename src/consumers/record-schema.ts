// What each field of a consumer may hold, and what a stored consumer record is. The id, name, plan, metadata and
// own limits, scopes and address ranges follow a key's rules (config/key-fields.ts): a value a key refuses, a consumer
// refuses with the same message. The admin API, the CLI and the store all parse with these.
import { z } from 'zod';
import { keyInputFields, keyInstantSchema } from '../config/key-fields.js';

/** Far above any real customer's key count; a guard, not a quota. */
export const MAX_KEYS_MAX = 100_000;
const maxKeysMessage = `expected a whole number from 1 to ${MAX_KEYS_MAX}`;

const billingDayMessage = 'expected a day of the month, a whole number from 1 to 31 (31: the last day of shorter months)';

/** The fields an administrator gives a consumer (create, update), each by its one rule. */
export const consumerInputFields = {
  id: keyInputFields.id,
  name: keyInputFields.name,
  plan: keyInputFields.plan,
  metadata: keyInputFields.metadata,
  maxKeys: z.number(maxKeysMessage).int(maxKeysMessage).min(1, maxKeysMessage).max(MAX_KEYS_MAX, maxKeysMessage),
  billingDay: z.number(billingDayMessage).int(billingDayMessage).min(1, billingDayMessage).max(31, billingDayMessage),
  perMinute: keyInputFields.perMinute,
  perDay: keyInputFields.perDay,
  perMonth: keyInputFields.perMonth,
  limitsExpiresAt: keyInputFields.limitsExpiresAt,
  limitsReason: keyInputFields.limitsReason,
  scopes: keyInputFields.scopes,
  allowedCidrs: keyInputFields.allowedCidrs,
};

const f = consumerInputFields;

/** A consumer record as stored: what every instance's cache reads. Unknown fields are refused. */
export const consumerRecordSchema = z.strictObject({
  id: f.id,
  name: f.name,
  plan: f.plan,
  metadata: f.metadata.optional(),
  status: z.enum(['active', 'suspended']),
  maxKeys: f.maxKeys.optional(),
  billingDay: f.billingDay.optional(),
  perMinute: f.perMinute.optional(),
  perDay: f.perDay.optional(),
  perMonth: f.perMonth.optional(),
  limitsExpiresAt: f.limitsExpiresAt.optional(),
  limitsReason: f.limitsReason.optional(),
  scopes: f.scopes.optional(),
  allowedCidrs: f.allowedCidrs.optional(),
  createdAt: keyInstantSchema,
  updatedAt: keyInstantSchema.optional(),
  suspendedAt: keyInstantSchema.optional(),
});

/** The fields of a record in the order they are stored: the same record is always the same bytes. */
const FIELD_ORDER = Object.keys(consumerRecordSchema.shape) as Array<keyof z.infer<typeof consumerRecordSchema>>;

/** The record with its fields in their stored order and absent ones left out (never `undefined` in JSON). */
export function canonicalConsumer<T extends object>(c: T): T {
  const src = c as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of FIELD_ORDER) if (src[k] !== undefined) out[k] = src[k];
  return out as T;
}
