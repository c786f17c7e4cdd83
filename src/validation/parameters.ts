// An operation's parameters as values to validate: the path's, the query's and the headers' text split by each
// parameter's style (OpenAPI 3 "style" and "explode": simple for paths and headers, form with or without explode,
// spaceDelimited, pipeDelimited and deepObject for queries, label and matrix for paths) into strings, arrays of
// strings and objects of strings, which Ajv then coerces to the schema's types. Objects are built property by
// property as data, so a parameter named `__proto__` is a property like any other, never a prototype.
import type { IncomingHttpHeaders } from 'node:http';
import { defineOwn, resolveRef } from './schemas.js';

export type ParameterLocation = 'path' | 'query' | 'header';
type Shape = 'array' | 'object' | 'primitive';

export interface ParameterSpec {
  readonly name: string;
  /** Where its value is read: the header's name lower-cased. */
  readonly key: string;
  readonly in: ParameterLocation;
  readonly required: boolean;
  readonly style: string;
  readonly explode: boolean;
  readonly shape: Shape;
  /** A form-exploded object's property names (each is a query parameter of its own). */
  readonly properties: readonly string[];
  /** Described by `content` (a JSON value in the text) rather than by `schema`. */
  readonly json: boolean;
  readonly schema: object | undefined;
}

/** A problem found while reading a value (before its schema is applied): `name` the parameter's key. */
export interface ReadProblem {
  name: string;
  message: string;
}

/** Header parameters OpenAPI says are ignored: the request's framing and credentials are described elsewhere. */
const IGNORED_HEADERS = new Set(['accept', 'content-type', 'authorization']);

/** The parameter specs of an operation's parameter objects ({$ref}s resolved); cookie parameters are not read. */
export function parameterSpecs(parameters: readonly object[], document: object): ParameterSpec[] {
  const out: ParameterSpec[] = [];
  for (const given of parameters) {
    const p = resolveRef(document, given) as Record<string, unknown> | undefined;
    if (!p || typeof p.name !== 'string' || (p.in !== 'path' && p.in !== 'query' && p.in !== 'header')) continue;
    const key = p.in === 'header' ? p.name.toLowerCase() : p.name;
    if (p.in === 'header' && IGNORED_HEADERS.has(key)) continue;
    const content = p.content as Record<string, { schema?: object }> | undefined;
    const contentSchema = content ? Object.values(content)[0]?.schema : undefined;
    const schema = (p.schema as object | undefined) ?? contentSchema;
    const style = typeof p.style === 'string' ? p.style : p.in === 'query' ? 'form' : 'simple';
    const resolved = resolveRef(document, schema) as Record<string, unknown> | undefined;
    out.push({
      name: p.name,
      key,
      in: p.in,
      required: p.in === 'path' || p.required === true,
      style,
      explode: typeof p.explode === 'boolean' ? p.explode : style === 'form',
      shape: p.schema === undefined ? 'primitive' : shapeOf(resolved),
      properties: resolved?.properties && typeof resolved.properties === 'object' ? Object.keys(resolved.properties) : [],
      json: p.schema === undefined && contentSchema !== undefined,
      schema,
    });
  }
  return out;
}

function shapeOf(schema: Record<string, unknown> | undefined): Shape {
  if (!schema) return 'primitive';
  const types = Array.isArray(schema.type) ? (schema.type as unknown[]) : [schema.type];
  if (types.includes('array') || (schema.type === undefined && schema.items !== undefined)) return 'array';
  if (types.includes('object') || (schema.type === undefined && schema.properties !== undefined)) return 'object';
  return 'primitive';
}

/** The raw query string's name/value pairs, decoded as a form is (`+` a space). */
export function queryPairs(raw: string): Array<[string, string]> {
  const q = raw.startsWith('?') ? raw.slice(1) : raw;
  return q === '' ? [] : [...new URLSearchParams(q)];
}

/** The query parameters' values by name (only those present), and what could not be read. */
export function readQuery(specs: readonly ParameterSpec[], raw: string): { values: object; problems: ReadProblem[] } {
  const pairs = queryPairs(raw);
  const values = {};
  const problems: ReadProblem[] = [];
  const all = (name: string): string[] => pairs.filter(([k]) => k === name).map(([, v]) => v);
  // `tag[]=a`, `tag[0]=a`, `id[x]=1`: Express (qs), PHP and Rails read each as `tag` (an array or an object), so a
  // documented parameter written so would reach the backend unchecked. Refused, except deepObject's own `name[prop]`.
  const bracketed = new Set<string>();
  for (const [k] of pairs) {
    const open = k.indexOf('[');
    if (open > 0) bracketed.add(k.slice(0, open));
  }
  for (const s of specs) {
    if (s.style === 'deepObject' || !bracketed.has(s.name)) continue;
    const spelled = pairs.find(([k]) => k.startsWith(`${s.name}[`))![0];
    problems.push({
      name: s.name,
      message: `is written "${short(spelled)}": a backend may read brackets as ${s.name}; send ${s.name}=<value> as its style says`,
    });
  }
  for (const s of specs) {
    if (s.style !== 'deepObject' && bracketed.has(s.name)) continue;
    let value: unknown;
    if (s.json) {
      const v = all(s.name);
      if (v.length > 0) value = parseJson(v[0]!, s.name, problems);
    } else if (s.style === 'deepObject') {
      const open = `${s.name}[`;
      const o = {};
      let any = false;
      for (const [k, v] of pairs) {
        if (!k.startsWith(open) || !k.endsWith(']')) continue;
        const prop = k.slice(open.length, -1);
        const had = Object.hasOwn(o, prop) ? (o as Record<string, unknown>)[prop] : undefined;
        defineOwn(o, prop, had === undefined ? v : [...(Array.isArray(had) ? had : [had]), v]);
        any = true;
      }
      if (any) value = o;
    } else if (s.shape === 'array') {
      const v = all(s.name);
      const sep = s.style === 'spaceDelimited' ? ' ' : s.style === 'pipeDelimited' ? '|' : ',';
      if (s.explode) value = v.length > 0 ? v : undefined;
      else if (v.length > 1) problems.push({ name: s.name, message: `is given ${v.length} times; send one value, its items separated by "${sep}"` });
      else if (v.length === 1) value = v[0] === '' ? [] : v[0]!.split(sep);
    } else if (s.shape === 'object') {
      if (s.explode) {
        const o = {};
        for (const prop of s.properties) {
          const v = all(prop);
          if (v.length > 0) defineOwn(o, prop, v.length === 1 ? v[0] : v);
        }
        if (Object.keys(o).length > 0) value = o;
      } else {
        const v = all(s.name);
        if (v.length > 0) value = pairsObject(v[0]!.split(','), s.name, problems);
      }
    } else {
      const v = all(s.name);
      if (v.length > 1) problems.push({ name: s.name, message: `is given ${v.length} times; it takes one value` });
      else if (v.length === 1) value = v[0];
    }
    if (value !== undefined) defineOwn(values, s.name, value);
  }
  return { values, problems };
}

/** The header parameters' values by lower-case name (simple style: items and properties separated by commas). */
export function readHeaders(specs: readonly ParameterSpec[], headers: IncomingHttpHeaders): { values: object; problems: ReadProblem[] } {
  const values = {};
  const problems: ReadProblem[] = [];
  for (const s of specs) {
    const raw = Object.hasOwn(headers, s.key) ? headers[s.key] : undefined;
    if (raw === undefined) continue;
    const text = Array.isArray(raw) ? raw.join(', ') : raw;
    defineOwn(values, s.key, s.json ? parseJson(text, s.key, problems) : simple(s, text, problems));
  }
  return { values, problems };
}

/** The path parameters' values (given decoded, by name), read by their style: simple, label or matrix. */
export function readPath(specs: readonly ParameterSpec[], params: Readonly<Record<string, string>>): { values: object; problems: ReadProblem[] } {
  const values = {};
  const problems: ReadProblem[] = [];
  for (const s of specs) {
    if (!Object.hasOwn(params, s.name)) continue;
    let text = params[s.name]!;
    if (s.json) {
      defineOwn(values, s.name, parseJson(text, s.name, problems));
      continue;
    }
    if (s.style === 'label') {
      if (!text.startsWith('.')) {
        problems.push({ name: s.name, message: 'must start with "." (label style)' });
        continue;
      }
      text = s.explode ? text.slice(1).replaceAll('.', ',') : text.slice(1);
    } else if (s.style === 'matrix') {
      const lead = `;${s.name}=`;
      if (!text.startsWith(lead)) {
        problems.push({ name: s.name, message: `must start with "${lead}" (matrix style)` });
        continue;
      }
      text =
        s.explode && s.shape === 'array'
          ? text
              .slice(1)
              .split(';')
              .map((p) => p.slice(p.indexOf('=') + 1))
              .join(',')
          : text.slice(lead.length);
    }
    defineOwn(values, s.name, simple(s, text, problems));
  }
  return { values, problems };
}

function simple(s: ParameterSpec, text: string, problems: ReadProblem[]): unknown {
  if (s.shape === 'array') return text === '' ? [] : text.split(',').map((t) => (s.in === 'header' ? t.trim() : t));
  if (s.shape !== 'object') return text;
  const parts = text.split(',').map((t) => t.trim());
  if (!s.explode) return pairsObject(parts, s.key, problems);
  const o = {};
  for (const part of parts) {
    const eq = part.indexOf('=');
    if (eq === -1) problems.push({ name: s.key, message: `"${short(part)}" is not a name=value pair` });
    else defineOwn(o, part.slice(0, eq), part.slice(eq + 1));
  }
  return o;
}

/** An object from a flat list: name, value, name, value. */
function pairsObject(parts: readonly string[], name: string, problems: ReadProblem[]): object | undefined {
  if (parts.length % 2 !== 0) {
    problems.push({ name, message: 'must list names and values in pairs (name,value,name,value)' });
    return undefined;
  }
  const o = {};
  for (let i = 0; i < parts.length; i += 2) defineOwn(o, parts[i]!, parts[i + 1]);
  return o;
}

function parseJson(text: string, name: string, problems: ReadProblem[]): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    problems.push({ name, message: 'is not valid JSON' });
    return undefined;
  }
}

/**
 * Numbers written in text (path, query and header values) as a backend reads them: an integer is decimal digits
 * with an optional minus, a number is a JSON number. Ajv's coercion takes anything `+text` reads (`0x1`, `1.`,
 * `Infinity`, ` 1`), which a backend's parser may read otherwise or refuse. Each problem: a pointer under the
 * parameter (its name, then an item's index or a property's name) and its message.
 */
export function numberSpellings(specs: readonly ParameterSpec[], values: object, document: object): Array<{ at: string[]; message: string }> {
  const out: Array<{ at: string[]; message: string }> = [];
  const visit = (schema: unknown, value: unknown, at: string[], depth: number): void => {
    const sch = resolveRef(document, schema) as Record<string, unknown> | undefined;
    if (!sch || typeof sch !== 'object' || depth > 4) return;
    if (typeof value === 'string') {
      const types = Array.isArray(sch.type) ? (sch.type as unknown[]) : [sch.type];
      // Only what Ajv's coercion would take (Infinity included): text it refuses gets its own message ("must be integer").
      const n = Number(value);
      if (types.includes('string') || value === '' || Number.isNaN(n)) return;
      if (types.includes('integer')) {
        if (!INTEGER_TEXT.test(value) && !(Number.isFinite(n) && !Number.isInteger(n)))
          out.push({ at, message: 'must be an integer written in decimal digits' });
      } else if (types.includes('number') && !(NUMBER_TEXT.test(value) && Number.isFinite(n)))
        out.push({ at, message: 'must be a finite number written as JSON writes one (such as -1.5 or 2e3)' });
    } else if (Array.isArray(value)) value.forEach((item, i) => visit(sch.items, item, [...at, String(i)], depth + 1));
    else if (value !== null && typeof value === 'object' && sch.properties && typeof sch.properties === 'object')
      for (const [k, v] of Object.entries(value))
        if (Object.hasOwn(sch.properties, k)) visit((sch.properties as Record<string, unknown>)[k], v, [...at, k], depth + 1);
  };
  for (const s of specs) if (!s.json && Object.hasOwn(values, s.key)) visit(s.schema, (values as Record<string, unknown>)[s.key], [s.key], 0);
  return out;
}

const INTEGER_TEXT = /^-?[0-9]+$/;
const NUMBER_TEXT = /^-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

function short(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}
