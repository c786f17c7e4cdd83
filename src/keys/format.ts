// The API key format: the issued prefix (auth.issuedPrefix, "tg_" by default) + 43 base62 characters of crypto
// randomness (256 bits) + a 6-character base62 CRC32. The checksum lets the gateway refuse a mistyped or made-up key
// without a key-store lookup. With auth.foreignKeys, keys of other shapes (a legacy system's) are accepted too and
// looked up by their SHA-256 like any other; a key that starts with the issued prefix is still judged as an issued one.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { KEY_PREFIX } from '../http/credentials.js';

const BODY_LENGTH = 43; // ceil(256 / log2(62))
const CHECKSUM_LENGTH = 6; // 62^6 > 2^32
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ISSUED_BODY = new RegExp(`^[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);

/** A foreign key: 16 to 256 visible ASCII characters (no space, no control character). */
const FOREIGN_KEY = /^[\x21-\x7e]{16,256}$/;
export const FOREIGN_KEY_MIN = 16;
export const FOREIGN_KEY_MAX = 256;

/** How presented keys are judged before any lookup (auth.issuedPrefix and auth.foreignKeys). */
export interface KeyShapeRules {
  issuedPrefix: string;
  foreignKeys: boolean;
}

export const DEFAULT_KEY_SHAPE: KeyShapeRules = Object.freeze({ issuedPrefix: KEY_PREFIX, foreignKeys: false });

function toBase62(n: bigint, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) {
    out = ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out;
}

function checksum(body: string): string {
  return toBase62(BigInt(crc32(body)), CHECKSUM_LENGTH);
}

/** A new plaintext key with the issued prefix. Shown to the operator once; only its SHA-256 is kept. */
export function generateKey(prefix: string = KEY_PREFIX): string {
  const body = toBase62(BigInt(`0x${randomBytes(32).toString('hex')}`), BODY_LENGTH);
  return prefix + body + checksum(body);
}

/** True when the token is an issued key (the prefix, the body, a matching checksum). */
export function isWellFormedKey(token: string, prefix: string = KEY_PREFIX): boolean {
  if (!token.startsWith(prefix)) return false;
  const rest = token.slice(prefix.length);
  if (!ISSUED_BODY.test(rest)) return false;
  return rest.slice(BODY_LENGTH) === checksum(rest.slice(0, BODY_LENGTH));
}

/**
 * True when the token is worth a key-store lookup: an issued key with its checksum right, or, with foreignKeys, any
 * other 16-256 visible ASCII characters. A token that starts with the issued prefix is judged as an issued key only,
 * so a mistyped issued key is refused here even when foreign keys are accepted.
 */
export function isAcceptableKey(token: string, rules: KeyShapeRules): boolean {
  if (token.startsWith(rules.issuedPrefix)) return isWellFormedKey(token, rules.issuedPrefix);
  return rules.foreignKeys && FOREIGN_KEY.test(token);
}

export function hashKey(token: string): string {
  // crypto.hash: the one-shot form, without a Hash object per call (this runs on every keyed request).
  return hash('sha256', token, 'hex');
}

/** A key's last 4 characters, kept in its record (`last4`) so its holder can tell it from their other keys. */
export function lastFour(token: string): string {
  return token.slice(-4);
}

/** Compares two SHA-256 hex digests in constant time. */
export function hashesEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex');
  const bb = Buffer.from(b, 'hex');
  return ab.length === 32 && bb.length === 32 && timingSafeEqual(ab, bb);
}

/** A short, readable, unguessable key id such as key_3fQx81mZtR0aLk2v (not a secret: it goes upstream). */
export function generateKeyId(): string {
  return `key_${toBase62(BigInt(`0x${randomBytes(12).toString('hex')}`), 16)}`;
}
