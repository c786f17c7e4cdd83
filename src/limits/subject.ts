// Whose windows a request counts in: a key, a consumer, or the address of a public route's client. Every Redis name of
// a subject's state carries its hash tag, so on Redis Cluster one limit check (one script) stays in one slot.

/** What a subject is: an API key, a consumer (the customer behind keys), or a client address (a public route's). */
export type SubjectKind = 'key' | 'consumer' | 'address';

/**
 * Whose windows, ban and ledger a limit check reads and writes, with the Redis Cluster hash tag every one of their names
 * carries (storage/keyspace.ts builds the names from it).
 */
export interface QuotaSubject {
  readonly kind: SubjectKind;
  readonly id: string;
  /**
   * The hash tag, without braces: the key id for a key; `c:<id>` for a consumer and for every key of it (a key of a
   * consumer keeps its record, caps, ban and ledger in its consumer's slot); `addr:<client>` for an address.
   */
  readonly tag: string;
  /**
   * A key of a consumer: the consumer, whose windows (the pool) its plan and route windows count in; the key's own
   * windows are then its caps inside the pool. Absent: the subject's windows are its own.
   */
  readonly pool?: QuotaSubject;
}

/**
 * A key's subject. Without a consumer it is tagged with its id, as every name of a key's limits has been
 * (`rl:{<id>}:minute`); with one, it lives in the consumer's slot (`rl:{c:<consumer>}:key:<id>:minute`) and its pool is
 * the consumer.
 */
export function keySubject(id: string, consumer?: string): QuotaSubject {
  if (consumer === undefined) return { kind: 'key', id, tag: id };
  const pool = consumerSubject(consumer);
  return { kind: 'key', id, tag: pool.tag, pool };
}

/** Whose windows a subject's plan and route windows count in: its consumer's for a key of one, else its own. */
export function poolOf(s: QuotaSubject): QuotaSubject {
  return s.pool ?? s;
}

/**
 * A client address of a public route (anonymousClientKey's: an IP literal or an IPv6 /64). Its tag `addr:<client>`
 * can never be a key's (key ids hold no colon), so no address's windows meet a key's.
 */
export function addressSubject(client: string): QuotaSubject {
  return { kind: 'address', id: client, tag: `addr:${client}` };
}

/** A consumer (the customer behind several keys): tagged `c:<id>`, a tag no key id can have (key ids hold no colon). */
export function consumerSubject(id: string): QuotaSubject {
  return { kind: 'consumer', id, tag: `c:${id}` };
}

/**
 * Whose ban a request of `s` meets and builds, by ban.scope: a key of a consumer has its own ('key', the default) or
 * shares its consumer's ('consumer'); any other subject has its own.
 */
export function banHolder(s: QuotaSubject, scope: 'key' | 'consumer' | undefined): QuotaSubject {
  return scope === 'consumer' ? poolOf(s) : s;
}
