// The registry of webhook endpoints registered for consumers (through the admin API, later the customer portal), as
// opposed to those the config file lists (events.webhooks): each a record {id, consumer, url, types, thresholds?,
// secret, createdAt, createdBy} kept in Redis (or memory, for a Redis-less gateway). The URL is judged when it is
// registered: an http(s) URL without credentials whose host resolves to an address endpoints may point at (the
// address guard: no loopback, private, link-local or metadata address unless events.allowTargets opens its range);
// the dispatcher judges it again at every delivery, since a name may resolve elsewhere later. The secret is made
// here, stored (deliveries are signed with it) and handed out once, in the answer to the registration: every view
// of a record after that leaves it out.
import { randomBytes } from 'node:crypto';
import type { ErrorCode } from '../http/errors.js';
import { EVENT_TYPES, type EventType } from '../observability/catalogue.js';
import type { Actor } from '../keys/key-changes.js';
import type { Keyspace } from '../storage/keyspace.js';
import type { RedisCommands } from '../storage/redis.js';
import type { Clock } from '../util/clock.js';

/** The event types an endpoint may ask for (CloudEvents `type`): every type there is. */
export const ENDPOINT_EVENT_TYPES = EVENT_TYPES;
export type EndpointEventType = EventType;

/** Endpoints one consumer may have registered at once. */
export const MAX_ENDPOINTS_PER_CONSUMER = 10;
/** The longest URL accepted: longer is no webhook receiver's address, and every delivery would carry it. */
export const MAX_ENDPOINT_URL = 2048;
/** quota.threshold percents an endpoint may choose (1..100), at most this many distinct ones. */
export const MAX_ENDPOINT_THRESHOLDS = 5;

/** A registered endpoint as stored: the secret included (deliveries are signed with it). */
export interface RegisteredEndpoint {
  id: string;
  consumer: string;
  url: string;
  types: EndpointEventType[];
  /** quota.threshold events only at these percents (ascending); absent: the gateway's events.thresholds. */
  thresholds?: number[];
  secret: string;
  createdAt: string;
  /** Who registered it: the admin token's id (or "cli"). */
  createdBy: string;
}

/** What any view of a record shows: everything but the secret. */
export type EndpointView = Omit<RegisteredEndpoint, 'secret'>;

export const endpointView = ({ secret: _secret, ...rest }: RegisteredEndpoint): EndpointView => rest;

/** What a registration is given. */
export interface EndpointInput {
  url: string;
  types?: EndpointEventType[];
  thresholds?: number[];
}

/** Registry refusals, each with its code from the error catalogue. */
export class EndpointError extends Error {
  constructor(
    readonly code: Extract<ErrorCode, 'webhook_url_refused' | 'webhooks_full' | 'not_found' | 'invalid_request'>,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Where a URL's host is allowed to point: the outbound address guard (src/outbound/address-guard.ts) satisfies it.
 * `check` resolves the host and rejects (an error with kind 'address_refused' or 'dns', its message naming the
 * address and range) when an endpoint may not point there.
 */
export interface UrlGuard {
  check(url: string): Promise<unknown>;
}

/** Where records are kept. Every write is one atomic step, so a consumer's count never passes its bound. */
export interface EndpointStore {
  /** Adds the record unless its consumer has `max` already. */
  add(record: RegisteredEndpoint, max: number): Promise<'added' | 'full'>;
  get(id: string): Promise<RegisteredEndpoint | undefined>;
  ofConsumer(consumer: string): Promise<RegisteredEndpoint[]>;
  all(): Promise<RegisteredEndpoint[]>;
  /** Removes the endpoint if it is this consumer's; false when it is not (or is not there). */
  remove(consumer: string, id: string): Promise<boolean>;
  /** Removes every endpoint of the consumer; their ids. */
  removeConsumer(consumer: string): Promise<string[]>;
}

/** Told of every registration and removal once stored (the audit line); never given the secret. */
export type EndpointChangeListener = (change: { action: 'webhook.create' | 'webhook.delete'; consumerId: string; endpointId: string; actor: Actor }) => void;

/** An endpoint id: ep_ and 24 hex digits. */
export const ENDPOINT_ID = /^ep_[0-9a-f]{24}$/;

export function generateEndpointId(): string {
  return `ep_${randomBytes(12).toString('hex')}`;
}

/** A signing secret in the Standard Webhooks form: whsec_ and the base64 of 32 random bytes. */
export function generateEndpointSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Why a URL is refused before any lookup, or undefined when its shape is acceptable. */
export function urlShapeProblem(url: string): string | undefined {
  if (url.length > MAX_ENDPOINT_URL) return `longer than ${MAX_ENDPOINT_URL} characters`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'not an absolute URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return `the scheme ${parsed.protocol} is not http: or https:`;
  if (parsed.username !== '' || parsed.password !== '') return 'it carries a user name or password (put credentials in the signature, not the URL)';
  if (parsed.hostname === '') return 'it names no host';
  return undefined;
}

export class EndpointRegistry {
  constructor(
    private readonly store: EndpointStore,
    private readonly opts: {
      clock: Clock;
      /** The guard in force (events.allowTargets is read per call: a reload applies). */
      guard: () => UrlGuard;
      onChange?: EndpointChangeListener;
      maxPerConsumer?: number;
    },
  ) {}

  /**
   * Registers an endpoint for a consumer (whose existence the caller has checked): its URL judged, its id and secret
   * made. The answer is the only place the secret is ever shown.
   */
  async register(consumer: string, input: EndpointInput, actor: Actor): Promise<{ endpoint: EndpointView; secret: string }> {
    const shape = urlShapeProblem(input.url);
    if (shape) throw new EndpointError('webhook_url_refused', `webhook URL refused: ${shape}`);
    try {
      await this.opts.guard().check(input.url);
    } catch (err) {
      const kind = (err as { kind?: unknown }).kind;
      if (kind === 'address_refused' || kind === 'dns') throw new EndpointError('webhook_url_refused', `webhook URL refused: ${(err as Error).message}`);
      throw err;
    }
    const record: RegisteredEndpoint = {
      id: generateEndpointId(),
      consumer,
      url: input.url,
      types: input.types ? [...new Set(input.types)] : [...ENDPOINT_EVENT_TYPES],
      ...(input.thresholds ? { thresholds: [...new Set(input.thresholds)].sort((a, b) => a - b) } : {}),
      secret: generateEndpointSecret(),
      createdAt: new Date(this.opts.clock.now()).toISOString(),
      createdBy: actor.by,
    };
    const max = this.opts.maxPerConsumer ?? MAX_ENDPOINTS_PER_CONSUMER;
    if ((await this.store.add(record, max)) === 'full')
      throw new EndpointError('webhooks_full', `consumer ${consumer} has ${max} webhook endpoints already, as many as a consumer may have; delete one first`);
    this.opts.onChange?.({ action: 'webhook.create', consumerId: consumer, endpointId: record.id, actor });
    return { endpoint: endpointView(record), secret: record.secret };
  }

  /** The consumer's endpoints, by creation time, without their secrets. */
  async list(consumer: string): Promise<EndpointView[]> {
    return (await this.store.ofConsumer(consumer)).sort(byCreation).map(endpointView);
  }

  /** One endpoint as stored (the secret included: for signing), or undefined. */
  get(id: string): Promise<RegisteredEndpoint | undefined> {
    return this.store.get(id);
  }

  /** Every registered endpoint as stored (the secret included: for the dispatcher), by creation time. */
  async all(): Promise<RegisteredEndpoint[]> {
    return (await this.store.all()).sort(byCreation);
  }

  /** Removes one of the consumer's endpoints; EndpointError not_found when the consumer has no such endpoint. */
  async remove(consumer: string, id: string, actor: Actor): Promise<void> {
    if (!ENDPOINT_ID.test(id) || !(await this.store.remove(consumer, id)))
      throw new EndpointError('not_found', `consumer ${consumer} has no webhook endpoint "${id}"`);
    this.opts.onChange?.({ action: 'webhook.delete', consumerId: consumer, endpointId: id, actor });
  }

  /** Removes every endpoint of a consumer (the consumer is being deleted); how many there were. */
  async removeConsumer(consumer: string, actor: Actor): Promise<number> {
    const ids = await this.store.removeConsumer(consumer);
    for (const id of ids) this.opts.onChange?.({ action: 'webhook.delete', consumerId: consumer, endpointId: id, actor });
    return ids.length;
  }
}

const byCreation = (a: RegisteredEndpoint, b: RegisteredEndpoint): number => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);

/** A stored record, or undefined when it is not one (bad JSON, a wrong shape: left out, never fatal). */
function parseEndpoint(raw: string | null | undefined): RegisteredEndpoint | undefined {
  if (!raw) return undefined;
  try {
    const r = JSON.parse(raw) as RegisteredEndpoint;
    return typeof r?.id === 'string' && typeof r.consumer === 'string' && typeof r.url === 'string' && typeof r.secret === 'string' && Array.isArray(r.types)
      ? r
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Adds a record unless the consumer's set holds `max` ids already. KEYS: 1 the records hash, 2 the consumer's set.
 * ARGV: 1 id, 2 record JSON, 3 max. Reply: 1 added, 0 full.
 */
const ADD = `
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
return 1
`;

/** Removes a record if the consumer's set holds it. KEYS: 1 the hash, 2 the consumer's set. ARGV: 1 id. Reply: 1 or 0. */
const REMOVE = `
if redis.call('SREM', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
`;

/** Removes every record of a consumer. KEYS: 1 the hash, 2 the consumer's set. Reply: the ids removed. */
const REMOVE_CONSUMER = `
local ids = redis.call('SMEMBERS', KEYS[2])
for _, id in ipairs(ids) do redis.call('HDEL', KEYS[1], id) end
redis.call('DEL', KEYS[2])
return ids
`;

/**
 * On Redis: one hash of every record (id -> JSON) and a set of ids per consumer, both in one hash slot
 * ({endpoints}), so each write is one script on Redis Cluster too.
 */
export class RedisEndpointStore implements EndpointStore {
  constructor(
    private readonly client: RedisCommands,
    private readonly ks: Keyspace,
  ) {}

  async add(record: RegisteredEndpoint, max: number): Promise<'added' | 'full'> {
    const done = await this.client.eval(
      ADD,
      2,
      this.ks.eventEndpoints(),
      this.ks.consumerEventEndpoints(record.consumer),
      record.id,
      JSON.stringify(record),
      max,
    );
    if (Number(done) !== 1) return 'full';
    await this.changed(record.id);
    return 'added';
  }

  async get(id: string): Promise<RegisteredEndpoint | undefined> {
    return parseEndpoint(await this.client.hget(this.ks.eventEndpoints(), id));
  }

  async ofConsumer(consumer: string): Promise<RegisteredEndpoint[]> {
    const ids = await this.client.smembers(this.ks.consumerEventEndpoints(consumer));
    if (ids.length === 0) return [];
    const raws = await this.client.hmget(this.ks.eventEndpoints(), ...ids);
    return raws.map(parseEndpoint).filter((r): r is RegisteredEndpoint => r !== undefined && r.consumer === consumer);
  }

  async all(): Promise<RegisteredEndpoint[]> {
    const raws = Object.values(await this.client.hgetall(this.ks.eventEndpoints()));
    return raws.map(parseEndpoint).filter((r): r is RegisteredEndpoint => r !== undefined);
  }

  async remove(consumer: string, id: string): Promise<boolean> {
    const removed = Number(await this.client.eval(REMOVE, 2, this.ks.eventEndpoints(), this.ks.consumerEventEndpoints(consumer), id)) === 1;
    if (removed) {
      await this.changed(id);
      await this.dropQueue(id);
    }
    return removed;
  }

  async removeConsumer(consumer: string): Promise<string[]> {
    const ids = (await this.client.eval(REMOVE_CONSUMER, 2, this.ks.eventEndpoints(), this.ks.consumerEventEndpoints(consumer))) as string[];
    for (const id of ids) {
      await this.changed(id);
      await this.dropQueue(id);
    }
    return ids;
  }

  /**
   * Tells every instance's events thread the registry changed (it reads it again at once). Not fatal when it fails:
   * the record is written, and each thread reads the registry again every 10 s anyway.
   */
  private async changed(id: string): Promise<void> {
    await this.client.publish(this.ks.eventEndpointsChanged(), id).catch(() => {});
  }

  /**
   * A removed endpoint's delivery queue goes with it (its events are nobody's now): one DEL, its keys share the slot
   * {ep:<id>}. The dispatcher stops its loop when it reads the registry again (at once, on the change message).
   */
  private async dropQueue(id: string): Promise<void> {
    await this.client.del(this.ks.endpointDue(id), this.ks.endpointEvents(id), this.ks.endpointDead(id), this.ks.endpointState(id), this.ks.endpointQueued(id));
  }
}

/** In memory, for a Redis-less gateway (one instance, gone when it stops). */
export class MemoryEndpointStore implements EndpointStore {
  private readonly records = new Map<string, RegisteredEndpoint>();

  async add(record: RegisteredEndpoint, max: number): Promise<'added' | 'full'> {
    if ((await this.ofConsumer(record.consumer)).length >= max) return 'full';
    this.records.set(record.id, structuredClone(record));
    return 'added';
  }

  async get(id: string): Promise<RegisteredEndpoint | undefined> {
    const r = this.records.get(id);
    return r && structuredClone(r);
  }

  async ofConsumer(consumer: string): Promise<RegisteredEndpoint[]> {
    return [...this.records.values()].filter((r) => r.consumer === consumer).map((r) => structuredClone(r));
  }

  async all(): Promise<RegisteredEndpoint[]> {
    return [...this.records.values()].map((r) => structuredClone(r));
  }

  async remove(consumer: string, id: string): Promise<boolean> {
    if (this.records.get(id)?.consumer !== consumer) return false;
    return this.records.delete(id);
  }

  async removeConsumer(consumer: string): Promise<string[]> {
    const ids = [...this.records.values()].filter((r) => r.consumer === consumer).map((r) => r.id);
    for (const id of ids) this.records.delete(id);
    return ids;
  }
}
