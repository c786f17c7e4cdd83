// The admin HTTP API, on a listener of its own (admin.host:admin.port): issue, list, read (with live limits), change,
// rotate, revoke and unban keys, reset their windows, the plans in force, the services' targets and their health, and
// the API's own OpenAPI document. Every
// change goes through KeyAdmin, the service the CLI uses too: one set of rules and error codes, and one audit line
// per change. Bodies and queries are validated with zod (src/admin/schemas.ts), every problem listed. No listen()
// here: src/server/gateway-server.ts binds it.
import { randomUUID } from 'node:crypto';
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import type { Runtime } from '../routing/runtime.js';
import { sendError, type ErrorCode } from '../http/errors.js';
import { H, isSaneRequestId, NO_STORE } from '../http/headers.js';
import { KeyAdminError, type Actor, type KeyAdmin, type KeyAdminErrorCode } from '../keys/admin.js';
import type { KeyRecord } from '../keys/types.js';
import type { KeyLimitAdmin } from '../limits/key-admin.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { securityHeaders } from '../pipeline/stages.js';
import { AdminGuard } from './guard.js';
import { importRoute } from './import-route.js';
import { dashboardRouter } from '../dashboard/routes.js';
import { Sessions } from './sessions.js';
import {
  createKeyBody,
  deprecatedQuery,
  emptyBody,
  keyUsageQuery,
  listKeysQuery,
  patchKeyBody,
  problemsOf,
  simulateBody,
  rotateKeyBody,
  usageQuery,
  type Problem,
} from './schemas.js';
import { resolvePeriod, type UsageReports } from '../usage/reports.js';
import type { OverviewCache } from '../usage/overview.js';
import { decodeCursor, type ReportCursor } from '../usage/report-pages.js';
import { ReportError } from '../usage/kept-reports.js';
import { decodeWhatIfCursor, type WhatIfCursor } from '../usage/whatif-pages.js';
import type { SimulateInput } from '../usage/whatif.js';
import type { ReportRunner } from '../usage/report-runner.js';
import { csv, deprecatedRows } from '../usage/csv.js';
import { DAY_MS, HOUR_MS } from '../util/time.js';
import type { AdminTokens } from './tokens.js';
import type { ServiceSnapshot } from '../routing/services.js';

export interface AdminAppOptions {
  keys: KeyAdmin;
  /** The keys' windows and bans (read, unban, reset). */
  keyLimits: KeyLimitAdmin;
  runtime: Runtime;
  tokens: AdminTokens;
  metrics: Metrics;
  logger: Logger;
  /** The OpenAPI document served at /openapi.json (docs/admin.openapi.yaml, parsed). */
  openapi: unknown;
  /** The usage ledger and deprecated-route report. */
  usage: UsageReports;
  /** Reports over every key: GET /usage's pages, the what-if, the deprecated-route report (usage/report-runner.ts). */
  reports: ReportRunner;
  /** The overview's summary, computed once and shared (usage/overview.ts). */
  overview: OverviewCache;
  /** Whether the gateway's Redis answers ('ok'), is being worked around ('degraded'), or there is none ('none'). */
  redisState: () => Promise<'ok' | 'degraded' | 'none'>;
  /** The services and their targets as this instance sees them now (ServiceRegistry.snapshot). */
  services: () => ServiceSnapshot[];
}

/** The ids KeyAdmin issues (key_...) and those `keys import` accepts. */
const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Admin requests are small JSON documents: a key's fields and metadata. */
const MAX_BODY = '64kb';

const ADMIN_ERRORS: Record<KeyAdminErrorCode, ErrorCode> = {
  not_found: 'not_found',
  revoked: 'key_revoked',
  unknown_plan: 'unknown_plan',
  invalid_record: 'invalid_record',
  invalid: 'invalid_request',
  contended: 'service_unavailable',
  incomplete: 'service_unavailable',
  import_in_progress: 'import_in_progress',
};

export function buildAdminApp(o: AdminAppOptions): express.Express {
  const { keys, keyLimits, runtime, logger } = o;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', false);

  const guard = new AdminGuard(o.tokens, () => runtime.config.admin.maxFailuresPerMinute, o.metrics, new Sessions());
  // A reload's tokens are in force from the next admin request on: a removed (or re-hashed) token, and every
  // session it opened, is refused at once, and such sessions stay ended if the token comes back.
  runtime.onChange((next) => {
    o.tokens.replace(next.config.admin.tokens);
    guard.endSessionsOfRevokedTokens();
  });
  app.use(adminRequestLog(logger));
  // The dashboard's page, assets and sign-in: before the API's own headers (the page has a CSP of its own).
  app.use(dashboardRouter(guard));
  app.use(securityHeaders());
  // The document describes the API, nothing in it is secret; tools fetch it without credentials.
  app.get('/openapi.json', (_req, res) => void res.json(o.openapi));
  app.use(guard.requireAdmin);
  const actor = (req: Request): Actor => ({ by: req.adminTokenId!, requestId: req.id });
  // Before the JSON parser: an import body is larger (up to 10 MB) and may be CSV or JSON lines.
  app.post('/keys/import', ...importRoute(keys, actor));
  app.use(express.json({ limit: MAX_BODY, strict: true }));
  app.use(requireJsonBody);

  const view = (k: KeyRecord) => ({ ...k, status: keys.statusOf(k) });
  const keyId: RequestHandler = (req, res, next) =>
    KEY_ID.test(String(req.params.id)) ? next() : sendError(res, 'not_found', `no key with id "${req.params.id}"`);
  const mustGet = async (id: string): Promise<KeyRecord> => {
    const k = await keys.get(id);
    if (!k) throw new KeyAdminError('not_found', `no key with id "${id}"`);
    return k;
  };

  app.post('/keys', async (req, res) => {
    const body = parse(createKeyBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const created = await keys.create(body, actor(req));
    // The plaintext key is in this answer and nowhere else: no cache between here and the caller may keep it.
    res.setHeader(H.cacheControl, NO_STORE);
    res
      .status(201)
      .location(`/keys/${created.record.id}`)
      .json({ ...view(created.record), key: created.key, replication: created.replication, warnings: created.warnings });
  });

  app.get('/keys', async (req, res) => {
    const query = parse(listKeysQuery, queryOf(req, res), 'query', res);
    if (!query) return;
    let after: string | undefined;
    if (query.cursor !== undefined) {
      after = Buffer.from(query.cursor, 'base64url').toString('utf8');
      if (!KEY_ID.test(after) || Buffer.from(after).toString('base64url') !== query.cursor)
        return sendProblems(res, [{ path: 'query.cursor', message: 'not a cursor this API gave out (use nextCursor from a previous page)' }]);
    }
    const page = await keys.page({
      limit: query.limit,
      ...(after !== undefined ? { after } : {}),
      ...(query.plan !== undefined ? { plan: query.plan } : {}),
      ...(query.status !== undefined ? { status: query.status } : {}),
      ...(query.name !== undefined ? { namePrefix: query.name } : {}),
    });
    res.json({ keys: page.keys.map(view), nextCursor: page.next === undefined ? null : Buffer.from(page.next).toString('base64url') });
  });

  app.get('/keys/:id', keyId, async (req, res) => {
    const k = await mustGet(String(req.params.id));
    res.json({ ...view(k), ...(await keyLimits.liveState(k)) });
  });

  app.patch('/keys/:id', keyId, async (req, res) => {
    const body = parse(patchKeyBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const updated = await keys.update(String(req.params.id), body, actor(req));
    res.json({ ...view(updated.record), replication: updated.replication, warnings: updated.warnings });
  });

  app.post('/keys/:id/rotate', keyId, async (req, res) => {
    const body = parse(rotateKeyBody, req.body ?? {}, 'body', res);
    if (!body) return;
    const id = String(req.params.id);
    const rotated = await keys.rotate(id, body.graceSeconds, actor(req));
    if (!rotated) throw new KeyAdminError('not_found', `no key with id "${id}"`);
    res.setHeader(H.cacheControl, NO_STORE);
    res.json({ ...view(rotated.record), key: rotated.key, graceSeconds: body.graceSeconds, replication: rotated.replication });
  });

  app.post('/keys/:id/revoke', keyId, async (req, res) => {
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const id = String(req.params.id);
    const k = await mustGet(id);
    // Revoking a revoked key changes nothing: the same answer, no second audit line; its replication is still
    // asked, so a retry after an unconfirmed revoke learns whether the revocation has reached a replica since.
    const revoked = k.status === 'revoked' ? { replication: await keys.replicated(id, []) } : await keys.revoke(id, actor(req));
    if (!revoked) throw new KeyAdminError('not_found', `no key with id "${id}"`);
    res.json({ ...view(await mustGet(id)), replication: revoked.replication });
  });

  app.post('/keys/:id/unban', keyId, async (req, res) => {
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const id = String(req.params.id);
    const { replication } = await keyLimits.unban(id, actor(req));
    const k = await mustGet(id);
    res.json({ ...view(k), ...(await keyLimits.liveState(k)), replication });
  });

  app.post('/keys/:id/reset', keyId, async (req, res) => {
    if (!parse(emptyBody, req.body ?? {}, 'body', res)) return;
    const id = String(req.params.id);
    await keyLimits.resetWindows(id, actor(req));
    const k = await mustGet(id);
    res.json({ ...view(k), ...(await keyLimits.liveState(k)) });
  });

  /** A period from the query: defaults (`defaultMs` before to, or all that is kept), from before to, within what is kept. */
  const periodOf = (
    q: { from?: string | undefined; to?: string | undefined },
    defaultMs: number,
    res: Response,
  ): { fromMs: number; toMs: number } | undefined => {
    const p = resolvePeriod(
      { fromMs: q.from !== undefined ? Date.parse(q.from) : undefined, toMs: q.to !== undefined ? Date.parse(q.to) : undefined },
      defaultMs,
      runtime.config.usage.retentionDays,
      Date.now(),
    );
    if (!('problem' in p)) return p;
    const message = p.problem === 'order' ? 'must be before to' : `the period may span at most ${p.maxDays} days (usage.retentionDays + 1)`;
    return void sendProblems(res, [{ path: 'query.from', message }]);
  };
  const periodView = (p: { fromMs: number; toMs: number }) => ({ from: new Date(p.fromMs).toISOString(), to: new Date(p.toMs).toISOString() });

  app.get('/keys/:id/usage', keyId, async (req, res) => {
    const q = parse(keyUsageQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const p = periodOf(q, q.granularity === 'hour' ? 24 * HOUR_MS : 7 * DAY_MS, res);
    if (!p) return;
    const k = await mustGet(String(req.params.id));
    const u = await o.usage.keyUsage(k.id, p.fromMs, p.toMs, q.granularity);
    res.json({ id: k.id, plan: k.plan, granularity: q.granularity, ...periodView(p), totals: u.totals, buckets: u.buckets });
  });

  app.get('/usage', async (req, res) => {
    const raw = queryOf(req, res);
    const q = parse(usageQuery, raw, 'query', res);
    if (!q) return;
    let at: ReportCursor | undefined;
    if (q.cursor !== undefined) {
      at = decodeCursor(q.cursor);
      const kept = runtime.config.usage.retentionDays;
      if (!at || 'problem' in resolvePeriod(at, 0, kept, Date.now()))
        return sendProblems(res, [{ path: 'query.cursor', message: 'not a cursor this API gave out (use nextCursor from a previous page)' }]);
      // The cursor's report decides the period and order; the same query repeated with it is welcome, another is not.
      const other =
        (q.from !== undefined && Date.parse(q.from) !== at.fromMs) ||
        (q.to !== undefined && Date.parse(q.to) !== at.toMs) ||
        (raw!.sort !== undefined && q.sort !== at.sort) ||
        (raw!.order !== undefined && q.order !== at.order);
      if (other)
        return sendProblems(res, [
          { path: 'query.cursor', message: "belongs to a report with another from, to, sort or order: leave them out or give the first page's" },
        ]);
    }
    const nonZero = q.nonzero === 'true';
    if (nonZero && q.sort === 'id') return sendProblems(res, [{ path: 'query.nonzero', message: 'only with a sort by a figure (admitted, rateLimited, ...)' }]);
    if (at && q.nonzero !== undefined && nonZero !== !!at.nonZero)
      return sendProblems(res, [{ path: 'query.cursor', message: "belongs to a report with another nonzero: leave it out or give the first page's" }]);
    const p = at ?? periodOf(q, 7 * DAY_MS, res);
    if (!p) return;
    const page = await o.reports.page(at ?? { fromMs: p.fromMs, toMs: p.toMs, sort: q.sort, order: q.order, ...(nonZero ? { nonZero } : {}) }, q.limit);
    res.json({
      ...periodView(page.query),
      sort: page.query.sort,
      order: page.query.order,
      keys: page.keys,
      total: page.total,
      nextCursor: page.next,
    });
  });

  app.get('/usage/summary', async (req, res) => {
    const q = parse(keyUsageQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const p = periodOf(q, q.granularity === 'hour' ? 24 * HOUR_MS : 7 * DAY_MS, res);
    if (!p) return;
    const u = await o.overview.get(p.fromMs, p.toMs, q.granularity);
    res.json({ granularity: q.granularity, ...periodView(u), asOf: new Date(u.asOfMs).toISOString(), totals: u.totals, buckets: u.buckets });
  });

  app.get('/status', async (_req, res) => {
    res.json({
      redis: await o.redisState(),
      usageRetentionDays: runtime.config.usage.retentionDays,
      plans: plansView(runtime),
    });
  });

  app.get('/routes/deprecated.csv', async (req, res) => {
    const p = periodOf({}, runtime.config.usage.retentionDays * DAY_MS, res)!;
    const rows = deprecatedRows(await o.reports.deprecatedRoutes(p.fromMs, p.toMs, runtime.config.routes));
    res.setHeader('content-disposition', 'attachment; filename="deprecated-routes.csv"');
    res.type('text/csv; charset=utf-8').send(csv(rows));
  });

  app.get('/routes/deprecated', async (req, res) => {
    const q = parse(deprecatedQuery, queryOf(req, res), 'query', res);
    if (!q) return;
    const p = periodOf(q, runtime.config.usage.retentionDays * DAY_MS, res);
    if (!p) return;
    res.json({ ...periodView(p), routes: await o.reports.deprecatedRoutes(p.fromMs, p.toMs, runtime.config.routes) });
  });

  // This instance's view: health checks and passive ejection are judged per gateway instance (docs/routing.md).
  app.get('/services', (_req, res) => {
    res.json({ asOf: new Date().toISOString(), services: o.services() });
  });

  app.get('/services/:name', (req, res) => {
    const name = String(req.params.name);
    const service = o.services().find((s) => s.name === name);
    if (!service) return sendError(res, 'not_found', `no service named "${name.slice(0, 64)}"`);
    res.json({ asOf: new Date().toISOString(), ...service });
  });

  app.get('/plans', (_req, res) => {
    res.json({ plans: plansView(runtime) });
  });

  // A read, though a POST: the question has a body. Nothing is changed, so nothing is audited. The answer is bounded:
  // totals, the keys most refused (each with its most refused hours), the rest of the keys by cursor.
  app.post('/plans/simulate', async (req, res) => {
    const body = parse(simulateBody, req.body ?? {}, 'body', res);
    if (!body) return;
    let first: SimulateInput | WhatIfCursor;
    if (body.cursor !== undefined) {
      const at = decodeWhatIfCursor(body.cursor);
      if (!at) return sendProblems(res, [{ path: 'body.cursor', message: 'not a cursor this API gave out (use nextCursor from a previous answer)' }]);
      first = at;
    } else {
      const plan = body.plan!;
      const current = Object.hasOwn(runtime.config.plans, plan) ? runtime.config.plans[plan] : undefined;
      if (!current) return sendError(res, 'unknown_plan', `no plan named "${plan}" (configured: ${Object.keys(runtime.config.plans).join(', ')})`);
      const p = resolvePeriod(
        { fromMs: body.from !== undefined ? Date.parse(body.from) : undefined, toMs: body.to !== undefined ? Date.parse(body.to) : undefined },
        7 * DAY_MS,
        runtime.config.usage.retentionDays,
        Date.now(),
      );
      if ('problem' in p)
        return sendProblems(res, [
          {
            path: 'body.from',
            message: p.problem === 'order' ? 'must be before to' : `the period may span at most ${p.maxDays} days (usage.retentionDays + 1)`,
          },
        ]);
      first = { plan, current: { perMinute: current.perMinute, perDay: current.perDay }, perMinute: body.perMinute, perDay: body.perDay, ...p };
    }
    const page = await o.reports.simulate(first, body.limit);
    const q = page.input;
    res.json({
      plan: q.plan,
      ...periodView(q),
      current: q.current,
      simulated: { ...(q.perMinute !== undefined ? { perMinute: q.perMinute } : {}), ...(q.perDay !== undefined ? { perDay: q.perDay } : {}) },
      unit: 'points',
      totals: page.totals,
      keys: page.keys,
      nextCursor: page.next,
    });
  });

  app.use((_req, res) => sendError(res, 'not_found'));
  app.use(adminErrors(logger));
  return app;
}

/**
 * The plans in force, as the API lists them (read per call: a reload applies at once): their windows' mode, and their
 * candidate limits (checked in shadow) when they have some.
 */
function plansView(
  runtime: Runtime,
): Array<{ name: string; perMinute: number; perDay: number; mode: 'enforce' | 'shadow'; shadow?: { perMinute?: number; perDay?: number } }> {
  const { plans, limits } = runtime.config;
  return Object.keys(plans).map((name) => {
    const p = plans[name]!;
    return { name, perMinute: p.perMinute, perDay: p.perDay, mode: p.mode ?? limits.mode, ...(p.shadow ? { shadow: { ...p.shadow } } : {}) };
  });
}

/** Validates with a schema; on failure answers 400 with every problem and returns undefined. */
function parse<S extends z.ZodType>(schema: S, value: unknown, where: string, res: Response): z.output<S> | undefined {
  if (res.headersSent) return undefined;
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  sendProblems(res, problemsOf(r.error, where));
  return undefined;
}

function sendProblems(res: Response, problems: Problem[]): void {
  res
    .status(400)
    .type('application/json')
    .send(JSON.stringify({ code: 'invalid_request', message: problems.map((p) => `${p.path}: ${p.message}`).join('; '), status: 400, problems }));
}

/** The query string as a flat map; a parameter given twice is a problem (answered here, returns undefined). */
function queryOf(req: Request, res: Response): Record<string, string> | undefined {
  const q = req.url.indexOf('?');
  const params = new URLSearchParams(q === -1 ? '' : req.url.slice(q + 1));
  const out: Record<string, string> = {};
  const repeated: Problem[] = [];
  for (const [k, v] of params) {
    if (Object.hasOwn(out, k)) repeated.push({ path: `query.${k}`, message: 'given more than once' });
    out[k] = v;
  }
  if (repeated.length) {
    sendProblems(res, repeated);
    return undefined;
  }
  return out;
}

/** A body that is there must be JSON (express.json parsed it); an empty one is taken as {}. */
function requireJsonBody(req: Request, res: Response, next: (err?: unknown) => void): void {
  const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
  if (hasBody && req.body === undefined) return sendError(res, 'unsupported_media_type', 'The request body must be application/json.');
  next();
}

/** Request id (the caller's X-Request-Id when sane) and one log line per admin request once it is answered. */
function adminRequestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const given = req.headers[H.requestId];
    req.id = isSaneRequestId(given) ? given : randomUUID();
    res.setHeader(H.requestId, req.id);
    const started = performance.now();
    res.once('close', () => {
      const q = req.originalUrl.indexOf('?');
      logger.info(
        {
          admin: true,
          req: { id: req.id, method: req.method, url: q === -1 ? req.originalUrl : req.originalUrl.slice(0, q), remoteAddress: req.socket.remoteAddress },
          res: { statusCode: res.statusCode },
          responseTime: Math.round(performance.now() - started),
          ...(req.adminTokenId ? { by: req.adminTokenId } : {}),
        },
        'admin request',
      );
    });
    next();
  };
}

function adminErrors(logger: Logger): ErrorRequestHandler {
  return function adminErrorHandler(err, req, res, _next) {
    if (res.headersSent) {
      if (!res.writableEnded) res.destroy();
      return;
    }
    if (err instanceof KeyAdminError) return sendError(res, ADMIN_ERRORS[err.code], err.message);
    if (err instanceof ReportError) return sendError(res, err.code, err.message);
    const type = (err as { type?: string })?.type;
    if (type === 'entity.parse.failed') return sendError(res, 'invalid_json');
    if (type === 'entity.too.large') return sendError(res, 'payload_too_large', `The request body is larger than ${MAX_BODY}.`);
    if (type === 'encoding.unsupported' || type === 'charset.unsupported') return sendError(res, 'unsupported_media_type');
    const status = typeof err?.status === 'number' ? err.status : 500;
    if (status >= 400 && status < 500) return sendError(res, 'invalid_request');
    // The key store did not answer (Redis down, a timeout): nothing was changed that the caller cannot retry.
    logger.error({ reqId: req.id, err: { message: String(err?.message), code: err?.code } }, 'admin request failed');
    sendError(res, 'service_unavailable', 'The key store did not answer. Retry shortly.');
  };
}
