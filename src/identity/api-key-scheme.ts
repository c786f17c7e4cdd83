// The API key scheme: the key a request presents in the configured sources (http/credentials.ts: a bearer token, RFC
// 6750, a header or a query parameter), verified against the key cache and store (keys/verifier.ts), answered as the
// Caller. It writes nothing to the response: the request path's authenticate and requireApiKey stages turn outcomes
// into HTTP. A client the anonymous limit already refuses gets no key-store read for a key the key filter is certain
// no stored key has (a made-up key: it could only have been answered 429 anyway); a valid key this instance has not
// cached is looked up and admitted, whatever else comes from its address. A key that belongs to a consumer is
// answered with the consumer's record (from the consumers' cache) and the consumer's plan; the scopes and allowed
// CIDRs of both come compiled (access.ts), for the request path's checks to read without any I/O.
import { DEFAULT_KEY_SOURCES, readPresentedKey, type KeySources, type PresentedKey } from '../http/credentials.js';
import type { LookupGate, VerifyResult } from '../keys/verifier.js';
import { accessFor } from './access.js';
import type { AuthOutcome, AuthRequest, AuthScheme, CredentialRequest } from './auth-scheme.js';
import type { Caller } from './caller.js';
import type { ConsumerLookup, ConsumerView } from './consumer-lookup.js';

/** What verifies a key (the key cache, KeyVerifier). */
export interface KeyVerification {
  verify<C>(token: string, gate?: LookupGate<C>, ctx?: C): Promise<VerifyResult>;
}

/** The anonymous limit's memory of whom it refuses (AnonymousLimiter): when the refusal ends, or 0. */
export interface RefusedClients {
  refusedUntil(clientKey: string): number;
}

export class ApiKeyScheme implements AuthScheme<PresentedKey> {
  readonly name = 'api_key';
  /**
   * Asked only on a key-cache miss (the store read a guessed key would cost), never for a cached key: made once
   * here, so a request allocates nothing for it.
   */
  private readonly lookupGate: LookupGate<AuthRequest> | undefined;
  private readonly sources: () => KeySources;
  private readonly consumers: ConsumerLookup | undefined;

  constructor(
    private readonly keys: KeyVerification,
    opts: {
      refused?: RefusedClients | undefined;
      /** The configured sources (auth.sources) of the config in force; the default: a bearer token only. */
      sources?: (() => KeySources) | undefined;
      /**
       * Where a key's consumer is found. Absent (a gateway without the consumers' store): a key's `consumer` is not
       * read, and the key stands alone.
       */
      consumers?: ConsumerLookup | undefined;
    } = {},
  ) {
    const refused = opts.refused;
    this.consumers = opts.consumers;
    this.sources = opts.sources ?? (() => DEFAULT_KEY_SOURCES);
    this.lookupGate = refused
      ? (ctx) => {
          const until = refused.refusedUntil(ctx.clientKey());
          if (until === 0) return true;
          ctx.anonymousRefusedUntil = until;
          return false;
        }
      : undefined;
  }

  read(req: CredentialRequest, ctx: AuthRequest): PresentedKey {
    // A route made from an OpenAPI document reads its key where its operation's security schemes say.
    const from = ctx.matchedRoute?.keySources ?? this.sources();
    ctx.keySources = from;
    const presented = readPresentedKey(req, from);
    if (presented.kind === 'conflict') ctx.authFailureMessage = 'The request carries two different API keys; send one key, in one place.';
    return presented;
  }

  async verify(parsed: PresentedKey, ctx: AuthRequest): Promise<AuthOutcome> {
    if (parsed.kind === 'missing') return 'missing_api_key';
    if (parsed.kind !== 'token') return 'invalid_api_key';
    const result = await this.keys.verify(parsed.token, this.lookupGate, ctx);
    if (result.storeMs !== undefined) ctx.redisMs += result.storeMs;
    if (!result.ok) return result.reason === 'unavailable' ? 'unavailable' : 'invalid_api_key';
    const k = result.key;
    let consumer: ConsumerView | undefined;
    if (k.consumer !== undefined && this.consumers) {
      const found = await this.consumerOf(k.consumer);
      // Its consumer cannot be read: the key may be fine (503). There is no such consumer: the key is not accepted
      // (a consumer is deleted only with its keys revoked; a record naming none that exists is not to be trusted).
      if (found === 'unavailable') return 'unavailable';
      if (found === undefined) return 'invalid_api_key';
      consumer = found;
    }
    const caller: Caller = { id: k.id, plan: consumer ? consumer.plan : k.plan };
    if (k.perMinute !== undefined) caller.perMinute = k.perMinute;
    if (k.perDay !== undefined) caller.perDay = k.perDay;
    if (k.perMonth !== undefined) caller.perMonth = k.perMonth;
    if (k.limitsExpiresAt !== undefined) caller.limitsExpiresAt = k.limitsExpiresAt;
    if (result.keyHash !== undefined) caller.keyHash = result.keyHash;
    if (result.revision !== undefined) caller.keyRevision = result.revision;
    if (consumer) caller.consumer = consumer;
    const access = k.scopes || k.allowedCidrs || consumer?.scopes || consumer?.allowedCidrs ? accessFor(k, consumer) : undefined;
    if (access) caller.access = access;
    return caller;
  }

  /** The consumer's record; awaited only when the lookup has to read it (a cache answers at once). */
  private async consumerOf(id: string): Promise<ConsumerView | undefined | 'unavailable'> {
    try {
      const found = this.consumers!.get(id);
      return found instanceof Promise ? await found : found;
    } catch {
      return 'unavailable';
    }
  }
}
