// The admin API's consumers: create, list (cursor pages, as GET /keys, each with its key count; searched by q), read
// (with its key count and its pool's windows), change, suspend, resume, delete (refused while it has keys that are not
// revoked, unless ?revokeKeys=true) and list its keys. Every change goes through consumer administration
// (src/consumers/admin.ts), as the CLI's do: audited, and announced to every instance.
import { Router, type RequestHandler, type Response } from 'express';
import { KEY_ID } from '../config/key-fields.js';
import type { ConsumerAdmin, ConsumerUpdate } from '../consumers/admin.js';
import type { ConsumerRecord } from '../consumers/types.js';
import { sendError } from '../http/errors.js';
import { keyStatus } from '../keys/rules.js';
import type { KeyLimitAdmin } from '../limits/key-admin.js';
import { actorOf, parse, queryOf, sendProblems } from './requests.js';
import { attachBody, consumerKeysQuery, createConsumerBody, deleteConsumerQuery, emptyBody, listConsumersQuery, patchConsumerBody } from './schemas.js';

/** A path's :id that no consumer could have (braces, spaces: it would break the hash tag) is answered 404 before any lookup. */
export const consumerIdParam: RequestHandler = (req, res, next) =>
  KEY_ID.test(String(req.params.id)) ? next() : sendError(res, 'not_found', `no consumer with id "${req.params.id}"`);

/** A page's cursor: the last id of the page before, base64url; undefined (answered 400) when it is not one this API gave. */
function cursorAfter(cursor: string | undefined, res: Response): { after?: string } | undefined {
  if (cursor === undefined) return {};
  const after = Buffer.from(cursor, 'base64url').toString('utf8');
  if (KEY_ID.test(after) && Buffer.from(after).toString('base64url') === cursor) return { after };
  sendProblems(res, [{ path: 'query.cursor', message: 'not a cursor this API gave out (use nextCursor from a previous page)' }]);
  return undefined;
}

const nextCursor = (next: string | undefined): string | null => (next === undefined ? null : Buffer.from(next).toString('base64url'));

/** Key counts of a list page read at once, at most: a page of 1000 consumers is 1000 reads, a few at a time. */
const KEY_COUNTS_IN_FLIGHT = 16;

export function consumerRoutes(consumers: ConsumerAdmin, limits: Pick<KeyLimitAdmin, 'poolWindows'>): Router {
  const router = Router();

  router.post('/consumers', async (req, res) => {
    const body = parse(createConsumerBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const { consumer, warnings } = await consumers.create(body, actorOf(req));
    res
      .status(201)
      .location(`/consumers/${consumer.id}`)
      .json({ ...consumer, warnings });
  });

  // Bulk attach: a preview (the default), or, with dryRun false, the preview made to happen in the same request.
  router.post('/consumers/attach', async (req, res) => {
    const body = parse(attachBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const preview =
      body.fromMetadata !== undefined
        ? await consumers.previewFromMetadata(body.fromMetadata, { plan: body.plan!, ...(body.maxKeys !== undefined ? { maxKeys: body.maxKeys } : {}) })
        : await consumers.previewKeys(body.consumer!, body.keys!);
    const applied = body.dryRun ? undefined : await consumers.applyAttach(preview, actorOf(req));
    res.json({ dryRun: body.dryRun, ...preview, ...(applied ? { applied } : {}) });
  });

  router.get('/consumers', async (req, res) => {
    const query = parse(listConsumersQuery, queryOf(req, res), 'query', res);
    if (!query) return;
    const cursor = cursorAfter(query.cursor, res);
    if (!cursor) return;
    const page = await consumers.page({
      limit: query.limit,
      ...cursor,
      ...(query.status !== undefined ? { status: query.status } : {}),
      ...(query.plan !== undefined ? { plan: query.plan } : {}),
      ...(query.q !== undefined ? { q: query.q } : {}),
    });
    // Each with its key count, so a list (the dashboard's) needs no request per row.
    const counts = new Array<number>(page.consumers.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      for (let i = next++; i < counts.length; i = next++) counts[i] = await consumers.keyCount(page.consumers[i]!.id);
    };
    await Promise.all(Array.from({ length: Math.min(KEY_COUNTS_IN_FLIGHT, counts.length) }, worker));
    res.json({ consumers: page.consumers.map((c, i) => ({ ...c, keyCount: counts[i]! })), nextCursor: nextCursor(page.next) });
  });

  router.get('/consumers/:id', consumerIdParam, async (req, res) => {
    const id = String(req.params.id);
    const consumer = await consumers.require(id);
    const [keyCount, windows] = await Promise.all([consumers.keyCount(id), limits.poolWindows(consumer)]);
    res.json({ ...consumer, keyCount, windows });
  });

  router.patch('/consumers/:id', consumerIdParam, async (req, res) => {
    const body = parse(patchConsumerBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const { consumer, warnings } = await consumers.update(String(req.params.id), body as ConsumerUpdate, actorOf(req));
    res.json({ ...consumer, warnings });
  });

  router.delete('/consumers/:id', consumerIdParam, async (req, res) => {
    const query = parse(deleteConsumerQuery, queryOf(req, res), 'query', res);
    if (!query) return;
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const id = String(req.params.id);
    const { revokedKeys } = await consumers.delete(id, { revokeKeys: query.revokeKeys === 'true' }, actorOf(req));
    res.json({ id, deleted: true, revokedKeys });
  });

  const status = (change: (id: string, actor: ReturnType<typeof actorOf>) => Promise<ConsumerRecord>): RequestHandler =>
    async function consumerStatus(req, res) {
      if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
      res.json(await change(String(req.params.id), actorOf(req)));
    };
  router.post(
    '/consumers/:id/suspend',
    consumerIdParam,
    status((id, actor) => consumers.suspend(id, actor)),
  );
  router.post(
    '/consumers/:id/resume',
    consumerIdParam,
    status((id, actor) => consumers.resume(id, actor)),
  );

  router.get('/consumers/:id/keys', consumerIdParam, async (req, res) => {
    const query = parse(consumerKeysQuery, queryOf(req, res), 'query', res);
    if (!query) return;
    const cursor = cursorAfter(query.cursor, res);
    if (!cursor) return;
    const all = await consumers.keysOf(String(req.params.id));
    const rest = cursor.after === undefined ? all : all.filter((k) => k.id > cursor.after!);
    const page = rest.slice(0, query.limit);
    const now = Date.now();
    res.json({
      keys: page.map((k) => ({ ...k, status: keyStatus(k, now) })),
      nextCursor: rest.length > page.length ? nextCursor(page[page.length - 1]!.id) : null,
    });
  });

  return router;
}
