// The key record and the KeyStore interface: one interface, a memory and a Redis implementation (I/O only).
// Validity rules (status, expiry, grace) live above it, in verifier.ts and rules.ts; changes in admin.ts.

export interface KeyRecord {
  id: string;
  name?: string;
  plan: string;
  /** Per-key overrides of the plan's limits. */
  perMinute?: number;
  perDay?: number;
  /** A monthly limit over the plan's (calendar months in UTC, or from its consumer's billingDay). */
  perMonth?: number;
  /**
   * When the own limits (perMinute, perDay, perMonth) end, ISO-8601: past it, the plan's values apply again with no
   * one touching the record. The key itself stays valid (that is expiresAt).
   */
  limitsExpiresAt?: string;
  /** Why the own limits were given (a launch week); nothing on the request path reads it. */
  limitsReason?: string;
  /** ISO-8601. */
  createdAt: string;
  expiresAt?: string;
  /** A small string map for the portal's own ids (src/keys/fields.ts). */
  metadata?: Record<string, string>;
  status: 'active' | 'revoked';
  revokedAt?: string;
  rotatedAt?: string;
  /** The visible prefix of an imported key (key-prefix.ts), kept by `rotate --keep-prefix`; no secret. */
  prefix?: string;
  /**
   * The key's last 4 characters, so its holder can tell their keys apart (the portal shows prefix…last4): written when
   * the plaintext is known (create, rotate, an import of a plaintext key). Too few to help a guess.
   */
  last4?: string;
  /**
   * The id of the consumer the key belongs to (src/consumers/): its plan and pool apply; the key's own `plan` applies
   * again once it is detached. Every write of the record copies it into that consumer's mirror (Keyspace.consumerKeys).
   */
  consumer?: string;
  /**
   * The routes the key may call (route names, `service:<name>`, `operation:<operationId>`); absent: every route. A key
   * of a consumer with scopes gets what both allow.
   */
  scopes?: string[];
  /** The client addresses the key may be used from (IPv4/IPv6 addresses and CIDRs); absent: anywhere. */
  allowedCidrs?: string[];
}

/** What the store keeps: the record plus the hashes that open it. Never the plaintext. */
export interface StoredKey extends KeyRecord {
  /** SHA-256 hex of the current plaintext key. */
  hash: string;
  /** After a rotation with grace: the old key's hash and when it stops working (epoch ms). */
  prevHash?: string;
  prevHashUntil?: number;
}

/** What a lookup by hash finds. */
export interface FoundKey {
  key: StoredKey;
  /**
   * Names the record exactly as read (Redis: the SHA-1 hex of its stored bytes). The limit check reads the same
   * record on every request and, when the cache asks, compares it with this, so a copy it confirms needs no
   * re-read. Absent from stores whose limit check cannot confirm it (memory).
   */
  revision?: string;
}

export interface KeyStore {
  /** The key a hash opens (current or grace hash), or undefined. */
  findByHash(hash: string): Promise<FoundKey | undefined>;
  /** The record, or undefined; a KeyStoreError (code invalid_record) when the stored record cannot be read. */
  get(id: string): Promise<StoredKey | undefined>;
  /** The record with its revision (what update's `ifRevision` compares), or undefined; errors as get(). */
  getVersioned(id: string): Promise<{ key: StoredKey; revision: string } | undefined>;
  /** Every readable record, by id; unreadable ones are left out (and reported, where the store can). */
  list(): Promise<StoredKey[]>;
  /** Every key id, sorted (no records read): what a page of `GET /keys` starts from. */
  ids(): Promise<string[]>;
  /**
   * Every key id, one batch at a time, in one pass over the id set (never started again from the beginning): what
   * reports over every key read. An id added or removed while the pass runs may or may not be yielded; every id
   * present for the whole pass is yielded exactly once.
   */
  idBatches(): AsyncGenerator<string[]>;
  /** How many keys the store holds (sizes each instance's key filter, src/keys/known-hashes.ts). */
  keyCount(): Promise<number>;
  /**
   * Every hash that may open a stored key (current and grace), in bounded batches, read off the request path: what
   * each instance's key filter is built from. Unreadable records are skipped.
   */
  forEachHash(each: (hashes: readonly string[]) => void): Promise<void>;
  /** Fails if the id or hash already exists. Tells every instance the new hash (subscribe's onKeyHash). */
  create(key: StoredKey): Promise<void>;
  /**
   * Replaces an existing record (a KeyStoreError if the id is unknown, and then nothing else changes), then adjusts
   * the hash index: `linkHash` now finds the key, `unlinkHashes` no longer do, `expireHash` stops at `atMs`. With
   * `ifRevision`, the record is replaced only if it is still that revision (getVersioned), atomically; otherwise a
   * KeyStoreError with code 'conflict' and nothing changed: two administrators' changes never overwrite each other.
   * A `linkHash` is told to every instance (subscribe's onKeyHash) once the record names it.
   */
  update(
    key: StoredKey,
    opts?: { unlinkHashes?: string[]; linkHash?: string; expireHash?: { hash: string; atMs: number }; ifRevision?: string; retireHashes?: string[] },
  ): Promise<void>;
  /**
   * Remembers for good that these hashes were the key's (rotated away, revoked): they open nothing, but an import that
   * would bring one back, under any id, is refused. Written before the record changes (update's `retireHashes` does it
   * first), so a crash in between can only remember a hash early, never forget one.
   */
  retire(id: string, hashes: readonly string[]): Promise<void>;
  /** The id of the key a hash was retired from, or undefined. */
  retiredFrom(hash: string): Promise<string | undefined>;
  /** Every hash retired from the key, sorted (what `keys export` carries, so a move to another Redis keeps them). */
  retiredHashes(id: string): Promise<string[]>;
  /**
   * The keys attached to a consumer, by id, as its mirror holds them: the copy of each record that every write of a
   * record naming the consumer leaves beside it (create, update, rotate, revoke, import), and that a write detaching
   * or moving the key removes. Each key as its own record has it: an entry whose record no longer names the
   * consumer (a move cut short between the record and the old mirror) is left out.
   */
  consumerKeys(consumerId: string): Promise<StoredKey[]>;
  /**
   * Takes the import lock: one import writes at a time, across every instance sharing the store. Undefined when
   * another import holds it. The holder checks `held()` before each write and releases it when done.
   */
  lockImports(): Promise<ImportLock | undefined>;
  /**
   * Waits (bounded) until a replica has what this process wrote for the key (its record, the ids set, the state in
   * its slot) and the hash links named, where the store has replicas: a key change must survive the failover of the
   * Redis that took it. `expected`: the replicas meant to be there; `acked`: those that confirmed. Absent for stores
   * without replicas.
   */
  confirmReplicated?(id: string, hashes: readonly string[], timeoutMs: number): Promise<{ expected: number; acked: number }>;
  /** Tells every gateway instance that a key changed: its record (the default), or only its windows (a reset). */
  publishChange(id: string, change?: KeyChange): Promise<void>;
  /**
   * Calls onChange(id, change) when any instance changes a key, and onReset() when changes may have been missed;
   * `more`: onKeyHash(hash) when any instance links a hash to a key (create, rotate, import), onListening() each time
   * the subscription is in place (first, and again after every reconnect): from then on no change is missed.
   */
  subscribe(onChange: (id: string, change?: KeyChange) => void, onReset: () => void, more?: ChangeFeedListeners): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/**
 * What a change message says changed: 'record' (create, update, rotate, revoke, unban: caches drop the key and what
 * they remember of its ban) or 'windows' (a reset: the record is unchanged, each instance drops its own copy of the
 * key's windows).
 */
export type KeyChange = 'record' | 'windows';

/**
 * The change feed's message: the key id, with " windows" after it for a reset (key ids never hold a space). An
 * instance of an older version reads the whole message as an id it does not know, and drops nothing.
 */
export function changeMessage(id: string, change: KeyChange): string {
  return change === 'windows' ? `${id} windows` : id;
}

export function parseChangeMessage(message: string): { id: string; change: KeyChange } {
  const space = message.indexOf(' ');
  if (space < 0) return { id: message, change: 'record' };
  return { id: message.slice(0, space), change: message.slice(space + 1) === 'windows' ? 'windows' : 'record' };
}

/** The import lock, while held (KeyStore.lockImports). */
export interface ImportLock {
  /** False once the lock was lost (its TTL ran out unrenewed, or another holder took it): stop writing. */
  held(): boolean;
  release(): Promise<void>;
}

/** The change feed's further listeners (KeyStore.subscribe). */
export interface ChangeFeedListeners {
  onKeyHash?(hash: string): void;
  onListening?(): void;
}

export class KeyStoreError extends Error {
  /**
   * 'invalid_record': a stored record that is not a JSON key record; 'conflict': the id or hash exists, or the record
   * changed since it was read (update's ifRevision); 'not_found'.
   */
  constructor(
    message: string,
    readonly code: 'invalid_record' | 'conflict' | 'not_found' = 'conflict',
  ) {
    super(message);
  }
}
