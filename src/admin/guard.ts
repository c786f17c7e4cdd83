// Who may use the admin API: a bearer admin token (src/admin/tokens.ts), or the dashboard's session cookie that a
// token was exchanged for (src/admin/sessions.ts) while that token is still in force. Wrong tokens are counted
// per client address with rate-limiter-flexible's memory limiter; past admin.maxFailuresPerMinute (read per request,
// so a reload applies) a wrong or missing credential is answered 429 until the address's minute ends. A right token
// or a live session is never refused by the throttle: admins behind one address (the TLS proxy in front of the
// listener) are not locked out by someone else's wrong guesses. The admin listener takes the socket's address (no
// proxy headers are believed there). A change made with the cookie must come from the dashboard's own origin (the
// Origin header), so another site cannot make a browser send one.
import type { Request, RequestHandler, Response } from 'express';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { sendError } from '../http/errors.js';
import { formatRetryAfter, H } from '../http/headers.js';
import type { Metrics } from '../observability/metrics.js';
import { cookieValue, SESSION_COOKIE, SESSION_TTL_MS, type Session, type Sessions } from './sessions.js';
import type { AdminTokens } from './tokens.js';

const BEARER = /^Bearer +([\x21-\x7e]{1,512}) *$/i;
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export class AdminGuard {
  // Only counts: whether an address is past the limit is decided here, against the limit in force now.
  private readonly failures = new RateLimiterMemory({ points: Number.MAX_SAFE_INTEGER, duration: 60 });

  constructor(
    private readonly tokens: AdminTokens,
    private readonly maxFailuresPerMinute: () => number,
    private readonly metrics: Pick<Metrics, 'adminAuthFailures'>,
    private readonly sessions: Sessions,
  ) {}

  /** Every admin API route: a bearer token, or a live session cookie (and for a change, the dashboard's Origin). */
  readonly requireAdmin: RequestHandler = async (req, res, next) => {
    const header = req.headers.authorization;
    if (header === undefined) {
      const session = this.liveSession(req);
      if (session) {
        if (!SAFE_METHODS.has(req.method) && !sameOrigin(req))
          return sendError(res, 'forbidden', 'A change with the dashboard session must come from the dashboard itself (Origin).');
        req.adminTokenId = session.tokenId;
        return next();
      }
    }
    const presented = header === undefined ? undefined : BEARER.exec(header)?.[1];
    const token = presented === undefined ? undefined : this.tokens.verify(presented);
    if (token !== undefined) {
      req.adminTokenId = token.id;
      return next();
    }
    if (await this.refusedAsThrottled(req, res)) return;
    res.setHeader('www-authenticate', header === undefined ? 'Bearer realm="tollgate-admin"' : 'Bearer realm="tollgate-admin", error="invalid_token"');
    if (header === undefined) {
      this.metrics.adminAuthFailures.inc({ reason: 'missing' });
      return sendError(res, 'missing_admin_token');
    }
    await this.failed(req, res, 'invalid_admin_token');
  };

  /** POST /session {token}: a right token opens a session (cookie); a wrong one counts as a failure like any other. */
  readonly signIn: RequestHandler = async (req, res) => {
    if (req.headers.origin !== undefined && !sameOrigin(req)) return sendError(res, 'forbidden', 'Sign in from the dashboard itself (Origin).');
    const presented = (req.body as { token?: unknown } | undefined)?.token;
    const token = typeof presented === 'string' && presented.length <= 512 ? this.tokens.verify(presented) : undefined;
    if (token === undefined) {
      if (await this.refusedAsThrottled(req, res)) return;
      return this.failed(req, res, 'invalid_admin_token');
    }
    const { id } = this.sessions.open(token);
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

  /** Ends every session opened with a token no longer in force (after a reload). */
  endSessionsOfRevokedTokens(): void {
    this.sessions.closeWhere((s) => !this.tokens.holds(s.token));
  }

  /** The request's session, if it is live and the token it was opened with is still in force (else it is ended). */
  private liveSession(req: Request): Session | undefined {
    const id = cookieValue(req.headers.cookie, SESSION_COOKIE);
    const session = this.sessions.find(id);
    if (!session || this.tokens.holds(session.token)) return session;
    this.sessions.close(id);
    return undefined;
  }

  private async refusedAsThrottled(req: Request, res: Response): Promise<boolean> {
    const seen = await this.failures.get(req.socket.remoteAddress ?? 'unknown');
    if (!seen || seen.consumedPoints < this.maxFailuresPerMinute()) return false;
    this.throttled(res, seen.msBeforeNext);
    return true;
  }

  /** A wrong token: counted, then 401, or 429 once it is past the address's limit for this minute. */
  private async failed(req: Request, res: Response, code: 'invalid_admin_token'): Promise<void> {
    this.metrics.adminAuthFailures.inc({ reason: 'invalid' });
    const seen = await this.failures.penalty(req.socket.remoteAddress ?? 'unknown', 1);
    if (seen.consumedPoints > this.maxFailuresPerMinute()) return this.throttled(res, seen.msBeforeNext);
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
