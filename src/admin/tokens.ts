// Admin tokens: how the admin API knows its callers. The config holds each token's SHA-256 (never the token), with an
// id that audit lines name; TOLLGATE_ADMIN_TOKEN may add one from the environment (id "env"). A bearer token is
// hashed and compared with every configured hash in constant time, so the answer's timing tells nothing of how
// close a guess came or which token it resembled.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Admin tokens are told apart from API keys (tg_...) at a glance, and a gateway key never has this shape. */
export const ADMIN_TOKEN_PREFIX = 'tga_';

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

export class AdminTokens {
  private readonly entries: ReadonlyArray<{ id: string; hash: Buffer }>;

  constructor(configured: readonly AdminTokenConfig[], envToken?: string) {
    const entries = configured.map((t) => ({ id: t.id, hash: Buffer.from(t.sha256, 'hex') }));
    if (envToken) entries.push({ id: ENV_TOKEN_ID, hash: Buffer.from(hashAdminToken(envToken), 'hex') });
    this.entries = entries;
  }

  /** Whether any token is configured: without one the admin API does not start. */
  get any(): boolean {
    return this.entries.length > 0;
  }

  get ids(): string[] {
    return this.entries.map((e) => e.id);
  }

  /** The id of the token `presented` is, or undefined. Every configured hash is compared, whichever matches. */
  verify(presented: string): string | undefined {
    const hash = createHash('sha256').update(presented, 'utf8').digest();
    let found: string | undefined;
    for (const e of this.entries) if (timingSafeEqual(hash, e.hash) && found === undefined) found = e.id;
    return found;
  }
}
