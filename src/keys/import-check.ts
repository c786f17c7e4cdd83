// The store's rules for one import record, as a function over the record and what the store holds for it (no I/O):
// every way a record could take over, revive or shadow a key is refused. import-run.ts applies it to every record of
// an import (`tollgate keys import`, POST /keys/import), after the record's schema and the checks within its file.
import type { StoredKey } from './types.js';
import { sameGivenFields, type NormalisedRecord } from './import-records.js';

/** A refused record and the line (or row) it came from, counted from 1. */
export interface ImportRefusal {
  line: number;
  error: string;
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
