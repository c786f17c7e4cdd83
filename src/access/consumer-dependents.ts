// What the consumer portal holds of a consumer, ended with it: suspending or deleting a consumer ends every portal
// session and unused sign-in link of it at once, on every instance (the ended mark), and they stay ended after a
// resume. The composition roots (src/compose.ts, the CLI's session) give ConsumerAdmin this beside the consumer's
// webhook endpoints (its other dependents).
import type { ConsumerDependents } from '../consumers/types.js';
import type { Actor } from '../keys/key-changes.js';
import type { Clock } from '../util/clock.js';
import { ENDED_MARK_KEEP_MS } from './portal-access.js';
import type { AccessStore } from './types.js';

/** Ends a consumer's portal sessions: all of them, or one actor's. Returns when (epoch ms). */
export interface SessionEnder {
  endSessions(consumer: string, actor?: string): Promise<number>;
}

/** Ends sessions by writing the ended mark alone: what a process without the portal's rules (the CLI) needs. */
export function sessionEnder(store: AccessStore, clock: Clock): SessionEnder {
  return {
    async endSessions(consumer, actor) {
      const at = clock.now();
      await store.markEnded(consumer, actor, at, ENDED_MARK_KEEP_MS);
      return at;
    },
  };
}

/** The consumer's other dependents, and its portal sessions ended when it is suspended or deleted. */
export function withPortalSessions(others: ConsumerDependents, portal: SessionEnder): ConsumerDependents {
  return {
    async removeConsumer(consumerId: string, actor: Actor): Promise<number> {
      await portal.endSessions(consumerId);
      return others.removeConsumer(consumerId, actor);
    },
    async consumerSuspended(consumerId: string, actor: Actor): Promise<void> {
      await portal.endSessions(consumerId);
      await others.consumerSuspended?.(consumerId, actor);
    },
  };
}
