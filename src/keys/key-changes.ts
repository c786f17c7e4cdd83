// What every change to a key shares, whatever changes it (issue.ts, lifecycle.ts, importer.ts, and a key's windows
// and ban in src/limits/key-admin.ts): who made it (Actor), the listener that audits it, the announcement that makes
// every gateway instance drop the key from its cache, the compare-and-set loop that keeps racing changes from
// undoing each other, and how far the change has replicated. One implementation, so no change can skip a step.
import { readOne, KeyAdminError } from './admin-errors.js';
import { KeyStoreError, type KeyStore, type StoredKey } from './types.js';

/**
 * How far a key change has reached: `expected` replicas the store's primary is meant to have (src/storage/redis.ts,
 * ExpectedReplicas), `acked` how many confirmed it within KEY_REPLICATION_WAIT_MS. expected > 0 with acked 0: the
 * change is on the primary alone, and a failover before it replicates would undo it (a revoked key working again).
 * `{expected: 0, acked: 0}` for stores without replicas (memory, a standalone Redis without any).
 */
export interface Replication {
  expected: number;
  acked: number;
}

/** Whether a change is at risk: replicas are expected and none confirmed it. */
export function unconfirmed(r: Replication): boolean {
  return r.expected > 0 && r.acked === 0;
}

/** The longest a key change waits for a replica to confirm it (Redis WAIT). */
export const KEY_REPLICATION_WAIT_MS = 1000;

const NO_REPLICAS: Replication = { expected: 0, acked: 0 };

/**
 * Who makes a change: an admin token's id, "cli", or "portal:<actor>" (a person signed in to the consumer portal), and
 * the request it came in (for the audit line); `consumer`: the consumer a portal change was made for.
 */
export interface Actor {
  by: string;
  requestId?: string;
  consumer?: string;
}

/** A change with no actor named: the CLI's, which passes none. */
export const CLI_ACTOR: Actor = { by: 'cli' };

export type KeyChangeAction = 'create' | 'update' | 'rotate' | 'revoke' | 'unban' | 'reset' | 'import';

/** What an import did: records created, records already there as given, records refused (then none was created). */
export interface ImportCounts {
  imported: number;
  unchanged: number;
  refused: number;
}

/**
 * Told of every change once it is stored (src/admin/audit.ts writes the audit line and counts it). An import is one
 * change of many keys: no keyId, its counts instead.
 */
export type KeyChangeListener = (
  change: { action: Exclude<KeyChangeAction, 'import'>; keyId: string; actor: Actor } | { action: 'import'; counts: ImportCounts; actor: Actor },
) => void;

/** The store options of one write of a changed record, but its revision (the loop below sets it). */
export type ChangeWrite = Omit<NonNullable<Parameters<KeyStore['update']>[1]>, 'ifRevision'>;

/**
 * How often a change is tried again when another change to the key came in between its read and its write, and the
 * longest random wait before a retry (they grow 1, 2, 4 ... ms): enough for dozens of simultaneous writers of one key.
 */
const CHANGE_ATTEMPTS = 16;
const CHANGE_BACKOFF_MAX_MS = 50;

export class KeyChanges {
  constructor(
    private readonly store: KeyStore,
    private readonly onChange: KeyChangeListener = () => {},
  ) {}

  /**
   * Reads the key, makes its next state with `make`, and writes it only if the record is still what was read
   * (compare-and-set on its revision); when another change came in between, reads again and makes it anew. So a
   * PATCH racing a revoke can never write the key back to active, nor a rotation's old hash back into the record.
   * Undefined for an unknown id.
   */
  async change(id: string, make: (k: StoredKey) => { next: StoredKey; opts?: ChangeWrite }): Promise<StoredKey | undefined> {
    for (let attempt = 0; attempt < CHANGE_ATTEMPTS; attempt++) {
      const read = await readOne(() => this.store.getVersioned(id));
      if (!read) return undefined;
      const { next, opts } = make(read.key);
      try {
        await this.store.update(next, { ...opts, ifRevision: read.revision });
        return next;
      } catch (err) {
        if (err instanceof KeyStoreError && err.code === 'not_found') return undefined;
        if (!(err instanceof KeyStoreError && err.code === 'conflict')) throw err;
      }
      // Writers that collided would collide again at once: each waits a random, growing moment before its next read.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(CHANGE_BACKOFF_MAX_MS, 2 ** attempt)));
    }
    throw new KeyAdminError('contended', `key ${id} kept changing while this change was being made; try again`);
  }

  /** Tells the listener of a change stored without a record write of this module's (a new key, an import). */
  told(change: Parameters<KeyChangeListener>[0]): void {
    this.onChange(change);
  }

  /**
   * Announces a stored change of the key: every instance drops what it cached of the key (`what`: only its windows,
   * for a change made outside the key's record, src/limits/key-admin.ts), and the change listener hears of it.
   */
  async announce(id: string, action: Exclude<KeyChangeAction, 'create' | 'import'>, actor: Actor = CLI_ACTOR, what?: 'windows'): Promise<void> {
    await this.store.publishChange(id, what);
    this.onChange({ action, keyId: id, actor });
  }

  /**
   * Waits (at most KEY_REPLICATION_WAIT_MS) until a replica has the key's record and everything else this process
   * wrote for it (its ban state shares the record's slot; `hashes`: the hash links it set or dropped). Also what an
   * idempotent change that wrote nothing answers, so its caller learns whether the state it relies on is replicated.
   */
  async replicated(id: string, hashes: readonly string[]): Promise<Replication> {
    return (await this.store.confirmReplicated?.(id, [...new Set(hashes)], KEY_REPLICATION_WAIT_MS)) ?? NO_REPLICAS;
  }
}
