// What identity needs of a key's consumer (the customer behind the keys): the fields the request path reads, and a
// way to find the record by id. The consumers room keeps the records (their store, their change feed) and satisfies
// ConsumerLookup with a cache every instance keeps current; identity reads only this.

/** The part of a consumer record the request path reads: a ConsumerRecord (consumers/) is one. */
export interface ConsumerView {
  readonly id: string;
  /** The plan in force for every key of the consumer. */
  readonly plan: string;
  readonly status: 'active' | 'suspended';
  readonly metadata?: Readonly<Record<string, string>> | undefined;
  /** 1-31: its monthly windows run from this day (31: the last day of a shorter month); absent: calendar months. */
  readonly billingDay?: number | undefined;
  /** Own limits of the pool, over its plan's, until limitsExpiresAt (ISO-8601) if it has one. */
  readonly perMinute?: number | undefined;
  readonly perDay?: number | undefined;
  readonly perMonth?: number | undefined;
  readonly limitsExpiresAt?: string | undefined;
  /** The routes its keys may call; absent: every route. A key's own scopes narrow them. */
  readonly scopes?: readonly string[] | undefined;
  /** The client addresses its keys may be used from; absent: anywhere. A key's own list narrows it. */
  readonly allowedCidrs?: readonly string[] | undefined;
}

export interface ConsumerLookup {
  /**
   * The consumer's record, as this instance has it: at once from a cache (the usual case), or a promise for a read.
   * Undefined: there is no such consumer. A rejection: it could not be read (the key is answered as one whose store
   * did not answer). The same record object while it is unchanged, so what is compiled from it is kept.
   */
  get(id: string): ConsumerView | undefined | Promise<ConsumerView | undefined>;
}
