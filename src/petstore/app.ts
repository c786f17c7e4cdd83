// The reference petstore upstream (its interface: docs/petstore.openapi.yaml) as an Express app: categories,
// a deprecated demo pets route and store orders. No I/O at import; the caller listens.
import express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { HttpError, sendError } from '../http/errors.js';
import type { Logger } from '../observability/logger.js';
import { StoreUnavailableError, type CategoryStore, type NewCategory } from './store.js';

export interface PetstoreAppOptions {
  store: CategoryStore;
  logger?: Logger;
}

export const NAME_MAX = 100;
export const DESCRIPTION_MAX = 1000;
export const BODY_LIMIT_BYTES = 64 * 1024;

interface Pet {
  id: number;
  name: string;
  categoryId: number;
}

// Pets are outside the spec; two fixed demo pets let the gateway's deprecation headers be tried on a 200.
const DEMO_PETS: ReadonlyMap<number, Pet> = new Map([
  [1, { id: 1, name: 'Rex', categoryId: 1 }],
  [2, { id: 2, name: 'Tom', categoryId: 2 }],
]);

/** Path ids: plain positive decimal integers that fit a JS number exactly; anything else is "no such resource". */
function parseId(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^[1-9][0-9]{0,15}$/.test(raw)) return undefined;
  const n = Number(raw);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** Counts code points, so an emoji is one character as a user would count it. */
function charLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** Returns the NewCategory, or throws invalid_request naming every offending field. */
export function validateNewCategory(body: unknown): NewCategory {
  // An empty body parses to {} (body-parser) or stays undefined (no body at all); both lack name.
  const input = body === undefined ? {} : body;
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new HttpError('invalid_request', 'request body must be a JSON object');
  }
  const obj = input as Record<string, unknown>;
  const problems: string[] = [];

  let name = '';
  if (!('name' in obj) || obj.name === undefined) problems.push('name: required');
  else if (typeof obj.name !== 'string') problems.push('name: must be a string');
  else {
    name = obj.name.trim();
    if (name === '') problems.push('name: must not be empty');
    else if (charLength(name) > NAME_MAX) problems.push(`name: must be at most ${NAME_MAX} characters`);
  }

  let description: string | undefined;
  if ('description' in obj && obj.description !== undefined) {
    if (typeof obj.description !== 'string') problems.push('description: must be a string');
    else if (charLength(obj.description) > DESCRIPTION_MAX) {
      problems.push(`description: must be at most ${DESCRIPTION_MAX} characters`);
    } else description = obj.description;
  }

  for (const key of Object.keys(obj)) {
    if (key !== 'name' && key !== 'description') problems.push(`unknown field ${JSON.stringify(key)}`);
  }

  if (problems.length > 0) throw new HttpError('invalid_request', problems.join('; '));
  return description === undefined ? { name } : { name, description };
}

function isJsonContentType(req: Request): boolean {
  const ct = req.headers['content-type'];
  return ct !== undefined && ct.split(';')[0]?.trim().toLowerCase() === 'application/json';
}

export function buildPetstoreApp({ store, logger }: PetstoreAppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Express 5 only parses ?a[b]=c with the extended parser; nothing here reads queries, keep it plain.
  app.set('query parser', 'simple');

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get('/readyz', async (_req, res) => {
    try {
      await store.ping();
      res.json({ status: 'ok' });
    } catch {
      sendError(res, 'service_unavailable', 'category store unavailable');
    }
  });

  app.get('/v1/categories', async (_req, res) => {
    res.json(await store.list());
  });

  app.post(
    '/v1/categories',
    (req, _res, next) => {
      // Checked before parsing so a non-JSON body is refused without being read.
      next(isJsonContentType(req) ? undefined : new HttpError('unsupported_media_type'));
    },
    express.json({ limit: BODY_LIMIT_BYTES, strict: false, type: () => true }),
    async (req, res) => {
      const created = await store.create(validateNewCategory(req.body));
      res.status(201).location(`/v1/categories/${created.id}`).json(created);
    },
  );

  app.get('/v1/categories/:id', async (req, res) => {
    const id = parseId(req.params.id);
    const found = id === undefined ? undefined : await store.get(id);
    if (!found) return sendError(res, 'not_found', 'category not found');
    res.json(found);
  });

  app.get('/v1/pets/:petId', (req, res) => {
    const id = parseId(req.params.petId);
    const pet = id === undefined ? undefined : DEMO_PETS.get(id);
    if (!pet) return sendError(res, 'not_found', 'pet not found');
    res.json(pet);
  });

  app.get('/v1/store/orders', (_req, res) => {
    res.json([]);
  });

  // Unknown paths and known paths with another method alike: the catalogue has no 405.
  app.use((_req, res) => {
    sendError(res, 'not_found');
  });

  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    if (err instanceof HttpError) return sendError(res, err.code, err.message);
    if (err instanceof StoreUnavailableError) {
      logger?.warn({ err: err.cause, method: req.method, path: req.path }, 'petstore: category store unavailable');
      return sendError(res, 'service_unavailable', 'category store unavailable');
    }
    const type = (err as { type?: unknown } | null)?.type;
    const status = (err as { status?: unknown } | null)?.status;
    switch (type) {
      case 'entity.parse.failed':
        return sendError(res, 'invalid_json');
      case 'entity.too.large':
        return sendError(res, 'payload_too_large', `request body must be at most ${BODY_LIMIT_BYTES} bytes`);
      case 'charset.unsupported':
        return sendError(res, 'unsupported_media_type', 'request body must be UTF-8 encoded application/json');
      case 'encoding.unsupported':
        return sendError(res, 'unsupported_media_type', 'unsupported Content-Encoding');
    }
    // The router cannot percent-decode a path parameter: no resource can have that id.
    if (err instanceof URIError) return sendError(res, 'not_found');
    // Other client-side errors Express raises itself (aborted or mis-sized body).
    if (typeof status === 'number' && status >= 400 && status < 500) return sendError(res, 'invalid_request', 'malformed request');
    logger?.error({ err, method: req.method, path: req.path }, 'petstore: unexpected error');
    sendError(res, 'internal_error');
  });

  return app;
}
