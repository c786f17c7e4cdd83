// The audit trail of key, consumer and webhook endpoint changes: one "admin change" log line per change (action, key id or an import's counts, who: an admin token's id
// or "cli", and the admin API request id) and a count of it. Key administration (src/keys/key-changes.ts) calls it once a change is stored, so the CLI and
// the admin API are audited by the same code. It never sees a key, a hash or a token: only ids.
import type { ConsumerChangeListener } from '../consumers/admin.js';
import type { Actor, KeyChangeListener } from '../keys/key-changes.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

export function auditKeyChanges(logger: Logger, metrics?: Pick<Metrics, 'adminChanges'>): KeyChangeListener {
  return (change) => {
    const { action, actor } = change;
    // An import is one line with its counts (records imported, already there, refused), not one per key.
    const what = change.action === 'import' ? change.counts : { keyId: change.keyId };
    logger.info(
      {
        audit: true,
        action,
        ...what,
        by: actor.by,
        ...(actor.consumer !== undefined ? { consumerId: actor.consumer } : {}),
        ...(actor.requestId ? { reqId: actor.requestId } : {}),
      },
      'admin change',
    );
    metrics?.adminChanges.inc({ action, source: actor.by === 'cli' ? 'cli' : 'api' });
  };
}

/**
 * The audit trail of consumer changes, as of key changes: one "admin change" line each (action consumer.<what>, the
 * consumer's id, who, the request id; a deletion that revoked keys says how many) and a count of it.
 */
export function auditConsumerChanges(logger: Logger, metrics?: Pick<Metrics, 'adminChanges'>): ConsumerChangeListener {
  return ({ action, consumerId, actor, revokedKeys }) => {
    const named = `consumer.${action}`;
    logger.info(
      {
        audit: true,
        action: named,
        consumerId,
        ...(revokedKeys !== undefined ? { revokedKeys } : {}),
        by: actor.by,
        ...(actor.requestId ? { reqId: actor.requestId } : {}),
      },
      'admin change',
    );
    metrics?.adminChanges.inc({ action: named, source: actor.by === 'cli' ? 'cli' : 'api' });
  };
}

/**
 * The audit trail of webhook endpoints: a registration or deletion (action webhook.create, webhook.delete, with the
 * consumer's and the endpoint's ids), a replay (endpoint.replay, with how many events) and an enable
 * (endpoint.enable). One "admin change" line each and a count of it; never the endpoint's secret or URL.
 */
export function auditEndpointChanges(
  logger: Logger,
  metrics?: Pick<Metrics, 'adminChanges'>,
): (change: { action: string; endpointId: string; consumerId?: string; replayed?: number; actor: Actor }) => void {
  return ({ action, endpointId, consumerId, replayed, actor }) => {
    logger.info(
      {
        audit: true,
        action,
        endpointId,
        ...(consumerId !== undefined ? { consumerId } : {}),
        ...(replayed !== undefined ? { replayed } : {}),
        by: actor.by,
        ...(actor.requestId ? { reqId: actor.requestId } : {}),
      },
      'admin change',
    );
    metrics?.adminChanges.inc({ action, source: actor.by === 'cli' ? 'cli' : 'api' });
  };
}

/**
 * The audit trail of the consumer portal's administration: a sign-in link issued (portal.link, with who it is for and
 * its scopes, never its code) and sessions ended (portal.sessions.end, all of the consumer's or one actor's). One
 * "admin change" line each and a count of it.
 */
export function auditPortalChanges(
  logger: Logger,
  metrics?: Pick<Metrics, 'adminChanges'>,
): (change: { action: 'portal.link' | 'portal.sessions.end'; consumerId: string; portalActor?: string; scopes?: readonly string[]; actor: Actor }) => void {
  return ({ action, consumerId, portalActor, scopes, actor }) => {
    logger.info(
      {
        audit: true,
        action,
        consumerId,
        ...(portalActor !== undefined ? { portalActor } : {}),
        ...(scopes !== undefined ? { scopes } : {}),
        by: actor.by,
        ...(actor.requestId ? { reqId: actor.requestId } : {}),
      },
      'admin change',
    );
    metrics?.adminChanges.inc({ action, source: actor.by === 'cli' ? 'cli' : 'api' });
  };
}
