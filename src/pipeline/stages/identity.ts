// Identity: who is calling, from the credential the request presents (authenticate), and the 401 for a request that
// needs a key and has no valid one by the time the anonymous limits have had their say (requireApiKey).
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { sendError } from '../../http/errors.js';
import type { AuthScheme } from '../../identity/auth-scheme.js';
import type { Logger } from '../../observability/logger.js';

/**
 * 4. Finds out who is calling: the scheme reads the credential the request presents and verifies it (the API key from
 * the configured sources: identity/api-key-scheme.ts); only a store that cannot answer is answered here (503, never
 * a 401).
 */
export function authenticate(scheme: AuthScheme, logger: Logger): RequestHandler {
  return async function authenticateStage(req, res, next) {
    const ctx = req.ctx;
    const span = ctx.trace?.start('tollgate.authenticate');
    const outcome = await scheme.verify(scheme.read(req, ctx), ctx);
    if (span) ctx.trace!.end(span, typeof outcome === 'object' ? 'consumer' : outcome, outcome === 'unavailable');
    if (typeof outcome === 'object') ctx.caller = outcome;
    else if (outcome === 'unavailable' && ctx.matchedRoute?.auth === 'none') {
      // A public route serves requests without a key: this one is metered as one (by its address) rather than refused.
      logger.warn({ reqId: req.id }, 'api key could not be verified on a public route (key store unavailable): metered by address');
      ctx.authFailure = 'invalid_api_key';
    } else if (outcome === 'unavailable') {
      // The key may be fine: the store did not answer. Not a 401, which would tell the client its key is wrong.
      logger.warn({ reqId: req.id }, 'api key could not be verified: key store unavailable');
      return sendError(res, 'service_unavailable', 'The API key could not be verified right now. Retry shortly.');
    } else ctx.authFailure = outcome;
    next();
  };
}

/** 6. 401 for whoever has no valid key by now (the anonymous limit let them through). */
export function requireApiKey(req: Request, res: Response, next: NextFunction): void {
  const ctx = req.ctx;
  if (ctx.caller) return next();
  const code = ctx.authFailure;
  res.setHeader('www-authenticate', code === 'missing_api_key' ? 'Bearer realm="tollgate"' : 'Bearer realm="tollgate", error="invalid_token"');
  const sources = ctx.keySources;
  if (code === 'missing_api_key' && sources && !sources.bearerOnly) return sendError(res, code, `An API key is required: send ${sources.howToSend}.`);
  sendError(res, code, code === 'invalid_api_key' ? ctx.authFailureMessage : undefined);
}

/**
 * The store no longer accepts the key authentication found (revoked, rotated past its grace, unreadable since it was
 * cached): the request is answered as one without a valid key, 401.
 */
export function disownKey(req: Request, res: Response, next: NextFunction): void {
  req.ctx.caller = undefined;
  req.ctx.authFailure = 'invalid_api_key';
  requireApiKey(req, res, next);
}
