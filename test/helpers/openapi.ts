// Checks HTTP answers against an OpenAPI 3.1 document kept in the repository: the status must be one the operation
// lists, and the body (JSON) and the headers it describes must match their schemas (JSON Schema 2020-12, with ajv).
// Every operation a test exercised is recorded, so a test can also insist that none of the document goes untried.
// CheckedApi calls an API (over HTTP or in process) and checks every answer, so test files need no copy of that.
import { readFileSync } from 'node:fs';
import type { Express } from 'express';
import request from 'supertest';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

interface Operation {
  operationId: string;
  responses: Record<string, ResponseObject | { $ref: string }>;
}
interface ResponseObject {
  headers?: Record<string, { schema: object } | { $ref: string }>;
  content?: Record<string, { schema: object }>;
}
interface Document {
  servers?: Array<{ url: string }>;
  paths: Record<string, Record<string, Operation>>;
  components?: { responses?: Record<string, ResponseObject>; headers?: Record<string, { schema: object }> };
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

export class OpenApiDocument {
  readonly doc: Document;
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly prefix: string;
  /** "operationId status" pairs seen by check(). */
  readonly seen = new Set<string>();

  constructor(file: string | URL) {
    const text = readFileSync(file, 'utf8');
    this.doc = (String(file).endsWith('.json') ? JSON.parse(text) : parse(text)) as Document;
    // OpenAPI's own keywords inside schemas (example, deprecated on properties) are not JSON Schema: allowed.
    this.ajv = new Ajv2020({ strict: false, allErrors: true });
    (addFormats as unknown as (ajv: Ajv2020) => void)(this.ajv);
    this.ajv.addSchema(this.doc as object, 'doc');
    const server = this.doc.servers?.[0]?.url ?? '';
    this.prefix = server.startsWith('/') ? server.replace(/\/$/, '') : '';
  }

  /** Every "operationId status" the document lists. */
  operations(): string[] {
    const out: string[] = [];
    for (const item of Object.values(this.doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (!METHODS.includes(method)) continue;
        for (const status of Object.keys(op.responses)) out.push(`${op.operationId} ${status}`);
      }
    }
    return out;
  }

  /** The operation a request path (with the server prefix, no query) and method belong to. */
  find(method: string, path: string): { template: string; op: Operation } | undefined {
    if (!path.startsWith(this.prefix)) return undefined;
    const rest = path.slice(this.prefix.length) || '/';
    for (const [template, item] of Object.entries(this.doc.paths)) {
      const re = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`);
      const op = item[method.toLowerCase()];
      if (op && re.test(rest)) return { template, op };
    }
    return undefined;
  }

  /**
   * The problems with one answer (an empty list when it conforms): an undocumented path, method or status, a body
   * or a documented header that does not match its schema.
   */
  check(method: string, path: string, status: number, headers: Record<string, string | string[] | undefined>, body: string): string[] {
    const where = `${method} ${path} -> ${status}`;
    const found = this.find(method, path.split('?')[0]!);
    if (!found) return [`${where}: no such operation in the document`];
    const ref = found.op.responses[String(status)];
    if (!ref) return [`${where}: status not documented for ${found.op.operationId}`];
    this.seen.add(`${found.op.operationId} ${status}`);
    const response = this.resolve(ref);
    const problems: string[] = [];
    const schemaPath = `#/paths/${pointer(found.template)}/${method.toLowerCase()}/responses/${status}`;
    const base = '$ref' in ref ? `#/components/responses/${ref.$ref.split('/').pop()}` : schemaPath;
    const json = response.content?.['application/json'];
    if (json) {
      const type = String(headers['content-type'] ?? '');
      if (!type.startsWith('application/json')) problems.push(`${where}: content-type ${type || '(none)'}, expected application/json`);
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch {
        problems.push(`${where}: body is not JSON: ${body.slice(0, 200)}`);
      }
      if (parsed !== undefined) problems.push(...this.validate(`${base}/content/application~1json/schema`, parsed, `${where} body`));
    }
    for (const [name, given] of Object.entries(response.headers ?? {})) {
      const value = headers[name.toLowerCase()];
      if (value === undefined) continue;
      const text = Array.isArray(value) ? value.join(', ') : value;
      // A header may be a reference to components/headers.
      const shared = '$ref' in given ? String(given.$ref).split('/').pop()! : undefined;
      const header = shared !== undefined ? this.doc.components?.headers?.[shared] : (given as { schema: object });
      if (!header) {
        problems.push(`${where}: unresolved header reference for ${name}`);
        continue;
      }
      const schema = header.schema as { type?: string };
      const typed = schema.type === 'integer' || schema.type === 'number' ? Number(text) : text;
      const at = shared !== undefined ? `#/components/headers/${shared}/schema` : `${base}/headers/${name}/schema`;
      problems.push(...this.validate(at, typed, `${where} header ${name}`));
    }
    return problems;
  }

  private resolve(r: ResponseObject | { $ref: string }): ResponseObject {
    if (!('$ref' in r)) return r;
    const name = r.$ref.split('/').pop()!;
    const found = this.doc.components?.responses?.[name];
    if (!found) throw new Error(`unresolved ${r.$ref}`);
    return found;
  }

  private validate(pointerPath: string, value: unknown, what: string): string[] {
    const ref = `doc${pointerPath}`;
    let fn = this.compiled.get(ref);
    if (!fn) {
      fn = this.ajv.compile({ $ref: ref });
      this.compiled.set(ref, fn);
    }
    if (fn(value)) return [];
    return (fn.errors ?? []).map((e) => `${what}: ${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`);
  }
}

/** A JSON pointer segment for a path template ("/categories/{id}" -> "~1categories~1{id}"). */
function pointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** docs/admin.openapi.yaml, parsed once per test file. */
let adminDoc: OpenApiDocument | undefined;
export function adminDocument(): OpenApiDocument {
  adminDoc ??= new OpenApiDocument(new URL('../../docs/admin.openapi.yaml', import.meta.url));
  return adminDoc;
}

export interface CheckedAnswer {
  status: number;
  /** Lower-cased names. */
  headers: Record<string, string>;
  text: string;
  /** The body parsed as JSON ({} when it is not JSON): supertest's loose type, so tests can reach into it. */
  body: request.Response['body'];
}

export interface CallOptions {
  body?: unknown;
  type?: string;
  token?: string | null;
  at?: string | Express;
}

/**
 * An API caller whose every answer is checked against an OpenAPI document; the problems pile up in `problems`, for a
 * final `expect(api.problems).toEqual([])`. `target` is read at each call (the gateway starts in beforeAll): a base
 * URL (fetch) or an Express app (supertest, no port); a call may name its own (`at`). `token` is sent as a bearer
 * token unless a call says otherwise.
 */
export class CheckedApi {
  readonly problems: string[] = [];
  readonly doc: OpenApiDocument;
  private readonly target: (() => string | Express) | undefined;
  private readonly token: string | undefined;
  constructor(opts: { target?: () => string | Express; token?: string; doc?: OpenApiDocument }) {
    this.target = opts.target;
    this.token = opts.token;
    this.doc = opts.doc ?? adminDocument();
  }

  /**
   * `body`: an object or array is sent as JSON; a string or Buffer as it is, with `type`. `token: null` sends none.
   * `at`: another target for this call (a second gateway of the same test).
   */
  async call(method: string, path: string, opts: CallOptions = {}): Promise<CheckedAnswer> {
    const token = opts.token === undefined ? this.token : opts.token;
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    let payload: string | Buffer | undefined;
    if (opts.body !== undefined) {
      const raw = typeof opts.body === 'string' || Buffer.isBuffer(opts.body);
      payload = raw ? (opts.body as string | Buffer) : JSON.stringify(opts.body);
      headers['content-type'] = opts.type ?? 'application/json';
    }
    const target = opts.at ?? this.target?.();
    if (target === undefined) throw new Error('CheckedApi: no target (give one to the constructor or to the call)');
    let answer: { status: number; headers: Record<string, string>; text: string };
    if (typeof target === 'string') {
      const res = await fetch(`${target}${path}`, { method, headers, ...(payload !== undefined ? { body: payload } : {}) });
      answer = { status: res.status, headers: Object.fromEntries(res.headers), text: await res.text() };
    } else {
      let req = request(target)[method.toLowerCase() as 'get'](path).set(headers);
      if (payload !== undefined) req = req.send(payload);
      const res = await req;
      answer = { status: res.status, headers: res.headers as Record<string, string>, text: res.text };
    }
    this.problems.push(...this.doc.check(method, path, answer.status, answer.headers, answer.text));
    let body: request.Response['body'] = {};
    try {
      body = JSON.parse(answer.text);
    } catch {}
    return { ...answer, body };
  }

  get(path: string, opts: Omit<CallOptions, 'body' | 'type'> = {}): Promise<CheckedAnswer> {
    return this.call('GET', path, opts);
  }
}
