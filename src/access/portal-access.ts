// The consumer portal's rules of access: a platform's backend asks the admin API for a single-use sign-in link for one
// of its people (issueLink), who opens it within 15 minutes (exchange); or a consumer's person signs in with one of
// the consumer's keys (signIn). Either way a session: a random id in an HttpOnly cookie, stored only under its hash,
// for at most portal.sessionHours (never more than 24). A session is live while it has not expired, was not ended
// (signing out, or an ended mark: DELETE /consumers/{id}/portal-sessions, a suspension, a deletion), its consumer
// exists and is active, and for a key sign-in, while that key is still active and the consumer's. Links and
// sessions are judged on every use; nothing here trusts what a request says about who it is.
import { createHash, randomBytes } from 'node:crypto';
import type { ConsumerRecord } from '../consumers/types.js';
import type { StoredKey } from '../keys/types.js';
import type { VerifyResult } from '../keys/verifier.js';
import { systemClock, type Clock } from '../util/clock.js';
import { KEY_SESSION_SCOPES, PORTAL_SCOPES, type AccessStore, type PortalLink, type PortalScope, type PortalSession, type StoredSession } from './types.js';

/** How long a sign-in link can be exchanged. */
export const LINK_TTL_MS = 15 * 60_000;
/** The longest a session lives, whatever the config says. */
export const MAX_SESSION_HOURS = 24;
const HOUR_MS = 3_600_000;
/** How long an ended mark is kept: past it, nothing it could end is alive anyway (sessions end by 24 hours). */
export const ENDED_MARK_KEEP_MS = MAX_SESSION_HOURS * HOUR_MS + LINK_TTL_MS + 60_000;
/** An actor as the platform names them: 1-200 printable characters (no control, format or unassigned code point). */
export const PORTAL_ACTOR = /^[^\p{C}]{1,200}$/u;
/** A link code or session id as issued: 32 random bytes, base64url. */
const SECRET = /^[A-Za-z0-9_-]{43}$/;

export type AccessErrorCode = 'not_found' | 'consumer_suspended' | 'invalid_request';

/** A link that cannot be issued: an unknown or suspended consumer, or what was asked is not a link there can be. */
export class AccessError extends Error {
  constructor(
    readonly code: AccessErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface LinkRequest {
  consumer: string;
  actor: string;
  scopes: readonly PortalScope[];
  /** 1-24: the session's lifetime; never longer than portal.sessionHours. */
  sessionHours?: number;
}

/** What a key sign-in comes to: a session, or why not (an error code of the catalogue). */
export type SignInResult =
  { ok: true; session: PortalSession } | { ok: false; code: 'invalid_api_key' | 'forbidden' | 'consumer_suspended' | 'service_unavailable'; message?: string };

export interface PortalAccessDeps {
  store: AccessStore;
  clock?: Clock;
  /** Judges a presented key as the gateway does (KeyVerifier.verify): unknown, revoked, expired refused. */
  verifyKey(token: string): Promise<VerifyResult>;
  /** A key's stored record by id (KeyStore.get): a key session lives only while its key is active and the consumer's. */
  keyRecord(id: string): Promise<Pick<StoredKey, 'status' | 'consumer' | 'expiresAt'> | undefined>;
  /** A consumer's record as stored now (ConsumerStore.get), not a cached copy: a suspension applies at once. */
  consumer(id: string): Promise<Pick<ConsumerRecord, 'id' | 'status'> | undefined>;
  /** portal.sessionHours, read at each sign-in (a reload applies to the next one). */
  sessionHours(): number;
}

export class PortalAccess {
  private readonly store: AccessStore;
  private readonly clock: Clock;

  constructor(private readonly deps: PortalAccessDeps) {
    this.store = deps.store;
    this.clock = deps.clock ?? systemClock;
  }

  /**
   * A single-use sign-in link for one of the consumer's people: the code (returned once, stored only as its hash)
   * and what it grants. AccessError for an unknown consumer (not_found), a suspended one, or a bad actor or scopes.
   */
  async issueLink(req: LinkRequest): Promise<{ code: string; link: PortalLink }> {
    if (!PORTAL_ACTOR.test(req.actor)) throw new AccessError('invalid_request', 'actor: expected 1-200 printable characters');
    const scopes = [...new Set(req.scopes)];
    if (scopes.length === 0 || scopes.length !== req.scopes.length || !scopes.every((s) => PORTAL_SCOPES.includes(s)))
      throw new AccessError('invalid_request', `scopes: expected 1-4 distinct scopes of ${PORTAL_SCOPES.join(', ')}`);
    if (req.sessionHours !== undefined && !(Number.isInteger(req.sessionHours) && req.sessionHours >= 1 && req.sessionHours <= MAX_SESSION_HOURS))
      throw new AccessError('invalid_request', `sessionHours: expected an integer 1-${MAX_SESSION_HOURS}`);
    await this.requireActive(req.consumer);
    const code = randomBytes(32).toString('base64url');
    const now = this.clock.now();
    const link: PortalLink = {
      consumer: req.consumer,
      actor: req.actor,
      scopes,
      ...(req.sessionHours !== undefined ? { sessionHours: req.sessionHours } : {}),
      createdAt: now,
      expiresAt: now + LINK_TTL_MS,
    };
    await this.store.putLink(sha256(code), link, LINK_TTL_MS);
    return { code, link };
  }

  /**
   * Exchanges a link's code for a session, once: the link is taken from the store whatever follows, so a code works at
   * most one time on every instance together. Undefined: unknown, used, expired, ended by a mark, or its consumer is
   * gone or suspended.
   */
  async exchange(code: string): Promise<PortalSession | undefined> {
    if (!SECRET.test(code)) return undefined;
    const link = await this.store.takeLink(sha256(code));
    const now = this.clock.now();
    if (!link || now >= link.expiresAt) return undefined;
    if (await this.endedByMark(link.consumer, link.actor, link.createdAt)) return undefined;
    if ((await this.deps.consumer(link.consumer))?.status !== 'active') return undefined;
    const hours = Math.min(link.sessionHours ?? MAX_SESSION_HOURS, this.sessionHours());
    return this.open({ kind: 'link', consumer: link.consumer, actor: link.actor, scopes: link.scopes, createdAt: now, expiresAt: now + hours * HOUR_MS });
  }

  /** Signs in with a key of a consumer: reading scopes, that key only. */
  async signIn(token: string): Promise<SignInResult> {
    const verified = await this.deps.verifyKey(token);
    if (!verified.ok) {
      if (verified.reason === 'unavailable') return { ok: false, code: 'service_unavailable', message: 'The key store did not answer. Retry shortly.' };
      return { ok: false, code: 'invalid_api_key' };
    }
    const consumerId = verified.key.consumer;
    if (consumerId === undefined) return { ok: false, code: 'forbidden', message: 'The portal serves consumers: this key belongs to none.' };
    const consumer = await this.deps.consumer(consumerId);
    if (!consumer) return { ok: false, code: 'forbidden', message: 'The portal serves consumers: this key belongs to none.' };
    if (consumer.status !== 'active')
      return { ok: false, code: 'consumer_suspended', message: `The consumer ${consumerId} this API key belongs to is suspended.` };
    const now = this.clock.now();
    return {
      ok: true,
      session: await this.open({
        kind: 'key',
        consumer: consumerId,
        keyId: verified.key.id,
        scopes: [...KEY_SESSION_SCOPES],
        createdAt: now,
        expiresAt: now + this.sessionHours() * HOUR_MS,
      }),
    };
  }

  /** The live session the id names, or undefined (and an expired or ended one is removed). */
  async find(id: string): Promise<PortalSession | undefined> {
    if (!SECRET.test(id)) return undefined;
    const idHash = sha256(id);
    const stored = await this.store.getSession(idHash);
    if (!stored) return undefined;
    if (!(await this.live(stored))) {
      await this.store.deleteSession(idHash);
      return undefined;
    }
    return { id, ...stored };
  }

  /** Ends one session (signing out). */
  async end(id: string): Promise<void> {
    if (SECRET.test(id)) await this.store.deleteSession(sha256(id));
  }

  /**
   * Ends every session and unused link of the consumer, or of one actor's (link sessions of that actor), on every
   * instance at once. Returns when (epoch ms): what was created at or before it is ended.
   */
  async endSessions(consumer: string, actor?: string): Promise<number> {
    const at = this.clock.now();
    await this.store.markEnded(consumer, actor, at, ENDED_MARK_KEEP_MS);
    return at;
  }

  private async live(s: StoredSession): Promise<boolean> {
    if (this.clock.now() >= s.expiresAt) return false;
    if (await this.endedByMark(s.consumer, s.kind === 'link' ? s.actor : undefined, s.createdAt)) return false;
    if ((await this.deps.consumer(s.consumer))?.status !== 'active') return false;
    if (s.kind === 'key') {
      const key = s.keyId === undefined ? undefined : await this.deps.keyRecord(s.keyId);
      if (!key || key.status !== 'active' || key.consumer !== s.consumer) return false;
      if (key.expiresAt !== undefined && Date.parse(key.expiresAt) <= this.clock.now()) return false;
    }
    return true;
  }

  private async endedByMark(consumer: string, actor: string | undefined, createdAt: number): Promise<boolean> {
    const marks = await this.store.endedMarks(consumer, actor);
    return (marks.all !== undefined && createdAt <= marks.all) || (marks.actor !== undefined && createdAt <= marks.actor);
  }

  private async open(session: StoredSession): Promise<PortalSession> {
    const id = randomBytes(32).toString('base64url');
    await this.store.putSession(sha256(id), session, session.expiresAt - session.createdAt);
    return { id, ...session };
  }

  private async requireActive(consumerId: string): Promise<void> {
    const consumer = await this.deps.consumer(consumerId);
    if (!consumer) throw new AccessError('not_found', `no consumer with id "${consumerId}"`);
    if (consumer.status !== 'active') throw new AccessError('consumer_suspended', `The consumer ${consumerId} is suspended: no sign-in link is issued for it.`);
  }

  private sessionHours(): number {
    return Math.min(MAX_SESSION_HOURS, Math.max(1, Math.floor(this.deps.sessionHours())));
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
