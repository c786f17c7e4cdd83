// keys: static keys written in the file, for a gateway without Redis. Their fields follow the rules shared by every way
// a key is made (key-fields.ts), and the file holds each key's SHA-256, never the key itself.
import { z } from 'zod';
import { keyInputFields, sha256HexSchema } from '../key-fields.js';
import type { Ctx } from './fields.js';

/** A static key: a key record's fields by the rules every way in shares (key-fields.ts), with the key's SHA-256. */
const staticKey = z.strictObject({
  id: keyInputFields.id.describe('The static key\'s id (X-Consumer-Id upstream).'),
  plan: keyInputFields.plan.describe('A plan from plans.'),
  sha256: sha256HexSchema.describe('SHA-256 of the plaintext key, 64 lowercase hex digits.'),
  name: keyInputFields.name.optional().describe('A label.'),
  perMinute: keyInputFields.perMinute.optional().describe('This key\'s own limit per minute, over its plan\'s.'),
  perDay: keyInputFields.perDay.optional().describe('This key\'s own limit per day, over its plan\'s.'),
  expiresAt: keyInputFields.expiresAt.optional().describe('When the key stops working (ISO-8601).'),
  metadata: keyInputFields.metadata.optional().describe('Names and values a portal or billing system keeps on the key (at most 16), shown in usage reports.'),
});

export const keys = z.array(staticKey);

export function staticKeyIdsUnique(cfg: { keys: StaticKeyConfig[] }, ctx: Ctx): void {
  const seen = new Set<string>();
  cfg.keys.forEach((k, i) => {
    if (seen.has(k.id)) ctx.addIssue({ code: 'custom', path: ['keys', i, 'id'], message: 'duplicate key id', input: k.id });
    seen.add(k.id);
  });
}

export type StaticKeyConfig = z.output<typeof staticKey>;
