// The key record schema: what a stored key record is. Its administrator-given fields are config/key-fields.ts's (the
// rules the admin API, the CLI, an import and a static key share); the fields only Tollgate sets (status, hashes,
// rotation and revocation dates) are added here. An export record is checked against it on import.
import { z } from 'zod';
import { keyInputFields, keyInstantSchema, sha256HexSchema } from '../config/key-fields.js';
import { prefixProblem } from './key-prefix.js';

const { id, name, plan, perMinute, perDay, perMonth, limitsExpiresAt, limitsReason, expiresAt, metadata, scopes, allowedCidrs } = keyInputFields;

/** A key record as stored: what every check of the request path reads. Unknown fields are refused. */
export const storedKeySchema = z.strictObject({
  id,
  name: name.optional(),
  plan,
  perMinute: perMinute.optional(),
  perDay: perDay.optional(),
  perMonth: perMonth.optional(),
  limitsExpiresAt: limitsExpiresAt.optional(),
  limitsReason: limitsReason.optional(),
  createdAt: keyInstantSchema,
  expiresAt: expiresAt.optional(),
  metadata: metadata.optional(),
  status: z.enum(['active', 'revoked']),
  revokedAt: keyInstantSchema.optional(),
  rotatedAt: keyInstantSchema.optional(),
  prefix: z
    .string()
    .superRefine((p, ctx) => {
      const problem = prefixProblem(p);
      if (problem) ctx.addIssue({ code: 'custom', message: problem.replace(/^prefix: /, '') });
    })
    .optional(),
  last4: z
    .string()
    .regex(/^[\x21-\x7e]{4}$/, 'expected the last 4 characters of the key')
    .optional(),
  scopes: scopes.optional(),
  allowedCidrs: allowedCidrs.optional(),
  hash: sha256HexSchema,
  prevHash: sha256HexSchema.optional(),
  prevHashUntil: z.number().int().nonnegative().optional(),
  /** The consumer the key belongs to: an id by a key id's rules (it goes into the consumer's hash tag). */
  consumer: id.optional(),
});
