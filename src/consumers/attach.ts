// A key joining a consumer: what key administration asks of the consumers (keys/admin-policy.ts's KeyConsumers),
// answered here and passed in by the composition roots. The consumer must exist; its keys that are not revoked, counted
// from its mirror, must leave room under maxKeys; and both are judged under the consumer's lock, so that two keys
// joining at once cannot both take the last place, and a consumer being deleted gets no key meanwhile.
import { setTimeout as sleep } from 'node:timers/promises';
import { KeyAdminError } from '../keys/admin-errors.js';
import type { ConsumerFacts, KeyConsumers } from '../keys/admin-policy.js';
import type { PlanLimits } from '../keys/limit-sums.js';
import type { PoolReplay } from '../keys/pool-refusals.js';
import { poolLimits } from './attach-preview.js';
import type { Actor } from '../keys/key-changes.js';
import type { KeyStore } from '../keys/types.js';
import { systemClock, type Clock } from '../util/clock.js';
import { canonicalConsumer } from './record-schema.js';
import { ConsumerStoreError, type ConsumerChangeListener, type ConsumerRecord, type ConsumerStore } from './types.js';

/** How long a change waits for a consumer's lock (another attach or a deletion holding it) before giving up. */
const LOCK_WAIT_MS = 5_000;

/** Runs `fn` holding the consumer's lock; KeyAdminError 'contended' when it stays taken for LOCK_WAIT_MS. */
export async function withConsumerLock<T>(store: Pick<ConsumerStore, 'lock'>, id: string, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + LOCK_WAIT_MS;
  let lock = await store.lock(id);
  for (let wait = 2; !lock; wait = Math.min(wait * 2, 100)) {
    if (Date.now() > deadline)
      throw new KeyAdminError('contended', `consumer ${id} is being changed by another administrator (its keys or its deletion); try again`);
    await sleep(wait * (0.5 + Math.random()));
    lock = await store.lock(id);
  }
  try {
    return await fn();
  } finally {
    await lock.release().catch(() => undefined);
  }
}

/** The keys of a consumer that count against its maxKeys: those not revoked (an expired key can be renewed). */
export function keysInUse(keys: ReadonlyArray<{ status: string }>): number {
  return keys.filter((k) => k.status !== 'revoked').length;
}

/** Consumers described at once (an import's check): each is a record read and its mirror's keys. */
const DESCRIBE_AT_ONCE = 16;

export class ConsumerAttach implements KeyConsumers {
  readonly replay: PoolReplay | undefined;

  /**
   * `opts`: the clock and change listener of the consumers an import creates (the audit); `replay`, the usage ledger's
   * estimate of what keys would have been refused in a pool, for the attach previews.
   */
  constructor(
    private readonly consumers: Pick<ConsumerStore, 'get' | 'lock' | 'create' | 'publishChange'>,
    private readonly keys: Pick<KeyStore, 'consumerKeys'>,
    private readonly opts: { clock?: Clock; onChange?: ConsumerChangeListener; plans?: () => Readonly<Record<string, PlanLimits>>; replay?: PoolReplay } = {},
  ) {
    this.replay = opts.replay;
  }

  async describe(ids: readonly string[]): Promise<Map<string, ConsumerFacts>> {
    const out = new Map<string, ConsumerFacts>();
    const plans = this.opts.plans?.() ?? {};
    const now = (this.opts.clock ?? systemClock).now();
    for (let i = 0; i < ids.length; i += DESCRIBE_AT_ONCE) {
      await Promise.all(
        ids.slice(i, i + DESCRIBE_AT_ONCE).map(async (id) => {
          const c = await this.consumers.get(id).catch((err: unknown) => {
            // An unreadable consumer is not one keys can join: as if it were not there.
            if (err instanceof ConsumerStoreError && err.code === 'invalid_record') return undefined;
            throw err;
          });
          if (!c) return;
          const keys = await this.keys.consumerKeys(id);
          out.set(id, {
            ...(c.maxKeys !== undefined ? { maxKeys: c.maxKeys } : {}),
            inUse: keysInUse(keys),
            pool: poolLimits(c, plans, now),
            keyIds: keys.map((k) => k.id),
          });
        }),
      );
    }
    return out;
  }

  async create(id: string, plan: string, actor: Actor): Promise<void> {
    const consumer = canonicalConsumer<ConsumerRecord>({
      id,
      name: id,
      plan,
      status: 'active',
      createdAt: new Date((this.opts.clock ?? systemClock).now()).toISOString(),
    });
    try {
      await this.consumers.create(consumer);
    } catch (err) {
      // Created meanwhile (another import, an administrator): it is there, which is what was asked.
      if (err instanceof ConsumerStoreError && err.code === 'conflict') return;
      throw err;
    }
    await this.consumers.publishChange(id);
    this.opts.onChange?.({ action: 'create', consumerId: id, actor });
  }

  attaching<T>(consumerId: string, keyId: string | undefined, write: () => Promise<T>): Promise<T> {
    return withConsumerLock(this.consumers, consumerId, async () => {
      let consumer: ConsumerRecord | undefined;
      try {
        consumer = await this.consumers.get(consumerId);
      } catch (err) {
        throw new KeyAdminError('invalid_record', (err as Error).message);
      }
      if (!consumer) throw new KeyAdminError('unknown_consumer', `no consumer with id "${consumerId}"`);
      if (consumer.maxKeys !== undefined) {
        // The key itself does not count: moving a key within its consumer, or changing one already there, needs no room.
        const others = keysInUse((await this.keys.consumerKeys(consumerId)).filter((k) => k.id !== keyId));
        if (others >= consumer.maxKeys)
          throw new KeyAdminError('consumer_full', `consumer ${consumerId} has ${others} keys (not revoked), its maxKeys: no room for another`);
      }
      return write();
    });
  }
}
