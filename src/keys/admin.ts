// Key administration: issue, read, list, update, rotate, revoke and import keys (a key's windows and ban are
// limits/key-admin.ts's, which announces its changes through announce()). The one service the `tollgate keys`
// commands and `tollgate dev` (and an HTTP admin API) go through, so each rule has one implementation and each failure
// one error code (KeyAdminError). Every change is announced to every gateway instance (publishChange), which drops
// the key from its cache before its next request.
import type { Clock } from '../util/clock.js';
import { DEFAULT_KEY_SHAPE, generateKey, generateKeyId, hashKey, type KeyShapeRules } from './format.js';
import { sortedMetadata } from '../config/key-fields.js';
import { overrideWarnings, type CostedRoute } from './cost-warnings.js';
import { keyStatus, toRecord, type KeyStatus } from './rules.js';
import { KeyStoreError, type KeyRecord, type KeyStore, type StoredKey } from './types.js';
import { readLimit, type ReadLimit } from '../storage/read-limit.js';
import { ImportWriteError, runImport, type ImportOptions, type ImportOutcome, type ImportSource } from './import-run.js';
import { keyMatcher } from './key-search.js';

export type KeyAdminErrorCode =
  /** No key with that id. */
  | 'not_found'
  /** The key is revoked: it cannot be rotated or changed back into use. */
  | 'revoked'
  /** The plan named is not configured. */
  | 'unknown_plan'
  /** The key's stored record cannot be read (not a JSON key record). */
  | 'invalid_record'
  /** A value given is out of range (e.g. a negative grace period). */
  | 'invalid'
  /** Other changes to the key kept coming in between this change's read and its write. */
  | 'contended'
  /** A list or report over many keys could not read them all (Redis failed or timed out): nothing partial is given. */
  | 'incomplete'
  /** Another import is running (on this or another instance): one import writes at a time. */
  | 'import_in_progress';

export class KeyAdminError extends Error {
  constructor(
    readonly code: KeyAdminErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** What a key can be given at creation and changed afterwards. `null` in an update removes an override or expiry. */
export interface KeyInput {
  plan: string;
  name?: string;
  perMinute?: number;
  perDay?: number;
  /** ISO-8601. */
  expiresAt?: string;
  metadata?: Record<string, string>;
}

export interface KeyUpdate {
  plan?: string;
  name?: string | null;
  perMinute?: number | null;
  perDay?: number | null;
  expiresAt?: string | null;
  /** Replaces the whole map; null removes it. */
  metadata?: Record<string, string> | null;
}

/** A page of `GET /keys`: keys by id after `after`, those matching every filter given. */
export interface KeyPageQuery {
  limit: number;
  after?: string;
  plan?: string;
  status?: KeyStatus;
  namePrefix?: string;
  /** An id prefix, or a piece of the name or of a metadata value (key-search.ts). */
  q?: string;
}

/**
 * How often a change is tried again when another change to the key came in between its read and its write, and the
 * longest random wait before a retry (they grow 1, 2, 4 ... ms): enough for dozens of simultaneous writers of one key.
 */
const CHANGE_ATTEMPTS = 16;
const CHANGE_BACKOFF_MAX_MS = 50;

/** How many records a page reads at once (one GET each: on a cluster they live in different slots). */
const PAGE_READ_BATCH = 100;

/**
 * The most records one page reads: a filter that matches few keys answers a short (even empty) page with a cursor
 * after this many, instead of one request reading every record.
 */
export const PAGE_SCAN_MAX = 10_000;

export interface KeyAdminPolicy {
  /** The plans in force (the config's, read per call: a reload applies at once). */
  plans(): Readonly<Record<string, unknown>>;
  /** The prefix new and rotated keys are issued with (auth.issuedPrefix); "tg_" when left out. */
  issuedPrefix?(): string;
  /** How plaintext keys in an import are judged (auth.issuedPrefix, auth.foreignKeys); the defaults when left out. */
  keyShape?(): KeyShapeRules;
  /** auth.sources: with "bearer" among them, an imported plaintext no Bearer header can carry is warned about. */
  keySources?(): readonly string[];
  /** The configured routes (their costs): a key's override below a route's cost is warned about. */
  routes?(): readonly CostedRoute[];
}

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

/** Who makes a change: an admin token's id or "cli", and the admin API request it came in (for the audit line). */
export interface Actor {
  by: string;
  requestId?: string;
}

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

/** A change with no actor named: the CLI's, which passes none. */
const CLI: Actor = { by: 'cli' };

/** Why a list or report over many keys failed, as its error message says it. */
export function incomplete(what: string, err: unknown): KeyAdminError {
  if (err instanceof KeyAdminError && err.code === 'incomplete') return err;
  // An unreadable record stays unreadable: retrying will not help, repairing or deleting it will (its message says so).
  const unreadable = err instanceof KeyStoreError && err.code === 'invalid_record';
  const cause = (err as Error)?.message ?? String(err);
  return new KeyAdminError('incomplete', `${what} could not be completed (nothing partial was returned): ${cause}${unreadable ? '' : '; retry shortly'}`);
}

/**
 * Reading every key, for reports: complete or failing. What a report over every key needs of the key store, apart
 * from changing keys, so that a report can run where key administration does not (the report thread).
 */
export class KeyRecords {
  constructor(
    private readonly store: Pick<KeyStore, 'get' | 'idBatches'>,
    readonly reads: ReadLimit = readLimit(),
  ) {}

  /** The key's record, never its hash; undefined for an unknown id; KeyAdminError 'invalid_record' if unreadable. */
  async get(id: string): Promise<KeyRecord | undefined> {
    try {
      const k = await this.reads(() => this.store.get(id));
      return k ? toRecord(k) : undefined;
    } catch (err) {
      if (err instanceof KeyStoreError && err.code === 'invalid_record') throw new KeyAdminError('invalid_record', err.message);
      throw err;
    }
  }

  /**
   * Every key's id, a batch at a time, in one pass over the id set (never read again from its start), reading no
   * record: what a report that needs no names goes through (the overview's sums). Complete or failing.
   */
  async *ids(what: string): AsyncGenerator<string[]> {
    const batches = this.store.idBatches();
    try {
      for (;;) {
        let next: IteratorResult<string[]>;
        try {
          next = await batches.next();
        } catch (err) {
          throw incomplete(what, err);
        }
        if (next.done) return;
        yield next.value;
      }
    } finally {
      // A caller that stops early (a failed read of its own) ends the id set's scan too.
      await batches.return(undefined).catch(() => undefined);
    }
  }

  /**
   * Every key's record, a batch at a time, in one pass over the id set (never read again from its start): what
   * reports over every key go through. Complete or failing: a record that cannot be read (Redis failed, or the
   * record is not a JSON key record) throws, so a report never leaves a key out silently. Keys added or removed
   * during the pass may or may not be included; every key present for the whole pass is, once.
   */
  async *all(what: string): AsyncGenerator<KeyRecord[]> {
    const batches = this.store.idBatches();
    for (;;) {
      let next: IteratorResult<string[]>;
      let records: Array<StoredKey | undefined>;
      try {
        next = await batches.next();
        if (next.done) return;
        records = await Promise.all(next.value.map((id) => this.reads(() => this.store.get(id))));
      } catch (err) {
        await batches.return(undefined).catch(() => undefined);
        throw incomplete(what, err);
      }
      // A key deleted between the id set's read and its record's: not a key any more.
      yield records.filter((k): k is StoredKey => k !== undefined).map(toRecord);
    }
  }
}

export class KeyAdmin {
  /**
   * `reads` bounds the record reads of pages and passes over every key (shared with the usage reports on the same
   * connection, so that concurrent reports together stay within it).
   */
  constructor(
    private readonly store: KeyStore,
    private readonly clock: Clock,
    private readonly policy: KeyAdminPolicy,
    private readonly onChange: KeyChangeListener = () => {},
    readonly reads: ReadLimit = readLimit(),
  ) {
    this.records = new KeyRecords(store, reads);
  }

  /** Reads over every key, for reports (the same store and bound on reads in flight). */
  readonly records: KeyRecords;

  /** Issues a key: the plaintext is returned once here and never stored. */
  /**
   * What is unusual about a key's overrides, warned and not refused: one below the cost of a configured route makes
   * every request of the key there refused (403 cost_exceeds_limit).
   */
  warningsFor(k: { perMinute?: number | undefined; perDay?: number | undefined }): string[] {
    return overrideWarnings(k, this.policy.routes?.() ?? []);
  }

  async create(input: KeyInput, actor: Actor = CLI): Promise<{ key: string; record: KeyRecord; replication: Replication; warnings: string[] }> {
    this.requirePlan(input.plan);
    const plaintext = generateKey(this.policy.issuedPrefix?.());
    const stored: StoredKey = {
      id: generateKeyId(),
      ...(input.name !== undefined ? { name: input.name } : {}),
      plan: input.plan,
      ...(input.perMinute !== undefined ? { perMinute: input.perMinute } : {}),
      ...(input.perDay !== undefined ? { perDay: input.perDay } : {}),
      createdAt: new Date(this.clock.now()).toISOString(),
      ...(input.expiresAt !== undefined ? { expiresAt: input.expiresAt } : {}),
      ...(input.metadata !== undefined ? { metadata: sortedMetadata(input.metadata) } : {}),
      status: 'active',
      hash: hashKey(plaintext),
    };
    await this.store.create(stored);
    this.onChange({ action: 'create', keyId: stored.id, actor });
    const replication = await this.replicated(stored.id, [stored.hash]);
    return { key: plaintext, record: toRecord(stored), replication, warnings: this.warningsFor(stored) };
  }

  /** The key's record, never its hash; undefined for an unknown id. */
  async get(id: string): Promise<KeyRecord | undefined> {
    const k = await this.read(id);
    return k ? toRecord(k) : undefined;
  }

  /** Every key's record, by id (records that cannot be read are left out, and reported by the store). */
  async list(): Promise<KeyRecord[]> {
    return (await this.store.list()).map(toRecord);
  }

  /**
   * One page of keys in id order, after the id `after`, matching the filters. Reads the id set, then only as many
   * records as the page needs (plus those the filters skip), at most PAGE_SCAN_MAX of them; `next` is the id to pass
   * as `after` for the next page, absent once the last id has been read. Unreadable records (not a JSON key record) are skipped (the store
   * reports them); any other failed read fails the whole page (KeyAdminError 'incomplete'), never a page with keys
   * silently missing.
   */
  async page(q: KeyPageQuery): Promise<{ keys: KeyRecord[]; next?: string }> {
    try {
      const ids = await this.store.ids();
      let i = q.after === undefined ? 0 : firstAfter(ids, q.after);
      const keys: KeyRecord[] = [];
      const now = this.clock.now();
      const matches = q.q === undefined ? undefined : keyMatcher(q.q);
      const end = Math.min(ids.length, i + PAGE_SCAN_MAX);
      while (i < end && keys.length < q.limit) {
        const batch = ids.slice(i, Math.min(end, i + PAGE_READ_BATCH));
        const records = await Promise.all(batch.map((id) => this.reads(() => this.store.get(id)).catch(skipUnreadable)));
        let j = 0;
        for (; j < batch.length && keys.length < q.limit; j++) {
          const k = records[j];
          if (!k) continue;
          if (q.plan !== undefined && k.plan !== q.plan) continue;
          if (q.status !== undefined && keyStatus(k, now) !== q.status) continue;
          if (q.namePrefix !== undefined && !(k.name ?? '').startsWith(q.namePrefix)) continue;
          if (matches && !matches(k)) continue;
          keys.push(toRecord(k));
        }
        i += j;
      }
      // The last id read (a full page stops right after its last key): the next page starts after it.
      return { keys, ...(i > 0 && i < ids.length ? { next: ids[i - 1]! } : {}) };
    } catch (err) {
      throw incomplete('the key list', err);
    }
  }

  /** Every key's record, a batch at a time, in one pass over the id set: see KeyRecords.all. */
  all(what: string): AsyncGenerator<KeyRecord[]> {
    return this.records.all(what);
  }

  /** The status an administrator sees, on this process's clock. */
  statusOf(k: KeyRecord): KeyStatus {
    return keyStatus(k, this.clock.now());
  }

  /** Changes a key's plan, name, overrides or expiry in place; the key itself (and its hash) stays. */
  async update(id: string, patch: KeyUpdate, actor: Actor = CLI): Promise<{ record: KeyRecord; replication: Replication; warnings: string[] }> {
    if (patch.plan !== undefined) this.requirePlan(patch.plan);
    const next = await this.change(id, (k) => {
      if (k.status === 'revoked') throw new KeyAdminError('revoked', `key ${id} is revoked; create a new key instead`);
      const next: StoredKey = { ...k };
      if (patch.plan !== undefined) next.plan = patch.plan;
      for (const field of ['name', 'perMinute', 'perDay', 'expiresAt', 'metadata'] as const) {
        const value = patch[field];
        if (value === null) delete next[field];
        else if (value !== undefined)
          (next as unknown as Record<string, unknown>)[field] = field === 'metadata' ? sortedMetadata(value as Record<string, string>) : value;
      }
      return { next };
    });
    if (!next) throw new KeyAdminError('not_found', `no key with id "${id}"`);
    await this.store.publishChange(id);
    this.onChange({ action: 'update', keyId: id, actor });
    return { record: toRecord(next), replication: await this.replicated(id, []), warnings: this.warningsFor(next) };
  }

  /** Revokes the key: no hash opens it any more. Undefined for an unknown id. */
  async revoke(id: string, actor: Actor = CLI): Promise<{ replication: Replication } | undefined> {
    let unlinked: string[] = [];
    const next = await this.change(id, (k) => {
      const next: StoredKey = { ...k, status: 'revoked', revokedAt: new Date(this.clock.now()).toISOString() };
      delete next.prevHash;
      delete next.prevHashUntil;
      unlinked = [k.hash, ...(k.prevHash ? [k.prevHash] : [])];
      // Remembered for good: an import that names one of them again, under any id, is refused.
      return { next, opts: { unlinkHashes: unlinked, retireHashes: unlinked } };
    });
    if (!next) return undefined;
    await this.store.publishChange(id);
    this.onChange({ action: 'revoke', keyId: id, actor });
    return { replication: await this.replicated(id, unlinked) };
  }

  /** A new plaintext for the same id, plan and overrides; the old one works for graceSeconds more. */
  async rotate(id: string, graceSeconds: number, actor: Actor = CLI): Promise<{ key: string; record: KeyRecord; replication: Replication } | undefined> {
    if (!Number.isInteger(graceSeconds) || graceSeconds < 0)
      throw new KeyAdminError('invalid', 'the grace period must be a whole number of seconds, 0 or more');
    let plaintext = '';
    let touched: string[] = [];
    const next = await this.change(id, (k) => {
      if (k.status === 'revoked') throw new KeyAdminError('revoked', `key ${id} is revoked; create a new key instead`);
      plaintext = generateKey(this.policy.issuedPrefix?.());
      const now = this.clock.now();
      const next: StoredKey = { ...k, hash: hashKey(plaintext), rotatedAt: new Date(now).toISOString() };
      const unlink = k.prevHash ? [k.prevHash] : [];
      if (graceSeconds > 0) {
        next.prevHash = k.hash;
        next.prevHashUntil = now + graceSeconds * 1000;
      } else {
        delete next.prevHash;
        delete next.prevHashUntil;
        unlink.push(k.hash);
      }
      touched = [next.hash, k.hash, ...unlink];
      return {
        next,
        opts: {
          linkHash: next.hash,
          unlinkHashes: unlink,
          // The old hash is retired now, even while its grace runs: once the record forgets it (the next rotation, a
          // revoke), nothing else would remember that it was this key's.
          retireHashes: [k.hash, ...unlink],
          ...(graceSeconds > 0 ? { expireHash: { hash: k.hash, atMs: next.prevHashUntil! } } : {}),
        },
      };
    });
    if (!next) return undefined;
    await this.store.publishChange(id);
    this.onChange({ action: 'rotate', keyId: id, actor });
    const replication = await this.replicated(id, touched);
    return { key: plaintext, record: toRecord(next), replication };
  }

  /**
   * Waits (at most KEY_REPLICATION_WAIT_MS) until a replica has the key's record and everything else this process
   * wrote for it (its ban state shares the record's slot; `hashes`: the hash links it set or dropped). Also what an
   * idempotent change that wrote nothing answers, so its caller learns whether the state it relies on is replicated.
   */
  async replicated(id: string, hashes: readonly string[]): Promise<Replication> {
    return (await this.store.confirmReplicated?.(id, [...new Set(hashes)], KEY_REPLICATION_WAIT_MS)) ?? NO_REPLICAS;
  }

  /**
   * Reads the key, makes its next state with `make`, and writes it only if the record is still what was read
   * (compare-and-set on its revision); when another change came in between, reads again and makes it anew. So a
   * PATCH racing a revoke can never write the key back to active, nor a rotation's old hash back into the record.
   * Undefined for an unknown id.
   */
  private async change(
    id: string,
    make: (k: StoredKey) => { next: StoredKey; opts?: Omit<NonNullable<Parameters<KeyStore['update']>[1]>, 'ifRevision'> },
  ): Promise<StoredKey | undefined> {
    for (let attempt = 0; attempt < CHANGE_ATTEMPTS; attempt++) {
      const read = await this.readVersioned(id);
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

  /**
   * Imports key records from a source read once per pass (import-run.ts): Tollgate's export records or a customer's
   * (import-records.ts). Every record is checked first (its shape, the plans, ids and hashes against the store and each
   * other); if any is refused nothing is written, unless `skipInvalid`. Records already stored as given are left
   * alone, so importing the same file again changes nothing. A dry run checks and writes nothing, not even its audit
   * line; any other import is audited once with its counts, whether it wrote or was refused.
   */
  async importKeys(source: ImportSource, actor: Actor = CLI, opts: ImportOptions = {}): Promise<ImportOutcome> {
    const deps = {
      store: this.store,
      reads: this.reads,
      plans: new Set(Object.keys(this.policy.plans())),
      shape: this.policy.keyShape?.() ?? DEFAULT_KEY_SHAPE,
      now: this.clock.now(),
      newId: generateKeyId,
      bearer: (this.policy.keySources?.() ?? ['bearer']).includes('bearer'),
      routes: this.policy.routes?.() ?? [],
    };
    let result: ImportOutcome | undefined;
    let imported = 0;
    // One import at a time across every instance: two imports checked side by side would each find a hash free that
    // the other then writes, and the second would stop half-written. A dry run writes nothing and takes no lock.
    const lock = opts.dryRun ? undefined : await this.store.lockImports();
    if (!opts.dryRun && !lock)
      throw new KeyAdminError(
        'import_in_progress',
        'another import is running (on this or another gateway instance); nothing was imported: run this one again once it has finished',
      );
    try {
      result = await runImport(source, { ...deps, ...(lock ? { lockHeld: () => lock.held() } : {}) }, opts);
      imported = result.imported;
      return result;
    } catch (err) {
      if (err instanceof ImportWriteError) {
        imported = err.imported;
        throw new KeyAdminError('contended', err.message);
      }
      throw err;
    } finally {
      await lock?.release().catch(() => undefined);
      if (!opts.dryRun && (result !== undefined || imported > 0))
        this.onChange({
          action: 'import',
          counts: { imported: result?.wrote === false ? 0 : imported, unchanged: result?.unchanged ?? 0, refused: result?.refusals.length ?? 0 },
          actor,
        });
    }
  }

  /** The key's record; KeyAdminError not_found when there is none (for operations on a key's windows and ban). */
  async require(id: string): Promise<KeyRecord> {
    return toRecord(await this.mustRead(id));
  }

  /**
   * Announces a change made outside the key's record (its ban lifted, its windows emptied: src/limits/key-admin.ts):
   * every instance drops what it cached of the key (`what`: only its windows), and the change listener hears of it.
   */
  async announce(id: string, action: 'unban' | 'reset', actor: Actor = CLI, what?: 'windows'): Promise<void> {
    await this.store.publishChange(id, what);
    this.onChange({ action, keyId: id, actor });
  }

  private requirePlan(plan: string): void {
    const plans = this.policy.plans();
    if (!Object.hasOwn(plans, plan)) throw new KeyAdminError('unknown_plan', `unknown plan "${plan}"; plans: ${Object.keys(plans).join(', ')}`);
  }

  private async read(id: string): Promise<StoredKey | undefined> {
    return (await this.readVersioned(id))?.key;
  }

  private async readVersioned(id: string): Promise<{ key: StoredKey; revision: string } | undefined> {
    try {
      return await this.store.getVersioned(id);
    } catch (err) {
      if (err instanceof KeyStoreError && err.code === 'invalid_record') throw new KeyAdminError('invalid_record', err.message);
      throw err;
    }
  }

  private async mustRead(id: string): Promise<StoredKey> {
    const k = await this.read(id);
    if (!k) throw new KeyAdminError('not_found', `no key with id "${id}"`);
    return k;
  }
}

/** A page skips a record that is not a JSON key record (the key is unusable; the store reports it); other errors stand. */
function skipUnreadable(err: unknown): undefined {
  if (err instanceof KeyStoreError && err.code === 'invalid_record') return undefined;
  throw err;
}

/** The index of the first id greater than `after` in sorted `ids`. */
function firstAfter(ids: readonly string[], after: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid]! <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
