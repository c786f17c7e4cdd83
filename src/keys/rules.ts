// The rules about a key that more than one part of Tollgate applies, each in one place: when a key has expired, the
// status an administrator sees, the limits a key gets from its plan and its own overrides, and the public view of a
// record (never a hash).
import type { KeyRecord, StoredKey } from './types.js';

export function isExpired(k: Pick<KeyRecord, 'expiresAt'>, nowMs: number): boolean {
  return expiredAt(expiryMs(k), nowMs);
}

/** The key's expiry as epoch ms (undefined: none), for callers that keep it parsed (the key cache). */
export function expiryMs(k: Pick<KeyRecord, 'expiresAt'>): number | undefined {
  return k.expiresAt === undefined ? undefined : Date.parse(k.expiresAt);
}

/** Whether a key with this expiry (epoch ms; undefined: none) has expired at nowMs. */
export function expiredAt(expiry: number | undefined, nowMs: number): boolean {
  return expiry !== undefined && nowMs >= expiry;
}

export type KeyStatus = 'active' | 'revoked' | 'expired';

/** Revoked wins over expired: a revoked key never comes back, an expired one can be given a new expiry. */
export function keyStatus(k: Pick<KeyRecord, 'status' | 'expiresAt'>, nowMs: number): KeyStatus {
  if (k.status === 'revoked') return 'revoked';
  return isExpired(k, nowMs) ? 'expired' : 'active';
}

export interface Limits {
  perMinute: number;
  perDay: number;
}

/**
 * One frozen Limits object per distinct pair (a plan's, or a key's own override), so what depends only on the limits
 * (the RateLimit-Policy header, the limit script's policy argument) is cached by identity, and the request path
 * allocates nothing for it. Per-key limits can make many pairs: bounded.
 */
const limitsByPair = new Map<string, Limits>();

/** The key's own perMinute/perDay where set, else its plan's; undefined when a window has neither (no usable plan). */
export function effectiveLimits(k: { perMinute?: number | undefined; perDay?: number | undefined }, plan: Limits | undefined): Limits | undefined {
  const perMinute = k.perMinute ?? plan?.perMinute;
  const perDay = k.perDay ?? plan?.perDay;
  if (perMinute === undefined || perDay === undefined) return undefined;
  const pair = `${perMinute}/${perDay}`;
  let limits = limitsByPair.get(pair);
  if (!limits) {
    if (limitsByPair.size >= 10_000) limitsByPair.clear();
    limits = Object.freeze({ perMinute, perDay });
    limitsByPair.set(pair, limits);
  }
  return limits;
}

/** The public view of a key: never the hash. */
export function toRecord(k: StoredKey): KeyRecord {
  const { hash: _h, prevHash: _p, prevHashUntil: _u, ...rest } = k;
  return rest;
}
