// A key's visible prefix ("sk_live_" of a legacy system's "sk_live_4eC39HqLyjWDarjtT1zdp7dc"): recorded at import so a
// rotation can keep it (`keys rotate --keep-prefix`), and the customer's tooling that recognises its keys by their
// prefix keeps working. Only the leading part that is no secret is kept: it ends at a separator, is short, and is
// never more than a third of the key, so a key without a separator near its start records no prefix at all.

/** The longest prefix recorded, in characters. */
export const PREFIX_MAX = 32;
/** The shortest: one character and its separator. */
export const PREFIX_MIN = 2;

/** Visible ASCII (no space, no control character) ending in `_` or `-`: what a recorded prefix is. */
export const PREFIX_PATTERN = /^[\x21-\x7e]+[_-]$/;

/**
 * The prefix of a plaintext key: the leading part up to and including the last `_` or `-` among its first
 * min(PREFIX_MAX, a third of its length) characters; undefined when there is no separator there.
 */
export function prefixOf(key: string): string | undefined {
  const window = key.slice(0, Math.min(PREFIX_MAX, Math.floor(key.length / 3)));
  const end = Math.max(window.lastIndexOf('_'), window.lastIndexOf('-')) + 1;
  if (end < PREFIX_MIN) return undefined;
  const prefix = window.slice(0, end);
  return PREFIX_PATTERN.test(prefix) ? prefix : undefined;
}

/** Why a prefix given on its own (an import's `prefix` column) is refused, in words that never quote it; undefined if it is fine. */
export function prefixProblem(prefix: string): string | undefined {
  if (prefix.length > PREFIX_MAX) return `prefix: at most ${PREFIX_MAX} characters (a prefix, never a whole key)`;
  if (prefix.length < PREFIX_MIN) return `prefix: at least ${PREFIX_MIN} characters`;
  if (!/^[\x21-\x7e]+$/.test(prefix)) return 'prefix: visible ASCII characters only (no space or control character)';
  if (!PREFIX_PATTERN.test(prefix)) return 'prefix: must end in "_" or "-" (the separator before the secret part)';
  return undefined;
}
