// Changing an issued key in place: its plan, name, overrides, expiry or metadata (update), a new plaintext for the
// same id (rotate), and the end of it (revoke). Each goes through KeyChanges' compare-and-set, so racing changes
// never undo each other, and retires the hashes it drops for good (an import naming one again is refused).
import type { Clock } from '../util/clock.js';
import { sortedMetadata } from '../config/key-fields.js';
import { KeyAdminError, notFound } from './admin-errors.js';
import { overrideWarningsFor, requirePlan, type KeyAdminPolicy } from './admin-policy.js';
import { generateKey, hashKey } from './format.js';
import { CLI_ACTOR, type Actor, type KeyChanges, type Replication } from './key-changes.js';
import { toRecord } from './rules.js';
import type { KeyRecord, StoredKey } from './types.js';

/** A change to a key: what is given changes, `null` removes an override, the expiry or the metadata. */
export interface KeyUpdate {
  plan?: string;
  name?: string | null;
  perMinute?: number | null;
  perDay?: number | null;
  expiresAt?: string | null;
  /** Replaces the whole map; null removes it. */
  metadata?: Record<string, string> | null;
}

export interface RotatedKey {
  /** The new plaintext: here and nowhere else. */
  key: string;
  record: KeyRecord;
  replication: Replication;
}

export class KeyLifecycle {
  constructor(
    private readonly clock: Clock,
    private readonly policy: KeyAdminPolicy,
    private readonly changes: KeyChanges,
  ) {}

  /** Changes a key's plan, name, overrides or expiry in place; the key itself (and its hash) stays. */
  async update(id: string, patch: KeyUpdate, actor: Actor = CLI_ACTOR): Promise<{ record: KeyRecord; replication: Replication; warnings: string[] }> {
    if (patch.plan !== undefined) requirePlan(this.policy, patch.plan);
    const next = await this.changes.change(id, (k) => {
      refuseRevoked(k);
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
    if (!next) throw notFound(id);
    await this.changes.announce(id, 'update', actor);
    return { record: toRecord(next), replication: await this.changes.replicated(id, []), warnings: overrideWarningsFor(this.policy, next) };
  }

  /** Revokes the key: no hash opens it any more. Undefined for an unknown id. */
  async revoke(id: string, actor: Actor = CLI_ACTOR): Promise<{ replication: Replication } | undefined> {
    let unlinked: string[] = [];
    const next = await this.changes.change(id, (k) => {
      const next: StoredKey = { ...k, status: 'revoked', revokedAt: new Date(this.clock.now()).toISOString() };
      delete next.prevHash;
      delete next.prevHashUntil;
      unlinked = [k.hash, ...(k.prevHash ? [k.prevHash] : [])];
      // Remembered for good: an import that names one of them again, under any id, is refused.
      return { next, opts: { unlinkHashes: unlinked, retireHashes: unlinked } };
    });
    if (!next) return undefined;
    await this.changes.announce(id, 'revoke', actor);
    return { replication: await this.changes.replicated(id, unlinked) };
  }

  /** A new plaintext for the same id, plan and overrides; the old one works for graceSeconds more. */
  async rotate(id: string, graceSeconds: number, actor: Actor = CLI_ACTOR): Promise<RotatedKey | undefined> {
    if (!Number.isInteger(graceSeconds) || graceSeconds < 0)
      throw new KeyAdminError('invalid', 'the grace period must be a whole number of seconds, 0 or more');
    let plaintext = '';
    let touched: string[] = [];
    const next = await this.changes.change(id, (k) => {
      refuseRevoked(k);
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
    await this.changes.announce(id, 'rotate', actor);
    const replication = await this.changes.replicated(id, touched);
    return { key: plaintext, record: toRecord(next), replication };
  }
}

/** A revoked key stays revoked: neither changed nor rotated back into use. */
function refuseRevoked(k: StoredKey): void {
  if (k.status === 'revoked') throw new KeyAdminError('revoked', `key ${k.id} is revoked; create a new key instead`);
}
