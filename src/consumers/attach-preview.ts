// What attaching keys to consumers would change, before anything is: the keys grouped per consumer (by a metadata
// field, or as given), and per consumer the limits before (each key counted on its own, as today: the sum of the keys'
// limits) and after (the consumer's pool: its own limits while in force, else its plan's). Three keys with 60 a
// minute each have 180 together, and 60 once pooled. Pure functions over records: admin.ts reads the records, adds
// what the usage ledger says each pool would have refused over the last 7 days (estimatedRefusals) and, when asked to
// apply, makes the same groups happen.
import { KEY_ID } from '../config/key-fields.js';
import { keyLimits, summed, WINDOWS, type PlanLimits, type WindowLimits } from '../keys/limit-sums.js';
import type { EstimatedRefusals } from '../keys/pool-refusals.js';
import type { KeyRecord } from '../keys/types.js';
import type { ConsumerRecord } from './types.js';

export { keyLimits, windowText, type PlanLimits, type WindowLimits } from '../keys/limit-sums.js';
export type { EstimatedRefusals } from '../keys/pool-refusals.js';

export interface AttachGroup {
  /** The consumer's id; it exists, or is to be created. */
  consumer: string;
  exists: boolean;
  name: string;
  plan: string;
  maxKeys?: number;
  /** The keys that would join it, by id. */
  keys: string[];
  /** Keys it has already (not revoked), which stay. */
  keysAlready: number;
  /** The keys' limits on their own, summed: what they may take together today. */
  before: WindowLimits;
  /** The pool they would share. */
  after: WindowLimits;
  /** Why this group would not be attached (nothing of it is changed): past maxKeys, an id no consumer can have. */
  refused?: string;
  /**
   * What the usage ledger says the pool would have refused over the last 7 days had these keys shared it (an estimate:
   * usage/attach-refusals.ts). Absent for a group refused, or where no ledger is read.
   */
  estimatedRefusals?: EstimatedRefusals;
}

export interface AttachPreview {
  groups: AttachGroup[];
  /** Keys left out, and why (revoked, already in a consumer, no value in the field). */
  skipped: Array<{ key: string; reason: string }>;
}

/** A consumer's pool: its own limits while they are in force (until limitsExpiresAt), else its plan's. */
export function poolLimits(
  c: Pick<ConsumerRecord, 'plan' | 'perMinute' | 'perDay' | 'perMonth' | 'limitsExpiresAt'>,
  plans: Readonly<Record<string, PlanLimits>>,
  nowMs: number,
): WindowLimits {
  const own = c.limitsExpiresAt === undefined || nowMs < Date.parse(c.limitsExpiresAt);
  const plan = plans[c.plan];
  const out = { perMinute: null, perDay: null, perMonth: null } as WindowLimits;
  for (const w of WINDOWS) out[w] = (own ? c[w] : undefined) ?? plan?.[w] ?? null;
  return out;
}

/** How a group's consumer is found or made: an existing record, or the fields a new one gets. */
export interface GroupTarget {
  existing?: ConsumerRecord;
  /** Keys of an existing consumer that are not revoked. */
  keysAlready: number;
  create?: { name: string; plan: string; maxKeys?: number };
}

/**
 * The groups a preview shows, from the keys each consumer would get: their limits before and after, and whether the
 * group can be attached (room under maxKeys; an id a consumer can have).
 */
export function groupsOf(
  byConsumer: ReadonlyMap<string, KeyRecord[]>,
  target: (id: string) => GroupTarget,
  plans: Readonly<Record<string, PlanLimits>>,
  nowMs: number,
): AttachGroup[] {
  const groups: AttachGroup[] = [];
  for (const [id, keys] of [...byConsumer].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const t = target(id);
    const c = t.existing;
    const plan = c?.plan ?? t.create?.plan ?? '';
    const maxKeys = c?.maxKeys ?? t.create?.maxKeys;
    const group: AttachGroup = {
      consumer: id,
      exists: c !== undefined,
      name: c?.name ?? t.create?.name ?? id,
      plan,
      ...(maxKeys !== undefined ? { maxKeys } : {}),
      keys: keys.map((k) => k.id).sort(),
      keysAlready: t.keysAlready,
      before: summed(keys.map((k) => keyLimits(k, plans))),
      after: poolLimits(c ?? { plan }, plans, nowMs),
    };
    if (!KEY_ID.test(id)) group.refused = 'not an id a consumer can have (1-64 characters of A-Z a-z 0-9 _ -)';
    else if (!c && !Object.hasOwn(plans, plan)) group.refused = `unknown plan "${plan}"`;
    else if (maxKeys !== undefined && t.keysAlready + keys.length > maxKeys)
      group.refused = `it would have ${t.keysAlready + keys.length} keys, more than its maxKeys (${maxKeys})`;
    groups.push(group);
  }
  return groups;
}

/**
 * Keys grouped by the value of one metadata field: each value names the consumer its keys would join. Revoked keys,
 * keys already in a consumer and keys without the field are left out, with why.
 */
export function byMetadata(keys: Iterable<KeyRecord>, field: string): { byConsumer: Map<string, KeyRecord[]>; skipped: AttachPreview['skipped'] } {
  const byConsumer = new Map<string, KeyRecord[]>();
  const skipped: AttachPreview['skipped'] = [];
  for (const k of keys) {
    const value = k.metadata?.[field];
    if (value === undefined) continue;
    if (k.status === 'revoked') skipped.push({ key: k.id, reason: 'revoked' });
    else if (k.consumer !== undefined) skipped.push({ key: k.id, reason: `already in consumer ${k.consumer}` });
    else {
      const list = byConsumer.get(value);
      if (list) list.push(k);
      else byConsumer.set(value, [k]);
    }
  }
  return { byConsumer, skipped: skipped.sort((a, b) => (a.key < b.key ? -1 : 1)) };
}
