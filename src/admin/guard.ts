// Who may use the admin API: a bearer admin token (src/admin/tokens.ts), or the dashboard's session cookie that a
// token was exchanged for (src/dashboard/sessions.ts), and not too many wrong tokens. Failed checks are counted per
// client address with rate-limiter-flexible's memory limiter; an address past admin.maxFailuresPerMinute is
// answered 429 until its minute ends, with a right token too, so a token cannot be guessed faster than that. The
// admin listener takes the socket's address (no proxy headers are believed there). A change made with the cookie
// must come from the dashboard's own origin (the Origin header), so another site cannot make a browser send one.
import type { Request, RequestHandler, Response } from 'express';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { sendError } from '../http/errors.js';
import { formatRetryAfter, H } from '../http/headers.js';
import type { Metrics } from '../observability/metrics.js';
import { cookieValue, SESSION_COOKIE, SESSION_TTL_MS, type Sessions } from '../dashboard/sessions.js';
import type { AdminTokens } from './tokens.js';

const BEARER = /^Bearer +([\x21-\x7e]{1,512}) *$/i;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export class AdminGuard {
  private readonly failures: RateLimiterMemory;

  constructor(
    private readonly tokens: AdminTokens,
    private readonly maxFailuresPerMinute: number,
    private readonly metrics: Pick<Metrics, 'adminAuthFailures'>,
    private readonly sessions: Sessions,
  ) {
    this.failures = new RateLimiterMemory({ points: maxFailuresPerMinute, duration: 60 });
  }

  /** Every admin API route: a bearer token, or a live session cookie (and for a change, the dashboard's Origin). */
  readonly requireAdmin: RequestHandler = async (req, res, next) => {
    if (await this.refusedAsThrottled(req, res)) return;
    const header = req.headers.authorization;
    if (header === undefined) {
      const session = this.sessions.find(cookieValue(req.headers.cookie, SESSION_COOKIE));
      if (session) {
        if (!SAFE_METHODS.has(req.method) && !sameOrigin(req))
          return sendError(res, 'forbidden', 'A change with the dashboard session must come from the dashboard itself (Origin).');
        req.adminTokenId = session.tokenId;
        return next();
      }
    }
    const presented = header === undefined ? undefined : BEARER.exec(header)?.[1];
    const tokenId = presented === undefined ? undefined : this.tokens.verify(presented);
    if (tokenId !== undefined) {
      req.adminTokenId = tokenId;
      return next();
    }
    res.setHeader('www-authenticate', header === undefined ? 'Bearer realm="tollgate-admin"' : 'Bearer realm="tollgate-admin", error="invalid_token"');
    if (header === undefined) {
      this.metrics.adminAuthFailures.inc({ reason: 'missing' });
      return sendError(res, 'missing_admin_token');
    }
    await this.failed(req, res, 'invalid_admin_token');
  };

  /** POST /session {token}: a right token opens a session (cookie); a wrong one counts as a failure like any other. */
  readonly signIn: RequestHandler = async (req, res) => {
    if (await this.refusedAsThrottled(req, res)) return;
    if (req.headers.origin !== undefined && !sameOrigin(req)) return sendError(res, 'forbidden', 'Sign in from the dashboard itself (Origin).');
    const token = (req.body as { token?: unknown } | undefined)?.token;
    const tokenId = typeof token === 'string' && token.length <= 512 ? this.tokens.verify(token) : undefined;
    if (tokenId === undefined) return this.failed(req, res, 'invalid_admin_token');
    const { id } = this.sessions.open(tokenId);
    res.cookie(SESSION_COOKIE, id, { httpOnly: true, sameSite: 'strict', path: '/', maxAge: SESSION_TTL_MS });
    res.status(204).end();
  };

  /** POST /session/end: forgets the session and clears the cookie. */
  readonly signOut: RequestHandler = (req, res) => {
    if (req.headers.origin !== undefined && !sameOrigin(req)) return sendError(res, 'forbidden', 'Sign out from the dashboard itself (Origin).');
    this.sessions.close(cookieValue(req.headers.cookie, SESSION_COOKIE));
    res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', path: '/' });
    res.status(204).end();
  };

  private async refusedAsThrottled(req: Request, res: Response): Promise<boolean> {
    const seen = await this.failures.get(req.socket.remoteAddress ?? 'unknown');
    if (!seen || seen.consumedPoints < this.maxFailuresPerMinute) return false;
    this.throttled(res, seen.msBeforeNext);
    return true;
  }

  private async failed(req: Request, res: Response, code: 'invalid_admin_token'): Promise<void> {
    this.metrics.adminAuthFailures.inc({ reason: 'invalid' });
    try {
      await this.failures.consume(req.socket.remoteAddress ?? 'unknown');
    } catch (err) {
      if (err instanceof RateLimiterRes) return this.throttled(res, err.msBeforeNext);
      throw err;
    }
    sendError(res, code);
  }

  private throttled(res: Response, msBeforeNext: number): void {
    this.metrics.adminAuthFailures.inc({ reason: 'throttled' });
    res.setHeader(H.retryAfter, formatRetryAfter(msBeforeNext));
    sendError(res, 'rate_limit_exceeded', `Too many failed admin token checks from this address. Retry after ${formatRetryAfter(msBeforeNext)} seconds.`);
  }
}

/** Whether the request's Origin is this listener's own (http://<Host>): what a page the dashboard served sends. */
function sameOrigin(req: Request): boolean {
  const origin = req.headers.origin;
  const host = req.headers.host;
  return origin !== undefined && host !== undefined && (origin === `http://${host}` || origin === `https://${host}`);
}

declare module 'node:http' {
  interface IncomingMessage {
    /** The admin token the request authenticated with (its id), on the admin listener. */
    adminTokenId?: string;
  }
}
