// Issuing a key: the one place a plaintext key is made for the key store, returned once to its caller and never
// stored (only its hash is). Apart from changing a key (lifecycle.ts), which never makes a new id.
import type { Clock } from '../util/clock.js';
import { sortedMetadata } from '../config/key-fields.js';
import { attaching, overrideWarningsFor, requirePlan, type KeyAdminPolicy } from './admin-policy.js';
import { generateKey, generateKeyId, hashKey, lastFour } from './format.js';
import { CLI_ACTOR, type Actor, type KeyChanges, type Replication } from './key-changes.js';
import { toRecord } from './rules.js';
import type { KeyRecord, KeyStore, StoredKey } from './types.js';

/** What a key can be given at creation (lifecycle.ts's KeyUpdate changes it afterwards). */
export interface KeyInput {
  plan: string;
  name?: string;
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  /** ISO-8601: when the own limits end (the plan's apply again). */
  limitsExpiresAt?: string;
  limitsReason?: string;
  /** ISO-8601. */
  expiresAt?: string;
  metadata?: Record<string, string>;
  scopes?: string[];
  allowedCidrs?: string[];
  /** The consumer the key joins (it must exist and have room under its maxKeys); its plan then applies. */
  consumer?: string;
}

export interface IssuedKey {
  /** The plaintext: here and nowhere else. */
  key: string;
  record: KeyRecord;
  replication: Replication;
  warnings: string[];
}

export class KeyIssuer {
  constructor(
    private readonly store: Pick<KeyStore, 'create'>,
    private readonly clock: Clock,
    private readonly policy: KeyAdminPolicy,
    private readonly changes: KeyChanges,
  ) {}

  /** Issues a key: the plaintext is returned once here and never stored. */
  async create(input: KeyInput, actor: Actor = CLI_ACTOR): Promise<IssuedKey> {
    requirePlan(this.policy, input.plan);
    const plaintext = generateKey(this.policy.issuedPrefix?.());
    const stored: StoredKey = {
      id: generateKeyId(),
      ...(input.name !== undefined ? { name: input.name } : {}),
      plan: input.plan,
      ...(input.perMinute !== undefined ? { perMinute: input.perMinute } : {}),
      ...(input.perDay !== undefined ? { perDay: input.perDay } : {}),
      ...(input.perMonth !== undefined ? { perMonth: input.perMonth } : {}),
      ...(input.limitsExpiresAt !== undefined ? { limitsExpiresAt: input.limitsExpiresAt } : {}),
      ...(input.limitsReason !== undefined ? { limitsReason: input.limitsReason } : {}),
      createdAt: new Date(this.clock.now()).toISOString(),
      ...(input.expiresAt !== undefined ? { expiresAt: input.expiresAt } : {}),
      ...(input.metadata !== undefined ? { metadata: sortedMetadata(input.metadata) } : {}),
      ...(input.scopes !== undefined ? { scopes: [...input.scopes] } : {}),
      ...(input.allowedCidrs !== undefined ? { allowedCidrs: [...input.allowedCidrs] } : {}),
      status: 'active',
      hash: hashKey(plaintext),
      last4: lastFour(plaintext),
      ...(input.consumer !== undefined ? { consumer: input.consumer } : {}),
    };
    if (stored.consumer === undefined) await this.store.create(stored);
    else await attaching(this.policy, stored.consumer, undefined, () => this.store.create(stored));
    this.changes.told({ action: 'create', keyId: stored.id, actor });
    const replication = await this.changes.replicated(stored.id, [stored.hash]);
    return { key: plaintext, record: toRecord(stored), replication, warnings: overrideWarningsFor(this.policy, stored) };
  }
}
