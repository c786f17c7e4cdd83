// The consumer record (the customer behind several keys: one plan, one pooled quota, one status) and the
// ConsumerStore interface: a memory and a Redis implementation, I/O only. What a consumer may hold is
// record-schema.ts's; changing consumers is admin.ts's; the gateway reads them through cache.ts.
import type { Actor } from '../keys/key-changes.js';

export interface ConsumerRecord {
  /** Same characters as a key id (config/key-fields.ts): it goes into Redis hash tags ({c:<id>}). */
  id: string;
  name: string;
  /** The plan in force for every key of the consumer (a key's own `plan` applies again once it is detached). */
  plan: string;
  /** A small string map for a portal's or billing system's ids: the bounds of a key's metadata. */
  metadata?: Record<string, string>;
  status: 'active' | 'suspended';
  /** Attaching or creating a key past this many (keys not revoked) is refused. */
  maxKeys?: number;
  /** 1-31: monthly windows run from this day of the month (31: the last day of shorter months); absent: calendar months, UTC. */
  billingDay?: number;
  /** Own limits: override the plan's for the whole pool, until limitsExpiresAt. */
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  /** ISO-8601: after it the plan's values apply again (the own perMinute/perDay/perMonth are ignored). */
  limitsExpiresAt?: string;
  /** Why the own limits were given (a launch week, a contract): for the administrators who find them. */
  limitsReason?: string;
  /** Route names, `service:<name>`, `operation:<operationId>`: the only routes the consumer's keys may call. */
  scopes?: string[];
  /** IPv4/IPv6 addresses and CIDR ranges the consumer's keys may call from. */
  allowedCidrs?: string[];
  /** ISO-8601. */
  createdAt: string;
  updatedAt?: string;
  suspendedAt?: string;
}

export interface ConsumerStore {
  /** The record, or undefined; a ConsumerStoreError (code invalid_record) when the stored record cannot be read. */
  get(id: string): Promise<ConsumerRecord | undefined>;
  /** The record with its revision (what update's and delete's `ifRevision` compare), or undefined; errors as get(). */
  getVersioned(id: string): Promise<{ consumer: ConsumerRecord; revision: string } | undefined>;
  /** Every consumer id, sorted (no record read): what a page of `GET /consumers` starts from. */
  ids(): Promise<string[]>;
  /** Fails (ConsumerStoreError 'conflict') if the id exists. */
  create(consumer: ConsumerRecord): Promise<void>;
  /**
   * Replaces an existing record (ConsumerStoreError 'not_found' if there is none). With `ifRevision`, only if it is
   * still that revision, atomically; otherwise 'conflict' and nothing changed.
   */
  update(consumer: ConsumerRecord, opts?: { ifRevision?: string }): Promise<void>;
  /** Removes the record and its id; false when there was none. With `ifRevision` as update's. */
  delete(id: string, opts?: { ifRevision?: string }): Promise<boolean>;
  /**
   * Takes the consumer's attach lock: one change of which keys belong to the consumer at a time (attaching a key,
   * deleting the consumer), across every instance, so two attaches cannot both find room under maxKeys. Undefined
   * while another holder has it. Held for at most CONSUMER_LOCK_TTL_MS.
   */
  lock(id: string): Promise<{ release(): Promise<void> } | undefined>;
  /** Tells every gateway instance that the consumer changed (its cached copy is dropped). */
  publishChange(id: string): Promise<void>;
  /**
   * Calls onChange(id) when any instance changes a consumer, and onReset() when changes may have been missed (the
   * subscription came back after a disconnect); onListening() each time the subscription is in place.
   */
  subscribe(onChange: (id: string) => void, onReset: () => void, more?: { onListening?(): void }): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export type ConsumerChangeAction = 'create' | 'update' | 'suspend' | 'resume' | 'delete';

/** Told of every change once it is stored; a deletion that revoked keys says how many (each key's revoke is audited too). */
export type ConsumerChangeListener = (change: { action: ConsumerChangeAction; consumerId: string; actor: Actor; revokedKeys?: number }) => void;

/**
 * What belongs to a consumer in a room above this one and goes when it is deleted: its webhook endpoints
 * (src/events/endpoints.ts's registry) and its portal sessions (src/access/), passed in by the composition roots.
 * removeConsumer returns how many endpoints were removed.
 */
export interface ConsumerDependents {
  removeConsumer(consumerId: string, actor: Actor): Promise<number>;
  /** Told on every suspension asked for (a repeated one too, so a retry after a failure here completes it). */
  consumerSuspended?(consumerId: string, actor: Actor): Promise<void>;
}

/** How long a consumer's attach lock lives if its holder dies (a killed CLI) before releasing it. */
export const CONSUMER_LOCK_TTL_MS = 10_000;

export class ConsumerStoreError extends Error {
  /**
   * 'invalid_record': a stored record that is not a JSON consumer record; 'conflict': the id exists, or the record
   * changed since it was read (ifRevision); 'not_found'.
   */
  constructor(
    message: string,
    readonly code: 'invalid_record' | 'conflict' | 'not_found' = 'conflict',
  ) {
    super(message);
  }
}
