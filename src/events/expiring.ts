// key.expiring: keys whose expiresAt falls within the next 7 days, found by a pass over every key record (each gateway
// runs it soon after start and hourly: src/compose.ts). The event id names the key and its expiry, so each expiry is
// announced once whichever instance's pass finds it first, and a key given a new expiry is announced again.
import type { KeyRecords } from '../keys/records.js';
import { DAY_MS } from '../util/time.js';
import type { EventProducer } from './producer.js';
import { eventIds, subjectOf, type EventDraft } from './types.js';

/** How far ahead an expiry is announced. */
export const EXPIRING_WITHIN_MS = 7 * DAY_MS;

export interface ExpiringDeps {
  records: Pick<KeyRecords, 'all'>;
  producer: Pick<EventProducer, 'publish'>;
}

/** The key.expiring event of a key expiring at `expiresAtMs`, found at `now`. */
export function expiringDraft(k: { id: string; plan: string; name?: string; consumer?: string }, expiresAtMs: number, now: number): EventDraft<'key.expiring'> {
  return {
    id: eventIds.expiring(k.id, expiresAtMs),
    type: 'key.expiring',
    subject: subjectOf(k.id, k.consumer),
    at: now,
    key: k.id,
    plan: k.plan,
    ...(k.consumer !== undefined ? { consumer: k.consumer } : {}),
    data: {
      key: k.id,
      ...(k.consumer !== undefined ? { consumer: k.consumer } : {}),
      ...(k.name !== undefined ? { name: k.name } : {}),
      plan: k.plan,
      expiresAt: new Date(expiresAtMs).toISOString(),
    },
  };
}

/**
 * Every active key whose expiresAt is after `now` and within EXPIRING_WITHIN_MS of it, published as key.expiring.
 * `expiring`: how many keys were found; `published`: how many of those the outbox had not seen. A read that fails
 * fails the pass (KeyRecords.all is complete or failing); the next pass finds the rest.
 */
export async function expiringKeys(now: number, deps: ExpiringDeps): Promise<{ expiring: number; published: number }> {
  let expiring = 0;
  let published = 0;
  for await (const batch of deps.records.all('the key.expiring scan')) {
    for (const k of batch) {
      if (k.status !== 'active' || k.expiresAt === undefined) continue;
      const at = Date.parse(k.expiresAt);
      if (!(at > now && at <= now + EXPIRING_WITHIN_MS)) continue;
      expiring++;
      if (await deps.producer.publish(expiringDraft(k, at, now))) published++;
    }
  }
  return { expiring, published };
}
