// Key administration: issue, read, list, update, rotate, revoke and unban keys, and read a key's ban state. The one
// service the `tollgate keys` commands and `tollgate dev` (and an HTTP admin API) go through, so each rule has one
// implementation and each failure one error code (KeyAdminError). Every change is announced to every gateway
// instance (publishChange), which drops the key from its cache before its next request.
import type { Clock } from '../util/clock.js';
import type { BanPolicy, BanStore } from '../limits/types.js';
import { generateKey, generateKeyId, hashKey } from './format.js';
import { keyStatus, toRecord, type KeyStatus } from './rules.js';
import { KeyStoreError, type KeyRecord, type KeyStore, type StoredKey } from './types.js';

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
  | 'invalid';

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
}

export interface KeyUpdate {
  plan?: string;
  name?: string | null;
  perMinute?: number | null;
  perDay?: number | null;
  expiresAt?: string | null;
}

export interface KeyAdminPolicy {
  /** The plans in force (the config's, read per call: a reload applies at once). */
  plans(): Readonly<Record<string, unknown>>;
  /** The ban ladder in force, for the level reset. */
  ban(): BanPolicy;
}

/**
 * How far a new or rotated key's write has reached: `replicas` the store's primary has, `acked` how many confirmed it
 * within KEY_REPLICATION_WAIT_MS. Absent for stores without replicas to ask (memory).
 */
export interface Replication {
  replicas: number;
  acked: number;
}

/** The longest a create or rotate waits for a replica to confirm the write (Redis WAIT). */
export const KEY_REPLICATION_WAIT_MS = 1000;

export interface BanView {
  /** ISO-8601, or null when the key is not banned. */
  bannedUntil: string | null;
  banLevel: number;
}

export class KeyAdmin {
  constructor(
    private readonly store: KeyStore,
    private readonly bans: BanStore,
    private readonly clock: Clock,
    private readonly policy: KeyAdminPolicy,
  ) {}

  /** Issues a key: the plaintext is returned once here and never stored. */
  async create(input: KeyInput): Promise<{ key: string; record: KeyRecord; replication?: Replication }> {
    this.requirePlan(input.plan);
    const plaintext = generateKey();
    const stored: StoredKey = {
      id: generateKeyId(),
      ...(input.name !== undefined ? { name: input.name } : {}),
      plan: input.plan,
      ...(input.perMinute !== undefined ? { perMinute: input.perMinute } : {}),
      ...(input.perDay !== undefined ? { perDay: input.perDay } : {}),
      createdAt: new Date(this.clock.now()).toISOString(),
      ...(input.expiresAt !== undefined ? { expiresAt: input.expiresAt } : {}),
      status: 'active',
      hash: hashKey(plaintext),
    };
    await this.store.create(stored);
    const replication = await this.store.confirmReplicated?.(stored, KEY_REPLICATION_WAIT_MS);
    return { key: plaintext, record: toRecord(stored), ...(replication ? { replication } : {}) };
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

  /** The status an administrator sees, on this process's clock. */
  statusOf(k: KeyRecord): KeyStatus {
    return keyStatus(k, this.clock.now());
  }

  /** Changes a key's plan, name, overrides or expiry in place; the key itself (and its hash) stays. */
  async update(id: string, patch: KeyUpdate): Promise<KeyRecord> {
    const k = await this.mustRead(id);
    if (k.status === 'revoked') throw new KeyAdminError('revoked', `key ${id} is revoked; create a new key instead`);
    if (patch.plan !== undefined) this.requirePlan(patch.plan);
    const next: StoredKey = { ...k };
    if (patch.plan !== undefined) next.plan = patch.plan;
    for (const field of ['name', 'perMinute', 'perDay', 'expiresAt'] as const) {
      const value = patch[field];
      if (value === null) delete next[field];
      else if (value !== undefined) (next as unknown as Record<string, unknown>)[field] = value;
    }
    await this.store.update(next);
    await this.store.publishChange(id);
    return toRecord(next);
  }

  /** Revokes the key: no hash opens it any more. Returns false for an unknown id. */
  async revoke(id: string): Promise<boolean> {
    const k = await this.read(id);
    if (!k) return false;
    const next: StoredKey = { ...k, status: 'revoked', revokedAt: new Date(this.clock.now()).toISOString() };
    delete next.prevHash;
    delete next.prevHashUntil;
    await this.store.update(next, { unlinkHashes: [k.hash, ...(k.prevHash ? [k.prevHash] : [])] });
    await this.store.publishChange(id);
    return true;
  }

  /** A new plaintext for the same id, plan and overrides; the old one works for graceSeconds more. */
  async rotate(id: string, graceSeconds: number): Promise<{ key: string; record: KeyRecord; replication?: Replication } | undefined> {
    if (!Number.isInteger(graceSeconds) || graceSeconds < 0)
      throw new KeyAdminError('invalid', 'the grace period must be a whole number of seconds, 0 or more');
    const k = await this.read(id);
    if (!k) return undefined;
    if (k.status === 'revoked') throw new KeyAdminError('revoked', `key ${id} is revoked; create a new key instead`);
    const plaintext = generateKey();
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
    await this.store.update(next, {
      linkHash: next.hash,
      unlinkHashes: unlink,
      ...(graceSeconds > 0 ? { expireHash: { hash: k.hash, atMs: next.prevHashUntil! } } : {}),
    });
    await this.store.publishChange(id);
    const replication = await this.store.confirmReplicated?.(next, KEY_REPLICATION_WAIT_MS);
    return { key: plaintext, record: toRecord(next), ...(replication ? { replication } : {}) };
  }

  /** The key's ban now, as the limit check sees it (the store's clock). */
  async banState(id: string): Promise<BanView> {
    const s = await this.bans.banState(id, this.policy.ban());
    return { bannedUntil: s.bannedUntilMs === null ? null : new Date(s.bannedUntilMs).toISOString(), banLevel: s.level };
  }

  /** Lifts the key's ban and resets its escalation level; every instance forgets the ban it remembered. */
  async unban(id: string): Promise<void> {
    await this.mustRead(id);
    await this.bans.unban(id);
    await this.store.publishChange(id);
  }

  private requirePlan(plan: string): void {
    const plans = this.policy.plans();
    if (!Object.hasOwn(plans, plan)) throw new KeyAdminError('unknown_plan', `unknown plan "${plan}"; plans: ${Object.keys(plans).join(', ')}`);
  }

  private async read(id: string): Promise<StoredKey | undefined> {
    try {
      return await this.store.get(id);
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
