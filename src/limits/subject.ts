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
  /** The hash tag, without braces: the key id for a key; `c:<id>` for a consumer; `addr:<client>` for an address. */
  readonly tag: string;
}

/** A key's own subject: tagged with its id, as every name of a key's limits has been (`rl:{<id>}:minute`). */
export function keySubject(id: string): QuotaSubject {
  return { kind: 'key', id, tag: id };
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
