// The admin API's webhook endpoints of a consumer: register one (only while portal.webhooks is true; the signing
// secret is in that answer and never again), list them (never the secret), delete one. The registry
// (src/events/endpoints.ts) judges the URL and keeps the bound per consumer; every change is audited through its
// listener (src/admin/audit.ts). Deleting the consumer deletes its endpoints (src/consumers/admin.ts's dependents).
import { Router } from 'express';
import type { ConsumerAdmin } from '../consumers/admin.js';
import type { EndpointRegistry } from '../events/endpoints.js';
import { sendError } from '../http/errors.js';
import { H, NO_STORE } from '../http/headers.js';
import { consumerIdParam } from './consumers-routes.js';
import { actorOf, parse } from './requests.js';
import { createWebhookBody, emptyBody } from './schemas.js';

export function webhookRoutes(o: {
  consumers: Pick<ConsumerAdmin, 'require'>;
  endpoints: EndpointRegistry;
  /** portal.webhooks of the config in force (a reload applies at once). */
  enabled: () => boolean;
}): Router {
  const router = Router();

  router.post('/consumers/:id/webhooks', consumerIdParam, async (req, res) => {
    if (!o.enabled())
      return sendError(
        res,
        'webhooks_disabled',
        'Webhook endpoints cannot be registered for consumers on this gateway: set portal.webhooks: true in its config to allow it.',
      );
    const body = parse(createWebhookBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const consumer = await o.consumers.require(String(req.params.id));
    const { endpoint, secret } = await o.endpoints.register(consumer.id, body, actorOf(req));
    // The secret is in this answer and nowhere else: no cache between here and the caller may keep it.
    res.setHeader(H.cacheControl, NO_STORE);
    res
      .status(201)
      .location(`/consumers/${consumer.id}/webhooks/${endpoint.id}`)
      .json({ ...endpoint, secret });
  });

  router.get('/consumers/:id/webhooks', consumerIdParam, async (req, res) => {
    const consumer = await o.consumers.require(String(req.params.id));
    res.json({ webhooks: await o.endpoints.list(consumer.id) });
  });

  router.delete('/consumers/:id/webhooks/:ep', consumerIdParam, async (req, res) => {
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const consumer = await o.consumers.require(String(req.params.id));
    const ep = String(req.params.ep);
    await o.endpoints.remove(consumer.id, ep, actorOf(req));
    res.json({ id: ep, consumer: consumer.id, deleted: true });
  });

  return router;
}
