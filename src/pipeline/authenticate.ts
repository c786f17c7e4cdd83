// Stage 1 of the request path: bearer API key authentication (RFC 6750).
// `authenticate` only finds out who is calling; `requireConsumer` answers 401 to whoever is not a valid key,
// so the anonymous per-IP limit can sit between the two. A client the anonymous limit is already refusing gets no
// key-store read for a key this instance does not know: it could only have been answered 429 anyway.
import type { NextFunction, Request, Response } from 'express';
import { sendError, type ErrorCode } from '../http/errors.js';
import type { KeyService } from '../keys/service.js';
import type { Logger } from '../observability/logger.js';

export interface Consumer {
  id: string;
  plan: string;
  perMinute?: number;
  perDay?: number;
  /** SHA-256 of the key presented, for keys from the key store (not static ones): the limit check re-validates it. */
  keyHash?: string;
  /** The cached key record's revision, when the copy is due for confirmation: the limit check compares it. */
  keyRevision?: string;
}

/** Scheme case-insensitive; the token is token68 (RFC 6750 §2.1). */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const BEARER_SCHEME = /^Bearer(?: |$)/i;

export type BearerParse = { kind: 'missing' } | { kind: 'malformed' } | { kind: 'token'; token: string };

export function parseBearer(header: string | undefined): BearerParse {
  // No Authorization, or another scheme (Basic, ...): no bearer credentials were offered.
  if (!header || !BEARER_SCHEME.test(header)) return { kind: 'missing' };
  const m = BEARER.exec(header);
  return m?.[1] ? { kind: 'token', token: m[1] } : { kind: 'malformed' };
}

/** The anonymous limit's memory of whom it refuses (AnonymousLimiter): when the refusal ends, or 0. */
export interface RefusedClients {
  refusedUntil(req: Request): number;
}

export function authenticate(keys: KeyService, logger: Logger, refused?: RefusedClients) {
  // Asked only on a key-cache miss (the store read a guessed key would cost), never for a cached key: made once
  // here, so a request allocates nothing for it. Why a refusal is skipped is told to the anonymous stage, which
  // answers 429 from that without asking Redis again.
  const lookupGate = refused
    ? (res: Response): boolean => {
        const until = refused.refusedUntil(res.req);
        if (until === 0) return true;
        res.locals.anonymousRefusedUntil = until;
        return false;
      }
    : undefined;
  return async function authenticateStage(req: Request, res: Response, next: NextFunction): Promise<void> {
    const parsed = parseBearer(req.headers.authorization);
    if (parsed.kind === 'missing') {
      res.locals.authFailure = 'missing_api_key' satisfies ErrorCode;
      return next();
    }
    if (parsed.kind === 'malformed') {
      res.locals.authFailure = 'invalid_api_key' satisfies ErrorCode;
      return next();
    }
    const result = await keys.verify(parsed.token, lookupGate, res);
    // Time spent reading the key store (a cache miss) comes out of the request's Redis budget for the limit check.
    if (result.storeMs !== undefined) res.locals.redisSpentMs = result.storeMs;
    if (result.ok) {
      const k = result.key;
      const consumer: Consumer = { id: k.id, plan: k.plan };
      if (k.perMinute !== undefined) consumer.perMinute = k.perMinute;
      if (k.perDay !== undefined) consumer.perDay = k.perDay;
      if (result.keyHash !== undefined) consumer.keyHash = result.keyHash;
      if (result.revision !== undefined) consumer.keyRevision = result.revision;
      res.locals.consumer = consumer;
      return next();
    }
    if (result.reason === 'unavailable') {
      // The key may be fine: the store did not answer. Not a 401, which would tell the client its key is wrong.
      logger.warn({ reqId: req.id }, 'api key could not be verified: key store unavailable');
      return sendError(res, 'service_unavailable', 'The API key could not be verified right now. Retry shortly.');
    }
    res.locals.authFailure = 'invalid_api_key' satisfies ErrorCode;
    next();
  };
}

export function requireConsumer(_req: Request, res: Response, next: NextFunction): void {
  if (res.locals.consumer) return next();
  const code = (res.locals.authFailure as ErrorCode | undefined) ?? 'missing_api_key';
  res.setHeader('www-authenticate', code === 'missing_api_key' ? 'Bearer realm="tollgate"' : 'Bearer realm="tollgate", error="invalid_token"');
  sendError(res, code);
}
