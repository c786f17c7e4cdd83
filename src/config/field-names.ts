// "did you mean ...?" for a field the schema does not know: the nearest field name the schema has at the same place,
// so a misspelt field is named with its fix rather than only refused. The names come from the schema itself, never
// a second list that could drift from it.
import { distance } from 'fastest-levenshtein';
import type { z } from 'zod';

/** The field names an object schema at `path` (below `schema`) has, or none when no object is there. */
export function knownFieldsAt(schema: z.core.$ZodType, path: ReadonlyArray<PropertyKey>): string[] {
  let at: z.core.$ZodType | undefined = schema;
  for (const seg of path) {
    at = child(unwrap(at), seg);
    if (!at) return [];
  }
  const objects = alternatives(unwrap(at));
  return [...new Set(objects.flatMap((o) => Object.keys((o._zod.def as unknown as { shape: Record<string, unknown> }).shape)))];
}

/**
 * The known name nearest to `typed`, when near enough to be a slip rather than another word: letter case ignored, one
 * edit for a name of up to 4 letters (two letters swapped count as one: "prot" is port), else two, or a third of its
 * letters if more. Ties go to the first name in the schema's order.
 */
export function nearestField(typed: string, known: readonly string[]): string | undefined {
  const t = typed.toLowerCase();
  const limit = t.length <= 4 ? 1 : Math.max(2, Math.floor(t.length / 3));
  let best: { name: string; d: number } | undefined;
  for (const name of known) {
    const n = name.toLowerCase();
    const d = swapped(t, n) ? 1 : distance(t, n);
    if (d <= limit && (!best || d < best.d)) best = { name, d };
  }
  return best?.name;
}

/** Whether `a` is `b` with two neighbouring letters swapped. */
function swapped(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  const diff = [...a].flatMap((c, i) => (c === b[i] ? [] : [i]));
  return diff.length === 2 && diff[1] === diff[0]! + 1 && a[diff[0]!] === b[diff[1]!] && a[diff[1]!] === b[diff[0]!];
}

type Def = { type: string; innerType?: z.core.$ZodType; in?: z.core.$ZodType; out?: z.core.$ZodType; options?: z.core.$ZodType[] };

/** Through the wrappers that hold one schema (optional, default, a pipe's input side, ...). */
function unwrap(s: z.core.$ZodType): z.core.$ZodType {
  for (let i = 0; i < 32; i++) {
    const def = s._zod.def as unknown as Def;
    const inner = def.innerType ?? (def.type === 'pipe' ? def.in : undefined);
    if (!inner) return s;
    s = inner;
  }
  return s;
}

/** The object schemas a value here may be: the object itself, or each object of a union. */
function alternatives(s: z.core.$ZodType): z.core.$ZodType[] {
  const def = s._zod.def as unknown as Def;
  if (def.type === 'object') return [s];
  if (def.type === 'union') return (def.options ?? []).map(unwrap).flatMap(alternatives);
  return [];
}

function child(s: z.core.$ZodType, seg: PropertyKey): z.core.$ZodType | undefined {
  const def = s._zod.def as unknown as Def & { shape?: Record<string, z.core.$ZodType>; element?: z.core.$ZodType; valueType?: z.core.$ZodType };
  if (def.type === 'array' && typeof seg === 'number') return def.element;
  if (def.type === 'record') return def.valueType;
  if (def.type === 'object' && typeof seg === 'string') return Object.hasOwn(def.shape ?? {}, seg) ? def.shape![seg] : undefined;
  if (def.type === 'union') {
    for (const o of def.options ?? []) {
      const c = child(unwrap(o), seg);
      if (c) return c;
    }
  }
  return undefined;
}
