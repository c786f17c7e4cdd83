// Request validation against a service's OpenAPI description: an operation's path, query and header parameters and
// its JSON request body, checked with the schemas the document gives them. compileRequestValidator() is called once
// per operation and config load (cached by operation); the schemas are compiled by Ajv on the operation's first
// request, since a document of 10,000 operations would cost seconds to compile whole at every reload (bench/README.md,
// "Request validation"). What is wrong comes back as a list of problems, each with a JSON pointer into the request
// (/path/petId, /query/limit, /headers/x-trace, /body/name/0) and a message a client developer can act on.
import type { IncomingHttpHeaders } from 'node:http';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { LoadedDocuments, OpenApiOperation } from '../openapi/operations.js';
import {
  numberSpellings,
  parameterSpecs,
  readHeaders,
  readPath,
  readQuery,
  type ParameterLocation,
  type ParameterSpec,
  type ReadProblem,
} from './parameters.js';
import { MAX_PATTERN_INPUT } from './patterns.js';
import { DescriptionError, resolveRef, schemasOf, type DocumentSchemas } from './schemas.js';

export { DescriptionError } from './schemas.js';

export interface ValidationProblem {
  /** Where in the request: /path/<name>, /query/<name>, /headers/<lower-case name>, /body, /body/<json pointer>. */
  pointer: string;
  message: string;
}

export interface RequestInput {
  /** The path parameters by name, percent-decoded (RequestValidator.pathParams reads them from a path). */
  path: Readonly<Record<string, string>>;
  /** The raw query string, without the "?". */
  query: string;
  headers: IncomingHttpHeaders;
  /** The body already parsed (JSON): used when `rawBody` is not given. */
  body?: unknown;
  /** The body's bytes as received: parsed here (UTF-8, JSON, depth bounded). */
  rawBody?: Buffer;
}

export interface RequestValidator {
  /** Whether the operation describes a JSON body with a schema: a request with such a body needs it read first. */
  readonly needsBody: boolean;
  /** Whether this request's body must be read for validation: it has one, of a JSON media type the operation describes. */
  wantsBody(headers: IncomingHttpHeaders): boolean;
  /** The path parameters of a request path (as routes match it) by the operation's template, percent-decoded. */
  pathParams(path: string): Record<string, string>;
  /**
   * Every problem found, at most MAX_PROBLEMS (then one more saying how many were left out); empty when the request
   * matches. Throws DescriptionError when the operation's description cannot be applied (a schema that refers to
   * itself with nothing in between, a $ref to nothing, a pattern Ajv cannot compile): the document's fault, not the
   * request's.
   */
  validate(input: RequestInput): ValidationProblem[];
}

/** Problems listed in one answer; more are summed up in one last problem. */
export const MAX_PROBLEMS = 20;
/** A JSON body nested deeper than this is refused before its schema is applied (a recursive schema would recurse as deep). */
export const MAX_BODY_DEPTH = 64;

const cache = new WeakMap<OpenApiOperation, RequestValidator>();

/** The validator of an operation: made once per operation object (per config load), its schemas compiled on first use. */
export function compileRequestValidator(op: OpenApiOperation): RequestValidator {
  let v = cache.get(op);
  if (!v) cache.set(op, (v = new OperationValidator(op)));
  return v;
}

/** An operation's name in metrics and reports: its operationId, else "<METHOD> <path template>". */
export function operationName(op: Pick<OpenApiOperation, 'operationId' | 'method' | 'pathTemplate'>): string {
  return op.operationId ?? `${op.method} ${op.pathTemplate}`;
}

/** Compiles every schema of the operation now: the reason it cannot be applied, or undefined when it can (config check). */
export function checkOperation(op: OpenApiOperation): string | undefined {
  try {
    (compileRequestValidator(op) as OperationValidator).compiled();
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * `config check` and start-up warnings: every operation whose requests are checked (validate shadow or enforce) and
 * whose description cannot be applied, named by file#pointer. Otherwise the operator learns it from an error line on
 * the operation's first request. It compiles each such operation's schemas now (about 1.5 ms each): the work its
 * first request would do, kept for it (compiled checks are cached on the operation), one operation per turn of the
 * event loop, so a large document delays no request by more than one operation's compile.
 */
export async function descriptionWarnings(documents: Pick<LoadedDocuments, 'routes'> | undefined): Promise<string[]> {
  const out: string[] = [];
  for (const route of documents?.routes ?? []) {
    const op = route?.operation;
    if (!op || op.validate === 'off') continue;
    const why = checkOperation(op);
    if (why !== undefined) {
      const at = `${op.file}#${op.pointer}`;
      out.push(
        `${at}: its description cannot be applied, so request validation is off for this operation: ${why.startsWith(`${at}: `) ? why.slice(at.length + 2) : why}`,
      );
    }
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return out;
}

interface Compiled {
  /**
   * Per place: its parameters, and the checks of their values: `check` for those read from text (coerced to their
   * schemas' types), `strict` for JSON-encoded ones (content), which are taken as they are.
   */
  readonly locations: ReadonlyArray<{ in: ParameterLocation; specs: ParameterSpec[]; checks: ValidateFunction[] }>;
  /** By lower-case media type (or range, `application/*`): the schema's check, or undefined when it has none. */
  readonly bodies: ReadonlyMap<string, ValidateFunction | undefined>;
}

interface BodyDescription {
  required: boolean;
  /** Lower-case media types and ranges the operation lists. */
  types: string[];
  /** Those of them that are JSON and have a schema. */
  jsonWithSchema: Set<string>;
}

class OperationValidator implements RequestValidator {
  readonly needsBody: boolean;
  private readonly schemas: DocumentSchemas;
  private readonly specs: ParameterSpec[];
  private readonly body: BodyDescription | undefined;
  private readonly pathPattern: { re: RegExp; names: string[] };
  private built: Compiled | DescriptionError | undefined;

  constructor(private readonly op: OpenApiOperation) {
    this.schemas = schemasOf(op.document, op.openapiVersion);
    const doc = this.schemas.document;
    this.specs = parameterSpecs(op.parameters, doc);
    const rb = resolveRef(doc, op.requestBody) as { required?: unknown; content?: Record<string, { schema?: unknown }> } | undefined;
    if (rb && rb.content && typeof rb.content === 'object') {
      const types = Object.keys(rb.content).map((t) => t.toLowerCase());
      const jsonWithSchema = new Set(
        Object.entries(rb.content)
          .filter(([t, m]) => isJsonType(t.toLowerCase()) && m && typeof m === 'object' && m.schema !== undefined)
          .map(([t]) => t.toLowerCase()),
      );
      this.body = { required: rb.required === true, types, jsonWithSchema };
    }
    this.needsBody = (this.body?.jsonWithSchema.size ?? 0) > 0;
    this.pathPattern = templatePattern(op.pathTemplate);
  }

  wantsBody(headers: IncomingHttpHeaders): boolean {
    if (!this.needsBody || !hasBody(headers)) return false;
    const type = this.mediaTypeOf(headers);
    return type !== undefined && this.body!.jsonWithSchema.has(type);
  }

  pathParams(path: string): Record<string, string> {
    const m = this.pathPattern.re.exec(path);
    const out: Record<string, string> = {};
    if (!m) return out;
    this.pathPattern.names.forEach((name, i) => {
      const raw = m[i + 1]!;
      let value = raw;
      try {
        value = decodeURIComponent(raw);
      } catch {
        // A malformed escape stays as sent; its schema judges it.
      }
      Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
    });
    return out;
  }

  validate(input: RequestInput): ValidationProblem[] {
    const c = this.compiled();
    const found: ValidationProblem[] = [];
    /** Problems past those converted (a 100,000-item array of wrong items gives 100,000 errors): counted only. */
    let more = 0;
    for (const loc of c.locations) {
      const read =
        loc.in === 'path' ? readPath(loc.specs, input.path) : loc.in === 'query' ? readQuery(loc.specs, input.query) : readHeaders(loc.specs, input.headers);
      const prefix = loc.in === 'header' ? '/headers' : `/${loc.in}`;
      for (const p of read.problems) found.push({ pointer: `${prefix}/${escapePointer(p.name)}`, message: p.message });
      for (const p of numberSpellings(loc.specs, read.values, this.schemas.document))
        found.push({ pointer: `${prefix}/${p.at.map(escapePointer).join('/')}`, message: p.message });
      for (const check of loc.checks)
        if (!check(read.values)) more += problemsOf(this.closest(takeErrors(check), true), prefix, read.problems, found, read.values);
    }
    more += this.validateBody(c, input, found);
    return capped(dedupe(found), more).map(clipped);
  }

  /**
   * Ajv's errors with each failed anyOf/oneOf explained by its closest alternative only: Ajv lists every
   * alternative's complaints (13 problems for one wrong property type, 12 of them about alternatives the client never
   * meant), so each alternative is checked again on its own, the one with the fewest problems is kept, and a summary
   * says how many there were. An alternative's errors come just before its anyOf/oneOf error, as many as the
   * alternatives give on their own; where that does not add up, or there are more than MAX_ALTERNATIVES_EXPLAINED
   * alternatives, or the request has used its budget of such checks, Ajv's list is kept as it is.
   */
  private closest(errors: ErrorObject[], coerce: boolean, budget = { checks: MAX_ALTERNATIVE_CHECKS }): ErrorObject[] {
    if (!errors.some((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf')) return errors;
    const reversed: ErrorObject[] = [];
    let i = errors.length - 1;
    while (i >= 0) {
      const e = errors[i]!;
      const found = e.keyword === 'anyOf' || e.keyword === 'oneOf' ? this.closestAlternative(e, coerce, budget) : undefined;
      const start = found ? i - found.total : -1;
      if (found && start >= 0 && errors.slice(start, i).every((x) => x.instancePath.startsWith(e.instancePath))) {
        const summary: ErrorObject = {
          keyword: 'closestAlternative',
          instancePath: e.instancePath,
          schemaPath: e.schemaPath,
          params: { keyword: e.keyword, count: found.count, index: found.index },
        };
        const own = this.closest(found.errors, coerce, budget).map((x) => ({ ...x, instancePath: e.instancePath + x.instancePath }));
        reversed.push(summary, ...own.reverse());
        i = start - 1;
        continue;
      }
      reversed.push(e);
      i--;
    }
    return reversed.reverse();
  }

  /** The alternative of a failed anyOf/oneOf with the fewest errors on its own, and how many errors they all give. */
  private closestAlternative(
    e: ErrorObject,
    coerce: boolean,
    budget: { checks: number },
  ): { index: number; count: number; errors: ErrorObject[]; total: number } | undefined {
    const alternatives = e.schema;
    // A oneOf that failed because several alternatives matched has no closest one.
    if (!Array.isArray(alternatives) || alternatives.length > MAX_ALTERNATIVES_EXPLAINED || (e.params as { passingSchemas?: unknown }).passingSchemas != null)
      return undefined;
    if (budget.checks < alternatives.length) return undefined;
    budget.checks -= alternatives.length;
    let best: { index: number; errors: ErrorObject[]; score: number } | undefined;
    let total = 0;
    try {
      alternatives.forEach((schema: unknown, index) => {
        const check = this.alternativeCheck(schema, coerce);
        const errors = check(e.data) ? [] : takeErrors(check);
        total += errors.length;
        const score = distance(errors);
        if (errors.length > 0 && (best === undefined || score < best.score)) best = { index, errors, score };
      });
    } catch {
      return undefined;
    }
    return best ? { index: best.index, errors: best.errors, count: alternatives.length, total } : undefined;
  }

  private readonly alternatives = new WeakMap<object, ValidateFunction>();

  private alternativeCheck(schema: unknown, coerce: boolean): ValidateFunction {
    const key = (schema !== null && typeof schema === 'object' ? schema : { schema }) as object;
    let check = this.alternatives.get(key);
    if (!check) this.alternatives.set(key, (check = this.schemas.compile(key === schema ? key : { allOf: [schema] }, coerce)));
    return check;
  }

  /** Compiles the schemas on first use; a description that cannot be applied fails every call the same way. */
  compiled(): Compiled {
    if (this.built instanceof DescriptionError) throw this.built;
    if (this.built) return this.built;
    try {
      this.built = this.compile();
    } catch (err) {
      const why = err instanceof RangeError ? 'a schema refers to itself with nothing in between' : err instanceof Error ? err.message : String(err);
      this.built = new DescriptionError(`${this.op.file}#${this.op.pointer}: ${why}`);
    }
    if (this.built instanceof DescriptionError) throw this.built;
    return this.built;
  }

  private compile(): Compiled {
    const locations: Array<Compiled['locations'][number]> = [];
    for (const where of ['path', 'query', 'header'] as const) {
      const specs = this.specs.filter((s) => s.in === where);
      if (specs.length === 0) continue;
      const checks: ValidateFunction[] = [];
      for (const json of [false, true]) {
        const these = specs.filter((s) => s.json === json);
        if (these.length === 0) continue;
        const properties: Record<string, object> = {};
        for (const s of these) Object.defineProperty(properties, s.key, { value: s.schema ?? {}, enumerable: true });
        const required = these.filter((s) => s.required).map((s) => s.key);
        checks.push(this.schemas.compile({ type: 'object', properties, required }, !json));
      }
      locations.push({ in: where, specs, checks });
    }
    const bodies = new Map<string, ValidateFunction | undefined>();
    const rb = resolveRef(this.schemas.document, this.op.requestBody) as { content?: Record<string, { schema?: object }> } | undefined;
    for (const [type, media] of Object.entries(rb?.content ?? {})) {
      const t = type.toLowerCase();
      bodies.set(t, this.body?.jsonWithSchema.has(t) ? this.schemas.compile(media.schema!, false) : undefined);
    }
    return { locations, bodies };
  }

  private validateBody(c: Compiled, input: RequestInput, found: ValidationProblem[]): number {
    const present = input.rawBody !== undefined ? input.rawBody.length > 0 : input.body !== undefined || hasBody(input.headers);
    if (!this.body) {
      if (present) found.push({ pointer: '/body', message: 'this operation takes no request body' });
      return 0;
    }
    if (!present) {
      if (this.body.required) found.push({ pointer: '/body', message: `is required (${this.body.types.join(', ')})` });
      return 0;
    }
    const type = this.mediaTypeOf(input.headers);
    if (type === undefined) {
      const given = input.headers['content-type'];
      found.push({
        pointer: '/headers/content-type',
        message:
          given === undefined || given === ''
            ? `is required with a body: one of ${this.body.types.join(', ')}`
            : `must be one of ${this.body.types.join(', ')} for this operation's body`,
      });
      return 0;
    }
    const check = c.bodies.get(type);
    if (!check) return 0;
    let value: unknown = input.body;
    if (input.rawBody !== undefined) {
      const parsed = parseBody(input.rawBody);
      if ('problem' in parsed) {
        found.push({ pointer: `/body${parsed.at ?? ''}`, message: parsed.problem });
        return 0;
      }
      value = parsed.value;
    }
    if (depthOver(value, MAX_BODY_DEPTH)) {
      found.push({ pointer: '/body', message: `is nested more than ${MAX_BODY_DEPTH} levels deep` });
      return 0;
    }
    let ok: boolean;
    try {
      ok = check(value) as boolean;
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      found.push({ pointer: '/body', message: 'could not be checked: it is nested too deeply' });
      return 0;
    }
    return ok ? 0 : problemsOf(this.closest(takeErrors(check), false), '/body', [], found, value);
  }

  /** The request's media type if the operation lists it (exactly, or by a range such as application/* or *\/*). */
  private mediaTypeOf(headers: IncomingHttpHeaders): string | undefined {
    const given = headers['content-type'];
    if (given === undefined || !this.body) return undefined;
    const type = given.split(';')[0]!.trim().toLowerCase();
    if (type === '' || !type.includes('/')) return undefined;
    const types = this.body.types;
    if (types.includes(type)) return type;
    const range = `${type.slice(0, type.indexOf('/'))}/*`;
    if (types.includes(range)) return range;
    return types.includes('*/*') ? '*/*' : undefined;
  }
}

/** application/json and any `+json` media type (application/problem+json, application/vnd.x+json). */
export function isJsonType(type: string): boolean {
  const t = type.split(';')[0]!.trim().toLowerCase();
  return t === 'application/json' || t.endsWith('+json');
}

function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** The body's bytes as JSON: UTF-8 strictly; a syntax error is named, never quoted back. */
function parseBody(raw: Buffer): { value: unknown } | { problem: string; at?: string } {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(raw);
  } catch {
    return { problem: 'is not valid UTF-8 text' };
  }
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    // V8's message quotes the body: not repeated back (nor into logs).
    return { problem: 'is not valid JSON' };
  }
  const twice = duplicateKey(text);
  if (twice !== undefined) return { problem: 'has a key given twice in one object: a backend may read either value', at: twice };
  return { value };
}

/**
 * The JSON pointer of the first key given twice in one object of `text` (valid JSON), or undefined. JSON.parse keeps
 * the last value, a backend's parser may keep the first: the gateway would have checked a value the backend never
 * reads. One pass over the text (the body is at most server.maxBodyBytes), keys kept per open object only.
 */
export function duplicateKey(text: string): string | undefined {
  const stack: Array<{ keys: Set<string> | undefined; expectKey: boolean; segment: string; index: number }> = [];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      let escaped = false;
      while (j < n && text.charCodeAt(j) !== 0x22) {
        if (text.charCodeAt(j) === 0x5c) {
          escaped = true;
          j++;
        }
        j++;
      }
      const top = stack[stack.length - 1];
      if (top?.keys && top.expectKey) {
        const key = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        if (top.keys.has(key))
          return [...stack.slice(0, -1).map((f) => f.segment), key]
            .map(escapePointer)
            .map((p) => `/${p}`)
            .join('');
        top.keys.add(key);
        top.segment = key;
        top.expectKey = false;
      }
      i = j;
    } else if (c === 0x7b) stack.push({ keys: new Set(), expectKey: true, segment: '', index: 0 });
    else if (c === 0x5b) stack.push({ keys: undefined, expectKey: false, segment: '0', index: 0 });
    else if (c === 0x7d || c === 0x5d) stack.pop();
    else if (c === 0x2c) {
      const top = stack[stack.length - 1];
      if (top?.keys) top.expectKey = true;
      else if (top) top.segment = String(++top.index);
    }
  }
  return undefined;
}

/** Whether a JSON value nests deeper than `max` arrays and objects (counted without recursion). */
function depthOver(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (d + 1 > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v as object)) if (child !== null && typeof child === 'object') stack.push([child, d + 1]);
  }
  return false;
}

/** The template's path as a pattern: `{name}` one segment (any characters but "/"), the rest literal. */
function templatePattern(template: string): { re: RegExp; names: string[] } {
  const names: string[] = [];
  let source = '';
  let at = 0;
  for (const m of template.matchAll(/\{([^}]+)\}/g)) {
    source += escapeRegExp(template.slice(at, m.index)) + '([^/]+)';
    names.push(m[1]!);
    at = m.index + m[0].length;
  }
  source += escapeRegExp(template.slice(at));
  return { re: new RegExp(`^${source}/?$`), names };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function escapePointer(name: string): string {
  return name.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * Ajv's errors as problems under `prefix`, added to `out` while it has fewer than CONVERTED; answers how many were left
 * out. A required value the reading already found fault with is not listed again.
 */
function problemsOf(errors: readonly ErrorObject[], prefix: string, read: readonly ReadProblem[], out: ValidationProblem[], data: unknown): number {
  let left = 0;
  for (const e of errors) {
    if (out.length >= CONVERTED) {
      left++;
      continue;
    }
    const at = prefix + e.instancePath;
    const params = e.params as Record<string, unknown>;
    switch (e.keyword) {
      case 'required': {
        const name = String(params.missingProperty);
        if (e.instancePath === '' && read.some((r) => r.name === name)) continue;
        out.push({ pointer: `${at}/${escapePointer(name)}`, message: 'is required' });
        break;
      }
      case 'additionalProperties':
        out.push({ pointer: `${at}/${escapePointer(String(params.additionalProperty))}`, message: 'is not a property this operation takes' });
        break;
      case 'unevaluatedProperties':
        out.push({ pointer: `${at}/${escapePointer(String(params.unevaluatedProperty))}`, message: 'is not a property this operation takes' });
        break;
      case 'enum':
        out.push({ pointer: at, message: `must be one of ${listed(params.allowedValues as unknown[])}` });
        break;
      case 'const':
        out.push({ pointer: at, message: `must be ${listed([params.allowedValue])}` });
        break;
      case 'type':
        out.push({ pointer: at, message: `must be ${String(params.type).replaceAll(',', ' or ')}` });
        break;
      case 'format':
        out.push({ pointer: at, message: `must be a valid ${String(params.format)}` });
        break;
      case 'pattern': {
        const value = valueAt(data, e.instancePath);
        out.push({
          pointer: at,
          message:
            typeof value === 'string' && value.length > MAX_PATTERN_INPUT
              ? `is ${value.length} characters long: a value matched against a pattern may have at most ${MAX_PATTERN_INPUT}`
              : `must match pattern ${JSON.stringify(String(params.pattern))}`,
        });
        break;
      }
      case 'closestAlternative': {
        const n = Number(params.count);
        out.push({
          pointer: at,
          message: `matches none of its ${n} alternatives (${String(params.keyword)}); the problems listed are those of the closest, alternative ${Number(params.index) + 1}`,
        });
        break;
      }
      // A branch that failed is told by its own errors; "must match a schema in anyOf" adds the summary.
      default:
        out.push({ pointer: at, message: e.message ?? `fails ${e.keyword}` });
    }
  }
  return left;
}

/**
 * How far a value is from an alternative, by that alternative's errors: one whose type the value does not have at all
 * is the farthest, one whose `const` or `enum` it misses (a discriminator such as `type: card`) next, then by count.
 */
function distance(errors: readonly ErrorObject[]): number {
  let score = errors.length;
  for (const e of errors) {
    if (e.keyword === 'type' && e.instancePath === '') score += 1_000_000;
    else if (e.keyword === 'const' || e.keyword === 'enum') score += 1_000;
  }
  return score;
}

/** A validator's errors, taken off it: it would otherwise hold the request's data (verbose errors) until its next call. */
function takeErrors(check: ValidateFunction): ErrorObject[] {
  const errors = check.errors ?? [];
  check.errors = null;
  return errors;
}

/** The value at an Ajv instancePath (a JSON pointer) in `root`, own properties only. */
function valueAt(root: unknown, instancePath: string): unknown {
  if (instancePath === '') return root;
  let at = root;
  for (const raw of instancePath.slice(1).split('/')) {
    const part = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, part)) return undefined;
    at = (at as Record<string, unknown>)[part];
  }
  return at;
}

/** An anyOf/oneOf with more alternatives than this is not narrowed to its closest (each would be checked again). */
const MAX_ALTERNATIVES_EXPLAINED = 32;
/** Alternatives checked again for one request's answer, at most (nested anyOfs multiply). */
const MAX_ALTERNATIVE_CHECKS = 256;

/** How much of a pointer and of a message an answer quotes: a client's 500,000-character property name is not sent back. */
export const MAX_QUOTED_POINTER = 200;
export const MAX_QUOTED_MESSAGE = 300;

function clipped(p: ValidationProblem): ValidationProblem {
  const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}... (${text.length} characters)` : text);
  return { pointer: clip(p.pointer, MAX_QUOTED_POINTER), message: clip(p.message, MAX_QUOTED_MESSAGE) };
}

/** Ajv errors turned into problems at most (enough to list MAX_PROBLEMS after duplicates are dropped). */
const CONVERTED = 10 * MAX_PROBLEMS;

function listed(values: readonly unknown[] | undefined): string {
  const all = (values ?? []).map((v) => JSON.stringify(v));
  const shown = all.slice(0, 10).join(', ');
  return all.length > 10 ? `${shown}, ... (${all.length} values)` : shown;
}

function dedupe(problems: ValidationProblem[]): ValidationProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const k = `${p.pointer}\u0000${p.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

function capped(problems: ValidationProblem[], more: number): ValidationProblem[] {
  if (problems.length + more <= MAX_PROBLEMS) return problems;
  const left = problems.length + more - MAX_PROBLEMS;
  return [
    ...problems.slice(0, MAX_PROBLEMS),
    { pointer: '', message: `and ${left} more problem${left === 1 ? '' : 's'} (only the first ${MAX_PROBLEMS} are listed)` },
  ];
}
