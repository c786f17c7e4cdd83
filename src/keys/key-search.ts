// Finding a key by what an operator remembers of it (GET /keys?q=): its id, a piece of its name, or one of its
// metadata values (a customer id the portal keeps). The text is only ever compared as text (startsWith, includes),
// never made into a pattern, so "." or "(" in it mean themselves. Letters are compared by their Unicode lower case
// after NFC, so "ACME" finds "acme-prod" and an "é" typed composed finds one stored decomposed.
import type { KeyRecord } from './types.js';

/** The longest search text, in characters: a metadata value's longest (METADATA_VALUE_MAX) is still findable. */
export const KEY_SEARCH_MAX = 256;

function folded(s: string): string {
  return s.normalize('NFC').toLowerCase();
}

/**
 * Whether a key matches the search text: its id starts with it (ids are exact: case counts), or its name or any
 * metadata value contains it, case and normalisation aside.
 */
export function keyMatcher(text: string): (k: Pick<KeyRecord, 'id' | 'name' | 'metadata'>) => boolean {
  const needle = folded(text);
  return (k) => {
    if (k.id.startsWith(text)) return true;
    if (k.name !== undefined && folded(k.name).includes(needle)) return true;
    if (k.metadata) for (const v of Object.values(k.metadata)) if (folded(v).includes(needle)) return true;
    return false;
  };
}
