// What one import record may be, and the key record it becomes. Two shapes are accepted side by side: Tollgate's own
// export records (they carry `hash`, `createdAt`, `status`: imported as they are) and a customer's records from another
// system: `{id?, name?, plan, key | sha256, prefix?, metadata?, perMinute?, perDay?, expiresAt?, consumer?}`. A plaintext `key` is
// hashed here and dropped: it is never stored, logged or echoed (no refusal message quotes a field's value); only its
// visible prefix is kept (key-prefix.ts). A record with only a hash may give that prefix itself.
import { z } from 'zod';
import { keyInputFields, sha256HexSchema, sortedMetadata } from '../config/key-fields.js';
import { FOREIGN_KEY_MAX, FOREIGN_KEY_MIN, hashKey, isAcceptableKey, lastFour, type KeyShapeRules } from './format.js';
import { storedKeySchema } from './record-schema.js';
import { prefixOf, prefixProblem } from './key-prefix.js';
import { isBearerToken } from './cost-warnings.js';
import type { StoredKey } from './types.js';

/** An export record's retired hashes: SHA-256 in lowercase hex, as stored. */
const retiredHashesSchema = z.array(sha256HexSchema).optional();

const { id, name, plan, perMinute, perDay, expiresAt, metadata } = keyInputFields;

/** A customer's record: strict (an unknown field is refused, so a misspelt column never goes unnoticed). */
const customerSchema = z.strictObject({
  id: id.optional(),
  name: name.optional(),
  plan,
  // Checked by hand below, never by a schema message: zod would not quote it, but the shape rules name it in words.
  key: z.string().optional(),
  sha256: z.string().optional(),
  prefix: z.string().optional(),
  metadata: metadata.optional(),
  perMinute: perMinute.optional(),
  perDay: perDay.optional(),
  expiresAt: expiresAt.optional(),
  /** The consumer the key joins (import-run.ts checks that it exists, or creates it, and its maxKeys). */
  consumer: id.optional(),
});

/**
 * A SHA-256 as 64 hex digits (either case) or standard base64 (44 characters with its "=" padding, or 43 without);
 * normalised to lowercase hex, the form Tollgate stores. Undefined when it is neither.
 */
export function normaliseSha256(text: string): string | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return text.toLowerCase();
  if (/^[A-Za-z0-9+/]{43}=?$/.test(text)) {
    const bytes = Buffer.from(text, 'base64');
    // The last character carries 2 spare bits: only the canonical spelling (spare bits zero) is a digest's.
    if (bytes.length === 32 && bytes.toString('base64').slice(0, 43) === text.slice(0, 43)) return bytes.toString('hex');
  }
  return undefined;
}

/** A record ready for the store check: the key record, and whether its id was generated (none was given). */
export interface NormalisedRecord {
  key: StoredKey;
  /** True for a customer record: its createdAt is the import's, so "already there" compares the fields it gave. */
  customer: boolean;
  idGiven: boolean;
  /** Hashes the key had before (an export's `retiredHashes`): refused to any other key, remembered as this one's. */
  retired: string[];
  /** A plaintext key was given that no `Authorization: Bearer` header can carry (not token68): a warning. */
  notBearer?: boolean;
}

export type Normalised = NormalisedRecord | { error: string };

/**
 * One parsed record as a key record, or why not (never quoting a key). `newId` names a record without an id; `now`
 * is the createdAt of customer records.
 */
export function normaliseRecord(record: unknown, shape: KeyShapeRules, now: string, newId: () => string): Normalised {
  if (record === null || typeof record !== 'object' || Array.isArray(record)) return { error: 'not a JSON object' };
  if (Object.hasOwn(record, 'hash')) {
    // An export's record may carry the hashes the key had before (transfer.ts): not part of the stored record.
    const { retiredHashes, ...stored } = record as { retiredHashes?: unknown };
    const retired = retiredHashesSchema.safeParse(retiredHashes);
    if (!retired.success) return { error: firstIssue(retired.error, 'retiredHashes') };
    const checked = storedKeySchema.safeParse(stored);
    if (!checked.success) return { error: firstIssue(checked.error) };
    return { key: checked.data as StoredKey, customer: false, idGiven: true, retired: retired.data ?? [] };
  }
  const checked = customerSchema.safeParse(record);
  if (!checked.success) return { error: firstIssue(checked.error) };
  const r = checked.data;
  if (r.key !== undefined && r.sha256 !== undefined) return { error: 'give key or sha256, not both' };
  let hash: string;
  let prefix: string | undefined;
  let last4: string | undefined;
  if (r.key !== undefined) {
    const problem = keyProblem(r.key, shape);
    if (problem) return { error: problem };
    if (r.prefix !== undefined) return { error: 'prefix: give it only with sha256 (with key, the prefix is taken from the key)' };
    hash = hashKey(r.key);
    prefix = prefixOf(r.key);
    last4 = lastFour(r.key);
  } else if (r.sha256 !== undefined) {
    const h = normaliseSha256(r.sha256);
    if (!h) return { error: 'sha256: expected 64 hex digits, or base64 of 32 bytes (44 characters with "=", or 43 without)' };
    hash = h;
    if (r.prefix !== undefined) {
      const problem = prefixProblem(r.prefix);
      if (problem) return { error: problem };
      prefix = r.prefix;
    }
  } else return { error: 'give key (the plaintext, hashed on import) or sha256' };
  const key: StoredKey = {
    id: r.id ?? newId(),
    ...(r.name !== undefined ? { name: r.name } : {}),
    plan: r.plan,
    ...(r.perMinute !== undefined ? { perMinute: r.perMinute } : {}),
    ...(r.perDay !== undefined ? { perDay: r.perDay } : {}),
    createdAt: now,
    ...(r.expiresAt !== undefined ? { expiresAt: new Date(Date.parse(r.expiresAt)).toISOString() } : {}),
    ...(r.metadata !== undefined ? { metadata: sortedMetadata(r.metadata) } : {}),
    status: 'active',
    hash,
    ...(prefix !== undefined ? { prefix } : {}),
    ...(last4 !== undefined ? { last4 } : {}),
    ...(r.consumer !== undefined ? { consumer: r.consumer } : {}),
  };
  return { key, customer: true, idGiven: r.id !== undefined, retired: [], ...(r.key !== undefined && !isBearerToken(r.key) ? { notBearer: true } : {}) };
}

/** Why a plaintext key could never be presented under this config, in words that never quote it. */
function keyProblem(key: string, shape: KeyShapeRules): string | undefined {
  if (isAcceptableKey(key, shape)) return undefined;
  if (key.startsWith(shape.issuedPrefix))
    return `key: starts with the issued prefix "${shape.issuedPrefix}" but is not a valid issued key (its checksum does not match)`;
  if (!shape.foreignKeys) return `key: not an issued key (prefix "${shape.issuedPrefix}"); keys of another shape need auth.foreignKeys: true in the config`;
  return `key: a foreign key must be ${FOREIGN_KEY_MIN}-${FOREIGN_KEY_MAX} visible ASCII characters (no spaces)`;
}

function firstIssue(error: z.ZodError, field?: string): string {
  const issue = error.issues[0]!;
  // Unknown fields are named (a name is not a secret); values never are.
  const where = [...(field !== undefined ? [field] : []), ...issue.path].join('.') || '(record)';
  return `${where}: ${issue.message}`;
}

/**
 * The fields a customer record sets: what "already there as given" compares (createdAt is the import's own). The
 * prefix is not among them: it follows from the key, which the hash already compares.
 */
export function sameGivenFields(stored: StoredKey, given: StoredKey): boolean {
  const pick = (k: StoredKey) =>
    JSON.stringify([
      k.hash,
      k.plan,
      k.name ?? null,
      k.perMinute ?? null,
      k.perDay ?? null,
      k.expiresAt ?? null,
      k.metadata ? sortedMetadata(k.metadata) : null,
      k.consumer ?? null,
    ]);
  return stored.status === 'active' && pick(stored) === pick(given);
}
