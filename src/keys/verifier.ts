// Key verification on the request path, above the KeyStore interface: the validity rules (status, expiry, grace),
// the in-process cache that keeps steady traffic off Redis, change propagation between instances, and the key filter
// (known-hashes.ts) that says which uncached hashes are worth a store read when the caller's gate would decline it.
// Changing keys is key administration's job (issue.ts, lifecycle.ts, importer.ts): the verifier only reads, and hears of changes.
import { LRUCache } from 'lru-cache';
import type { Clock } from '../util/clock.js';
import { withDeadline } from '../util/deadline.js';
import type { StaticKeyConfig } from '../config/schema.js';
import { sortedMetadata } from '../config/key-fields.js';
import { hashKey, hashesEqual, isWellFormedKey } from './format.js';
import { KnownHashes, type HashSource } from './known-hashes.js';
import { expiredAt, expiryMs } from './rules.js';
import type { FoundKey, KeyChange, KeyRecord, KeyStore, StoredKey } from './types.js';

/**
 * Who a verified key belongs to, its own limits, and what it may reach from where (its consumer, scopes and allowed
 * addresses): what the request path takes from the record. One object per cached record, handed out as it is, so
 * what is compiled from it (identity/access.ts) is compiled once per record.
 */
export type KeyIdentity = Pick<KeyRecord, 'id' | 'plan' | 'perMinute' | 'perDay' | 'perMonth' | 'limitsExpiresAt' | 'consumer' | 'scopes' | 'allowedCidrs'>;

/** `storeMs`: how long this verification waited on the key store (absent when answered from memory). */
export type VerifyResult =
  /**
   * keyHash: set for keys from the store (not static ones), so the limit check can re-validate them; revision:
   * the cached record's, when the store names one and the key is that copy's current hash, so the limit check
   * compares it with the stored record (recordChecked) and, while they are the same bytes, has nothing to decode
   * (the copy is the one this key was just judged valid against). A key in its rotation's grace gets none: its
   * grace ends on Redis's clock, which only the full check reads.
   */
  (
    | { ok: true; key: KeyIdentity; keyHash?: string; revision?: string }
    | { ok: false; reason: 'malformed' | 'unknown' | 'revoked' | 'expired' }
    /** The store could not answer in time and nothing usable was cached: the key may well be valid. */
    | { ok: false; reason: 'unavailable' }
    /** A store read was needed and the caller's gate declined it: nothing is known about the key. */
    | { ok: false; reason: 'not_looked_up' }
  ) & { storeMs?: number };

/**
 * Asked by verify() only when answering would take a key-store read (nothing usable cached) and the key filter is
 * certain no stored key has the hash: false declines the read. A hash the filter may hold is always read, whatever
 * the gate says, so a valid key is never declined. `ctx` is the caller's, passed through, so the caller needs no
 * closure per call.
 */
export type LookupGate<C> = (ctx: C) => boolean;

export interface KeyCacheOptions {
  /**
   * Known keys are re-read from the store after this long without a confirmation (bounds staleness if pub/sub is
   * down). A limit check that finds the stored record unchanged confirms it (recordChecked), so a key in steady
   * use is not re-read.
   */
  ttlMs: number;
  /** Unknown hashes are remembered this long, so a flood of bad keys is not a flood of store reads. */
  negativeTtlMs: number;
  /** While the store fails, a cached key stays usable for at most this long after it was read or confirmed. */
  maxStaleMs: number;
  maxEntries: number;
  /** No verification waits longer than this on the store. */
  lookupTimeoutMs: number;
}

export const DEFAULT_KEY_CACHE: KeyCacheOptions = {
  ttlMs: 60_000,
  negativeTtlMs: 2_000,
  maxStaleMs: 3_600_000,
  maxEntries: 100_000,
  lookupTimeoutMs: 100,
};

/**
 * What the cache keeps of a stored key, made once per read: its identity (handed out as it is: the request path
 * copies nothing per request) and what decides validity. The rest of the record (name, dates, metadata) stays in the
 * store: with tens of thousands of keys in use, every byte per entry is resident memory (bench/README.md, RSS); the
 * scopes and allowed CIDRs a key may have are bounded for that reason (config/key-fields.ts).
 */
interface CachedKey {
  identity: KeyIdentity;
  status: KeyRecord['status'];
  /** expiresAt as epoch ms, parsed once. */
  expiresAtMs?: number;
  hash: string;
  prevHash?: string;
  prevHashUntil?: number;
}

function toCached(k: StoredKey): CachedKey {
  const identity: KeyIdentity = { id: k.id, plan: k.plan };
  if (k.perMinute !== undefined) identity.perMinute = k.perMinute;
  if (k.perDay !== undefined) identity.perDay = k.perDay;
  if (k.perMonth !== undefined) identity.perMonth = k.perMonth;
  // When the own limits end (the limits compare it with the clock per request); their reason is never read here.
  if (k.limitsExpiresAt !== undefined) identity.limitsExpiresAt = k.limitsExpiresAt;
  if (k.consumer !== undefined) identity.consumer = k.consumer;
  if (k.scopes !== undefined) identity.scopes = k.scopes;
  if (k.allowedCidrs !== undefined) identity.allowedCidrs = k.allowedCidrs;
  const cached: CachedKey = { identity, status: k.status, hash: k.hash };
  const expiry = expiryMs(k);
  if (expiry !== undefined) cached.expiresAtMs = expiry;
  if (k.prevHash !== undefined) cached.prevHash = k.prevHash;
  if (k.prevHashUntil !== undefined) cached.prevHashUntil = k.prevHashUntil;
  return cached;
}

interface CacheEntry {
  key: CachedKey | null;
  revision: string | undefined;
  /** When the record was read, or last confirmed unchanged by a limit check. */
  readAt: number;
  /** KeyVerifier.resets when the record was read or confirmed: an older value means changes may have been missed. */
  resets: number;
}

export class KeyVerifier {
  private readonly cache: LRUCache<string, CacheEntry>;
  private readonly staticKeys: ReadonlyMap<string, CachedKey>;
  private readonly inflight = new Map<string, Promise<CachedKey | null>>();
  /** Bumped whenever cached keys are dropped, so a lookup that started before cannot re-cache what it read. */
  private generation = 0;
  /**
   * Bumped when the change feed may have missed messages (its subscriber reconnected). Entries of known keys read
   * before are kept and served (their limit checks compare their revisions anyway); negative entries read before are
   * read again: marking them all costs one increment, not a scan.
   */
  private resets = 0;
  private unsubscribe: (() => Promise<void>) | undefined;
  private readonly changeListeners: Array<(id: string | undefined, change: KeyChange) => void> = [];
  readonly opts: KeyCacheOptions;
  /** Every hash that opens a stored key, as a Bloom filter: built once the change feed listens (start()). */
  readonly knownHashes: KnownHashes;

  /**
   * `store` holds issued keys (Redis in production); `staticKeys`, the config's `keys:` list, is consulted
   * first and never changes while the process runs.
   */
  constructor(
    readonly store: KeyStore,
    private readonly clock: Clock,
    opts: Partial<KeyCacheOptions> = {},
    staticKeys: ReadonlyMap<string, StoredKey> = new Map(),
    /**
     * The key filter: where it reads the stored hashes (default `store`; the gateway gives it the admin connection's
     * store, so its full reads never queue on the request path's connection) and who hears of each build.
     */
    filter: { source?: HashSource; onBuilt?: ConstructorParameters<typeof KnownHashes>[1] } = {},
    /** Whether a token is worth a lookup at all (auth.issuedPrefix and auth.foreignKeys: isAcceptableKey). */
    private readonly acceptsShape: (token: string) => boolean = (token) => isWellFormedKey(token),
  ) {
    this.opts = { ...DEFAULT_KEY_CACHE, ...opts };
    this.knownHashes = new KnownHashes(filter.source ?? store, filter.onBuilt);
    this.staticKeys = new Map([...staticKeys].map(([hash, k]) => [hash, toCached(k)]));
    this.cache = new LRUCache({
      max: this.opts.maxEntries,
      // Keeps hashesById in step with whatever leaves the cache (eviction, delete, overwrite, clear).
      dispose: (entry, hash) => {
        const id = entry.key?.identity.id;
        if (id === undefined) return;
        const hashes = this.hashesById.get(id);
        if (hashes === hash) this.hashesById.delete(id);
        else if (typeof hashes === 'object') {
          hashes.delete(hash);
          if (hashes.size === 1) this.hashesById.set(id, hashes.values().next().value!);
        }
      },
    });
  }

  /**
   * Cached hashes by key id, so a change message drops its key's entries directly instead of walking a cache of up
   * to maxEntries on every message. One hash (nearly every key) is kept as the string itself; a Set only while a
   * rotation's grace gives the key two: a Set per key was about 120 bytes of every entry.
   */
  private readonly hashesById = new Map<string, string | Set<string>>();

  private remember(hash: string, entry: CacheEntry): void {
    this.cache.set(hash, entry);
    const id = entry.key?.identity.id;
    if (id === undefined) return;
    const hashes = this.hashesById.get(id);
    if (hashes === undefined) this.hashesById.set(id, hash);
    else if (typeof hashes === 'string') {
      if (hashes !== hash) this.hashesById.set(id, new Set([hashes, hash]));
    } else hashes.add(hash);
  }

  /**
   * Listens for key changes made by any instance (revoke, rotate, plan change) and drops them from the cache; each
   * time the subscription is in place (first, and after a reconnect) the key filter is built anew from the store, in
   * the background, and hashes the feed names (create, rotate, import) go into it as they come.
   */
  async start(): Promise<void> {
    this.unsubscribe = await this.store.subscribe(
      (id, change) => this.forget(id, change),
      () => this.changesMayBeMissed(),
      { onKeyHash: (hash) => this.hashLinked(hash), onListening: () => this.knownHashes.rebuild() },
    );
  }

  /** A hash now opens a key: into the filter, and a "no such key" remembered for it is dropped. */
  private hashLinked(hash: string): void {
    this.knownHashes.add(hash);
    if (this.cache.peek(hash)?.key === null) this.cache.delete(hash);
  }

  /**
   * The subscriber reconnected: messages sent meanwhile are lost. Forgetting every cached key here made each
   * reconnect a burst of store reads, which fail (503 for valid keys) when the reconnect comes from a flapping
   * connection. Instead each entry read before now is confirmed by its next request's limit check (its revision
   * goes along; the check answers in the same round trip and re-validates the key's hash and status anyway), and an
   * entry that check cannot confirm (no revision: an unknown hash) is read again. What is derived from keys (the
   * limiter's known bans) still starts over.
   */
  private changesMayBeMissed(): void {
    this.resets++;
    this.knownHashes.changesMayBeMissed();
    for (const fn of this.changeListeners) fn(undefined, 'record');
  }

  /** Stops listening for changes and closes the store. */
  async close(): Promise<void> {
    this.knownHashes.close();
    await this.unsubscribe?.();
    await this.store.close();
  }

  /** Cached entries, for metrics and tests. */
  get cacheSize(): number {
    return this.cache.size;
  }

  /** `gate`: see LookupGate; it is never asked for static keys, cached ones, or a known key whose copy is stale. */
  async verify<C>(token: string, gate?: LookupGate<C>, ctx?: C): Promise<VerifyResult> {
    if (!this.acceptsShape(token)) return { ok: false, reason: 'malformed' };
    const hash = hashKey(token);
    const now = this.clock.now();
    const fixed = this.staticKeys.get(hash);
    if (fixed) return this.judge(fixed, hash, now);
    const cached = this.cache.get(hash);
    let stored: CachedKey | null;
    let revision: string | undefined;
    if (
      cached &&
      now - cached.readAt < (cached.key ? this.opts.ttlMs : this.opts.negativeTtlMs) &&
      (cached.resets === this.resets || cached.revision !== undefined)
    ) {
      stored = cached.key;
      // Every request of a cached key has its copy compared (judge decides whether it goes along): comparing costs
      // Redis a SHA-1 of the record, less than decoding it, which an unchanged record spares the check.
      revision = cached.revision;
    } else {
      // A key this instance has read before is never declined: it was valid, and a gate that throttles guessing
      // should not cost its owner a request. Nor is one the key filter may hold (a valid key this instance has not
      // cached, or was told of by the change feed): what is declined is a token no stored key can have.
      if (gate && !cached?.key && !this.knownHashes.mayOpenAKey(hash) && !gate(ctx as C)) {
        // A key created on another instance just before its owner's request came here: the change feed's message
        // naming its hash left Redis before the creator had its answer, so it is at latest in this turn's input.
        // Let this turn's I/O be read, then ask the filter again.
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (!this.knownHashes.mayOpenAKey(hash)) return { ok: false, reason: 'not_looked_up' };
      }
      const started = this.clock.now();
      try {
        // Just read: nothing to confirm yet.
        return { ...this.judge(await this.lookup(hash), hash, now), storeMs: this.clock.now() - started };
      } catch {
        // The store failed: a key read recently enough keeps working, and the wait is reported (it came out of the
        // request's Redis budget, which the limit check then shares); anything else cannot be verified.
        if (cached?.key && now - cached.readAt < this.opts.maxStaleMs) return { ...this.judge(cached.key, hash, now), storeMs: this.clock.now() - started };
        // A key filter made uncertain by the outage itself (the change feed dropped) still knew every key up to it:
        // a hash it never held, from a client the gate declines, is answered as a declined read (429 for a refused
        // client, as before the outage), not as a key that may be fine (503).
        if (gate && !cached?.key && this.knownHashes.saidNo(hash) && !gate(ctx as C)) return { ok: false, reason: 'not_looked_up' };
        return { ok: false, reason: 'unavailable' };
      }
    }
    return this.judge(stored, hash, now, revision);
  }

  /**
   * What the limit check found of the record that `revision` names: `current`, the stored record is still exactly
   * that one, as good as a fresh read, so the cached copy's ttl starts again; not current, it changed since it was
   * read (a plan or expiry edited in place), so the next request reads it again. Either way only the entry that
   * holds that very revision is touched: a newer read that raced this check stays as it is.
   */
  recordChecked(hash: string, revision: string, current: boolean): void {
    const entry = this.cache.peek(hash);
    if (entry?.revision !== revision) return;
    if (current) {
      entry.readAt = this.clock.now();
      entry.resets = this.resets;
    } else this.cache.delete(hash);
  }

  /** Validity rules, applied to cached and fresh records alike. */
  private judge(stored: CachedKey | null, hash: string, now: number, revision?: string): VerifyResult {
    if (!stored) return { ok: false, reason: 'unknown' };
    const current = hashesEqual(stored.hash, hash);
    const inGrace = !current && stored.prevHash !== undefined && hashesEqual(stored.prevHash, hash) && now < (stored.prevHashUntil ?? 0);
    if (!current && !inGrace) return { ok: false, reason: 'unknown' };
    if (stored.status === 'revoked') return { ok: false, reason: 'revoked' };
    if (expiredAt(stored.expiresAtMs, now)) return { ok: false, reason: 'expired' };
    if (this.staticKeys.has(hash)) return { ok: true, key: stored.identity };
    const fromStore: VerifyResult & { ok: true } = { ok: true, key: stored.identity, keyHash: hash };
    if (revision !== undefined && current) fromStore.revision = revision;
    return fromStore;
  }

  /** One store read per hash at a time, however many requests carry it. */
  private lookup(hash: string): Promise<CachedKey | null> {
    let p = this.inflight.get(hash);
    if (!p) {
      const generation = this.generation;
      // A reset while this read is in flight: what it read may predate a missed change, so it is cached as due.
      const resets = this.resets;
      p = withDeadline(this.store.findByHash(hash), this.opts.lookupTimeoutMs, 'key lookup')
        .then((found: FoundKey | undefined) => {
          const key = found ? toCached(found.key) : null;
          // A change announced while this read was in flight may postdate what it read: answer, but do not cache.
          if (generation === this.generation) this.remember(hash, { key, revision: found?.revision, readAt: this.clock.now(), resets });
          return key;
        })
        .finally(() => this.inflight.delete(hash));
      this.inflight.set(hash, p);
    }
    return p;
  }

  /**
   * Called with a key id whenever any instance changes that key (revoke, rotate, unban: 'record'; a reset of its
   * windows: 'windows'), and with undefined when changes may have been missed (the subscriber reconnected).
   */
  onChange(fn: (id: string | undefined, change: KeyChange) => void): void {
    this.changeListeners.push(fn);
  }

  /**
   * Drops a key from this instance's cache and tells the change listeners: on a change message from any instance,
   * and when the limit check found the stored record no longer accepts the key. A reset of the key's windows leaves
   * its record, so the cache keeps it: only the listeners hear of it.
   */
  forget(id: string, change: KeyChange = 'record'): void {
    if (change === 'record') this.generation++;
    for (const fn of this.changeListeners) fn(id, change);
    if (change === 'windows') return;
    const hashes = this.hashesById.get(id);
    // A copy: each delete's dispose edits the set.
    if (hashes) for (const hash of typeof hashes === 'string' ? [hashes] : [...hashes]) this.cache.delete(hash);
  }
}

/** The config's `keys:` list, indexed by hash. */
export function staticKeyMap(keys: readonly StaticKeyConfig[], createdAt: string): Map<string, StoredKey> {
  return new Map(
    keys.map((k) => {
      const stored: StoredKey = { id: k.id, plan: k.plan, createdAt, status: 'active', hash: k.sha256 };
      if (k.name !== undefined) stored.name = k.name;
      if (k.perMinute !== undefined) stored.perMinute = k.perMinute;
      if (k.perDay !== undefined) stored.perDay = k.perDay;
      if (k.expiresAt !== undefined) stored.expiresAt = k.expiresAt;
      if (k.metadata !== undefined) stored.metadata = sortedMetadata(k.metadata);
      return [k.sha256, stored];
    }),
  );
}
