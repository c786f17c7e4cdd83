// What each field of a key record may hold, written once: the admin API, the CLI, an import and the config's static
// keys all parse a key's fields with these schemas, so each refuses the same bad value with the same message. In
// config/ (not keys/) because the config's static keys need them and config/ sits below keys/ (docs/architecture.md).
import { z } from 'zod';

/** A key id: what KeyIssuer issues (key_...), what an import or a static key may name, what a report cursor carries. */
export const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;
export const keyIdSchema = z.string().regex(KEY_ID, 'expected 1-64 characters of A-Z a-z 0-9 _ -');

export const KEY_NAME_MAX = 200;
const nameMessage = `expected a name of 1-${KEY_NAME_MAX} characters`;
/** A key's label (a customer's name): shown in tables and reports, so bounded. */
export const keyNameSchema = z.string(nameMessage).min(1, nameMessage).max(KEY_NAME_MAX, nameMessage);

/** A plan name as a key names it; whether it is configured is checked against the plans where they are known. */
export const keyPlanSchema = z.string('a plan is required').min(1, 'a plan is required');

/**
 * The largest per-key limit (perMinute, perDay): far above any real quota, and well inside the whole numbers a
 * double (the limit script's Lua number) holds exactly.
 */
export const KEY_LIMIT_MAX = 1_000_000_000_000;
const limitMessage = `expected a whole number from 1 to ${KEY_LIMIT_MAX}`;
/** A key's own perMinute or perDay, over its plan's. */
export const keyLimitSchema = z.number(limitMessage).int(limitMessage).min(1, limitMessage).max(KEY_LIMIT_MAX, limitMessage);

/** A key's dates (expiresAt, createdAt, ...): ISO-8601 with a time and its offset, so no reader guesses a zone. */
export const keyInstantSchema = z.iso.datetime({ offset: true, message: 'expected an ISO-8601 date-time with its offset, e.g. 2027-01-01T00:00:00Z' });

/** Up to 30 days: a longer overlap of two keys is a second key, not a rotation. */
export const GRACE_MAX_SECONDS = 2_592_000;
const graceMessage = `expected a whole number of seconds from 0 to ${GRACE_MAX_SECONDS} (30 days)`;
/** How long a rotated key's old plaintext keeps working. */
export const graceSecondsSchema = z.number(graceMessage).int(graceMessage).min(0, graceMessage).max(GRACE_MAX_SECONDS, graceMessage);

/** At most this many metadata entries per key: it is for a portal's ids and labels, not for data. */
export const METADATA_MAX_ENTRIES = 16;
export const METADATA_VALUE_MAX = 256;

/** A metadata entry's name (also a CSV import's `metadata.<name>` column). */
export const METADATA_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** A small string map a portal or billing system keeps on a key (customer id, subscription, ...). */
export const metadataSchema = z
  .record(
    z.string().regex(METADATA_NAME, 'metadata names are 1-64 characters of A-Z a-z 0-9 _ . -'),
    z.string(`expected a string of at most ${METADATA_VALUE_MAX} characters`).max(METADATA_VALUE_MAX, `expected a string of at most ${METADATA_VALUE_MAX} characters`),
  )
  .refine((m) => Object.keys(m).length <= METADATA_MAX_ENTRIES, `at most ${METADATA_MAX_ENTRIES} metadata entries`);

/**
 * The fields an administrator gives a key, by every way in (create, an import's customer record, a static key). Each
 * way picks those it takes and says which are optional; none writes a rule of its own.
 */
export const keyInputFields = {
  id: keyIdSchema,
  name: keyNameSchema,
  plan: keyPlanSchema,
  perMinute: keyLimitSchema,
  perDay: keyLimitSchema,
  expiresAt: keyInstantSchema,
  metadata: metadataSchema,
};

/** A key's hash as stored: the SHA-256 of the plaintext, 64 lowercase hex digits. */
export const sha256HexSchema = z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits (SHA-256 of the key)');

/** Metadata with its names sorted: the same map is stored, exported and compared as the same bytes. */
export function sortedMetadata(m: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1)));
}
