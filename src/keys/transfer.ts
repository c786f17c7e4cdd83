// `tollgate keys export` and `keys import`: every key record as one JSON line, hashes included (never a plaintext:
// Tollgate has none), to back keys up or move them to another Redis (a standalone one to a cluster). Import checks
// every line before it writes anything of it, and is idempotent: a record already there as exported is left alone.
import { z } from 'zod';
import { metadataSchema } from './fields.js';
import type { KeyStore, StoredKey } from './types.js';

const hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'expected a SHA-256 in lowercase hex');
const isoTime = z.iso.datetime({ offset: true });

/** A key record as stored: what every check of the request path reads. Unknown fields are refused. */
const storedKeySchema = z.strictObject({
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

/** Every record, one JSON object per line. */
export async function* exportKeys(store: KeyStore): AsyncGenerator<string> {
  for (const k of await store.list()) yield JSON.stringify(k);
}

export interface ImportReport {
  imported: number;
  unchanged: number;
  /** An id that exists with other content: left as it is (delete or revoke it first to replace it). */
  conflicts: string[];
  /** Lines that are not a valid key record, with why. */
  invalid: Array<{ line: number; error: string }>;
}

/** Imports JSON lines (blank lines skipped). A line that fails validation is reported and skipped; the rest go on. */
export async function importKeys(store: KeyStore, lines: AsyncIterable<string> | Iterable<string>, nowMs: number): Promise<ImportReport> {
  const report: ImportReport = { imported: 0, unchanged: 0, conflicts: [], invalid: [] };
  let n = 0;
  for await (const text of lines) {
    n++;
    if (text.trim() === '') continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      report.invalid.push({ line: n, error: 'not JSON' });
      continue;
    }
    const checked = storedKeySchema.safeParse(parsed);
    if (!checked.success) {
      const issue = checked.error.issues[0]!;
      report.invalid.push({ line: n, error: `${issue.path.join('.') || '(record)'}: ${issue.message}` });
      continue;
    }
    const record = checked.data as StoredKey;
    const existing = await store.get(record.id).catch(() => undefined);
    if (existing) {
      if (canonical(existing) === canonical(record)) report.unchanged++;
      else report.conflicts.push(record.id);
      continue;
    }
    // create() writes the record, then its hash link, then the id set: a crash in between leaves nothing usable.
    await store.create(record);
    // A rotation's old key still in its grace period keeps working until it ends, on the new Redis too.
    if (record.prevHash !== undefined && record.prevHashUntil !== undefined && record.prevHashUntil > nowMs) {
      await store.update(record, { linkHash: record.prevHash, expireHash: { hash: record.prevHash, atMs: record.prevHashUntil } });
    }
    report.imported++;
  }
  return report;
}

/** JSON with keys sorted: the same record read back or parsed anew compares equal whatever its field order. */
function canonical(k: StoredKey): string {
  return JSON.stringify(Object.fromEntries(Object.entries(k).sort(([a], [b]) => (a < b ? -1 : 1))));
}
