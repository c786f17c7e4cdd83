// docs/configuration.md, the config reference, against the schema it describes (config/gateway.schema.json, which
// test/config-schema.test.ts keeps equal to the zod schema): every field the schema has is in the reference, every
// field the reference names is in the schema, and a default the reference states is the schema's.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string): string => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const SCHEMA = JSON.parse(read('config/gateway.schema.json')) as JsonSchema;
const REFERENCE = read('docs/configuration.md');

interface JsonSchema {
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  default?: unknown;
  description?: string;
}

/** A field's place: `server.tls.caFile`, a map's entry as `<*>` (`plans.<*>.perDay`), an array's item as `[]`. */
interface Field {
  path: string;
  schema: JsonSchema;
  /** It holds fields of its own (an object, a map, an array of objects): documented through them. */
  container: boolean;
}

function fieldsOf(schema: JsonSchema, prefix = ''): Field[] {
  const out: Field[] = [];
  const walk = (node: JsonSchema, path: string): boolean => {
    let holds = false;
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      holds = true;
      const p = path ? `${path}.${name}` : name;
      const at = out.push({ path: p, schema: child, container: false }) - 1;
      out[at]!.container = walk(child, p);
    }
    if (typeof node.additionalProperties === 'object') {
      const p = `${path}.<*>`;
      const at = out.push({ path: p, schema: node.additionalProperties, container: false }) - 1;
      out[at]!.container = walk(node.additionalProperties, p);
      holds = true;
    }
    if (node.items) {
      // The array's item is a field of its own (`keys[]`) when it holds fields.
      const at = out.push({ path: `${path}[]`, schema: node.items, container: false }) - 1;
      if ((out[at]!.container = walk(node.items, `${path}[]`))) holds = true;
    }
    for (const alt of [...(node.anyOf ?? []), ...(node.oneOf ?? []), ...(node.allOf ?? [])]) if (walk(alt, path)) holds = true;
    return holds;
  };
  walk(schema, prefix);
  // A field reached through several alternatives (a target: a URL or { url, weight }) once.
  return [...new Map(out.map((f) => [f.path, f])).values()];
}

/** `<name>`, `<plan>`: a map's entry, whatever the reference calls it. */
const normal = (path: string): string => path.replace(/<[^>]+>/g, '<*>');

interface Row {
  /** The fields its first cell names: full paths, and bare names after one (`redis.tls.caFile`, `certFile`) resolved beside it. */
  fields: string[];
  defaultCell: string;
  meaning: string;
}

/** The rows of the reference's field table: `| field | default | meaning |`. */
function referenceRows(markdown: string): Row[] {
  const rows: Row[] = [];
  for (const line of markdown.split('\n')) {
    if (!line.startsWith('| `')) continue;
    const cells = line.split(/(?<!\\)\|/).slice(1, -1);
    if (cells.length !== 3) continue;
    const names = [...cells[0]!.matchAll(/`([^`]+)`/g)].map((m) => normal(m[1]!));
    const first = names[0]!;
    const parent = first.includes('.') ? first.slice(0, first.lastIndexOf('.')) : '';
    const fields = names.map((n, i) => (i > 0 && !n.includes('.') && parent ? `${parent}.${n}` : n));
    rows.push({ fields, defaultCell: cells[1]!.trim(), meaning: cells[2]! });
  }
  return rows;
}

const rows = referenceRows(REFERENCE);
const fields = fieldsOf(SCHEMA);
const byPath = new Map(fields.map((f) => [f.path, f]));
const rowOf = (path: string): Row | undefined => rows.find((r) => r.fields.includes(path));

/** `admin.tls` → `server.tls` when admin.tls's row says it is "the same block as `server.tls`". */
function sameBlockAs(path: string): string | undefined {
  const m = /same block as `([^`]+)`/.exec(rowOf(path)?.meaning ?? '');
  return m ? normal(m[1]!) : undefined;
}

/** The field and those above it, nearest first: `keys[].id` → `keys[]`, `keys`. */
function above(path: string): string[] {
  const out: string[] = [];
  let p = path;
  while (p) {
    p = p.endsWith('[]') ? p.slice(0, -2) : p.includes('.') ? p.slice(0, p.lastIndexOf('.')) : '';
    if (p) out.push(p);
  }
  return out;
}

/** Why `path` counts as documented, or undefined. */
function documented(path: string): string | undefined {
  if (rowOf(path)) return 'a row of its own';
  const leaf = path.slice(path.lastIndexOf('.') + 1);
  for (const a of above(path)) {
    const same = sameBlockAs(a);
    if (same) return documented(`${same}${path.slice(a.length)}`) && `as ${same}`;
    const row = rowOf(a);
    if (!row) continue;
    // The nearest row above lists its fields in a shape: `{ id, plan, sha256, name?, ... }`.
    const shapes = [...row.meaning.matchAll(/`[^`]*\{([^`]*)\}[^`]*`/g)].map((m) => m[1]!);
    return shapes.some((s) => new RegExp(`(^|[{,\\s])${leaf}\\??(:|,|\\s|$)`).test(s)) ? `in ${a}'s shape` : undefined;
  }
  return undefined;
}

describe('docs/configuration.md, the config reference', () => {
  it('reads the field table (a check of this test itself)', () => {
    expect(rows.length).toBeGreaterThan(100);
    expect(rowOf('redis.tls.keyFile')?.fields[0]).toBe('redis.tls.caFile');
    expect(fields.map((f) => f.path)).toEqual(expect.arrayContaining(['plans.<*>.shadow.perDay', 'services.<*>.targets[].weight', 'admin.tokens[].id']));
    expect(documented('keys[].sha256')).toBe("in keys[]'s shape");
    expect(documented('ops.tls.caFile')).toBe('as server.tls');
    expect(documented('keys[].nosuchfield')).toBeUndefined();
  });

  it('documents every field of the schema', () => {
    // A map's entries (`keys[].metadata.<*>`) and an array's items are documented with the map and the array.
    const missing = fields.filter((f) => !f.container && !/(<\*>|\[\])$/.test(f.path) && !documented(f.path)).map((f) => f.path);
    expect(missing).toEqual([]);
  });

  it('names no field the schema does not have', () => {
    const unknown = rows.flatMap((r) => r.fields).filter((p) => !byPath.has(p));
    expect(unknown).toEqual([]);
  });

  it('a block "the same as" another is the same in the schema', () => {
    const strip = (s: JsonSchema): unknown => JSON.parse(JSON.stringify(s, (k, v: unknown) => (k === 'description' ? undefined : v)));
    for (const r of rows) {
      const same = sameBlockAs(r.fields[0]!);
      if (same) expect(strip(byPath.get(r.fields[0]!)!.schema), `${r.fields[0]} and ${same}`).toEqual(strip(byPath.get(same)!.schema));
    }
  });

  it("states each field's default as the schema has it", () => {
    // A row of one field with a scalar or list default: the default cell holds it in backticks (quotes and spaces aside).
    const squash = (s: string): string => s.replace(/["'\s]/g, '');
    const wrong: string[] = [];
    let checked = 0;
    for (const r of rows) {
      const f = byPath.get(r.fields[0]!);
      if (r.fields.length !== 1 || !f || f.schema.default === undefined || (typeof f.schema.default === 'object' && !Array.isArray(f.schema.default))) continue;
      checked++;
      const stated = [...r.defaultCell.matchAll(/`([^`]+)`/g)].map((m) => squash(m[1]!));
      if (!stated.includes(squash(JSON.stringify(f.schema.default))))
        wrong.push(`${f.path}: schema ${JSON.stringify(f.schema.default)}, reference ${r.defaultCell}`);
    }
    expect(wrong).toEqual([]);
    expect(checked).toBeGreaterThan(60);
  });
});
