// Renaming a customer's columns to Tollgate's field names before an import reads its records (`keys import --map
// api_key=key`, POST /keys/import?map=api_key=key), so a file exported from another system is imported as it is. The
// same map applies to CSV columns and to the top-level fields of JSON records. Every way a map could silently import
// the wrong thing is refused: an unknown target, two columns for one field, a column the file does not have.
import { closest, distance } from 'fastest-levenshtein';
import type { ImportItem } from './import-run.js';
import { METADATA_NAME } from '../config/key-fields.js';

/** The fields a customer's import record has (import-records.ts), and `metadata.<name>` for each metadata entry. */
export const IMPORT_FIELDS: readonly string[] = ['id', 'name', 'plan', 'key', 'sha256', 'prefix', 'perMinute', 'perDay', 'expiresAt', 'consumer'];

/** A column map: the file's name -> Tollgate's field. */
export type ColumnMap = ReadonlyMap<string, string>;

/** The most pairs a map may have: more columns than any record has fields. */
const MAX_PAIRS = 64;

/** A map that cannot be applied (to any file, or to this one): a usage error, nothing imported. */
export class ColumnMapError extends Error {}

export function isImportField(name: string): boolean {
  return IMPORT_FIELDS.includes(name) || (name.startsWith('metadata.') && METADATA_NAME.test(name.slice('metadata.'.length)));
}

const fieldList = () => `${IMPORT_FIELDS.join(', ')}, metadata.<name>`;

/** The map given as OLD=NEW pairs, or a ColumnMapError naming the first pair that is wrong. */
export function parseColumnMap(pairs: readonly string[]): ColumnMap {
  if (pairs.length > MAX_PAIRS) throw new ColumnMapError(`map: at most ${MAX_PAIRS} pairs (an import reads ${IMPORT_FIELDS.length} fields and its metadata)`);
  const map = new Map<string, string>();
  const byTarget = new Map<string, string>();
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    const from = eq < 0 ? '' : pair.slice(0, eq);
    const to = eq < 0 ? '' : pair.slice(eq + 1);
    const shown = JSON.stringify(pair.slice(0, 80));
    if (eq < 0 || from === '' || to === '') throw new ColumnMapError(`map ${shown}: expected OLD=NEW (the file's column, then Tollgate's field)`);
    if (!isImportField(to)) {
      const near = closest(to, [...IMPORT_FIELDS]);
      const hint = distance(to, near) <= Math.max(2, Math.floor(to.length / 3)) ? ` (did you mean "${near}"?)` : '';
      throw new ColumnMapError(`map ${shown}: "${to.slice(0, 64)}" is not a field an import reads${hint}; fields: ${fieldList()}`);
    }
    if (map.has(from)) throw new ColumnMapError(`map ${shown}: column "${from}" is mapped twice`);
    const other = byTarget.get(to);
    if (other !== undefined) throw new ColumnMapError(`map ${shown}: columns "${other}" and "${from}" both map to "${to}"; a field takes one column`);
    map.set(from, to);
    byTarget.set(to, from);
  }
  return map;
}

/** A CSV header with the map applied, refused when a mapped column is missing or a target is also a column of its own. */
export function renameHeader(cells: readonly string[], map: ColumnMap): string[] {
  if (map.size === 0) return [...cells];
  const present = new Set(cells);
  for (const [from, to] of map) {
    if (!present.has(from)) throw new ColumnMapError(`map ${from}=${to}: the CSV header has no column "${from.slice(0, 64)}"`);
    if (present.has(to) && !map.has(to))
      throw new ColumnMapError(`map ${from}=${to}: the file also has a column "${to}"; columns "${from}" and "${to}" would both fill "${to}"`);
  }
  return cells.map((c) => map.get(c) ?? c);
}

/**
 * Records (JSON lines, a JSON array) with the map applied to each object's top-level fields. A record holding both a
 * mapped field and its target is refused by its line; a mapped field no record of the whole source has ends the read
 * with a ColumnMapError (a misspelt name), as a CSV header without the column does.
 */
export async function* renameFields(items: AsyncIterable<ImportItem>, map: ColumnMap): AsyncGenerator<ImportItem> {
  if (map.size === 0) return yield* items;
  const seen = new Set<string>();
  let records = 0;
  for await (const item of items) {
    if ('error' in item || item.record === null || typeof item.record !== 'object' || Array.isArray(item.record)) {
      yield item;
      continue;
    }
    records++;
    const renamed = renameOne(item.record as Record<string, unknown>, map, seen);
    yield typeof renamed === 'string' ? { line: item.line, error: renamed } : { line: item.line, record: renamed };
  }
  if (records === 0) return;
  for (const [from, to] of map) if (!seen.has(from)) throw new ColumnMapError(`map ${from}=${to}: no record of the file has a field "${from.slice(0, 64)}"`);
}

function renameOne(record: Record<string, unknown>, map: ColumnMap, seen: Set<string>): Record<string, unknown> | string {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(record)) if (!map.has(field)) out[field] = value;
  for (const [from, to] of map) {
    if (!Object.hasOwn(record, from)) continue;
    seen.add(from);
    const value = record[from];
    if (to.startsWith('metadata.')) {
      const name = to.slice('metadata.'.length);
      const metadata = out.metadata;
      if (metadata !== undefined && (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)))
        return `metadata: not an object, so field "${from}" cannot go in it (map ${from}=${to})`;
      if (metadata !== undefined && Object.hasOwn(metadata, name)) return `fields "${from}" and "${to}" both give ${to} (map ${from}=${to})`;
      out.metadata = { ...(metadata as Record<string, unknown> | undefined), [name]: value };
    } else {
      if (Object.hasOwn(out, to)) return `fields "${from}" and "${to}" both give ${to} (map ${from}=${to})`;
      out[to] = value;
    }
  }
  return out;
}
