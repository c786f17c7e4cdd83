// Who a portal request is for: the session cookie (tollgate_portal) names a live session (src/access/portal-access.ts
// decides what is live: not expired, not ended by a mark, its consumer still there and active), which is set on the
// request as req.portalSession; without one, /api answers 401 portal_session_required. Headers are never believed
// for identity. A change (POST, PATCH, DELETE) must be JSON and, when the browser names an Origin, come from the
// portal's own: beside SameSite=Strict, a page elsewhere cannot make a browser change anything here. requireScope
// guards each route by what the session may do.
import type { Request, RequestHandler, Response } from 'express';
import type { PortalScope, PortalSession } from '../access/types.js';
import { cookieValue } from '../admin/sessions.js';
import { sendError } from '../http/errors.js';

/** The portal's session cookie: its value is the session id (32 random bytes, base64url). */
export const PORTAL_COOKIE = 'tollgate_portal';

/** What the guard needs of PortalAccess. */
export interface SessionFinder {
  /** The live session the id names, or undefined. */
  find(id: string): Promise<PortalSession | undefined>;
}

const CHANGES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** A session id as issued: 32 bytes base64url (43 characters); anything else names no session. */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

/** The session id the request's cookie carries, when it is shaped like one. */
export function sessionIdOf(req: Request): string | undefined {
  const id = cookieValue(req.headers.cookie, PORTAL_COOKIE);
  return id !== undefined && SESSION_ID.test(id) ? id : undefined;
}

/** Sets req.portalSession from the cookie, or answers 401 portal_session_required. */
export function sessionGuard(access: SessionFinder): RequestHandler {
  return async (req, res, next) => {
    const id = sessionIdOf(req);
    const session = id === undefined ? undefined : await access.find(id);
    if (!session) return sendError(res, 'portal_session_required');
    req.portalSession = session;
    next();
  };
}

/**
 * Changes only as JSON and from the portal's own origin: `Origin`, when sent, must be http(s)://<Host> or the
 * configured public URL's origin; otherwise 403 forbidden. A body-less change still says application/json.
 */
export function changeGuard(publicOrigin: string | undefined): RequestHandler {
  return (req, res, next) => {
    if (!CHANGES.has(req.method)) return next();
    const type = req.headers['content-type'];
    if (type === undefined || !/^application\/json\s*(;|$)/i.test(type))
      return sendError(res, 'forbidden', 'A change to the portal must be sent as application/json.');
    const origin = req.headers.origin;
    if (origin !== undefined && !ownOrigin(origin, req.headers.host, publicOrigin))
      return sendError(res, 'forbidden', 'A change to the portal must come from the portal itself (Origin).');
    next();
  };
}

function ownOrigin(origin: string, host: string | undefined, publicOrigin: string | undefined): boolean {
  if (publicOrigin !== undefined && origin === publicOrigin) return true;
  return host !== undefined && (origin === `http://${host}` || origin === `https://${host}`);
}

/** 403 portal_scope_denied unless the session holds the scope (after sessionGuard). */
export function requireScope(scope: PortalScope): RequestHandler {
  return (req, res, next) => {
    if (req.portalSession?.scopes.includes(scope)) return next();
    sendError(res, 'portal_scope_denied', `This portal session does not hold the ${scope} scope.`);
  };
}

/** Sets a new session's cookie: HttpOnly, SameSite=Strict, Path=/, for the session's life; Secure over TLS. */
export function setSessionCookie(res: Response, session: Pick<PortalSession, 'id' | 'createdAt' | 'expiresAt'>, secure: boolean): void {
  res.cookie(PORTAL_COOKIE, session.id, {
    httpOnly: true,
    sameSite: 'strict',
    path: '/',
    maxAge: session.expiresAt - session.createdAt,
    ...(secure ? { secure: true } : {}),
  });
}

export function clearSessionCookie(res: Response, secure: boolean): void {
  res.clearCookie(PORTAL_COOKIE, { httpOnly: true, sameSite: 'strict', path: '/', ...(secure ? { secure: true } : {}) });
}

declare module 'node:http' {
  interface IncomingMessage {
    /** On the portal listener, after the session guard: the live session the request came with. */
    portalSession?: PortalSession;
  }
}
