// The API key format: "tg_" + 43 base62 characters of crypto randomness (256 bits) + a 6-character base62 CRC32.
// The checksum lets the gateway refuse a mistyped or made-up key without a key-store lookup.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

export const KEY_PREFIX = 'tg_';
const BODY_LENGTH = 43; // ceil(256 / log2(62))
const CHECKSUM_LENGTH = 6; // 62^6 > 2^32
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_SHAPE = new RegExp(`^${KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);

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

/** A new plaintext key. Shown to the operator once; only its SHA-256 is kept. */
export function generateKey(): string {
  const body = toBase62(BigInt(`0x${randomBytes(32).toString('hex')}`), BODY_LENGTH);
  return KEY_PREFIX + body + checksum(body);
}

/** True when the token has the key shape and its checksum matches: worth a key-store lookup. */
export function isWellFormedKey(token: string): boolean {
  if (!KEY_SHAPE.test(token)) return false;
  const body = token.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  return token.slice(KEY_PREFIX.length + BODY_LENGTH) === checksum(body);
}

/**
 * Text shaped like a key, or like the start of one (a key cut short is still most of a secret): "tg_" and 20 or more
 * base62 characters, anywhere. Logs never carry it and a request id may not be one.
 */
const KEY_IN_TEXT = /tg_[0-9A-Za-z]{20,}/;
const KEYS_IN_TEXT = new RegExp(KEY_IN_TEXT.source, 'g');

export function holdsKeyShape(text: string): boolean {
  return text.includes(KEY_PREFIX) && KEY_IN_TEXT.test(text);
}

/** The text with everything shaped like a key replaced by `tg_[redacted]`; the same string when there is none. */
export function redactKeyShapes(text: string): string {
  return text.includes(KEY_PREFIX) ? text.replace(KEYS_IN_TEXT, `${KEY_PREFIX}[redacted]`) : text;
}

export function hashKey(token: string): string {
  // crypto.hash: the one-shot form, without a Hash object per call (this runs on every keyed request).
  return hash('sha256', token, 'hex');
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
