// Admin tokens: how the admin API knows its callers. The config holds each token's SHA-256 (never the token), with an
// id that audit lines name; TOLLGATE_ADMIN_TOKEN may add one from the environment (id "env"). A bearer token is
// hashed and compared with every configured hash in constant time, so the answer's timing tells nothing of how
// close a guess came or which token it resembled. A reload replaces the configured tokens (replace()): a token no
// longer listed, or listed with another hash, stops opening the API at once, and so do the sessions it opened (holds()).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ADMIN_TOKEN_PREFIX } from '../http/credentials.js';

export interface AdminTokenConfig {
  id: string;
  sha256: string;
}

/** The id the environment's token (TOLLGATE_ADMIN_TOKEN) is known by in audit lines. */
export const ENV_TOKEN_ID = 'env';

export function hashAdminToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A new admin token: the prefix and 256 bits of randomness, base64url. */
export function generateAdminToken(): string {
  return `${ADMIN_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** A token in force as verify() found it: what a dashboard session remembers it was opened with. */
export interface AdminCredential {
  readonly id: string;
  readonly sha256: string;
}

interface Entry {
  id: string;
  sha256: string;
  hash: Buffer;
}

export class AdminTokens {
  private entries: readonly Entry[] = [];
  private readonly envEntry: Entry | undefined;

  constructor(configured: readonly AdminTokenConfig[], envToken?: string) {
    if (envToken) {
      const sha256 = hashAdminToken(envToken);
      this.envEntry = { id: ENV_TOKEN_ID, sha256, hash: Buffer.from(sha256, 'hex') };
    }
    this.replace(configured);
  }

  /** The configured tokens in force from now on (a reload); the environment's token stays, as the process's env does. */
  replace(configured: readonly AdminTokenConfig[]): void {
    const entries: Entry[] = configured.map((t) => ({ id: t.id, sha256: t.sha256, hash: Buffer.from(t.sha256, 'hex') }));
    if (this.envEntry) entries.push(this.envEntry);
    this.entries = entries;
  }

  /** Whether any token is configured: without one the admin API does not start. */
  get any(): boolean {
    return this.entries.length > 0;
  }

  get ids(): string[] {
    return this.entries.map((e) => e.id);
  }

  /** The token `presented` is, or undefined. Every configured hash is compared, whichever matches. */
  verify(presented: string): AdminCredential | undefined {
    const hash = createHash('sha256').update(presented, 'utf8').digest();
    let found: AdminCredential | undefined;
    for (const e of this.entries) if (timingSafeEqual(hash, e.hash) && found === undefined) found = { id: e.id, sha256: e.sha256 };
    return found;
  }

  /**
   * Whether a token verify() found earlier is still in force: the same id with the same hash. (Not a secret check: the
   * session id that led to it was the secret.)
   */
  holds(credential: AdminCredential): boolean {
    return this.entries.some((e) => e.id === credential.id && e.sha256 === credential.sha256);
  }
}
