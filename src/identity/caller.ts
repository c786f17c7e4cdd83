// Who is calling: what authentication answers, whatever scheme the credential came in (an API key today), as the
// limits, the request path's stages and the upstream headers need it.

export interface Caller {
  /** The credential's id (an API key's id): the subject of its windows, ban and ledger, X-Consumer-Id upstream. */
  id: string;
  plan: string;
  perMinute?: number;
  perDay?: number;
  /** SHA-256 of the key presented, for keys from the key store (not static ones): the limit check re-validates it. */
  keyHash?: string;
  /** The cached key record's revision, when the key is that copy's current hash: the limit check compares it. */
  keyRevision?: string;
}
