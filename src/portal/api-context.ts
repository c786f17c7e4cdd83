// What every router of the portal's JSON API shares: the pieces it is given (PortalApiDeps), the session the guard
// set (the only source of who is asking: never a header, a query or a body), the consumer that session belongs to,
// read again on every request, the audit actor of a change, the key lookups that keep one consumer from reaching
// another's (an id that is not the session's answers exactly as an id that does not exist), and the errors of the
// administration pieces turned into the JSON error body.
import type { Request } from 'express';
import type { PortalSession } from '../access/types.js';
import { KEY_ID } from '../config/key-fields.js';
import type { PlanConfig } from '../config/schema.js';
import type { ConsumerAdmin } from '../consumers/admin.js';
import type { ConsumerRecord } from '../consumers/types.js';
import type { DeliveryState } from '../events/delivery-view.js';
import type { EndpointRegistry } from '../events/endpoints.js';
import { HttpError, type ErrorCode } from '../http/errors.js';
import type { KeyAdmin } from '../keys/admin.js';
import { KeyAdminError, readOne, type KeyAdminErrorCode } from '../keys/admin-errors.js';
import type { Actor } from '../keys/key-changes.js';
import type { KeyStore, StoredKey } from '../keys/types.js';
import type { KeyLimitAdmin } from '../limits/key-admin.js';
import type { KeyLimiter } from '../limits/key-limits.js';
import type { Logger } from '../observability/logger.js';
import type { Runtime } from '../routing/runtime.js';
import type { ReportRunner } from '../usage/report-runner.js';
import type { Clock } from '../util/clock.js';

/** What the portal's API routers are given by the composition root (src/compose.ts). */
export interface PortalApiDeps {
  /** The config in force (plans, routes, portal.webhooks, usage.retentionDays, auth.issuedPrefix): read per request. */
  runtime: Pick<Runtime, 'config'>;
  clock: Clock;
  logger: Logger;
  /** The consumer records (the session's consumer is read on every request: a suspension applies at once). */
  consumers: Pick<ConsumerAdmin, 'get'>;
  /** Issuing and changing keys: the same pieces as the admin API, audited alike. */
  keys: Pick<KeyAdmin, 'issuer' | 'lifecycle'>;
  /**
   * The admin key store, read for one key or a consumer's keys (its mirror): the records as stored, since a key's
   * view shows when its rotation's overlap ends. Never written here; no hash leaves this module.
   */
  keyStore: Pick<KeyStore, 'get' | 'consumerKeys'>;
  /** The quota read as GET /ratelimit makes it: the pool's windows, a key's caps, its ban; nothing counted. */
  limiter: Pick<KeyLimiter, 'quota'>;
  /** A consumer's pool windows (its month; with no key to read them through, all of them) and a key's ban. */
  keyLimits: Pick<KeyLimitAdmin, 'poolWindows' | 'liveState'>;
  /**
   * The usage reports: a consumer's, one key's (a key session's: a month of hours is hundreds of buckets to add up),
   * the deprecated-route report. On the report thread with Redis, never on the event loop that serves the gateway.
   */
  reports: Pick<ReportRunner, 'consumerUsage' | 'keyUsageByConsumer' | 'deprecatedRoutes'>;
  /** The consumers' webhook endpoints (the outbound address rules apply to every registration). */
  endpoints: Pick<EndpointRegistry, 'list' | 'register' | 'remove'>;
  /** Each endpoint's delivery state; absent without Redis (nothing is queued then). */
  delivery?: { state(endpointId: string): Promise<DeliveryState> };
}

/** The session the guard set: 401 when there is none (the router mounted without the guard answers nothing). */
export function sessionOf(req: Request): PortalSession {
  const s = req.portalSession;
  if (!s) throw new HttpError('portal_session_required');
  return s;
}

/**
 * The session's consumer as it stands now: gone answers 401 (the session ended with it), suspended 403
 * consumer_suspended, whatever the session guard found a moment before.
 */
export async function consumerOf(deps: Pick<PortalApiDeps, 'consumers'>, session: PortalSession): Promise<ConsumerRecord> {
  const c = await deps.consumers.get(session.consumer);
  if (!c) throw new HttpError('portal_session_required', 'The consumer this portal session belonged to no longer exists.');
  if (c.status !== 'active') throw new HttpError('consumer_suspended', 'This consumer is suspended: its keys and portal are not usable until it is resumed.');
  return c;
}

/**
 * Whether the consumers of `plan` may create keys themselves in the portal: plans.<plan>.selfServiceKeys, true unless
 * it is false (a plan not configured says nothing here: the key issuer refuses it). Rotating and revoking are not
 * asked about: a leaked key stays replaceable without the provider.
 */
export function planLetsCreateKeys(plans: Readonly<Record<string, PlanConfig>>, plan: string): boolean {
  return !Object.hasOwn(plans, plan) || plans[plan]!.selfServiceKeys !== false;
}

/** Who makes a change from the portal, for the audit line: the link's actor, for the session's consumer. */
export function actorOf(req: Request, session: PortalSession): Actor {
  return { by: `portal:${session.actor ?? `key:${session.keyId ?? ''}`}`, requestId: req.id, consumer: session.consumer };
}

/**
 * The answer for a key id the session cannot see: the same whether it exists elsewhere or nowhere, and without the id
 * (an answer never carries another consumer's id back, even the one asked for).
 */
export const noSuchKey = (): HttpError => new HttpError('not_found', 'None of your keys has this id.');

/**
 * The key the path names, as stored, if the session may see it: one of its consumer's keys, and for a key session its
 * own key. Anything else (another consumer's key, a key of none, an id no key has or could have) is not_found, with
 * one message, so an answer never tells whether an id exists.
 */
export async function ownKey(deps: Pick<PortalApiDeps, 'keyStore'>, session: PortalSession, id: string): Promise<StoredKey> {
  if (!KEY_ID.test(id)) throw noSuchKey();
  if (session.kind === 'key' && session.keyId !== id) throw noSuchKey();
  const k = await readOne(() => deps.keyStore.get(id));
  if (!k || k.consumer !== session.consumer) throw noSuchKey();
  return k;
}

/** The keys the session may see, as stored: every key of the consumer (link), or its own key (key session). */
export async function visibleKeys(deps: Pick<PortalApiDeps, 'keyStore'>, session: PortalSession): Promise<StoredKey[]> {
  if (session.kind === 'key') {
    const k = session.keyId === undefined ? undefined : await readOne(() => deps.keyStore.get(session.keyId!));
    return k && k.consumer === session.consumer ? [k] : [];
  }
  return (await deps.keyStore.consumerKeys(session.consumer)).filter((k) => k.consumer === session.consumer);
}

/** Key administration's refusals as the portal answers them (the admin API's mapping, src/admin/app.ts). */
const KEY_ERRORS: Record<KeyAdminErrorCode, ErrorCode> = {
  not_found: 'not_found',
  revoked: 'key_revoked',
  unknown_plan: 'service_unavailable',
  invalid_record: 'invalid_record',
  invalid: 'invalid_request',
  contended: 'service_unavailable',
  incomplete: 'service_unavailable',
  import_in_progress: 'service_unavailable',
  prefix_not_kept: 'prefix_not_kept',
  unknown_consumer: 'not_found',
  consumer_full: 'consumer_full',
  consumer_exists: 'consumer_exists',
  consumer_has_keys: 'consumer_has_keys',
};

/**
 * How the portal words a key administration error (app.ts's error handler, src/admin/json-errors.ts): as the admin
 * API does, except that a key outside the session is only ever not found, and a plan problem is the operator's.
 */
export function portalKeyError(err: KeyAdminError): { code: ErrorCode; message: string } {
  // Never the id asked for (noSuchKey): a key outside the session is not found, whatever it is.
  if (err.code === 'not_found') return { code: 'not_found', message: noSuchKey().message };
  // The consumer's plan missing from the config is the operator's to fix; the consumer only learns it is unusable.
  if (err.code === 'unknown_plan') return { code: 'service_unavailable', message: 'Keys cannot be issued for this consumer right now.' };
  return { code: KEY_ERRORS[err.code], message: err.message };
}
