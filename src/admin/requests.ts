// Reading an admin API request, shared by the resource modules (keys-routes.ts, usage-routes.ts, ...): the body and
// query checked against src/admin/schemas.ts (every problem answered in one 400), the caller as an audit Actor, a
// key id in the path, a report's period within what is kept.
import type { Request, RequestHandler, Response } from 'express';
import type { z } from 'zod';
import { KEY_ID } from '../config/key-fields.js';
import { sendError } from '../http/errors.js';
import type { Actor } from '../keys/key-changes.js';
import { resolvePeriod } from '../usage/reports.js';
import { problemsOf, type Problem } from './schemas.js';

/** Who made a change, for its audit line: the admin token guard.ts found, and the request's id. */
export const actorOf = (req: Request): Actor => ({ by: req.adminTokenId!, requestId: req.id });

/** A path's :id that no key could have is answered 404 before any lookup. */
export const keyIdParam: RequestHandler = (req, res, next) =>
  KEY_ID.test(String(req.params.id)) ? next() : sendError(res, 'not_found', `no key with id "${req.params.id}"`);

/** Validates with a schema; on failure answers 400 with every problem and returns undefined. */
export function parse<S extends z.ZodType>(schema: S, value: unknown, where: string, res: Response): z.output<S> | undefined {
  if (res.headersSent) return undefined;
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  sendProblems(res, problemsOf(r.error, where));
  return undefined;
}

export function sendProblems(res: Response, problems: Problem[]): void {
  res
    .status(400)
    .type('application/json')
    .send(JSON.stringify({ code: 'invalid_request', message: problems.map((p) => `${p.path}: ${p.message}`).join('; '), status: 400, problems }));
}

/** The query string as a flat map; a parameter given twice is a problem (answered here, returns undefined). */
export function queryOf(req: Request, res: Response): Record<string, string> | undefined {
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
export function requireJsonBody(req: Request, res: Response, next: (err?: unknown) => void): void {
  const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
  if (hasBody && req.body === undefined) return sendError(res, 'unsupported_media_type', 'The request body must be application/json.');
  next();
}

/**
 * A period from the query or body: defaults (`defaultMs` before to, or all that is kept), from before to, within what
 * is kept. On a problem answers 400 naming `path` and returns undefined.
 */
export function periodOf(
  q: { from?: string | undefined; to?: string | undefined },
  defaultMs: number,
  retentionDays: number,
  res: Response,
  path = 'query.from',
): { fromMs: number; toMs: number } | undefined {
  const p = resolvePeriod(
    { fromMs: q.from !== undefined ? Date.parse(q.from) : undefined, toMs: q.to !== undefined ? Date.parse(q.to) : undefined },
    defaultMs,
    retentionDays,
    Date.now(),
  );
  if (!('problem' in p)) return p;
  const message = p.problem === 'order' ? 'must be before to' : `the period may span at most ${p.maxDays} days (usage.retentionDays + 1)`;
  return void sendProblems(res, [{ path, message }]);
}

export const periodView = (p: { fromMs: number; toMs: number }) => ({ from: new Date(p.fromMs).toISOString(), to: new Date(p.toMs).toISOString() });
