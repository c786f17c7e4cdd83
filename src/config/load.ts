// Reads the YAML file, applies environment overrides, validates against the schema and freezes the result.
// Every problem is reported at once, each as "path: what was expected, what was found".
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { redactKeyShapes } from '../http/credentials.js';
import { configSchema, openapiBlocks, UPSTREAM_SERVICE, type Config } from './schema.js';
import { knownFieldsAt, nearestField } from './field-names.js';
import { tlsFileErrors } from './tls-files.js';
import { expandDocumentsOffThread, type ThreadBounds } from '../openapi/load-thread.js';
import { MAX_YAML_ALIASES } from '../openapi/limits.js';
import type { LoadedDocuments } from '../openapi/operations.js';

export const DEFAULT_CONFIG_PATH = 'config/gateway.yaml';

/**
 * `sections`: the top-level sections the file itself gives (not empty, not null), before defaults and the environment:
 * what a reload compares to see whether a new file drops a whole section (configSections).
 */
export type LoadResult = { ok: true; config: Config; path: string; sections: string[]; warnings: string[] } | { ok: false; errors: string[]; path: string };

/** What an empty document (no content, only comments, or `null`) is told: never the defaults, which serve nothing. */
export const EMPTY_DOCUMENT_ERROR =
  '(root): the document is empty (no sections, only comments, or null): a truncated or half-written file? Write `{}` for a config of defaults only';

/** --config, else TOLLGATE_CONFIG, else config/gateway.yaml. */
export function resolveConfigPath(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return flag ?? env.TOLLGATE_CONFIG ?? DEFAULT_CONFIG_PATH;
}

/**
 * Environment variable -> config path it overrides, and how its text becomes a value. `ifSection`: applied only when
 * the file has that section (credentials in the environment do not turn a Redis-less gateway into one with Redis).
 */
const ENV_OVERRIDES: ReadonlyArray<{ env: string; path: [string, string]; parse: (v: string) => unknown; ifSection?: boolean }> = [
  { env: 'PORT', path: ['server', 'port'], parse: numberIfNumeric },
  { env: 'HOST', path: ['server', 'host'], parse: (v) => v },
  { env: 'UPSTREAM_URL', path: ['upstream', 'url'], parse: (v) => v },
  { env: 'REDIS_URL', path: ['redis', 'url'], parse: (v) => v },
  { env: 'REDIS_USERNAME', path: ['redis', 'username'], parse: (v) => v, ifSection: true },
  { env: 'REDIS_PASSWORD', path: ['redis', 'password'], parse: (v) => v, ifSection: true },
  { env: 'LOG_LEVEL', path: ['log', 'level'], parse: (v) => v },
];

function numberIfNumeric(v: string): unknown {
  return /^\d+$/.test(v.trim()) ? Number(v) : v;
}

/**
 * Reads, validates and completes the config file: the OpenAPI documents its services and its upstream section name
 * are read too (relative to the file), so this is asynchronous. Never throws.
 *
 * `replaceDocument`: load the config as if services.<service>.openapi.file (upstream.openapi.file for the upstream
 * service) named `file` (a path as given on a command line, relative to the working directory): what
 * `tollgate openapi diff` compares against the config as it is.
 */
export async function loadConfigFile(
  path: string,
  env: NodeJS.ProcessEnv = process.env,
  replaceDocument?: { service: string; file: string },
  bounds: ThreadBounds = {},
): Promise<LoadResult> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (err as Error).message;
    return { ok: false, errors: [`${path}: ${reason}`], path };
  }
  const read = readRaw(text, env);
  if (!read.ok) return { ...read, path };
  const raw = replaceDocument ? withDocument(read.raw, replaceDocument) : read.raw;
  const result = await validateConfigWithDocuments(raw, dirname(path), read.overridden, bounds).catch(
    (err: unknown): { ok: false; errors: string[] } => ({ ok: false, errors: [`OpenAPI documents: ${excerpt(String((err as Error)?.message ?? err), 200)}`] }),
  );
  if (!result.ok) return { ...result, path };
  return { ...result, sections: configSections(read.raw), path };
}

/**
 * The config a text gives, checked by the schema alone: for a config that names no OpenAPI document (one
 * that does is refused here: loadConfigFile reads documents).
 */
export function parseConfigText(
  text: string,
  env: NodeJS.ProcessEnv = {},
): { ok: true; config: Config; sections: string[]; warnings: string[] } | { ok: false; errors: string[] } {
  const read = readRaw(text, env);
  if (!read.ok) return read;
  const result = validateConfig(read.raw, read.overridden);
  if (!result.ok) return result;
  return { ...result, warnings: [], sections: configSections(read.raw) };
}

/** The raw config with one service's document file replaced (absolute, so the config's folder does not apply). */
function withDocument(raw: Record<string, unknown>, { service, file }: { service: string; file: string }): Record<string, unknown> {
  if (service === UPSTREAM_SERVICE && isRecord(raw.upstream)) {
    const openapi = isRecord(raw.upstream.openapi) ? raw.upstream.openapi : {};
    return { ...raw, upstream: { ...raw.upstream, openapi: { ...openapi, file: resolve(file) } } };
  }
  const services = isRecord(raw.services) ? raw.services : {};
  const s = isRecord(services[service]) ? services[service] : {};
  const openapi = isRecord(s.openapi) ? s.openapi : {};
  return { ...raw, services: { ...services, [service]: { ...s, openapi: { ...openapi, file: resolve(file) } } } };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The sections a text gives when it is a valid config by the schema alone (documents unread): what --watch-config compares. */
export function sectionsOfText(text: string, env: NodeJS.ProcessEnv = {}): string[] | undefined {
  const read = readRaw(text, env);
  if (!read.ok) return undefined;
  return validateSchema(read.raw, read.overridden).ok ? configSections(read.raw) : undefined;
}

type RawRead = { ok: true; raw: Record<string, unknown>; overridden: Map<string, string> } | { ok: false; errors: string[] };

/** The YAML as an object with the environment's overrides applied, or why it is none. */
function readRaw(text: string, env: NodeJS.ProcessEnv): RawRead {
  let raw: unknown;
  try {
    const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
    if (doc.errors.length > 0) return { ok: false, errors: doc.errors.map((e) => yamlError(e.message)) };
    raw = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
    // `cmd > gateway.yaml` truncates before it writes: a reload that caught that moment must not become a gateway of
    // defaults (no routes, no admin API, no keys). An empty document is refused everywhere: config check, start, reload.
    if (raw === null || raw === undefined) return { ok: false, errors: [EMPTY_DOCUMENT_ERROR] };
  } catch (err) {
    // The YAML library throws (rather than reports) on some inputs, e.g. an alias bomb ("Excessive alias count"); a
    // reload must reject such a file like any other, never let the exception take the process down.
    return { ok: false, errors: [yamlError(err instanceof Error ? err.message : String(err))] };
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    return { ok: false, errors: [`(root): expected a mapping of sections (server, upstream, ...), got ${describe(raw)}`] };
  }
  const overridden = new Map<string, string>();
  return { ok: true, raw: applyEnvOverrides(raw as Record<string, unknown>, env, overridden), overridden };
}

/**
 * A config object (a parsed file with its overrides applied) validated and completed: the OpenAPI documents its
 * services and upstream section name read relative to `configDir` and their operations merged into routes (src/openapi/documents.ts), then
 * the whole checked by the schema once more, so document routes obey every route rule; an error about one names its
 * file and JSON pointer. `warnings`: what `config check` and start-up say without refusing.
 */
export async function validateConfigWithDocuments(
  raw: Record<string, unknown>,
  configDir: string,
  overridden: ReadonlyMap<string, string> = new Map(),
  bounds: ThreadBounds = {},
): Promise<{ ok: true; config: Config; warnings: string[] } | { ok: false; errors: string[] }> {
  const first = validateSchema(raw, overridden);
  if (!first.ok) return first;
  const parsed = first.config;
  if (!needsDocuments(parsed)) return finish(parsed, []);
  // On a thread of its own, bounded in time and memory: a reload reads them while this process serves.
  const expanded = await expandDocumentsOffThread(openapiBlocks(parsed), Array.isArray(raw.routes) ? raw.routes : [], configDir, bounds);
  if (!expanded.ok) return { ok: false, errors: expanded.errors };
  const second = validateSchema({ ...raw, routes: expanded.routes }, overridden);
  if (!second.ok) {
    // routes[i] of the merged list is a route of the file or a document's operation: name it as the reader knows it,
    // and a field a document gave by where the document wrote it (routes[9].brownouts[1] -> doc.yaml#/paths/~1a/get/x-brownouts/1).
    return {
      ok: false,
      errors: second.errors.map((e) =>
        e.replace(/^routes\[(\d+)\](?:\.([A-Za-z]+)((?:\[\d+\])*))?/, (m, i: string, field: string | undefined, indexes: string | undefined) => {
          const at = field === undefined ? undefined : expanded.fieldOrigins[Number(i)]?.get(field);
          if (at !== undefined) return at + (indexes ?? '').replace(/\[(\d+)\]/g, '/$1');
          return (expanded.origins[Number(i)] ?? `routes[${i}]`) + m.slice(`routes[${i}]`.length);
        }),
      ),
    };
  }
  return finish({ ...second.config, openapi: expanded.documents }, [...expanded.documents.warnings]);
}

function finish(config: ParsedConfig & { openapi?: LoadedDocuments }, warnings: string[]): { ok: true; config: Config; warnings: string[] } | { ok: false; errors: string[] } {
  // The certificate and key files are part of the config: one that cannot be used fails it like a bad field.
  const frozen = deepFreeze(config) as Config;
  const tlsErrors = tlsFileErrors(frozen);
  if (tlsErrors.length > 0) return { ok: false, errors: tlsErrors };
  return { ok: true, config: frozen, warnings };
}

function needsDocuments(c: ParsedConfig): boolean {
  return openapiBlocks(c).some((b) => b.openapi.file !== undefined) || c.routes.some((r) => r.operationId !== undefined);
}

/** The top-level sections a parsed file gives with some content (null, `{}` and `[]` count as absent), sorted. */
export function configSections(raw: Record<string, unknown>): string[] {
  const given = (v: unknown): boolean =>
    v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0) && !(typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0);
  return Object.keys(raw)
    .filter((k) => given(raw[k]))
    .sort();
}

/** Sections given in `before` and no longer in `after`: a reload that would drop them wants an explicit SIGHUP. */
export function droppedSections(before: readonly string[], after: readonly string[]): string[] {
  return before.filter((s) => !after.includes(s));
}

type ParsedConfig = z.output<typeof configSchema>;

/**
 * A config object checked by the schema, for one that names no OpenAPI document (validateConfigWithDocuments
 * reads them). `overridden` maps a field path to the environment variable that set it, so errors can name it.
 */
export function validateConfig(
  raw: unknown,
  overridden: ReadonlyMap<string, string> = new Map(),
): { ok: true; config: Config } | { ok: false; errors: string[] } {
  const result = validateSchema(raw, overridden);
  if (!result.ok) return result;
  if (needsDocuments(result.config))
    return { ok: false, errors: ['services: an OpenAPI document (services.<name>.openapi, upstream.openapi) or a route naming operationId needs the documents read (validateConfigWithDocuments)'] };
  const frozen = deepFreeze(result.config) as Config;
  return { ok: true, config: frozen };
}

/** Fields of the upstream section that belong to its service alone (the rest, hideCredentials and maxSockets, apply to every service). */
const UPSTREAM_SERVICE_FIELDS = ['timeoutMs', 'healthPath', 'openapi'] as const;

/**
 * An upstream section without `url` beside `services` holds gateway-wide proxy settings (hideCredentials, maxSockets),
 * not a service: it used to make one at the default 127.0.0.1:8081, with /v1/* routed there. So it is no service, and
 * what only a service means in it, or a route that would need it as one, is refused.
 */
function settingsOnlyUpstream(raw: unknown, config: ParsedConfig): { errors: string[] } | { config: ParsedConfig } {
  const given = isRecord(raw) ? raw.upstream : undefined;
  if (!isRecord(raw) || !isRecord(raw.services) || Object.keys(raw.services).length === 0 || !isRecord(given) || given.url !== undefined) return { config };
  const errors: string[] = [];
  for (const field of UPSTREAM_SERVICE_FIELDS)
    if (given[field] !== undefined)
      errors.push(
        `upstream.${field}: an upstream section without url beside services is no service (its hideCredentials and maxSockets apply to every service), so ${field} has nothing to apply to; give upstream.url to make it the service for /v1, or ${field === 'openapi' ? 'give the document to a service (services.<name>.openapi)' : `set it on each service (services.<name>${field === 'timeoutMs' ? '.timeoutMs' : '.healthCheck'})`}`,
      );
  config.routes.forEach((r, i) => {
    if (r.service === undefined && r.operationId === undefined)
      errors.push(`routes[${i}].service: the route names no service, and the upstream section, without url, is no service beside services; name one of the services`);
  });
  return errors.length > 0 ? { errors } : { config: { ...config, upstreamIsService: false } };
}

function validateSchema(raw: unknown, overridden: ReadonlyMap<string, string>): { ok: true; config: ParsedConfig } | { ok: false; errors: string[] } {
  const checked = validateSchemaAlone(raw, overridden);
  if (!checked.ok) return checked;
  const settings = settingsOnlyUpstream(raw, checked.config);
  return 'errors' in settings ? { ok: false, errors: settings.errors } : { ok: true, config: settings.config };
}

function validateSchemaAlone(raw: unknown, overridden: ReadonlyMap<string, string>): { ok: true; config: ParsedConfig } | { ok: false; errors: string[] } {
  const parsed = configSchema.safeParse(raw, { reportInput: true });
  if (!parsed.success) {
    return {
      ok: false,
      // One issue can name several fields (unknown keys): each becomes its own error line.
      errors: parsed.error.issues.flatMap((issue) => {
        const from = overridden.get(formatPath(issue.path));
        return formatIssue(issue).map((line) => line + (from ? ` (from ${from})` : ''));
      }),
    };
  }
  return { ok: true, config: parsed.data };
}

function applyEnvOverrides(raw: Record<string, unknown>, env: NodeJS.ProcessEnv, overridden: Map<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...raw };
  for (const o of ENV_OVERRIDES) {
    const value = env[o.env];
    if (value === undefined || value === '') continue;
    const [section, field] = o.path;
    const current = out[section];
    if (o.ifSection && (typeof current !== 'object' || current === null)) continue;
    const base = typeof current === 'object' && current !== null && !Array.isArray(current) ? current : {};
    out[section] = { ...base, [field]: o.parse(value) };
    overridden.set(`${section}.${field}`, o.env);
  }
  return out;
}

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? String(seg) : `.${String(seg)}`;
  }
  return out === '' ? '(root)' : out;
}

function formatIssue(issue: z.core.$ZodIssue): string[] {
  const where = formatPath(issue.path);
  switch (issue.code) {
    case 'invalid_type':
      // A schema's own message (a key field's, key-fields.ts: the one the admin API and the CLI give) over zod's.
      return [`${where}: ${issue.message.startsWith('Invalid input') ? `expected ${issue.expected}` : issue.message}, got ${describe(issue.input)}`];
    case 'unrecognized_keys': {
      const known = knownFieldsAt(configSchema, issue.path);
      return issue.keys.map((k) => {
        const near = nearestField(k, known);
        return `${formatPath([...issue.path, k])}: unknown field${near ? `; did you mean ${near}?` : ''}`;
      });
    }
    case 'invalid_value':
      return [`${where}: expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, got ${describe(issue.input)}`];
    case 'invalid_key':
      // A record key (a plan name) that fails its own rule: show that rule, not zod's generic "Invalid key in record".
      return [`${where}: ${issue.issues.map((i) => i.message).join('; ')}, got ${describe(issue.input)}`];
    default:
      return [`${where}: ${issue.message.replace(/^Invalid input: /, '')}, got ${describe(issue.input)}`];
  }
}

/** The first line of a YAML parser message (later lines quote the file), short. */
function yamlError(message: string): string {
  return `YAML: ${excerpt((message.split('\n')[0] ?? '').replace(/:$/, ''), 160)}`;
}

/** Longest value quoted in an error: enough to recognise a typo, too short to carry a document. */
const MAX_QUOTED = 60;

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return JSON.stringify(typeof value === 'string' ? excerpt(value, MAX_QUOTED) : value);
}

/**
 * What an error may quote of a value: errors go to the log on a rejected reload, and a misplaced or mangled value can
 * be a secret (a Redis URL with its password, an API key). Credentials in URLs and key-shaped text are replaced, and
 * the rest is cut to `max` characters.
 */
export function excerpt(text: string, max: number): string {
  const redacted = redactKeyShapes(text.replace(/(\/\/[^/@\s:]*:)[^@\s]*@/g, '$1***@'));
  return redacted.length > max ? `${redacted.slice(0, max)}…` : redacted;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
