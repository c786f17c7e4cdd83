// The authentication decision: who is calling, from the key the request presents (read from the configured sources
// by http/credentials.ts: a bearer token, RFC 6750, a header or a query parameter).
// It answers with an outcome and writes nothing to the response: the request path's authenticate and requireApiKey
// stages turn outcomes into HTTP. A client the anonymous limit already refuses gets no key-store read for a key
// the key filter is certain no stored key has (a made-up key: it could only have been answered 429 anyway); a valid
// key this instance has not cached is looked up and admitted, whatever else comes from its address.
import type { Consumer } from './consumer.js';
import type { PresentedKey } from '../http/credentials.js';
import type { LookupGate, VerifyResult } from './verifier.js';

/** Why a request carries no consumer: the 401 it gets unless the anonymous limit answers 429 first. */
export type AuthFailure = 'missing_api_key' | 'invalid_api_key';

/**
 * What authentication reads and writes of a request: declared here so keys/ need not import the request path;
 * pipeline/context.ts's RequestContext has all of it.
 */
export interface AuthRequest {
  /** The key the anonymous limit meters this request's client under. */
  clientKey(): string;
  anonymousRefusedUntil: number;
  /** Milliseconds the request has waited on Redis so far (a key-store read adds to it). */
  redisMs: number;
}

/**
 * A consumer; or why there is none (the request goes on to the anonymous limit, then 401); or `unavailable`: the
 * key store did not answer and nothing usable was cached, so the key may be fine (503, never a 401).
 */
export type AuthOutcome = Consumer | AuthFailure | 'unavailable';

/** What verifies a key (the key cache, KeyVerifier). */
export interface KeyVerification {
  verify<C>(token: string, gate?: LookupGate<C>, ctx?: C): Promise<VerifyResult>;
}

/** The anonymous limit's memory of whom it refuses (AnonymousLimiter): when the refusal ends, or 0. */
export interface RefusedClients {
  refusedUntil(clientKey: string): number;
}

export class Authenticator {
  /**
   * Asked only on a key-cache miss (the store read a guessed key would cost), never for a cached key: made once
   * here, so a request allocates nothing for it.
   */
  private readonly lookupGate: LookupGate<AuthRequest> | undefined;

  constructor(
    private readonly keys: KeyVerification,
    refused?: RefusedClients,
  ) {
    this.lookupGate = refused
      ? (ctx) => {
          const until = refused.refusedUntil(ctx.clientKey());
          if (until === 0) return true;
          ctx.anonymousRefusedUntil = until;
          return false;
        }
      : undefined;
  }

  /** Time spent reading the key store (a cache miss) is added to ctx.redisMs: it comes out of the request's Redis budget. */
  async authenticate(parsed: PresentedKey, ctx: AuthRequest): Promise<AuthOutcome> {
    if (parsed.kind === 'missing') return 'missing_api_key';
    if (parsed.kind !== 'token') return 'invalid_api_key';
    const result = await this.keys.verify(parsed.token, this.lookupGate, ctx);
    if (result.storeMs !== undefined) ctx.redisMs += result.storeMs;
    if (result.ok) {
      const k = result.key;
      const consumer: Consumer = { id: k.id, plan: k.plan };
      if (k.perMinute !== undefined) consumer.perMinute = k.perMinute;
      if (k.perDay !== undefined) consumer.perDay = k.perDay;
      if (result.keyHash !== undefined) consumer.keyHash = result.keyHash;
      if (result.revision !== undefined) consumer.keyRevision = result.revision;
      return consumer;
    }
    return result.reason === 'unavailable' ? 'unavailable' : 'invalid_api_key';
  }
}
