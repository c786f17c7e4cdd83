// What the consumer portal's access is made of: the scopes a session may hold, a single-use sign-in link as stored, a
// session, and the AccessStore interface (a Redis and a memory implementation, I/O only). The rules over them (who
// may sign in, when a link or session is live) are portal-access.ts's.

/** What a portal session may do: read keys, change keys, read usage, register webhook endpoints. */
export type PortalScope = 'keys:read' | 'keys:write' | 'usage:read' | 'webhooks:write';

export const PORTAL_SCOPES: readonly PortalScope[] = ['keys:read', 'keys:write', 'usage:read', 'webhooks:write'];

/** What a key sign-in gets: reading, and only about that key. Never a :write scope. */
export const KEY_SESSION_SCOPES: readonly PortalScope[] = ['keys:read', 'usage:read'];

export function isPortalScope(value: unknown): value is PortalScope {
  return typeof value === 'string' && (PORTAL_SCOPES as readonly string[]).includes(value);
}

/** A signed-in consumer's person, as the portal knows them for the life of the session. */
export interface PortalSession {
  /** The cookie value (never stored in clear: the store's name for the session hashes it). */
  id: string;
  kind: 'key' | 'link';
  consumer: string;
  /** kind 'key': the key that signed in (the session sees that key only). */
  keyId?: string;
  /** kind 'link': who, as the platform that asked for the link knows them (1-200 printable characters). */
  actor?: string;
  /** kind 'key': ['keys:read', 'usage:read']; kind 'link': what the link granted. */
  scopes: PortalScope[];
  /** Epoch ms. */
  createdAt: number;
  expiresAt: number;
}

/** A session as stored: everything but its id. */
export type StoredSession = Omit<PortalSession, 'id'>;

/** A sign-in link as stored under the hash of its code, until it is exchanged or expires (15 minutes). */
export interface PortalLink {
  consumer: string;
  actor: string;
  scopes: PortalScope[];
  /** The session's lifetime in hours the link asked for (never past portal.sessionHours); absent: that setting. */
  sessionHours?: number;
  /** Epoch ms. */
  createdAt: number;
  expiresAt: number;
}

/**
 * When a consumer's sessions and unused links were last ended, epoch ms: `all` for every one of them, `actor` for
 * one actor's. Something created at or before a mark that applies to it is ended.
 */
export interface EndedMarks {
  all?: number;
  actor?: number;
}

/**
 * Storage for links, sessions and ended marks. Names are hashes (sha256 hex) of the code or session id, so the store
 * never holds a secret that opens anything. Every operation touches one key (Redis Cluster works).
 */
export interface AccessStore {
  /** Stores a link under its code's hash for ttlMs. */
  putLink(codeHash: string, link: PortalLink, ttlMs: number): Promise<void>;
  /** Reads and removes a link in one step (single use, atomic across instances); undefined if none (or unreadable). */
  takeLink(codeHash: string): Promise<PortalLink | undefined>;
  /** Stores a session under its id's hash for ttlMs. */
  putSession(idHash: string, session: StoredSession, ttlMs: number): Promise<void>;
  getSession(idHash: string): Promise<StoredSession | undefined>;
  deleteSession(idHash: string): Promise<void>;
  /** Writes an ended mark at `at` (epoch ms) for every session of the consumer, or for one actor's; kept for keepMs. */
  markEnded(consumer: string, actor: string | undefined, at: number, keepMs: number): Promise<void>;
  /** The marks that apply to the consumer (and to the actor, when given): one read. */
  endedMarks(consumer: string, actor: string | undefined): Promise<EndedMarks>;
}
