// The key record schema: what a stored key record is, its fields and their bounds, written once. An import's records
// are checked against it; it sits apart from the import's rules so that both the import check and the record
// normalisation can use it without importing each other.
import { z } from 'zod';
import { metadataSchema } from './fields.js';

const hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'expected a SHA-256 in lowercase hex');
const isoTime = z.iso.datetime({ offset: true });

/** A key record as stored: what every check of the request path reads. Unknown fields are refused. */
export const storedKeySchema = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'expected an id of letters, digits, "_" or "-"'),
  name: z.string().max(200).optional(),
  plan: z.string().min(1),
  perMinute: z.number().int().positive().optional(),
  perDay: z.number().int().positive().optional(),
  createdAt: isoTime,
  expiresAt: isoTime.optional(),
  metadata: metadataSchema.optional(),
  status: z.enum(['active', 'revoked']),
  revokedAt: isoTime.optional(),
  rotatedAt: isoTime.optional(),
  hash: hex64,
  prevHash: hex64.optional(),
  prevHashUntil: z.number().int().nonnegative().optional(),
});
