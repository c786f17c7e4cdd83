// Who is calling: the key a request authenticated with, as the limits and the upstream headers need it.

export interface Consumer {
  id: string;
  plan: string;
  perMinute?: number;
  perDay?: number;
  /** SHA-256 of the key presented, for keys from the key store (not static ones): the limit check re-validates it. */
  keyHash?: string;
  /** The cached key record's revision, when the key is that copy's current hash: the limit check compares it. */
  keyRevision?: string;
}
