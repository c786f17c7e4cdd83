// Dashboard sessions: an admin token, checked once at sign-in, exchanged for a random session id the browser keeps in
// an HttpOnly, SameSite=Strict cookie, so the page's script never holds the token. Sessions live in this process's
// memory (a restart, or another worker, signs the browser out) and end after SESSION_TTL_MS or at sign-out. Each
// remembers the token it was opened with, so that the admin guard ends it once a reload takes that token away. They
// live in admin/ beside the guard that honours them: a session opens the admin API, whichever page signed in.
import { randomBytes } from 'node:crypto';

export const SESSION_COOKIE = 'tollgate_session';
/** How long a dashboard session lasts from sign-in. */
export const SESSION_TTL_MS = 8 * 3_600_000;
/** Most sessions held at once; past it the oldest is dropped (a flood of sign-ins cannot grow memory). */
const MAX_SESSIONS = 10_000;

export interface Session {
  /** The admin token's id it was opened with: audit lines name it. */
  tokenId: string;
  /** The token it was opened with (id and SHA-256): the session is live only while that token is in force. */
  token: { readonly id: string; readonly sha256: string };
  expiresAt: number;
}

export class Sessions {
  private readonly byId = new Map<string, Session>();

  constructor(private readonly now: () => number = Date.now) {}

  open(token: Session['token']): { id: string; session: Session } {
    if (this.byId.size >= MAX_SESSIONS) this.byId.delete(this.byId.keys().next().value!);
    const id = randomBytes(32).toString('base64url');
    const session = { tokenId: token.id, token, expiresAt: this.now() + SESSION_TTL_MS };
    this.byId.set(id, session);
    return { id, session };
  }

  /** The live session of a cookie value, or undefined (unknown or expired: an expired one is forgotten). */
  find(id: string | undefined): Session | undefined {
    if (!id) return undefined;
    const s = this.byId.get(id);
    if (s && s.expiresAt <= this.now()) {
      this.byId.delete(id);
      return undefined;
    }
    return s;
  }

  close(id: string | undefined): void {
    if (id) this.byId.delete(id);
  }

  /** Ends every session `ended` says is over. */
  closeWhere(ended: (s: Session) => boolean): void {
    for (const [id, s] of this.byId) if (ended(s)) this.byId.delete(id);
  }
}

/** One cookie's value from a Cookie header. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
