// `tollgate keys export`: every key record as one JSON line, hashes included (never a plaintext: Tollgate has none),
// to back keys up or move them to another Redis (a standalone one to a cluster). `keys import` reads the lines back
// (import-read.ts) and KeyImporter.importKeys (importer.ts) checks every record before it writes any: importing an export again
// changes nothing. A record carries `retiredHashes`, the hashes the key had before (rotated away, revoked), so the
// Redis it moves to refuses them too.
import type { KeyStore } from './types.js';

/** How many keys' retired hashes are read at once (one SMEMBERS each, in the key's own slot). */
const BATCH = 100;

/** Every record, one JSON object per line. */
export async function* exportKeys(store: KeyStore): AsyncGenerator<string> {
  const all = await store.list();
  for (let i = 0; i < all.length; i += BATCH) {
    const batch = all.slice(i, i + BATCH);
    const retired = await Promise.all(batch.map((k) => store.retiredHashes(k.id)));
    for (const [j, k] of batch.entries()) {
      const r = retired[j]!;
      yield JSON.stringify(r.length > 0 ? { ...k, retiredHashes: r } : k);
    }
  }
}
