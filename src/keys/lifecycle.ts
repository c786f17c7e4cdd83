// Changing an issued key in place: its plan, name, overrides, expiry, metadata, scopes or allowed CIDRs (update), a
// new plaintext for the same id (rotate), and the end of it (revoke). Each goes through KeyChanges' compare-and-set, so
// racing changes never undo each other, and retires the hashes it drops for good (an import naming one again is refused).
import type { Clock } from '../util/clock.js';
import { sortedMetadata } from '../config/key-fields.js';
import { KeyAdminError, notFound } from './admin-errors.js';
import { attaching, overrideWarningsFor, requirePlan, type KeyAdminPolicy } from './admin-policy.js';
import { DEFAULT_KEY_SHAPE, generateKey, hashKey, isAcceptableKey, lastFour } from './format.js';
import { CLI_ACTOR, type Actor, type KeyChanges, type Replication } from './key-changes.js';
import { toRecord } from './rules.js';
import type { KeyShapeRules } from './format.js';
import type { KeyRecord, StoredKey } from './types.js';

/** A change to a key: what is given changes, `null` removes an override, the expiry or the metadata. */
export interface KeyUpdate {
  plan?: string;
  name?: string | null;
  perMinute?: number | null;
  perDay?: number | null;
  perMonth?: number | null;
  limitsExpiresAt?: string | null;
  limitsReason?: string | null;
  expiresAt?: string | null;
  /** Replaces the whole map; null removes it. */
  metadata?: Record<string, string> | null;
  /** Replace the whole list; null removes it (every route, from anywhere, again). */
  scopes?: string[] | null;
  allowedCidrs?: string[] | null;
  /**
   * The consumer the key joins (or moves to: it leaves the one it was in), which must exist and have room under its
   * maxKeys; null detaches it (its own plan applies again). The key's own plan is kept either way.
   */
  consumer?: string | null;
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

  /** Changes a key's plan, name, overrides, expiry, metadata or lists in place; the key itself (and its hash) stays. */
  async update(id: string, patch: KeyUpdate, actor: Actor = CLI_ACTOR): Promise<{ record: KeyRecord; replication: Replication; warnings: string[] }> {
    if (patch.plan !== undefined) requirePlan(this.policy, patch.plan);
    const change = () =>
      this.changes.change(id, (k) => {
        refuseRevoked(k);
        const next: StoredKey = { ...k };
        if (patch.plan !== undefined) next.plan = patch.plan;
        for (const field of [
          'name',
          'perMinute',
          'perDay',
          'perMonth',
          'limitsExpiresAt',
          'limitsReason',
          'expiresAt',
          'metadata',
          'scopes',
          'allowedCidrs',
          'consumer',
        ] as const) {
          const value = patch[field];
          if (value === null) delete next[field];
          else if (value !== undefined)
            (next as unknown as Record<string, unknown>)[field] =
              field === 'metadata' ? sortedMetadata(value as Record<string, string>) : Array.isArray(value) ? [...value] : value;
        }
        return { next };
      });
    // Joining a consumer (or moving to another) holds that consumer's lock while its room is counted and the key written.
    const next = typeof patch.consumer === 'string' ? await attaching(this.policy, patch.consumer, id, change) : await change();
    if (!next) throw notFound(id);
    await this.changes.announce(id, 'update', actor);
    return { record: toRecord(next), replication: await this.changes.replicated(id, []), warnings: overrideWarningsFor(this.policy, next) };
  }

  /**
   * Revokes the key: no hash opens it any more. Undefined for an unknown id. `within`: only a key of that consumer
   * (judged on the record the change writes over), else not_found.
   */
  async revoke(id: string, actor: Actor = CLI_ACTOR, opts: { within?: string } = {}): Promise<{ replication: Replication } | undefined> {
    let unlinked: string[] = [];
    const next = await this.changes.change(id, (k) => {
      requireWithin(k, opts.within);
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

  /**
   * A new plaintext for the same id, plan and overrides; the old one works for graceSeconds more. With `keepPrefix`,
   * the new key starts with the key's recorded prefix (an imported key's, key-prefix.ts) instead of the issued one,
   * followed by as much randomness as an issued key: only with auth.foreignKeys, which such a key needs to be
   * accepted. Without it, the new key is an issued one and the record forgets any prefix it had. `within`: only a key
   * of that consumer (judged on the record the change writes over, so a key moved meanwhile is never rotated), else
   * not_found.
   */
  async rotate(
    id: string,
    graceSeconds: number,
    actor: Actor = CLI_ACTOR,
    opts: { keepPrefix?: boolean; within?: string } = {},
  ): Promise<RotatedKey | undefined> {
    if (!Number.isInteger(graceSeconds) || graceSeconds < 0)
      throw new KeyAdminError('invalid', 'the grace period must be a whole number of seconds, 0 or more');
    const shape = this.policy.keyShape?.() ?? { ...DEFAULT_KEY_SHAPE, ...(this.policy.issuedPrefix ? { issuedPrefix: this.policy.issuedPrefix() } : {}) };
    if (opts.keepPrefix && !shape.foreignKeys)
      throw new KeyAdminError(
        'prefix_not_kept',
        `cannot keep the prefix: auth.foreignKeys is false, so the gateway accepts only keys with the issued prefix "${shape.issuedPrefix}" and would refuse the new key; rotate without keeping the prefix, or set auth.foreignKeys: true`,
      );
    let plaintext = '';
    let touched: string[] = [];
    const next = await this.changes.change(id, (k) => {
      requireWithin(k, opts.within);
      refuseRevoked(k);
      if (opts.keepPrefix) plaintext = keptPrefixKey(k, shape);
      else plaintext = generateKey(this.policy.issuedPrefix?.());
      const now = this.clock.now();
      const next: StoredKey = { ...k, hash: hashKey(plaintext), last4: lastFour(plaintext), rotatedAt: new Date(now).toISOString() };
      if (!opts.keepPrefix) delete next.prefix;
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

/** A new key with the key's recorded prefix and an issued key's randomness, refused when the gateway could not accept it. */
function keptPrefixKey(k: StoredKey, shape: KeyShapeRules): string {
  if (k.prefix === undefined)
    throw new KeyAdminError(
      'prefix_not_kept',
      `key ${k.id} has no recorded prefix (only keys imported with one have it: a plaintext key with a separator near its start, or a prefix column); rotate without keeping the prefix`,
    );
  const plaintext = generateKey(k.prefix);
  // A prefix that starts with the issued one (but is not it) makes a key judged as an issued key, which it is not.
  if (!isAcceptableKey(plaintext, shape))
    throw new KeyAdminError(
      'prefix_not_kept',
      `cannot keep the prefix "${k.prefix}" of key ${k.id}: a key starting with it is judged as an issued key (prefix "${shape.issuedPrefix}") and would be refused; rotate without keeping the prefix`,
    );
  return plaintext;
}

/** A change made for one consumer (the portal's) reaches that consumer's keys alone: any other key is not found. */
function requireWithin(k: StoredKey, consumer: string | undefined): void {
  if (consumer !== undefined && k.consumer !== consumer) throw notFound(k.id);
}

/** A revoked key stays revoked: neither changed nor rotated back into use. */
function refuseRevoked(k: StoredKey): void {
  if (k.status === 'revoked') throw new KeyAdminError('revoked', `key ${k.id} is revoked; create a new key instead`);
}
