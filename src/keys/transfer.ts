// `tollgate keys export` and `keys import`: every key record as one JSON line, hashes included (never a plaintext:
// Tollgate has none), to back keys up or move them to another Redis (a standalone one to a cluster). Import parses the
// lines here; KeyAdmin.importKeys checks every record (import-check.ts) before it writes any, and re-importing an
// export changes nothing.
import type { ImportCandidate, ImportRefusal } from './import-check.js';
import type { KeyStore } from './types.js';

/** Every record, one JSON object per line. */
export async function* exportKeys(store: KeyStore): AsyncGenerator<string> {
  for (const k of await store.list()) yield JSON.stringify(k);
}

/** JSON lines as import candidates, numbered from 1 (blank lines skipped); a line that is not JSON is refused. */
export function parseImportLines(lines: Iterable<string>): { candidates: ImportCandidate[]; refusals: ImportRefusal[] } {
  const candidates: ImportCandidate[] = [];
  const refusals: ImportRefusal[] = [];
  let n = 0;
  for (const text of lines) {
    n++;
    if (text.trim() === '') continue;
    try {
      candidates.push({ line: n, record: JSON.parse(text) as unknown });
    } catch {
      refusals.push({ line: n, error: 'not JSON' });
    }
  }
  return { candidates, refusals };
}
