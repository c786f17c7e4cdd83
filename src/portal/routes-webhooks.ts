// The portal's webhook endpoints: a link session holding webhooks:write lists its consumer's endpoints with their
// delivery state, registers one (the signing secret in that answer and never again) and deletes one, while
// portal.webhooks is true. Through the same registry as the admin API (src/events/endpoints.ts): the outbound address
// rules judge every URL (no loopback, private, link-local or metadata address unless events.allowTargets opens it),
// the per-consumer bound holds, each change is audited. An endpoint id is only ever looked up within the consumer.
import { Router, type RequestHandler } from 'express';
import { z } from 'zod';
import { parse, queryOf } from '../admin/requests.js';
import { createWebhookBody } from '../admin/schemas.js';
import type { DeliveryState } from '../events/delivery-view.js';
import { EndpointError, type EndpointView } from '../events/endpoints.js';
import { HttpError, sendError } from '../http/errors.js';
import { H, NO_STORE } from '../http/headers.js';
import { actorOf, consumerOf, sessionOf, type PortalApiDeps } from './api-context.js';
import { requireScope } from './session-guard.js';

const emptyBody = z.strictObject({});
const noQuery = z.strictObject({});

/** Endpoints' delivery states read at once (a consumer has at most 10). */
const STATES_IN_FLIGHT = 10;

/** What the portal shows of an endpoint: never its secret, never who registered it beyond this consumer's actor. */
function endpointOut(e: EndpointView, delivery: DeliveryState | undefined) {
  return {
    id: e.id,
    url: e.url,
    types: e.types,
    ...(e.thresholds ? { thresholds: e.thresholds } : {}),
    createdAt: e.createdAt,
    delivery: delivery
      ? {
          queued: delivery.queued,
          delivered: delivery.delivered,
          failed: delivery.failed,
          undelivered: delivery.undelivered,
          disabled: delivery.disabled,
          lastError: delivery.lastError ?? null,
          lastStatus: delivery.lastStatus ?? null,
        }
      : null,
  };
}

export function webhookRoutes(deps: PortalApiDeps): Router {
  const router = Router();
  // While portal.webhooks is false, none of this is open (the config in force: a reload applies at once).
  const enabled: RequestHandler = (_req, res, next) =>
    deps.runtime.config.portal.webhooks
      ? next()
      : sendError(res, 'webhooks_disabled', 'Webhook endpoints are not offered on this portal (portal.webhooks is false).');
  const guard = [requireScope('webhooks:write'), enabled];

  router.get('/webhooks', ...guard, async (req, res) => {
    const session = sessionOf(req);
    if (!parse(noQuery, queryOf(req, res), 'query', res)) return;
    const c = await consumerOf(deps, session);
    const list = await deps.endpoints.list(c.id);
    const states: Array<DeliveryState | undefined> = [];
    for (let i = 0; i < list.length; i += STATES_IN_FLIGHT)
      states.push(...(await Promise.all(list.slice(i, i + STATES_IN_FLIGHT).map((e) => deps.delivery?.state(e.id)))));
    res.setHeader(H.cacheControl, NO_STORE);
    res.json({ webhooks: list.map((e, i) => endpointOut(e, states[i])) });
  });

  router.post('/webhooks', ...guard, async (req, res) => {
    const session = sessionOf(req);
    const body = parse(createWebhookBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const c = await consumerOf(deps, session);
    const { endpoint, secret } = await deps.endpoints.register(c.id, body, actorOf(req, session));
    // The secret is in this answer and nowhere else.
    res.setHeader(H.cacheControl, NO_STORE);
    res.status(201).json({ ...endpointOut(endpoint, undefined), secret });
  });

  router.delete('/webhooks/:id', ...guard, async (req, res) => {
    const session = sessionOf(req);
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const c = await consumerOf(deps, session);
    // The registry removes it only if it is this consumer's: another's, or none, is the same not_found, without the id.
    await deps.endpoints.remove(c.id, String(req.params.id), actorOf(req, session)).catch((err: unknown) => {
      throw err instanceof EndpointError && err.code === 'not_found' ? new HttpError('not_found', 'None of your webhook endpoints has this id.') : err;
    });
    res.setHeader(H.cacheControl, NO_STORE);
    res.status(204).end();
  });

  return router;
}
