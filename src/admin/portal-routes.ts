// The admin API's side of the consumer portal: a platform's backend asks for a single-use sign-in link for one of its
// people (POST /consumers/{id}/portal-links: the code is in that answer and nowhere else, never stored or logged in
// clear), and ends sessions (DELETE /consumers/{id}/portal-sessions: all of the consumer's, or one actor's, on every
// instance at once). Links can be issued while this instance serves no portal (another may): they need somewhere to
// lead, portal.publicUrl or this instance's portal listener. Both changes are audited (audit.ts).
import { Router } from 'express';
import type { PortalAccess } from '../access/portal-access.js';
import { AccessError } from '../access/portal-access.js';
import type { ConsumerAdmin } from '../consumers/admin.js';
import { sendError } from '../http/errors.js';
import { H, NO_STORE } from '../http/headers.js';
import type { Actor } from '../keys/key-changes.js';
import { consumerIdParam } from './consumers-routes.js';
import { actorOf, parse, queryOf, sendProblems } from './requests.js';
import { createPortalLinkBody, emptyBody, endPortalSessionsQuery } from './schemas.js';

export type PortalChangeListener = (change: {
  action: 'portal.link' | 'portal.sessions.end';
  consumerId: string;
  portalActor?: string;
  scopes?: readonly string[];
  actor: Actor;
}) => void;

export interface PortalAdminOptions {
  access: Pick<PortalAccess, 'issueLink' | 'endSessions'>;
  consumers: Pick<ConsumerAdmin, 'require'>;
  /** Where links lead: portal.publicUrl, else this instance's portal listener's URL once it listens; undefined: nowhere. */
  linkBase: () => string | undefined;
  /** portal.webhooks of the config in force: webhooks:write is granted only while it is true. */
  webhooks: () => boolean;
  onChange?: PortalChangeListener;
}

export function portalRoutes(o: PortalAdminOptions): Router {
  const router = Router();

  router.post('/consumers/:id/portal-links', consumerIdParam, async (req, res) => {
    const body = parse(createPortalLinkBody, req.body ?? {}, 'body', res);
    if (!body) return;
    if (body.scopes.includes('webhooks:write') && !o.webhooks())
      return sendProblems(res, [{ path: 'body.scopes', message: 'webhooks:write is not granted while portal.webhooks is false in the config' }]);
    const base = o.linkBase();
    const consumer = await o.consumers.require(String(req.params.id));
    if (base === undefined)
      return sendError(res, 'portal_off', 'The portal is off: set portal.port (or portal.publicUrl, for a portal another instance serves).');
    let issued: Awaited<ReturnType<PortalAdminOptions['access']['issueLink']>>;
    try {
      issued = await o.access.issueLink({
        consumer: consumer.id,
        actor: body.actor,
        scopes: body.scopes,
        ...(body.sessionHours !== undefined ? { sessionHours: body.sessionHours } : {}),
      });
    } catch (err) {
      if (err instanceof AccessError) return sendError(res, err.code, err.message);
      throw err;
    }
    const { code, link } = issued;
    o.onChange?.({ action: 'portal.link', consumerId: consumer.id, portalActor: link.actor, scopes: link.scopes, actor: actorOf(req) });
    // The code is in this answer and nowhere else: no cache between here and the caller may keep it.
    res.setHeader(H.cacheControl, NO_STORE);
    res.status(201).json({
      url: `${base.replace(/\/+$/, '')}/link?code=${code}`,
      code,
      consumer: link.consumer,
      actor: link.actor,
      scopes: link.scopes,
      expiresAt: new Date(link.expiresAt).toISOString(),
    });
  });

  router.delete('/consumers/:id/portal-sessions', consumerIdParam, async (req, res) => {
    const raw = queryOf(req, res);
    if (!raw) return;
    const query = parse(endPortalSessionsQuery, raw, 'query', res);
    if (!query) return;
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const consumer = await o.consumers.require(String(req.params.id));
    const endedAt = await o.access.endSessions(consumer.id, query.actor);
    o.onChange?.({
      action: 'portal.sessions.end',
      consumerId: consumer.id,
      ...(query.actor !== undefined ? { portalActor: query.actor } : {}),
      actor: actorOf(req),
    });
    res.json({ consumer: consumer.id, actor: query.actor ?? null, endedAt: new Date(endedAt).toISOString() });
  });

  return router;
}
