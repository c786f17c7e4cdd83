// The JSON Schemas of an OpenAPI document as Ajv compiles them. One Ajv instance per document (per config load), to
// which the whole document is added once, so every `#/components/...` reference (recursive ones included) resolves
// against it and each referenced schema is compiled once however many operations use it. OpenAPI 3.1 schemas are
// JSON Schema 2020-12 (Ajv2020); 3.0's are a dialect of draft 07 whose `nullable` and boolean
// exclusiveMinimum/Maximum are rewritten into draft 07 here. Ajv rather than a hand-written checker: formats,
// unicode-aware lengths, patterns, $ref resolution and code generation (about a microsecond per small body) are its
// trade, and it is the validator most OpenAPI tools use.
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { linearRegExp } from './patterns.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type AnyAjv = Ajv | Ajv2020;

/** What compiles an operation's schemas: for parameters (strings coerced to the schema's types) and for bodies (as sent). */
export interface DocumentSchemas {
  readonly version: '3.0' | '3.1';
  /** The document, 3.0's schemas already rewritten: what `$ref`s are looked up in. */
  readonly document: object;
  /** Compiles `schema` (taken from the document: its `#/` references are the document's) for a part of the request. */
  compile(schema: object, coerce: boolean): ValidateFunction;
}

/** The part of a document a request cannot reach the end of: a schema that refers to itself with nothing in between. */
export class DescriptionError extends Error {}

const byDocument = new WeakMap<object, DocumentSchemas>();
let documents = 0;

/** The document's schemas, made once per document object (a config load reads each document once). */
export function schemasOf(document: object, version: '3.0' | '3.1'): DocumentSchemas {
  let found = byDocument.get(document);
  if (!found) {
    found = new Schemas(document, version, `tollgate-openapi-${++documents}`);
    byDocument.set(document, found);
  }
  return found;
}

class Schemas implements DocumentSchemas {
  readonly document: object;
  private plain: AnyAjv | undefined;
  private coercing: AnyAjv | undefined;

  constructor(
    document: object,
    readonly version: '3.0' | '3.1',
    private readonly key: string,
  ) {
    this.document = version === '3.0' ? (rewrite30(document as Json) as object) : document;
  }

  compile(schema: object, coerce: boolean): ValidateFunction {
    const ajv = coerce ? (this.coercing ??= this.make(true)) : (this.plain ??= this.make(false));
    const own = withDocumentRefs(this.version === '3.0' ? (rewrite30(schema as Json) as object) : schema, this.key);
    refuseEndlessRefs(own, this.document);
    return ajv.compile(own);
  }

  private make(coerce: boolean): AnyAjv {
    const options = {
      // OpenAPI's own keywords in schemas (example, xml, externalDocs, discriminator, deprecated) are not JSON Schema.
      strict: false,
      allErrors: true,
      // A 3.1 document's $schema names OpenAPI's dialect, which Ajv has no meta-schema for; the loader checked it.
      validateSchema: false,
      // Parameters arrive as text: "20" is an integer 20, one value is an array of one. Bodies are JSON as sent.
      coerceTypes: coerce ? ('array' as const) : false,
      // A failed anyOf/oneOf's error carries its alternatives and the value (validator.ts explains it by the closest
      // alternative); the validator takes the errors off the function at once, so no request's data stays referenced.
      verbose: true,
      messages: true,
      // Patterns are matched in linear time (patterns.ts): a document's pattern cannot hold the event loop.
      code: { regExp: linearRegExp },
      // Infinity and NaN are no JSON numbers: a body's -1e400 (parsed as -Infinity) is refused, not passed on.
      strictNumbers: true,
    };
    const ajv: AnyAjv = this.version === '3.1' ? new Ajv2020(options) : new Ajv(options);
    (addFormats as unknown as (a: AnyAjv) => void)(ajv);
    // OpenAPI's own formats for numbers (int32, int64, float, double) and strings (byte, binary, password): ranges
    // for the integers, nothing for the rest.
    ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -2147483648 && n <= 2147483647 });
    ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isInteger(n) && Math.abs(n) <= 2 ** 63 });
    for (const f of ['float', 'double']) ajv.addFormat(f, { type: 'number', validate: () => true });
    for (const f of ['byte', 'binary', 'password']) ajv.addFormat(f, true);
    ajv.addSchema(this.document, this.key);
    return ajv;
  }
}

/**
 * OpenAPI 3.0's schema dialect as draft 07: `nullable: true` adds null to the type (or the enum), and a boolean
 * exclusiveMinimum/exclusiveMaximum becomes draft 07's number form. A copy: the loader's document is not changed.
 * Examples are copied as they are (their values are data, not schemas).
 */
export function rewrite30(node: Json): Json {
  if (Array.isArray(node)) return node.map(rewrite30);
  if (node === null || typeof node !== 'object') return node;
  const out: { [k: string]: Json } = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'example' || k === 'examples' || k === 'default' || k === 'enum' || k === 'const') defineOwn(out, k, v);
    else defineOwn(out, k, rewrite30(v));
  }
  for (const bound of ['Minimum', 'Maximum'] as const) {
    const exclusive = out[`exclusive${bound}`];
    const limit = out[bound.toLowerCase()];
    if (exclusive === true && typeof limit === 'number') {
      out[`exclusive${bound}`] = limit;
      delete out[bound.toLowerCase()];
    } else if (typeof exclusive === 'boolean') delete out[`exclusive${bound}`];
  }
  if (out.nullable === true) {
    delete out.nullable;
    const t = out.type;
    if (typeof t === 'string') out.type = [t, 'null'];
    else if (Array.isArray(t) && !t.includes('null')) out.type = [...t, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    if (t === undefined && out.enum === undefined) return { anyOf: [out, { type: 'null' }] };
  } else if (typeof out.nullable === 'boolean') delete out.nullable;
  return out;
}

/** A copy of `schema` whose document-relative references (`#/...`) name the document as added to Ajv. */
function withDocumentRefs(schema: object, key: string): object {
  const copy = (node: unknown, inData: boolean): unknown => {
    if (Array.isArray(node)) return node.map((n) => copy(n, inData));
    if (node === null || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) {
      const data = inData || k === 'example' || k === 'examples' || k === 'default' || k === 'enum' || k === 'const';
      if (!inData && k === '$ref' && typeof v === 'string' && v.startsWith('#')) defineOwn(out, k, `${key}${v}`);
      else defineOwn(out, k, copy(v, data));
    }
    return out;
  };
  return copy(schema, false) as object;
}

/** Sets a property as data, whatever its name (`__proto__` included): never the object's prototype. */
export function defineOwn(o: object, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

/** The value at a JSON pointer in `root` (`#/a/b` or `/a/b`), own properties only; undefined when there is none. */
export function atPointer(root: unknown, pointer: string): unknown {
  const p = pointer.startsWith('#') ? pointer.slice(1) : pointer;
  if (p === '') return root;
  let at: unknown = root;
  for (const raw of p.slice(1).split('/')) {
    const part = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, part)) return undefined;
    at = (at as Record<string, unknown>)[part];
  }
  return at;
}

/** Follows `{ $ref }` objects (parameters, request bodies, schemas) to what they name, or undefined for a broken one. */
export function resolveRef(document: object, node: unknown): unknown {
  const seen = new Set<string>();
  let at = node;
  while (at !== null && typeof at === 'object' && typeof (at as { $ref?: unknown }).$ref === 'string') {
    const ref = (at as { $ref: string }).$ref;
    if (!ref.startsWith('#') || seen.has(ref)) return undefined;
    seen.add(ref);
    at = atPointer(document, ref);
  }
  return at;
}

/** The keywords that apply their schemas to the same value (no step into the data): a cycle through them never ends. */
const IN_PLACE = ['allOf', 'anyOf', 'oneOf', 'not', 'if', 'then', 'else', '$ref', 'dependentSchemas'];

/**
 * Refuses a schema that refers to itself without a step into the data in between (`A: {$ref: B}`, `B: {allOf:
 * [{$ref: A}]}`): Ajv would recurse until the stack ran out, at compile time or on the first request. A reference
 * through `properties` or `items` (a tree) is fine: each step is a level of the data, and the data's depth is bounded.
 */
function refuseEndlessRefs(schema: object, document: object): void {
  const done = new Set<unknown>();
  const visit = (node: unknown, path: string[], onPath: Set<unknown>): void => {
    if (node === null || typeof node !== 'object' || done.has(node)) return;
    if (onPath.has(node)) throw new DescriptionError(`a schema refers to itself with nothing in between (${path.join(' -> ')})`);
    onPath.add(node);
    const o = node as Record<string, unknown>;
    for (const k of IN_PLACE) {
      const v = o[k];
      if (!Object.hasOwn(o, k)) continue;
      if (k === '$ref' && typeof v === 'string') {
        const ref = fragmentOf(v);
        const target = ref === undefined ? undefined : atPointer(document, ref);
        if (target === undefined) throw new DescriptionError(`$ref ${ref ?? v} names nothing in the document`);
        visit(target, [...path, ref ?? v], onPath);
      } else if (Array.isArray(v)) v.forEach((s) => visit(s, path, onPath));
      else if (v !== null && typeof v === 'object') {
        if (k === 'dependentSchemas') for (const s of Object.values(v)) visit(s, path, onPath);
        else visit(v, path, onPath);
      }
    }
    onPath.delete(node);
    done.add(node);
  };
  // Every schema reachable from the one given is a starting point: a loop may sit under a property of a schema that
  // one of its references names.
  const reached = new Set<unknown>();
  const pending: unknown[] = [schema];
  while (pending.length > 0) {
    const node = pending.pop();
    if (node === null || typeof node !== 'object' || reached.has(node)) continue;
    reached.add(node);
    visit(node, ['(schema)'], new Set());
    for (const [k, v] of Object.entries(node)) {
      if (DATA_KEYWORDS.has(k)) continue;
      if (k === '$ref' && typeof v === 'string') pending.push(atPointer(document, fragmentOf(v) ?? '#/~'));
      else pending.push(v);
    }
  }
}

/** A reference's place in the document (`#/...`), or undefined for one outside it. */
function fragmentOf(ref: string): string | undefined {
  const hash = ref.indexOf('#');
  return hash === -1 ? undefined : ref.slice(hash);
}

/** Keywords whose values are data, not schemas. */
const DATA_KEYWORDS = new Set(['example', 'examples', 'enum', 'const', 'default']);
