// Who may use the admin API: a bearer admin token (src/admin/tokens.ts), and not too many wrong ones. Failed checks
// are counted per client address with rate-limiter-flexible's memory limiter; an address past
// admin.maxFailuresPerMinute is answered 429 until its minute ends, with a right token too, so a token cannot be
// guessed faster than that. The admin listener takes the socket's address (no proxy headers are believed there).
import type { RequestHandler } from 'express';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { sendError } from '../http/errors.js';
import { formatRetryAfter, H } from '../http/headers.js';
import type { Metrics } from '../observability/metrics.js';
import type { AdminTokens } from './tokens.js';

const BEARER = /^Bearer +([\x21-\x7e]{1,512}) *$/i;

export function requireAdminToken(tokens: AdminTokens, maxFailuresPerMinute: number, metrics: Pick<Metrics, 'adminAuthFailures'>): RequestHandler {
  const failures = new RateLimiterMemory({ points: maxFailuresPerMinute, duration: 60 });
  const throttled = (res: Parameters<RequestHandler>[1], msBeforeNext: number): void => {
    metrics.adminAuthFailures.inc({ reason: 'throttled' });
    res.setHeader(H.retryAfter, formatRetryAfter(msBeforeNext));
    sendError(res, 'rate_limit_exceeded', `Too many failed admin token checks from this address. Retry after ${formatRetryAfter(msBeforeNext)} seconds.`);
  };
  return async function adminTokenStage(req, res, next) {
    const address = req.socket.remoteAddress ?? 'unknown';
    const seen = await failures.get(address);
    if (seen && seen.consumedPoints >= maxFailuresPerMinute) return throttled(res, seen.msBeforeNext);
    const header = req.headers.authorization;
    const presented = header === undefined ? undefined : BEARER.exec(header)?.[1];
    const tokenId = presented === undefined ? undefined : tokens.verify(presented);
    if (tokenId !== undefined) {
      req.adminTokenId = tokenId;
      return next();
    }
    res.setHeader('www-authenticate', header === undefined ? 'Bearer realm="tollgate-admin"' : 'Bearer realm="tollgate-admin", error="invalid_token"');
    if (header === undefined) {
      metrics.adminAuthFailures.inc({ reason: 'missing' });
      return sendError(res, 'missing_admin_token');
    }
    metrics.adminAuthFailures.inc({ reason: 'invalid' });
    try {
      await failures.consume(address);
    } catch (err) {
      if (err instanceof RateLimiterRes) return throttled(res, err.msBeforeNext);
      throw err;
    }
    sendError(res, 'invalid_admin_token');
  };
}

declare module 'node:http' {
  interface IncomingMessage {
    /** The admin token the request authenticated with (its id), on the admin listener. */
    adminTokenId?: string;
  }
}
