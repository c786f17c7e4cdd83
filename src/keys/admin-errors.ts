// The errors of key administration, one code each, shared by every piece of it (issuing, reading, changing,
// importing) and by the reports over every key: the CLI prints their message, the admin API maps their code to its
// error codes (src/admin/app.ts), so a rule refused in one place is refused alike in the other.
import { KeyStoreError } from './types.js';

export type KeyAdminErrorCode =
  /** No key with that id. */
  | 'not_found'
  /** The key is revoked: it cannot be rotated or changed back into use. */
  | 'revoked'
  /** The plan named is not configured. */
  | 'unknown_plan'
  /** The key's stored record cannot be read (not a JSON key record). */
  | 'invalid_record'
  /** A value given is out of range (e.g. a negative grace period). */
  | 'invalid'
  /** Other changes to the key kept coming in between this change's read and its write. */
  | 'contended'
  /** A list or report over many keys could not read them all (Redis failed or timed out): nothing partial is given. */
  | 'incomplete'
  /** Another import is running (on this or another instance): one import writes at a time. */
  | 'import_in_progress'
  /** A rotation cannot keep the key's prefix (none recorded, or the gateway would refuse a key with it). */
  | 'prefix_not_kept'
  /** The consumer a key is to join does not exist. */
  | 'unknown_consumer'
  /** The consumer a key is to join already has its maxKeys keys (not revoked). */
  | 'consumer_full'
  /** A consumer with that id exists already. */
  | 'consumer_exists'
  /** The consumer still has keys that are not revoked: deleting it would leave them in no consumer's pool. */
  | 'consumer_has_keys';

export class KeyAdminError extends Error {
  constructor(
    readonly code: KeyAdminErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Why a list or report over many keys failed, as its error message says it. */
export function incomplete(what: string, err: unknown): KeyAdminError {
  if (err instanceof KeyAdminError && err.code === 'incomplete') return err;
  // An unreadable record stays unreadable: retrying will not help, repairing or deleting it will (its message says so).
  const unreadable = err instanceof KeyStoreError && err.code === 'invalid_record';
  const cause = (err as Error)?.message ?? String(err);
  return new KeyAdminError('incomplete', `${what} could not be completed (nothing partial was returned): ${cause}${unreadable ? '' : '; retry shortly'}`);
}

/** A read of one key's record: a record that is not a JSON key record is KeyAdminError 'invalid_record'. */
export async function readOne<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof KeyStoreError && err.code === 'invalid_record') throw new KeyAdminError('invalid_record', err.message);
    throw err;
  }
}

/** The answer for an id no key has. */
export function notFound(id: string): KeyAdminError {
  return new KeyAdminError('not_found', `no key with id "${id}"`);
}
