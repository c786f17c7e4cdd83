// `tollgate keys export`: every key record as one JSON line, hashes included (never a plaintext: Tollgate has none),
// to back keys up or move them to another Redis (a standalone one to a cluster). `keys import` reads the lines back
// (import-read.ts) and KeyAdmin.importKeys checks every record before it writes any: importing an export again
// changes nothing.
import type { KeyStore } from './types.js';

/** Every record, one JSON object per line. */
export async function* exportKeys(store: KeyStore): AsyncGenerator<string> {
  for (const k of await store.list()) yield JSON.stringify(k);
}
