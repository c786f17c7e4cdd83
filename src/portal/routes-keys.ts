// The portal's keys: the session's keys (a key session: its own key alone) with their live windows and bans, and, for
// a link session holding keys:write, a new key (where the consumer's plan lets it: plans.<plan>.selfServiceKeys), a
// rotation with an overlap and a revocation (whatever the plan). Changes go through the same key administration as the
// admin API (KeyIssuer, KeyLifecycle: audited, announced to every instance), with the link's actor; every key id in a path is looked up within the session's consumer (api-context.ts ownKey).
import { Router, type Request } from 'express';
import { z } from 'zod';
import { parse, queryOf } from '../admin/requests.js';
import { keyNameSchema } from '../config/key-fields.js';
import type { ConsumerRecord } from '../consumers/types.js';
import { HttpError } from '../http/errors.js';
import { H, NO_STORE } from '../http/headers.js';
import { keyStatus } from '../keys/rules.js';
import type { KeyRecord, StoredKey } from '../keys/types.js';
import type { LimitedCaller } from '../limits/quota.js';
import { planMode } from '../limits/windows.js';
import { actorOf, consumerOf, noSuchKey, ownKey, planLetsCreateKeys, sessionOf, visibleKeys, type PortalApiDeps } from './api-context.js';
import { requireScope } from './session-guard.js';

/** The longest overlap of a rotation: a week, as the admin API's graceSeconds allows. */
export const MAX_OVERLAP_SECONDS = 604_800;
/** A rotation's overlap when none is asked: a day for every client to take the new key. */
export const DEFAULT_OVERLAP_SECONDS = 86_400;

/** A key's name from the portal: the admin API's rules, and no control character (it is shown in tables and logs). */
const portalKeyName = keyNameSchema.refine((n) => !/\p{Cc}/u.test(n), 'expected a name without control characters');

export const createPortalKeyBody = z.strictObject({ name: portalKeyName.optional() });
export const rotatePortalKeyBody = z.strictObject({
  overlapSeconds: z
    .number('expected a whole number of seconds from 0 to 604800')
    .int('expected a whole number of seconds from 0 to 604800')
    .min(0, 'expected a whole number of seconds from 0 to 604800')
    .max(MAX_OVERLAP_SECONDS, 'expected a whole number of seconds from 0 to 604800 (a week)')
    .default(DEFAULT_OVERLAP_SECONDS),
});
const emptyBody = z.strictObject({});
const noQuery = z.strictObject({});

export type PortalKeyStatus = 'active' | 'expired' | 'revoked' | 'grace';

/** A key as the portal shows it: never its hash; its plaintext only in the answer that made it. */
export interface PortalKeyView {
  id: string;
  name?: string;
  masked: string;
  status: PortalKeyStatus;
  createdAt: string;
  expiresAt?: string;
  rotatedAt?: string;
  graceUntil?: string;
}

/**
 * A key's view at `now`. `graceUntilMs`: when its previous plaintext stops working (a rotation's overlap); while that
 * runs the key is in 'grace'. `masked`: its visible prefix (an imported key's recorded one, else the issued prefix),
 * "…", and its last 4 characters where the record has them.
 */
export function keyView(k: KeyRecord, now: number, issuedPrefix: string, graceUntilMs?: number): PortalKeyView {
  const status = keyStatus(k, now);
  const grace = status === 'active' && graceUntilMs !== undefined && graceUntilMs > now;
  return {
    id: k.id,
    ...(k.name !== undefined ? { name: k.name } : {}),
    masked: `${k.prefix ?? issuedPrefix}…${k.last4 ?? ''}`,
    status: grace ? 'grace' : status,
    createdAt: k.createdAt,
    ...(k.expiresAt !== undefined ? { expiresAt: k.expiresAt } : {}),
    ...(k.rotatedAt !== undefined ? { rotatedAt: k.rotatedAt } : {}),
    ...(grace ? { graceUntil: new Date(graceUntilMs).toISOString() } : {}),
  };
}

/** A stored key's view (its overlap read from the record). */
function storedView(k: StoredKey, now: number, issuedPrefix: string): PortalKeyView {
  return keyView(k, now, issuedPrefix, k.prevHash !== undefined ? k.prevHashUntil : undefined);
}

/** A window as the portal shows it (GET /ratelimit's figures, with what was used). */
export interface PortalWindow {
  name: string;
  limit: number;
  used: number;
  remaining: number;
  resetAt: string;
  mode: 'enforce' | 'shadow';
}

/** Keys whose quota is read at once (one read-only Redis call each). */
const QUOTA_READS_IN_FLIGHT = 8;

export function keyRoutes(deps: PortalApiDeps): Router {
  const router = Router();
  const issuedPrefix = () => deps.runtime.config.auth.issuedPrefix;

  router.get('/keys', requireScope('keys:read'), async (req, res) => {
    const session = sessionOf(req);
    if (!parse(noQuery, queryOf(req, res), 'query', res)) return;
    await consumerOf(deps, session);
    const now = deps.clock.now();
    const keys = (await visibleKeys(deps, session)).map((k) => storedView(k, now, issuedPrefix()));
    // Revoked keys last; otherwise newest first.
    keys.sort((a, b) => Number(a.status === 'revoked') - Number(b.status === 'revoked') || b.createdAt.localeCompare(a.createdAt) || a.id.localeCompare(b.id));
    res.setHeader(H.cacheControl, NO_STORE);
    res.json({ keys });
  });

  router.get('/windows', requireScope('keys:read'), async (req, res) => {
    const session = sessionOf(req);
    if (!parse(noQuery, queryOf(req, res), 'query', res)) return;
    const consumer = await consumerOf(deps, session);
    const keys = (await visibleKeys(deps, session)).filter((k) => k.status !== 'revoked').sort((a, b) => a.id.localeCompare(b.id));
    const read = await quotas(deps, req, consumer, keys);
    res.setHeader(H.cacheControl, NO_STORE);
    res.json(read);
  });

  router.post('/keys', requireScope('keys:write'), async (req, res) => {
    const session = sessionOf(req);
    const body = parse(createPortalKeyBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const consumer = await consumerOf(deps, session);
    // A plan whose keys the provider issues (plans.<plan>.selfServiceKeys: false): nothing is created here.
    if (!planLetsCreateKeys(deps.runtime.config.plans, consumer.plan))
      throw new HttpError('forbidden', 'Your plan does not let you create keys here: ask your provider for one.');
    // The consumer's plan and pool; maxKeys is counted under the consumer's lock (409 consumer_full past it).
    const created = await deps.keys.issuer.create(
      { plan: consumer.plan, ...(body.name !== undefined ? { name: body.name } : {}), consumer: consumer.id },
      actorOf(req, session),
    );
    // The plaintext key is in this answer and nowhere else.
    res.setHeader(H.cacheControl, NO_STORE);
    res.status(201).json({ ...keyView(created.record, deps.clock.now(), issuedPrefix()), key: created.key });
  });

  router.post('/keys/:id/rotate', requireScope('keys:write'), async (req, res) => {
    const session = sessionOf(req);
    const body = parse(rotatePortalKeyBody, req.body ?? {}, 'body', res);
    if (!body) return;
    await consumerOf(deps, session);
    const id = String(req.params.id);
    await ownKey(deps, session, id);
    // Checked again on the record the rotation writes over: a key moved to another consumer meanwhile is not rotated.
    const rotated = await deps.keys.lifecycle.rotate(id, body.overlapSeconds, actorOf(req, session), { within: session.consumer });
    if (!rotated) throw noSuchKey();
    // The old plaintext works until then (rotate stores rotatedAt + the overlap as its end).
    const overlapUntilMs = Date.parse(rotated.record.rotatedAt!) + body.overlapSeconds * 1000;
    res.setHeader(H.cacheControl, NO_STORE);
    res.json({
      ...keyView(rotated.record, deps.clock.now(), issuedPrefix(), overlapUntilMs),
      key: rotated.key,
      overlapUntil: new Date(overlapUntilMs).toISOString(),
    });
  });

  router.post('/keys/:id/revoke', requireScope('keys:write'), async (req, res) => {
    const session = sessionOf(req);
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    await consumerOf(deps, session);
    const id = String(req.params.id);
    const k = await ownKey(deps, session, id);
    // Revoking a revoked key changes nothing: the same answer, no second audit line.
    if (k.status !== 'revoked' && !(await deps.keys.lifecycle.revoke(id, actorOf(req, session), { within: session.consumer }))) throw noSuchKey();
    const now = deps.clock.now();
    res.setHeader(H.cacheControl, NO_STORE);
    res.json(storedView(await ownKey(deps, session, id), now, issuedPrefix()));
  });

  return router;
}

/**
 * The pool's windows and each key's caps and ban, from the quota read GET /ratelimit makes (one read-only store call
 * per key, nothing counted): the pool (the plan's windows, the month, the route windows and the candidate limits) is
 * the same through every key of the consumer, so it is taken from the first read; a consumer without a key that is
 * not revoked (or whose keys could not be read) shows its pool from a read of its own.
 */
async function quotas(
  deps: PortalApiDeps,
  req: Request,
  consumer: ConsumerRecord,
  keys: readonly StoredKey[],
): Promise<{ pool: PortalWindow[]; keys: Array<{ id: string; windows: PortalWindow[]; ban: { until: string; level: number } | null }> }> {
  const out: Array<{ pool: PortalWindow[]; id: string; windows: PortalWindow[]; ban: { until: string; level: number } | null }> = new Array(keys.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < keys.length; i = next++) out[i] = await quotaOf(deps, req, consumer, keys[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(QUOTA_READS_IN_FLIGHT, keys.length) }, worker));
  const perKey = out.map(({ id, windows, ban }) => ({ id, windows, ban }));
  const read = out.find((o) => o.pool.length > 0);
  if (read) return { pool: read.pool, keys: perKey };
  const pool = await deps.keyLimits.poolWindows(consumer);
  if (!pool) throw new HttpError('service_unavailable', 'The limits of this consumer cannot be read right now: its plan is not usable.');
  const mode = planMode(deps.runtime.config, consumer.plan);
  return { pool: pool.map((w) => ({ name: w.name, limit: w.limit, used: w.used, remaining: w.remaining, resetAt: w.resetAt, mode })), keys: perKey };
}

/** One key's quota read: the pool's windows (with the candidate limits, as shadow), its caps, its ban. */
async function quotaOf(
  deps: PortalApiDeps,
  req: Request,
  c: ConsumerRecord,
  k: StoredKey,
): Promise<{ pool: PortalWindow[]; id: string; windows: PortalWindow[]; ban: { until: string; level: number } | null }> {
  const caller: LimitedCaller = {
    id: k.id,
    plan: k.plan,
    perMinute: k.perMinute,
    perDay: k.perDay,
    perMonth: k.perMonth,
    limitsExpiresAt: k.limitsExpiresAt,
    consumer: {
      id: c.id,
      plan: c.plan,
      billingDay: c.billingDay,
      perMinute: c.perMinute,
      perDay: c.perDay,
      perMonth: c.perMonth,
      limitsExpiresAt: c.limitsExpiresAt,
    },
  };
  const o = await deps.limiter.quota(caller, { id: req.id, redisMs: 0, decision: undefined, charge: undefined });
  if (o.kind === 'no_plan') throw new HttpError('service_unavailable', 'The limits of this consumer cannot be read right now: its plan is not usable.');
  if (o.kind === 'unavailable') throw new HttpError('service_unavailable', 'The limits cannot be read right now. Retry shortly.');
  // A key the store cannot read now (its record unreadable): no figures rather than wrong ones.
  if (o.kind !== 'read') return { pool: [], id: k.id, windows: [], ban: null };
  const { snapshot: s, request, now } = o;
  const view = (name: string, limit: number, stateAt: number, endsAt: number | undefined, mode: 'enforce' | 'shadow'): PortalWindow => {
    const state = s.windows[stateAt]!;
    return { name, limit, used: state.used, remaining: Math.max(0, limit - state.used), resetAt: new Date(endsAt ?? now + state.resetMs).toISOString(), mode };
  };
  const pool: PortalWindow[] = [];
  const windows: PortalWindow[] = [];
  request.windows.forEach((w, i) => (w.cap ? windows : pool).push(view(w.name, w.limit, i, w.endsAt, w.mode)));
  for (const cand of request.candidates) pool.push(view(cand.name, cand.limit, cand.of, request.windows[cand.of]!.endsAt, 'shadow'));
  return { pool, id: k.id, windows, ban: s.banMs > 0 ? { until: new Date(now + s.banMs).toISOString(), level: s.banLevel } : null };
}
