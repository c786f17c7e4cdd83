// The port every way of proving who is calling implements: read the credential a request presents, verify it, answer
// with the Caller (or why there is none). The API key (api-key-scheme.ts) is the one scheme today; a JWT scheme would
// be a second implementation, and the request path's authenticate stage would not change.
import type { IncomingMessage } from 'node:http';
import type { KeySources } from '../http/credentials.js';
import type { Caller } from './caller.js';

/** Why a request carries no caller: the 401 it gets unless the anonymous limit answers 429 first. */
export type AuthFailure = 'missing_api_key' | 'invalid_api_key';

/**
 * A caller; or why there is none (the request goes on to the anonymous limit, then 401); or `unavailable`: the
 * credential could not be verified (its store did not answer and nothing usable was cached), so it may be fine (503,
 * never a 401).
 */
export type AuthOutcome = Caller | AuthFailure | 'unavailable';

/**
 * What authentication reads and writes of a request: declared here so identity/ need not import the request path;
 * pipeline/context.ts's RequestContext has all of it.
 */
export interface AuthRequest {
  /** The key the anonymous limit meters this request's client under. */
  clientKey(): string;
  anonymousRefusedUntil: number;
  /** Milliseconds the request has waited on Redis so far (a credential-store read adds to it). */
  redisMs: number;
  /** The route the request matched: one made from an OpenAPI document says where its key is read. */
  readonly matchedRoute?: { readonly keySources?: KeySources } | undefined;
  /** Where the credential was read from, set by read(): the proxy removes what carried it (hideCredentials). */
  keySources: KeySources | undefined;
  /** The 401's message when the default one would not say what is wrong (two different keys in one request). */
  authFailureMessage: string | undefined;
}

/** The request as a scheme reads it: its headers, and the URL for a credential sent as a query parameter. */
export type CredentialRequest = IncomingMessage & { originalUrl?: string };

export interface AuthScheme<Credential = unknown> {
  /** The scheme's name, for logs and traces. */
  readonly name: string;
  /** The credential the request presents, as found: nothing verified and no I/O. */
  read(req: CredentialRequest, ctx: AuthRequest): Credential;
  /** Verifies what read() found and answers who is calling. Time spent reading a store is added to ctx.redisMs. */
  verify(credential: Credential, ctx: AuthRequest): Promise<AuthOutcome>;
}
