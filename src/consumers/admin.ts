// Consumer administration, the one way the CLI and the admin API read and change consumers: create, read, page,
// update (compare-and-set, so racing changes never undo each other), suspend and resume, delete (refused while the
// consumer has keys that are not revoked, unless asked to revoke them), and its keys. Every change is announced on
// the change feed (every instance drops its copy) and told to the change listener (src/admin/audit.ts audits it).
import { randomBytes } from 'node:crypto';
import type { Clock } from '../util/clock.js';
import { KEY_ID, sortedMetadata } from '../config/key-fields.js';
import { incomplete, KeyAdminError } from '../keys/admin-errors.js';
import { overrideWarningsFor, requirePlan, type KeyAdminPolicy } from '../keys/admin-policy.js';
import type { KeyAdmin } from '../keys/admin.js';
import { CLI_ACTOR, type Actor } from '../keys/key-changes.js';
import { keyMatcher } from '../keys/key-search.js';
import { toRecord } from '../keys/rules.js';
import type { KeyRecord, KeyStore } from '../keys/types.js';
import { keysInUse, withConsumerLock } from './attach.js';
import {
  byMetadata,
  groupsOf,
  poolLimits,
  type AttachGroup,
  type AttachPreview,
  type EstimatedRefusals,
  type GroupTarget,
  type PlanLimits,
} from './attach-preview.js';
import { canonicalConsumer } from './record-schema.js';
import {
  ConsumerStoreError,
  type ConsumerChangeAction,
  type ConsumerChangeListener,
  type ConsumerDependents,
  type ConsumerRecord,
  type ConsumerStore,
} from './types.js';
import { firstAfter } from '../keys/listing.js';
import { catalogueChannel, CHANNELS, type ConsumerChangedMessage } from '../observability/catalogue.js';

/** The catalogue's channel of consumer status changes (observability/catalogue.ts): published only while someone listens. */
const changedChannel = catalogueChannel(CHANNELS.consumerChanged);

export type { ConsumerChangeAction, ConsumerChangeListener, ConsumerDependents } from './types.js';

/** What a consumer can be given at creation; `id` left out: one is made (con_...). */
export type ConsumerInput = Partial<Pick<ConsumerRecord, 'id'>> & Omit<ConsumerRecord, 'id' | 'status' | 'createdAt' | 'updatedAt' | 'suspendedAt'>;

/** The fields an update may remove (null) besides replacing. */
const OPTIONAL_FIELDS = [
  'metadata',
  'maxKeys',
  'billingDay',
  'perMinute',
  'perDay',
  'perMonth',
  'limitsExpiresAt',
  'limitsReason',
  'scopes',
  'allowedCidrs',
] as const;
type OptionalField = (typeof OPTIONAL_FIELDS)[number];

/** A change to a consumer: what is given changes, null removes an optional field, what is left out stays. */
export type ConsumerUpdate = { name?: string; plan?: string } & { [F in OptionalField]?: ConsumerRecord[F] | null };

/** A page of `GET /consumers`: consumers by id after `after`, those matching every filter given. */
export interface ConsumerPageQuery {
  limit: number;
  after?: string;
  status?: ConsumerRecord['status'];
  plan?: string;
  /** Search text: an id prefix, or a piece of the name or of a metadata value (as keys are searched). */
  q?: string;
}

/** How many records a page reads at once; the most it reads in all (a filter matching few: a short page with a cursor). */
const PAGE_READ_BATCH = 100;
const PAGE_SCAN_MAX = 10_000;

const CHANGE_ATTEMPTS = 16;

/** A consumer id made when none is given: con_ and 24 hex digits (a key id's characters, as the hash tag needs). */
export function generateConsumerId(): string {
  return `con_${randomBytes(12).toString('hex')}`;
}

function notFound(id: string): KeyAdminError {
  return new KeyAdminError('not_found', `no consumer with id "${id}"`);
}

/** A read of one consumer's record: an unreadable one is KeyAdminError 'invalid_record'. */
async function readOne<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof ConsumerStoreError && err.code === 'invalid_record') throw new KeyAdminError('invalid_record', err.message);
    throw err;
  }
}

export class ConsumerAdmin {
  constructor(
    private readonly store: ConsumerStore,
    private readonly keyStore: Pick<KeyStore, 'consumerKeys'>,
    private readonly keys: Pick<KeyAdmin, 'lifecycle' | 'listing' | 'records'>,
    private readonly clock: Clock,
    private readonly policy: Pick<KeyAdminPolicy, 'plans' | 'routes' | 'consumers'>,
    private readonly onChange: ConsumerChangeListener = () => {},
    private readonly dependents?: ConsumerDependents,
  ) {}

  /** The consumer, or undefined; KeyAdminError 'invalid_record' when its record cannot be read. */
  async get(id: string): Promise<ConsumerRecord | undefined> {
    return readOne(() => this.store.get(id));
  }

  /** The consumer; KeyAdminError 'not_found' when there is none. */
  async require(id: string): Promise<ConsumerRecord> {
    const c = await this.get(id);
    if (!c) throw notFound(id);
    return c;
  }

  /** The consumer's keys (never a hash), by id; revoked ones too, as their records have them. */
  async keysOf(id: string): Promise<KeyRecord[]> {
    await this.require(id);
    return (await this.keyStore.consumerKeys(id)).map(toRecord);
  }

  /** How many of the consumer's keys are not revoked (what maxKeys counts): one read of its hash of keys. */
  async keyCount(id: string): Promise<number> {
    return (await this.keyStore.consumerKeys(id)).filter((k) => k.status !== 'revoked').length;
  }

  /**
   * One page of consumers in id order after `after`, matching the filters; `next` is the id to pass as `after` for
   * the next page, absent once the last id has been read. A failed read fails the page (KeyAdminError 'incomplete').
   */
  async page(q: ConsumerPageQuery): Promise<{ consumers: ConsumerRecord[]; next?: string }> {
    try {
      const ids = await this.store.ids();
      let i = q.after === undefined ? 0 : firstAfter(ids, q.after);
      const end = Math.min(ids.length, i + PAGE_SCAN_MAX);
      const consumers: ConsumerRecord[] = [];
      const matches = q.q !== undefined ? keyMatcher(q.q) : undefined;
      while (i < end && consumers.length < q.limit) {
        const batch = ids.slice(i, Math.min(end, i + PAGE_READ_BATCH));
        // A record that cannot be read is left out of pages (GET /consumers/{id} names it), never fails the page.
        const records = await Promise.all(batch.map((id) => this.store.get(id).catch(skipUnreadable)));
        let j = 0;
        for (; j < batch.length && consumers.length < q.limit; j++) {
          const c = records[j];
          if (!c) continue;
          if (q.status !== undefined && c.status !== q.status) continue;
          if (q.plan !== undefined && c.plan !== q.plan) continue;
          if (matches && !matches(c)) continue;
          consumers.push(c);
        }
        i += j;
      }
      return { consumers, ...(i > 0 && i < ids.length ? { next: ids[i - 1]! } : {}) };
    } catch (err) {
      throw incomplete('the consumer list', err);
    }
  }

  /** Creates a consumer (active); KeyAdminError 'consumer_exists' when its id is taken, 'unknown_plan'. */
  async create(input: ConsumerInput, actor: Actor = CLI_ACTOR): Promise<{ consumer: ConsumerRecord; warnings: string[] }> {
    requirePlan(this.policy, input.plan);
    const { id, metadata, ...rest } = input;
    const consumer = canonicalConsumer<ConsumerRecord>({
      id: id ?? generateConsumerId(),
      ...rest,
      ...(metadata !== undefined ? { metadata: sortedMetadata(metadata) } : {}),
      status: 'active',
      createdAt: new Date(this.clock.now()).toISOString(),
    });
    try {
      await this.store.create(consumer);
    } catch (err) {
      if (err instanceof ConsumerStoreError && err.code === 'conflict')
        throw new KeyAdminError('consumer_exists', `a consumer with id "${consumer.id}" exists already`);
      throw err;
    }
    await this.announce(consumer.id, 'create', actor);
    return { consumer, warnings: this.warnings(consumer) };
  }

  /** Changes a consumer in place; every instance drops its copy. */
  async update(id: string, patch: ConsumerUpdate, actor: Actor = CLI_ACTOR): Promise<{ consumer: ConsumerRecord; warnings: string[] }> {
    if (patch.plan !== undefined) requirePlan(this.policy, patch.plan);
    const consumer = await this.change(id, (c) => {
      const next: Record<string, unknown> = { ...c };
      if (patch.name !== undefined) next.name = patch.name;
      if (patch.plan !== undefined) next.plan = patch.plan;
      for (const field of OPTIONAL_FIELDS) {
        const value = patch[field];
        if (value === null) delete next[field];
        else if (value !== undefined) next[field] = field === 'metadata' ? sortedMetadata(value as Record<string, string>) : value;
      }
      return next as unknown as ConsumerRecord;
    });
    await this.announce(id, 'update', actor);
    return { consumer, warnings: this.warnings(consumer) };
  }

  /**
   * Suspends the consumer: every key of it is refused (403 consumer_suspended) on every instance within a second.
   * Suspending a suspended consumer changes nothing (no second audit line).
   */
  async suspend(id: string, actor: Actor = CLI_ACTOR): Promise<ConsumerRecord> {
    return this.setStatus(id, 'suspended', actor);
  }

  /** Lifts a suspension; resuming an active consumer changes nothing. */
  async resume(id: string, actor: Actor = CLI_ACTOR): Promise<ConsumerRecord> {
    return this.setStatus(id, 'active', actor);
  }

  private async setStatus(id: string, status: ConsumerRecord['status'], actor: Actor): Promise<ConsumerRecord> {
    let changed = false;
    const consumer = await this.change(id, (c) => {
      changed = c.status !== status;
      if (!changed) return c;
      const next: ConsumerRecord = { ...c, status };
      if (status === 'suspended') next.suspendedAt = new Date(this.clock.now()).toISOString();
      else delete next.suspendedAt;
      return next;
    });
    // What hangs off the consumer above this room ends with a suspension (its portal sessions), and stays ended after
    // a resume. Asked again on a repeated suspension: one that failed here half-way is completed by asking again.
    if (status === 'suspended') await this.dependents?.consumerSuspended?.(id, actor);
    if (changed) {
      await this.announce(id, status === 'suspended' ? 'suspend' : 'resume', actor);
      this.published(id, status);
    }
    return consumer;
  }

  /**
   * Deletes the consumer. While it has keys that are not revoked: KeyAdminError 'consumer_has_keys', nothing changed,
   * unless `revokeKeys`: then each is revoked first (on every instance, each audited). Its revoked keys keep naming it
   * (their history); the consumer's mirror goes with it. The final check and the deletion hold the consumer's lock,
   * so no key joins it in between. Returns the keys it revoked.
   */
  async delete(id: string, opts: { revokeKeys?: boolean } = {}, actor: Actor = CLI_ACTOR): Promise<{ revokedKeys: string[] }> {
    await this.require(id);
    const revokedKeys: string[] = [];
    if (opts.revokeKeys) {
      for (const k of await this.keyStore.consumerKeys(id)) {
        if (k.status === 'revoked') continue;
        await this.keys.lifecycle.revoke(k.id, actor);
        revokedKeys.push(k.id);
      }
    }
    await withConsumerLock(this.store, id, async () => {
      const keys = await this.keyStore.consumerKeys(id);
      const inUse = keysInUse(keys);
      if (inUse > 0)
        throw new KeyAdminError(
          'consumer_has_keys',
          `consumer ${id} has ${inUse} key${inUse === 1 ? '' : 's'} that ${inUse === 1 ? 'is' : 'are'} not revoked (${keys
            .filter((k) => k.status !== 'revoked')
            .slice(0, 5)
            .map((k) => k.id)
            .join(', ')}${inUse > 5 ? ', ...' : ''}); revoke ${inUse === 1 ? 'it' : 'them'} first, or ask for it (--revoke-keys, revokeKeys=true)`,
        );
      if (!(await this.store.delete(id))) throw notFound(id);
    });
    // What hangs off the consumer in rooms above this one (its webhook endpoints) goes with it.
    await this.dependents?.removeConsumer(id, actor);
    await this.store.publishChange(id);
    this.onChange({ action: 'delete', consumerId: id, actor, ...(opts.revokeKeys ? { revokedKeys: revokedKeys.length } : {}) });
    this.published(id, 'deleted');
    return { revokedKeys };
  }

  /**
   * What grouping the keys by a metadata field would do: each value names a consumer (an existing one, or one to be
   * created with that id and name, on `create.plan`), and each group shows its keys' limits before and its pool after.
   * Reads only. KeyAdminError 'unknown_plan' for a plan not configured.
   */
  async previewFromMetadata(field: string, create: { plan: string; maxKeys?: number }): Promise<AttachPreview> {
    requirePlan(this.policy, create.plan);
    const all: KeyRecord[] = [];
    for await (const batch of this.keys.records.all('the attach preview')) all.push(...batch);
    const { byConsumer, skipped } = byMetadata(all, field);
    return { groups: await this.groups(byConsumer, create), skipped };
  }

  /**
   * What attaching these keys to one existing consumer would do. Unknown and revoked keys, and keys already in a
   * consumer (a move is one key's PATCH), are left out with why.
   */
  async previewKeys(consumerId: string, keyIds: readonly string[]): Promise<AttachPreview> {
    await this.require(consumerId);
    const joining: KeyRecord[] = [];
    const skipped: AttachPreview['skipped'] = [];
    for (const id of [...new Set(keyIds)].sort()) {
      const k = await this.keys.listing.get(id);
      if (!k) skipped.push({ key: id, reason: 'no such key' });
      else if (k.status === 'revoked') skipped.push({ key: id, reason: 'revoked' });
      else if (k.consumer !== undefined) skipped.push({ key: id, reason: k.consumer === consumerId ? 'already in it' : `already in consumer ${k.consumer}` });
      else joining.push(k);
    }
    return { groups: await this.groups(new Map(joining.length ? [[consumerId, joining]] : []), undefined), skipped };
  }

  private async groups(byConsumer: ReadonlyMap<string, KeyRecord[]>, create: { plan: string; maxKeys?: number } | undefined): Promise<AttachGroup[]> {
    const targets = new Map<string, GroupTarget>();
    const members = new Map<string, string[]>();
    for (const id of byConsumer.keys()) {
      const existing = KEY_ID.test(id) ? await this.get(id) : undefined;
      const keys = existing ? await this.keyStore.consumerKeys(id) : [];
      members.set(
        id,
        keys.map((k) => k.id),
      );
      targets.set(id, {
        ...(existing ? { existing } : {}),
        keysAlready: keysInUse(keys),
        ...(create ? { create: { name: id, plan: create.plan, ...(create.maxKeys !== undefined ? { maxKeys: create.maxKeys } : {}) } } : {}),
      });
    }
    const groups = groupsOf(byConsumer, (id) => targets.get(id)!, this.policy.plans() as Readonly<Record<string, PlanLimits>>, this.clock.now());
    // Each pool that would be made, replayed against the ledger: the keys the preview then says would have been refused.
    const replay = this.policy.consumers?.replay;
    const attachable = groups.filter((g) => g.refused === undefined);
    if (replay && attachable.length > 0) {
      const estimates = await replay(
        attachable.map((g) => ({ consumer: g.consumer, exists: g.exists, joining: g.keys, members: members.get(g.consumer)!, limits: g.after })),
      );
      attachable.forEach((g, i) => (g.estimatedRefusals = estimates[i]!));
    }
    return groups;
  }

  /**
   * What the usage ledger says these keys would have been refused over the last 7 days had they shared the consumer's
   * pool (with the keys it has, or had); undefined where no ledger is read. For one key attached at once (`keys update
   * --consumer`): the estimate a bulk attach's preview gives, after the fact.
   */
  async estimateRefusals(consumer: ConsumerRecord, keyIds: readonly string[]): Promise<EstimatedRefusals | undefined> {
    const replay = this.policy.consumers?.replay;
    if (!replay) return undefined;
    const limits = poolLimits(consumer, this.policy.plans() as Readonly<Record<string, PlanLimits>>, this.clock.now());
    const members = (await this.keyStore.consumerKeys(consumer.id)).map((k) => k.id);
    return (await replay([{ consumer: consumer.id, exists: true, joining: keyIds, members, limits }]))[0];
  }

  /**
   * Makes a preview happen: each group not refused gets its consumer (created when it is not there) and its keys,
   * each key attached as `keys update --consumer` attaches it (maxKeys judged again under the consumer's lock). Groups
   * refused in the preview are left alone. Returns, per group, the keys attached and those that could not be.
   */
  async applyAttach(
    preview: AttachPreview,
    actor: Actor = CLI_ACTOR,
  ): Promise<Array<{ consumer: string; created: boolean; attached: string[]; failed: Array<{ key: string; reason: string }> }>> {
    const out = [];
    for (const g of preview.groups) {
      if (g.refused !== undefined) continue;
      let created = false;
      if (!g.exists) {
        try {
          await this.create({ id: g.consumer, name: g.name, plan: g.plan, ...(g.maxKeys !== undefined ? { maxKeys: g.maxKeys } : {}) }, actor);
          created = true;
        } catch (err) {
          // Created meanwhile: its keys join it all the same.
          if (!(err instanceof KeyAdminError && err.code === 'consumer_exists')) throw err;
        }
      }
      const attached: string[] = [];
      const failed: Array<{ key: string; reason: string }> = [];
      for (const key of g.keys) {
        try {
          await this.keys.lifecycle.update(key, { consumer: g.consumer }, actor);
          attached.push(key);
        } catch (err) {
          if (!(err instanceof KeyAdminError)) throw err;
          failed.push({ key, reason: err.message });
        }
      }
      out.push({ consumer: g.consumer, created, attached, failed });
    }
    return out;
  }

  /** Read, make the next record, write it only if unchanged since the read; read again when another change came in. */
  private async change(id: string, make: (c: ConsumerRecord) => ConsumerRecord): Promise<ConsumerRecord> {
    for (let attempt = 0; attempt < CHANGE_ATTEMPTS; attempt++) {
      const read = await readOne(() => this.store.getVersioned(id));
      if (!read) throw notFound(id);
      const made = make(read.consumer);
      if (made === read.consumer) return made;
      const next = canonicalConsumer<ConsumerRecord>({ ...made, updatedAt: new Date(this.clock.now()).toISOString() });
      try {
        await this.store.update(next, { ifRevision: read.revision });
        return next;
      } catch (err) {
        if (err instanceof ConsumerStoreError && err.code === 'not_found') throw notFound(id);
        if (!(err instanceof ConsumerStoreError && err.code === 'conflict')) throw err;
      }
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 ** attempt)));
    }
    throw new KeyAdminError('contended', `consumer ${id} kept changing while this change was being made; try again`);
  }

  /** A status change or a deletion, on the catalogue's channel (only while someone listens). */
  private published(id: string, status: ConsumerChangedMessage['status']): void {
    if (changedChannel.hasSubscribers) changedChannel.publish({ consumer: id, status, at: this.clock.now() } satisfies ConsumerChangedMessage);
  }

  private async announce(id: string, action: ConsumerChangeAction, actor: Actor): Promise<void> {
    await this.store.publishChange(id);
    this.onChange({ action, consumerId: id, actor });
  }

  /** An own limit below a route's cost, as for a key: every request of the consumer's keys there would be refused. */
  private warnings(c: ConsumerRecord): string[] {
    return overrideWarningsFor(this.policy, c).map((w) => w.replace('this key can', "this consumer's keys can"));
  }
}

function skipUnreadable(err: unknown): undefined {
  if (err instanceof ConsumerStoreError && err.code === 'invalid_record') return undefined;
  throw err;
}
