// The admin API's keys: issue, list, read (with the live windows and ban), change, rotate, revoke, unban and reset
// windows. Every change goes through the key administration's pieces (src/keys/admin.ts) or KeyLimitAdmin, as the
// CLI's do. (POST /keys/import is
// import-route.ts; a key's usage is usage-routes.ts.)
import { Router } from 'express';
import { H, NO_STORE } from '../http/headers.js';
import type { KeyAdmin } from '../keys/admin.js';
import { notFound } from '../keys/admin-errors.js';
import type { KeyRecord } from '../keys/types.js';
import type { KeyLimitAdmin } from '../limits/key-admin.js';
import { KEY_ID } from '../config/key-fields.js';
import { actorOf, keyIdParam, parse, queryOf, sendProblems } from './requests.js';
import { createKeyBody, emptyBody, listKeysQuery, patchKeyBody, rotateKeyBody } from './schemas.js';

/** The key routes. A key that is not there is a not_found KeyAdminError (listing.require's): the error handler answers 404. */
export function keyRoutes(keys: Pick<KeyAdmin, 'listing' | 'issuer' | 'lifecycle' | 'changes'>, keyLimits: KeyLimitAdmin): Router {
  const { listing, issuer, lifecycle, changes } = keys;
  const router = Router();
  const view = (k: KeyRecord) => ({ ...k, status: listing.statusOf(k) });

  router.post('/keys', async (req, res) => {
    const body = parse(createKeyBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const created = await issuer.create(body, actorOf(req));
    // The plaintext key is in this answer and nowhere else: no cache between here and the caller may keep it.
    res.setHeader(H.cacheControl, NO_STORE);
    res
      .status(201)
      .location(`/keys/${created.record.id}`)
      .json({ ...view(created.record), key: created.key, replication: created.replication, warnings: created.warnings });
  });

  router.get('/keys', async (req, res) => {
    const query = parse(listKeysQuery, queryOf(req, res), 'query', res);
    if (!query) return;
    let after: string | undefined;
    if (query.cursor !== undefined) {
      after = Buffer.from(query.cursor, 'base64url').toString('utf8');
      if (!KEY_ID.test(after) || Buffer.from(after).toString('base64url') !== query.cursor)
        return sendProblems(res, [{ path: 'query.cursor', message: 'not a cursor this API gave out (use nextCursor from a previous page)' }]);
    }
    const page = await listing.page({
      limit: query.limit,
      ...(after !== undefined ? { after } : {}),
      ...(query.plan !== undefined ? { plan: query.plan } : {}),
      ...(query.status !== undefined ? { status: query.status } : {}),
      ...(query.name !== undefined ? { namePrefix: query.name } : {}),
      ...(query.q !== undefined ? { q: query.q } : {}),
    });
    // With windows=true each key's live state is read here (one snapshot per key, in parallel), not by one request
    // per row from the client.
    const keysOut =
      query.windows === 'true' ? await Promise.all(page.keys.map(async (k) => ({ ...view(k), ...(await keyLimits.liveState(k)) }))) : page.keys.map(view);
    res.json({ keys: keysOut, nextCursor: page.next === undefined ? null : Buffer.from(page.next).toString('base64url') });
  });

  router.get('/keys/:id', keyIdParam, async (req, res) => {
    const k = await listing.require(String(req.params.id));
    res.json({ ...view(k), ...(await keyLimits.liveState(k)) });
  });

  router.patch('/keys/:id', keyIdParam, async (req, res) => {
    const body = parse(patchKeyBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const updated = await lifecycle.update(String(req.params.id), body, actorOf(req));
    res.json({ ...view(updated.record), replication: updated.replication, warnings: updated.warnings });
  });

  router.post('/keys/:id/rotate', keyIdParam, async (req, res) => {
    const body = parse(rotateKeyBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const id = String(req.params.id);
    const rotated = await lifecycle.rotate(id, body.graceSeconds, actorOf(req), { keepPrefix: body.keepPrefix });
    if (!rotated) throw notFound(id);
    res.setHeader(H.cacheControl, NO_STORE);
    res.json({ ...view(rotated.record), key: rotated.key, graceSeconds: body.graceSeconds, replication: rotated.replication });
  });

  router.post('/keys/:id/revoke', keyIdParam, async (req, res) => {
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const id = String(req.params.id);
    const k = await listing.require(id);
    // Revoking a revoked key changes nothing: the same answer, no second audit line; its replication is still
    // asked, so a retry after an unconfirmed revoke learns whether the revocation has reached a replica since.
    const revoked = k.status === 'revoked' ? { replication: await changes.replicated(id, []) } : await lifecycle.revoke(id, actorOf(req));
    if (!revoked) throw notFound(id);
    res.json({ ...view(await listing.require(id)), replication: revoked.replication });
  });

  router.post('/keys/:id/unban', keyIdParam, async (req, res) => {
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const id = String(req.params.id);
    const { replication } = await keyLimits.unban(id, actorOf(req));
    const k = await listing.require(id);
    res.json({ ...view(k), ...(await keyLimits.liveState(k)), replication });
  });

  router.post('/keys/:id/reset', keyIdParam, async (req, res) => {
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const id = String(req.params.id);
    await keyLimits.resetWindows(id, actorOf(req));
    const k = await listing.require(id);
    res.json({ ...view(k), ...(await keyLimits.liveState(k)) });
  });

  return router;
}
