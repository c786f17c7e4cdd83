// The rules an import must pass before anything of it is written, as one function over parsed records and what the
// store holds (no I/O): every way a record could take over, revive or shadow a key is refused with its line number.
// KeyAdmin.importKeys applies it for `tollgate keys import`; any other way in (another file format, an admin
// endpoint) hands it its parsed records and gets the same refusals.
import { storedKeySchema } from './record-schema.js';
import type { StoredKey } from './types.js';
import { sameGivenFields, type NormalisedRecord } from './import-records.js';

/** One record to import, as parsed (not yet validated), and the line (or row) it came from, counted from 1. */
export interface ImportCandidate {
  line: number;
  record: unknown;
}

export interface ImportRefusal {
  line: number;
  error: string;
}

/** What the store holds, read once before the check. */
export interface ImportContext {
  /** The plan names configured. */
  plans: ReadonlySet<string>;
  /** Every readable key record. */
  existing: readonly StoredKey[];
  /** Ids in the store whose record cannot be read: nothing may be imported over them. */
  unreadable: ReadonlySet<string>;
}

export interface ImportCheck {
  /** Records to create, in file order. */
  create: Array<{ line: number; key: StoredKey }>;
  /** Records already stored exactly so (same id, same content): left alone. */
  unchanged: Array<{ line: number; id: string }>;
  /** Every refused record, by line: when there is any, nothing should be written. */
  refusals: ImportRefusal[];
}

/**
 * Checks every record against the schema, the plans, the store and the records before it in the same import. A record
 * is refused when: it is not a key record; its id exists with other content or an unreadable record; its plan is not
 * configured; its hash or grace hash (prevHash) opens, or once opened, another key (active or revoked: a hash is never
 * given to a second id, so a revoked key cannot come back under a new one, nor a key's requests be billed to
 * another); or an earlier record of the import has the same id or one of its hashes.
 */
export function checkImport(candidates: readonly ImportCandidate[], ctx: ImportContext): ImportCheck {
  const out: ImportCheck = { create: [], unchanged: [], refusals: [] };
  const byId = new Map(ctx.existing.map((k) => [k.id, k]));
  const hashOwner = new Map<string, StoredKey>();
  for (const k of ctx.existing) for (const h of hashesOf(k)) hashOwner.set(h, k);
  const idLine = new Map<string, number>();
  const hashLine = new Map<string, number>();
  for (const { line, record } of candidates) {
    const refuse = (error: string) => out.refusals.push({ line, error });
    const checked = storedKeySchema.safeParse(record);
    if (!checked.success) {
      const issue = checked.error.issues[0]!;
      refuse(`${issue.path.join('.') || '(record)'}: ${issue.message}`);
      continue;
    }
    const key = checked.data as StoredKey;
    const hashes = hashesOf(key);
    // Within the import: one id, one owner per hash (the first line to name them keeps them).
    const sameId = idLine.get(key.id);
    const sameHash = hashes.map((h) => hashLine.get(h)).find((n) => n !== undefined);
    if (!idLine.has(key.id)) idLine.set(key.id, line);
    for (const h of hashes) if (!hashLine.has(h)) hashLine.set(h, line);
    if (sameId !== undefined) {
      refuse(`id ${key.id} is also on line ${sameId}`);
      continue;
    }
    if (key.prevHash !== undefined && key.prevHash === key.hash) {
      refuse("prevHash is the key's own hash");
      continue;
    }
    if (sameHash !== undefined) {
      refuse(`a hash of this record is also on line ${sameHash}`);
      continue;
    }
    const owner = hashes.map((h) => hashOwner.get(h)).find((k) => k !== undefined);
    const verdict = judgeRecord(
      { key, customer: false, idGiven: true, retired: [] },
      { byId: ctx.unreadable.has(key.id) ? 'unreadable' : byId.get(key.id), owner },
      ctx.plans,
    );
    if (verdict === 'unchanged') out.unchanged.push({ line, id: key.id });
    else if (verdict !== 'create') refuse(verdict);
    if (verdict !== 'create') continue;
    out.create.push({ line, key });
  }
  return out;
}

/** What the store holds for one record: the record under its id (or that it is unreadable), and the key owning one of its hashes. */
export interface StoredFacts {
  byId: StoredKey | 'unreadable' | undefined;
  owner: StoredKey | undefined;
  /** The key one of the record's hashes was retired from (rotated away, revoked), if any. */
  retiredFrom?: string | undefined;
}

/**
 * The store's rules for one record that passed its schema and the checks within its file: 'create', 'unchanged' (already
 * stored as given), or why it is refused. A customer record (import-records.ts) has no createdAt of its own, so it is
 * "already there" when a key with its id (or, without an id, the key its hash opens) holds the fields it gives.
 */
export function judgeRecord(r: NormalisedRecord, facts: StoredFacts, plans: ReadonlySet<string>): 'create' | 'unchanged' | string {
  const { key } = r;
  if (facts.byId === 'unreadable') return `key ${key.id} exists with an unreadable record; repair or delete it in Redis first`;
  const existing = facts.byId;
  if (existing) {
    if (r.customer ? sameGivenFields(existing, key) : canonical(existing) === canonical(key)) return 'unchanged';
    return `key ${key.id} exists with other content; left as it is (change it with keys update, or revoke it)`;
  }
  const owner = facts.owner;
  if (owner) {
    if (r.customer && !r.idGiven && sameGivenFields(owner, key)) return 'unchanged';
    return `a hash of this record belongs to ${owner.status === 'revoked' ? 'revoked ' : ''}key ${owner.id}; a hash opens one key only`;
  }
  if (facts.retiredFrom !== undefined)
    return `a hash of this record was key ${facts.retiredFrom}'s and was retired (rotated away or revoked); a retired key is never brought back`;
  // A revoked key's own hash was retired with it: its export carries it in both places. Any other key's is an error.
  if (key.status !== 'revoked' && r.retired.includes(key.hash)) return "retiredHashes holds the key's own hash";
  if (!plans.has(key.plan)) return `unknown plan "${key.plan}"; plans: ${[...plans].join(', ')}`;
  return 'create';
}

/** The hashes a record holds: its current one and, after a rotation, the old one (in or past its grace). */
export function hashesOf(k: StoredKey): string[] {
  return k.prevHash !== undefined ? [k.hash, k.prevHash] : [k.hash];
}

/** JSON with keys sorted: the same record read back or parsed anew compares equal whatever its field order. */
function canonical(k: StoredKey): string {
  return JSON.stringify(Object.fromEntries(Object.entries(k).sort(([a], [b]) => (a < b ? -1 : 1))));
}
