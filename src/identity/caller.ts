// Who is calling: what authentication answers, whatever scheme the credential came in (an API key today), as the
// limits, the request path's stages and the upstream headers need it.
import type { CallerAccess } from './access.js';
import type { ConsumerView } from './consumer-lookup.js';

export interface Caller {
  /** The credential's id (an API key's id): the subject of its windows, ban and ledger; X-Credential-Id upstream. */
  id: string;
  /** The plan in force: its consumer's for a key that has one, else the key's own. */
  plan: string;
  /**
   * The key's own limits: over its plan's for a key on its own, its caps inside the pool for a key of a consumer;
   * past limitsExpiresAt (ISO-8601) none of them applies (the limits compare it with the clock on every request).
   * Their reason stays in the record: nothing here reads it, and every cached key would carry it.
   */
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  limitsExpiresAt?: string;
  /** SHA-256 of the key presented, for keys from the key store (not static ones): the limit check re-validates it. */
  keyHash?: string;
  /** The cached key record's revision, when the key is that copy's current hash: the limit check compares it. */
  keyRevision?: string;
  /** The consumer the key belongs to, as this instance has its record; absent: the key stands alone. */
  consumer?: ConsumerView;
  /**
   * What the caller may reach and from where (the key's scopes and allowed CIDRs, intersected with its consumer's),
   * compiled; absent when neither restricts anything.
   */
  access?: CallerAccess;
}
