// What key administration reads of the config in force, per call (a reload applies at once), and the two rules on it
// that issuing, changing and importing keys all apply: the plan must be configured, and an override below a route's
// cost is warned about. The composition root (src/compose.ts, the CLI's session) hands the config over as this.
import { KeyAdminError } from './admin-errors.js';
import type { Actor } from './key-changes.js';
import type { WindowLimits } from './limit-sums.js';
import type { PoolReplay } from './pool-refusals.js';
import { overrideWarnings, type CostedRoute } from './cost-warnings.js';
import type { KeyShapeRules } from './format.js';

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
  /**
   * The consumers keys may belong to (src/consumers/attach.ts, passed in by the composition roots: consumers/ sits
   * above keys/). Without it a key cannot be given a consumer (KeyAdminError 'unknown_consumer').
   */
  consumers?: KeyConsumers;
}

/** What key administration asks of the consumers when a key joins one. */
export interface KeyConsumers {
  /**
   * Runs `write`, which makes key `keyId` (undefined: a key being created) one of the consumer's, once the consumer
   * exists and has room under its maxKeys, holding the consumer's lock so that no other attach (nor the consumer's
   * deletion) runs in between. KeyAdminError 'unknown_consumer', 'consumer_full' or 'contended' otherwise, before
   * `write` runs.
   */
  attaching<T>(consumerId: string, keyId: string | undefined, write: () => Promise<T>): Promise<T>;
  /**
   * For an import's check: each of these consumers that exists, with its maxKeys, how many keys it has (not revoked)
   * and its pool's limits (for a dry run's preview).
   */
  describe(ids: readonly string[]): Promise<Map<string, ConsumerFacts>>;
  /** For an import that creates the consumers it names: a consumer named by its id, on this plan (announced, audited). */
  create(id: string, plan: string, actor: Actor): Promise<void>;
  /**
   * What the usage ledger says keys would have been refused over the last 7 days had they shared a pool (the attach
   * preview's estimate: usage/attach-refusals.ts, passed in by the composition roots). Absent: previews go without.
   */
  readonly replay?: PoolReplay | undefined;
}

/** What an import needs to know of a consumer its records name. */
export interface ConsumerFacts {
  maxKeys?: number;
  inUse: number;
  pool: WindowLimits;
  /** Its keys by id (revoked ones too): the members of the pool a dry run's preview replays. */
  keyIds?: string[];
}

/** Runs a write that puts a key into a consumer, through the policy's consumers (refused when there are none). */
export function attaching<T>(policy: KeyAdminPolicy, consumerId: string, keyId: string | undefined, write: () => Promise<T>): Promise<T> {
  if (!policy.consumers) throw new KeyAdminError('unknown_consumer', `no consumer with id "${consumerId}" (consumers are not available here)`);
  return policy.consumers.attaching(consumerId, keyId, write);
}

/** Refuses a plan the config does not have (KeyAdminError 'unknown_plan', naming the plans there are). */
export function requirePlan(policy: KeyAdminPolicy, plan: string): void {
  const plans = policy.plans();
  if (!Object.hasOwn(plans, plan)) throw new KeyAdminError('unknown_plan', `unknown plan "${plan}"; plans: ${Object.keys(plans).join(', ')}`);
}

/**
 * What is unusual about a key's overrides, warned and not refused: one below the cost of a configured route makes
 * every request of the key there refused (403 cost_exceeds_limit).
 */
export function overrideWarningsFor(policy: KeyAdminPolicy, k: { perMinute?: number | undefined; perDay?: number | undefined }): string[] {
  return overrideWarnings(k, policy.routes?.() ?? []);
}
