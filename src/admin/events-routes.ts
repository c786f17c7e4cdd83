// The operator's view of event delivery: every webhook endpoint (those the config lists under events.webhooks and
// those registered for consumers), each with its delivery state; one endpoint's undelivered events (those whose last
// attempt failed), a page at a time; replaying them (all, or the ones named) and enabling an endpoint that was
// disabled (a 410 from its receiver, or an operator). The queues themselves are the delivery's (src/events/): these
// routes read and ask them through EndpointDelivery, and audit every change.
import { Router, type RequestHandler } from 'express';
import type { DeliveryState, UndeliveredEvent } from '../events/delivery-view.js';
import type { EndpointView } from '../events/endpoints.js';
import { sendError } from '../http/errors.js';
import type { Actor } from '../keys/key-changes.js';
import { actorOf, parse, queryOf, sendProblems } from './requests.js';
import { emptyBody, replayBody, undeliveredQuery } from './schemas.js';

/** What these routes ask of the delivery: the per-endpoint queues (src/events/delivery-view.ts's DeliveryView). */
export interface EndpointDelivery {
  state(endpointId: string): Promise<DeliveryState>;
  /** Undelivered events, oldest first, after the cursor this gave; `next` while more remain. */
  undelivered(endpointId: string, page: { limit: number; cursor?: string }): Promise<{ events: UndeliveredEvent[]; next?: string }>;
  /** Queues undelivered events again, due now (every one, or those named): how many, and ids it did not hold. */
  replay(endpointId: string, ids?: readonly string[]): Promise<{ replayed: number; notFound: string[] }>;
  /** Enables a disabled endpoint (its queue resumes). */
  enable(endpointId: string): Promise<void>;
}

/** An endpoint the config lists: no consumer, no registration. */
export interface ConfiguredEndpoint {
  id: string;
  url: string;
  types: readonly string[];
}

/** Told of every replay and enable once done (the audit line). */
export type DeliveryChangeListener = (change: { action: 'endpoint.replay' | 'endpoint.enable'; endpointId: string; actor: Actor; replayed?: number }) => void;

/** Endpoints' states read at once, at most, for a list. */
const STATES_IN_FLIGHT = 16;

/** An endpoint id in a path: a registered one's (ep_...) or a configured one's. */
const ENDPOINT_PARAM = /^[A-Za-z0-9_.:-]{1,128}$/;

export function eventsRoutes(o: {
  /** The endpoints the config in force lists (events.webhooks). */
  configured: () => readonly ConfiguredEndpoint[];
  registered: { all(): Promise<Array<EndpointView & { secret?: string }>> };
  delivery: EndpointDelivery;
  onChange?: DeliveryChangeListener;
}): Router {
  const router = Router();

  /** Every endpoint, configured ones first, as the operator sees it (never a secret). */
  const endpoints = async () => [
    ...o.configured().map((c) => ({ id: c.id, source: 'config' as const, url: c.url, types: [...c.types] })),
    ...(await o.registered.all()).map((r) => ({
      id: r.id,
      source: 'registered' as const,
      consumer: r.consumer,
      url: r.url,
      types: r.types,
      ...(r.thresholds ? { thresholds: r.thresholds } : {}),
      createdAt: r.createdAt,
      createdBy: r.createdBy,
    })),
  ];
  const withDelivery = async <E extends { id: string }>(e: E) => ({ ...e, delivery: stateView(await o.delivery.state(e.id)) });

  /** The :ep of the path: 404 unless it names an endpoint, configured or registered. */
  const knownEndpoint: RequestHandler = async (req, res, next) => {
    const ep = String(req.params.ep);
    if (ENDPOINT_PARAM.test(ep) && (await endpoints()).some((e) => e.id === ep)) return next();
    sendError(res, 'not_found', `no webhook endpoint "${ep}"`);
  };

  router.get('/events/endpoints', async (_req, res) => {
    const all = await endpoints();
    // Each endpoint's state is one script on Redis: a few at a time, not thousands at once.
    const out = new Array<Awaited<ReturnType<typeof withDelivery<(typeof all)[number]>>>>(all.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < all.length; i = next++) out[i] = await withDelivery(all[i]!);
    };
    await Promise.all(Array.from({ length: Math.min(STATES_IN_FLIGHT, all.length) }, worker));
    res.json({ endpoints: out });
  });

  router.get('/events/endpoints/:ep/undelivered', knownEndpoint, async (req, res) => {
    const query = parse(undeliveredQuery, queryOf(req, res), 'query', res);
    if (!query) return;
    const ep = String(req.params.ep);
    let page;
    try {
      page = await o.delivery.undelivered(ep, { limit: query.limit, ...(query.cursor !== undefined ? { cursor: query.cursor } : {}) });
    } catch (err) {
      if (err instanceof RangeError)
        return sendProblems(res, [{ path: 'query.cursor', message: 'not a cursor this API gave out (use nextCursor from a previous page)' }]);
      throw err;
    }
    res.json({ endpoint: ep, events: page.events.map(eventView), nextCursor: page.next ?? null });
  });

  router.post('/events/endpoints/:ep/replay', knownEndpoint, async (req, res) => {
    const body = parse(replayBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const ep = String(req.params.ep);
    const done = await o.delivery.replay(ep, body.ids);
    o.onChange?.({ action: 'endpoint.replay', endpointId: ep, actor: actorOf(req), replayed: done.replayed });
    res.json({ endpoint: ep, replayed: done.replayed, notFound: done.notFound, delivery: stateView(await o.delivery.state(ep)) });
  });

  router.post('/events/endpoints/:ep/enable', knownEndpoint, async (req, res) => {
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const ep = String(req.params.ep);
    await o.delivery.enable(ep);
    o.onChange?.({ action: 'endpoint.enable', endpointId: ep, actor: actorOf(req) });
    const found = (await endpoints()).find((e) => e.id === ep)!;
    res.json(await withDelivery(found));
  });

  return router;
}

/** A state with its times as ISO-8601 (null when none). */
function stateView(s: DeliveryState) {
  return {
    queued: s.queued,
    delivered: s.delivered,
    failed: s.failed,
    dropped: s.dropped,
    undelivered: s.undelivered,
    disabled: s.disabled,
    disabledReason: s.disabledReason ?? null,
    lastError: s.lastError ?? null,
    lastStatus: s.lastStatus ?? null,
    oldestDueAt: s.oldestDueAt === undefined ? null : new Date(s.oldestDueAt).toISOString(),
  };
}

function eventView(e: UndeliveredEvent) {
  return {
    id: e.id,
    type: e.type,
    subject: e.subject ?? null,
    time: e.time ?? null,
    attempts: e.attempts,
    firstAttemptAt: e.firstAttemptAt === undefined ? null : new Date(e.firstAttemptAt).toISOString(),
    deadAt: e.deadAt === undefined ? null : new Date(e.deadAt).toISOString(),
    lastError: e.lastError ?? null,
  };
}
