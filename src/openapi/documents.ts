// A service's OpenAPI document as routes: every operation becomes a route to that service (method, path template
// under basePath, auth from its security, deprecation and sunset from its deprecated flag and x- fields; the upstream
// section's document makes routes without a service, which the upstream takes under /v1 only), appended
// after the hand-written routes, which keep precedence (first match wins). A hand-written route that names an
// operationId adds its own fields onto that operation's route instead of being a route of its own. The result is
// route config as a file would write it, so the config schema checks document routes by the same rules as any
// other, and every error names the file and the JSON pointer it comes from.
import { isAbsolute, resolve } from 'node:path';
import { parseKeySource } from '../http/credentials.js';
import { isUnderUpstreamPrefix, UPSTREAM_PREFIX } from '../http/paths.js';
import type { DocumentRoute, LoadedDocuments, OpenApiOperation } from './operations.js';
import { clip, pointerOf, readDocument, resolvePointer } from './read.js';
import { routePattern, templateKey } from './template.js';

/** The config's openapi blocks as the schema parsed them (config/schema.ts openapiBlocks: the upstream's and the services'). */
export interface DocumentBlock {
  /** The service its routes go to. */
  readonly service: string;
  /** Where the block is in the config, e.g. ['services', 'shop', 'openapi'] or ['upstream', 'openapi']. */
  readonly at: readonly string[];
  readonly openapi: { file?: string | undefined; basePath?: string | undefined; validate: 'off' | 'shadow' | 'enforce' };
  /** The upstream section's: its routes name no service, and the upstream takes /v1 only. */
  readonly upstream: boolean;
}

/** The methods an OpenAPI path item holds operations under, as the gateway routes them. */
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'] as const;

export type Expanded =
  | {
      ok: true;
      /** The routes as a file would write them: the hand-written ones (less those naming an operationId), then the documents'. */
      routes: unknown[];
      /** What each of those routes is called in an error: routes[i] of the file, or file#pointer of its operation. */
      origins: string[];
      /**
       * By route index, for a document route: where in the document each route field it took from there was written
       * (stability -> file#/paths/~1a/get/x-stability), so an error about the field names what the author wrote.
       */
      fieldOrigins: Array<ReadonlyMap<string, string> | undefined>;
      documents: LoadedDocuments;
    }
  | { ok: false; errors: string[]; files: string[] };

interface OperationRoute {
  raw: Record<string, unknown>;
  info: DocumentRoute;
  label: string;
  /** Route field -> file#pointer of the document field it came from. */
  fields: Map<string, string>;
}

/**
 * Reads every service's document (relative to `configDir`) and merges the routes. `rawRoutes`: routes[] as the file
 * gives them (the merge copies their fields as written, so the schema sees them once, in place).
 */
export async function expandDocuments(
  blocks: readonly DocumentBlock[],
  rawRoutes: readonly unknown[],
  configDir: string,
  /** Told each document before it is read (config.path: file): what a refusal for time or memory names. */
  reading?: (label: string) => void,
): Promise<Expanded> {
  const errors: string[] = [];
  const warnings: string[] = [];
  const files = new Set<string>();
  const operations: OperationRoute[] = [];
  let unread = 0;
  for (const block of blocks) {
    // A stability map alone (no file) is for hand-written routes.
    if (block.openapi.file === undefined) continue;
    const where = block.at.join('.');
    const label = block.openapi.file;
    const path = isAbsolute(label) ? label : resolve(configDir, label);
    files.add(path);
    reading?.(`${where}: ${label}`);
    const read = await readDocument(path, label);
    for (const f of read.files) files.add(f);
    if (!read.ok) {
      unread++;
      errors.push(...read.errors.map((e) => `${where}: ${e}`));
      continue;
    }
    const made = documentRoutes(block, label, read.document, read.version);
    errors.push(...made.errors);
    warnings.push(...made.warnings);
    operations.push(...made.routes);
  }
  // Two operations that claim one method and path: the first would take every request of the second.
  const claimed = new Map<string, string>();
  for (const op of operations) {
    const key = `${op.info.operation.method} ${templateKey(op.info.operation.pathTemplate)}`;
    const first = claimed.get(key);
    if (first !== undefined) errors.push(`${op.label}: ${op.info.operation.method} ${op.info.operation.pathTemplate} is already the route of ${first}`);
    else claimed.set(key, op.label);
  }
  const byId = new Map<string, OperationRoute[]>();
  for (const op of operations) {
    const id = op.info.operation.operationId;
    if (id !== undefined) byId.set(id, [...(byId.get(id) ?? []), op]);
  }
  const handWritten: unknown[] = [];
  const origins: string[] = [];
  const merged = new Set<OperationRoute>();
  rawRoutes.forEach((r, i) => {
    const route = r as Record<string, unknown>;
    const id = route.operationId;
    if (typeof id !== 'string') {
      handWritten.push(r);
      origins.push(`routes[${i}]`);
      return;
    }
    for (const f of ['method', 'path', 'host', 'service', 'stripPrefix'])
      if (f in route)
        errors.push(
          `routes[${i}].${f}: a route naming operationId takes its ${f === 'method' || f === 'path' ? 'method and path' : f} from the document; leave ${f} out`,
        );
    const found = byId.get(id) ?? [];
    if (found.length === 0) {
      errors.push(
        `routes[${i}].operationId: unknown operationId "${clip(id, 80)}"; ${
          unread > 0
            ? 'no operation of the documents read has it (one that could not be read may)'
            : operations.length === 0
              ? 'no service has an OpenAPI document (services.<name>.openapi, upstream.openapi)'
              : "no operation of the services' OpenAPI documents has it"
        }`,
      );
      return;
    }
    if (found.length > 1) {
      errors.push(
        `routes[${i}].operationId: "${clip(id, 80)}" is an operation of several documents (${found.map((f) => f.label).join(', ')}); it must name one`,
      );
      return;
    }
    const op = found[0]!;
    if (merged.has(op)) {
      errors.push(`routes[${i}].operationId: another route already names "${clip(id, 80)}"`);
      return;
    }
    merged.add(op);
    const { operationId: _id, ...fields } = route;
    op.raw = { ...op.raw, ...fields };
    // Fields the route gives are the route's, named by the label below.
    for (const f of Object.keys(fields)) op.fields.delete(f);
    op.label = `${op.label} (with routes[${i}])`;
  });
  if (errors.length > 0) return { ok: false, errors, files: [...files] };
  return {
    ok: true,
    routes: [...handWritten, ...operations.map((o) => o.raw)],
    origins: [...origins, ...operations.map((o) => o.label)],
    fieldOrigins: [...handWritten.map(() => undefined), ...operations.map((o) => o.fields)],
    documents: {
      routes: [...handWritten.map(() => undefined), ...operations.map((o) => o.info)],
      files: [...files].sort(),
      warnings,
    },
  };
}

type Doc = Record<string, unknown>;

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** A value that may be a {$ref} to another place in the document, followed. */
function deref(doc: Doc, v: unknown): unknown {
  for (let i = 0; i < 32 && isObject(v) && typeof v.$ref === 'string'; i++) v = resolvePointer(doc, v.$ref);
  return v;
}

function documentRoutes(
  block: DocumentBlock,
  file: string,
  doc: Doc,
  version: '3.0' | '3.1',
): { routes: OperationRoute[]; errors: string[]; warnings: string[] } {
  const { service, openapi: opts } = block;
  const errors: string[] = [];
  const warnings: string[] = [];
  const at = (tokens: ReadonlyArray<string | number>): string => `${file}#${pointerOf(tokens)}`;
  const base = opts.basePath ?? serversBasePath(doc, block.at.join('.'), (m) => errors.push(`${at(['servers', 0, 'url'])}: ${m}`));
  const paths = isObject(doc.paths) ? doc.paths : {};
  // Concrete paths before templated ones (OpenAPI: "/pets/mine" before "/pets/{petId}"), else the document's order.
  const entries = Object.entries(paths)
    .map(([template, item], order) => ({ template, item, order, params: (template.match(/\{/g) ?? []).length }))
    .sort((a, b) => (a.params === 0 ? 0 : 1) - (b.params === 0 ? 0 : 1) || a.order - b.order);
  const templates = new Map<string, string>();
  for (const { template, item } of entries) {
    const pathItem = deref(doc, item);
    if (!isObject(pathItem)) continue;
    for (const m of METHODS) {
      const op = pathItem[m];
      if (isObject(op) && typeof op.operationId === 'string') templates.set(op.operationId, base + template);
    }
  }
  const sourcesCache = new Map<string, readonly string[]>();
  // Schemes the gateway reads no key from (oauth2, openIdConnect, ...) -> the operations naming them: one warning each.
  const unread = new Map<string, { kind: string; operations: string[] }>();
  const routes: OperationRoute[] = [];
  for (const { template, item } of entries) {
    const pathItem = deref(doc, item);
    if (!isObject(pathItem)) continue;
    if (isObject(pathItem.trace))
      warnings.push(`${at(['paths', template, 'trace'])}: TRACE operations are not routed (the gateway routes ${METHODS.join(', ').toUpperCase()})`);
    const pathParams = Array.isArray(pathItem.parameters) ? (pathItem.parameters as object[]) : [];
    for (const m of METHODS) {
      const op = pathItem[m];
      if (!isObject(op)) continue;
      const tokens = ['paths', template, m];
      const pointer = pointerOf(tokens);
      const label = at(tokens);
      const operationId = typeof op.operationId === 'string' ? op.operationId : undefined;
      const pathTemplate = base + template;
      // The upstream takes /v1 and nothing else: an operation of its document elsewhere could never reach it.
      if (block.upstream && !isUnderUpstreamPrefix(pathTemplate)) {
        errors.push(
          `${label}: ${m.toUpperCase()} ${pathTemplate} is not under ${UPSTREAM_PREFIX}/, and the upstream section's routes are (set ${block.at.join('.')}.basePath, or give the document to a service of services)`,
        );
        continue;
      }
      const operation: OpenApiOperation = {
        service,
        file,
        pointer,
        operationId,
        method: m.toUpperCase(),
        pathTemplate,
        document: doc,
        parameters: mergeParameters(doc, pathParams, Array.isArray(op.parameters) ? (op.parameters as object[]) : []),
        requestBody: isObject(op.requestBody) ? op.requestBody : undefined,
        openapiVersion: version,
        validate: opts.validate,
      };
      // The upstream's routes name no service, as hand-written upstream routes do.
      const raw: Record<string, unknown> = { method: operation.method, path: routePattern(pathTemplate), ...(block.upstream ? {} : { service }) };
      const fields = new Map<string, string>();
      const from = (field: string, ...docTokens: string[]): void => {
        fields.set(field, at([...tokens, ...docTokens]));
      };
      if (operationId !== undefined) raw.operationId = operationId;
      const security = (op.security ?? doc.security) as unknown;
      const where = op.security !== undefined ? [...tokens, 'security'] : ['security'];
      const auth = securityOf(doc, security, where, label, errors, (scheme, kind) => {
        const users = unread.get(scheme) ?? { kind, operations: [] };
        users.operations.push(`${operation.method} ${pathTemplate}`);
        unread.set(scheme, users);
      });
      if (auth === 'none') raw.auth = 'none';
      let keySources: readonly string[] | undefined;
      if (Array.isArray(auth)) {
        const text = auth.join('\n');
        keySources = sourcesCache.get(text) ?? auth;
        sourcesCache.set(text, keySources);
      }
      const dateAt = (field: string): string | undefined => {
        const v = op[field];
        if (v === undefined) return undefined;
        const iso = isoDate(v);
        if (iso === undefined)
          errors.push(
            `${at([...tokens, field])}: expected a date (2027-06-01) or a date-time with an offset (2027-06-01T00:00:00Z) that the calendar has, got ${clip(JSON.stringify(v) ?? String(v), 60)}`,
          );
        return iso;
      };
      const deprecation = dateAt('x-deprecated-at');
      const sunset = dateAt('x-sunset');
      if (op.deprecated === true) {
        raw.deprecated = true;
        from('deprecated', 'deprecated');
        if (deprecation === undefined)
          warnings.push(`${label}: deprecated without x-deprecated-at: counted as deprecated, but no Deprecation header is sent (it needs a date)`);
      }
      if (deprecation !== undefined) {
        raw.deprecation = deprecation;
        from('deprecation', 'x-deprecated-at');
      }
      if (sunset !== undefined) {
        raw.sunset = sunset;
        raw.afterSunset = 'gone';
        from('sunset', 'x-sunset');
        from('afterSunset', 'x-sunset');
      }
      const docsUrl = isObject(op.externalDocs) ? op.externalDocs.url : undefined;
      if (typeof docsUrl === 'string' && (op.deprecated === true || deprecation !== undefined || sunset !== undefined)) {
        if (/^https?:\/\//i.test(docsUrl)) {
          raw.link = docsUrl;
          from('link', 'externalDocs', 'url');
        } else warnings.push(`${at([...tokens, 'externalDocs', 'url'])}: not an http(s) URL, so not sent as the deprecation Link`);
      }
      const successor = op['x-successor'];
      if (successor !== undefined) {
        from('successor', 'x-successor');
        if (typeof successor === 'string' && /^https?:\/\//i.test(successor)) raw.successor = successor;
        else if (typeof successor === 'string' && templates.has(successor)) raw.successor = templates.get(successor);
        else
          errors.push(
            `${at([...tokens, 'x-successor'])}: expected an http(s) URL or the operationId of an operation of this document, got ${clip(JSON.stringify(successor) ?? '', 60)}`,
          );
      }
      const brownouts = op['x-brownouts'];
      if (brownouts !== undefined) {
        from('brownouts', 'x-brownouts');
        if (Array.isArray(brownouts) && brownouts.every((b) => typeof b === 'string')) raw.brownouts = brownouts;
        else errors.push(`${at([...tokens, 'x-brownouts'])}: expected a list of ISO 8601 intervals such as 2027-03-01T14:00:00Z/PT1H`);
      }
      const stability = op['x-stability'];
      if (stability !== undefined) {
        from('stability', 'x-stability');
        if (typeof stability === 'string') raw.stability = stability;
        else errors.push(`${at([...tokens, 'x-stability'])}: expected a word such as experimental, beta or stable`);
      }
      routes.push({ raw, label, info: { operation, keySources }, fields });
    }
  }
  for (const [scheme, { kind, operations }] of unread) {
    const listed =
      operations.length > UNREAD_LISTED
        ? `${operations.slice(0, UNREAD_LISTED).join(', ')} and ${operations.length - UNREAD_LISTED} more`
        : operations.join(', ');
    warnings.push(
      `${at(['components', 'securitySchemes', scheme])}: ${clip(scheme, 60)} (${clip(kind, 60)}) is no key the gateway reads, in ${operations.length} operation${operations.length === 1 ? '' : 's'} (${listed}): ` +
        'the backend checks it, and the gateway passes it on untouched unless a key source reads the same place; where no apiKey or bearer scheme stands beside it, ' +
        "the route reads its key from auth.sources (with the default, bearer, the users' bearer tokens would be taken for API keys: read keys from a header, e.g. header:X-API-Key)",
    );
  }
  return { routes, errors, warnings };
}

/** How many operations a warning about an unread security scheme names before "and N more". */
const UNREAD_LISTED = 5;

/** The path of servers[0].url (its variables at their defaults), without a trailing slash; '' without servers. */
function serversBasePath(doc: Doc, where: string, fail: (message: string) => void): string {
  const first = Array.isArray(doc.servers) ? (doc.servers[0] as unknown) : undefined;
  if (!isObject(first) || typeof first.url !== 'string') return '';
  const vars = isObject(first.variables) ? first.variables : {};
  const url = first.url.replace(/\{([^}]+)\}/g, (_m, name: string) => {
    const v = vars[name];
    return isObject(v) && typeof v.default === 'string' ? v.default : '';
  });
  let path: string;
  if (url.startsWith('/')) path = url;
  else {
    try {
      path = new URL(url).pathname;
    } catch {
      path = '';
    }
  }
  path = path.replace(/\/+$/, '');
  if (path !== '' && !/^(\/[A-Za-z0-9._~!$&'()+,;=@%-]+)+$/.test(path)) {
    fail(`its path "${clip(path, 60)}" cannot be a base path; set ${where}.basePath`);
    return '';
  }
  return path;
}

/** Path-level parameters with the operation's: the operation's win by name and in. */
function mergeParameters(doc: Doc, pathLevel: readonly object[], own: readonly object[]): object[] {
  const keyOf = (p: object): string => {
    const d = deref(doc, p);
    return isObject(d) ? `${String(d.in)}:${String(d.name)}` : '';
  };
  const ownKeys = new Set(own.map(keyOf));
  return [...pathLevel.filter((p) => !ownKeys.has(keyOf(p))), ...own];
}

/**
 * The effective security requirement as the gateway applies it: 'none' (an empty list, or an empty requirement among
 * the alternatives: no key needed), the key sources its schemes name (apiKey in a header or the query, http bearer),
 * or undefined (no security declared, or only schemes the gateway cannot read keys from: the config's auth.sources).
 */
function securityOf(
  doc: Doc,
  security: unknown,
  where: Array<string | number>,
  label: string,
  errors: string[],
  unreadScheme: (name: string, kind: string) => void,
): 'none' | string[] | undefined {
  if (!Array.isArray(security)) return undefined;
  const file = label.slice(0, label.indexOf('#'));
  const ptr = (tokens: Array<string | number>): string => `${file}#${pointerOf(tokens)}`;
  if (security.length === 0 || security.some((req) => isObject(req) && Object.keys(req).length === 0)) return 'none';
  const schemes = isObject(doc.components) && isObject(doc.components.securitySchemes) ? doc.components.securitySchemes : {};
  const sources: string[] = [];
  const unsupported = new Map<string, string>();
  security.forEach((req, i) => {
    if (!isObject(req)) return;
    for (const name of Object.keys(req)) {
      const scheme = deref(doc, schemes[name]);
      if (!isObject(scheme)) {
        errors.push(`${ptr([...where, i, name])}: no security scheme "${clip(name, 60)}" in components.securitySchemes`);
        continue;
      }
      let text: string | undefined;
      if (scheme.type === 'apiKey' && (scheme.in === 'header' || scheme.in === 'query') && typeof scheme.name === 'string')
        text = `${scheme.in}:${scheme.name}`;
      else if (scheme.type === 'http' && typeof scheme.scheme === 'string' && scheme.scheme.toLowerCase() === 'bearer') text = 'bearer';
      if (text === undefined) {
        unsupported.set(
          name,
          `${String(scheme.type)}${scheme.type === 'apiKey' ? ` in ${String(scheme.in)}` : scheme.type === 'http' ? ` ${String(scheme.scheme)}` : ''}`,
        );
        continue;
      }
      const parsed = parseKeySource(text);
      if (typeof parsed === 'string') {
        errors.push(`${ptr(['components', 'securitySchemes', name])}: ${parsed}`);
        continue;
      }
      if (!sources.includes(text)) sources.push(text);
    }
  });
  for (const [name, kind] of unsupported) unreadScheme(name, kind);
  return sources.length > 0 ? sources : undefined;
}

/**
 * A date (midnight UTC) or a date-time with an offset, as an ISO-8601 instant; undefined when it is neither. Each
 * field is checked against the calendar and the clock before Date.parse sees it: V8 rolls 2027-02-30 over into March
 * and 24:30 into the next day, which would move a sunset to a day nobody announced (gateway.yaml's dates are refused
 * the same way).
 */
function isoDate(v: unknown): string | undefined {
  // A YAML reader may have made an unquoted timestamp a Date already.
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? undefined : v.toISOString();
  if (typeof v !== 'string') return undefined;
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(?:Z|[+-](\d{2}):(\d{2})))?$/i.exec(v);
  if (!m) return undefined;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const back = new Date(Date.UTC(year, month - 1, day));
  if (back.getUTCFullYear() !== year || back.getUTCMonth() !== month - 1 || back.getUTCDate() !== day) return undefined;
  if (m[4] === undefined) return back.toISOString();
  const within = (field: string | undefined, max: number): boolean => field === undefined || Number(field) <= max;
  if (!within(m[4], 23) || !within(m[5], 59) || !within(m[6], 59) || !within(m[7], 23) || !within(m[8], 59)) return undefined;
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}
