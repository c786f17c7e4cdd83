// The error catalogue (docs/errors.md): one JSON shape, and the error table in docs/errors.md lists every code with its status.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERRORS, HttpError, errorBody, type ErrorCode } from '../src/http/errors.js';

const README = fileURLToPath(new URL('../docs/errors.md', import.meta.url));
const codes = Object.keys(ERRORS) as ErrorCode[];

/** Rows like "| 404 | `not_found` | ... |" or "| 401 | `missing_api_key` / `invalid_api_key` | ... |". */
function readmeErrorRows(markdown: string): Array<{ status: number; code: string }> {
  const rows: Array<{ status: number; code: string }> = [];
  for (const line of markdown.split('\n')) {
    const m = /^\|\s*(\d{3})\s*\|\s*(`[a-z_]+`(?:\s*\/\s*`[a-z_]+`)*)\s*\|/.exec(line.trim());
    if (!m) continue;
    for (const c of m[2]!.matchAll(/`([a-z_]+)`/g)) rows.push({ status: Number(m[1]), code: c[1]! });
  }
  return rows;
}

describe('the catalogue', () => {
  it('has snake_case codes, error statuses and a message for each', () => {
    expect(codes.length).toBeGreaterThan(0);
    for (const code of codes) {
      expect(code).toMatch(/^[a-z]+(_[a-z]+)*$/);
      // A bound by design: any 4xx or 5xx status is an error status.
      expect(ERRORS[code].status).toBeGreaterThanOrEqual(400);
      expect(ERRORS[code].status).toBeLessThan(600);
      expect(ERRORS[code].message.length).toBeGreaterThan(10);
    }
  });

  it('holds every code the contract names, with its status', () => {
    const contract: Record<string, number> = {
      invalid_request: 400,
      invalid_json: 400,
      missing_api_key: 401,
      invalid_api_key: 401,
      not_found: 404,
      gone: 410,
      payload_too_large: 413,
      unsupported_media_type: 415,
      rate_limit_exceeded: 429,
      api_key_banned: 429,
      bad_gateway: 502,
      service_unavailable: 503,
      gateway_timeout: 504,
    };
    for (const [code, status] of Object.entries(contract)) expect(ERRORS[code as ErrorCode]?.status, code).toBe(status);
  });

  it('errorBody is {code, message, status} with the catalogue status', () => {
    expect(errorBody('gone')).toEqual({ code: 'gone', message: ERRORS.gone.message, status: 410 });
    expect(errorBody('bad_gateway', 'custom')).toEqual({ code: 'bad_gateway', message: 'custom', status: 502 });
    expect(Object.keys(errorBody('not_found')).sort()).toEqual(['code', 'message', 'status']);
  });

  it('HttpError carries the code and its status', () => {
    const e = new HttpError('payload_too_large');
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe('payload_too_large');
    expect(e.status).toBe(413);
    expect(e.message).toBe(ERRORS.payload_too_large.message);
    expect(new HttpError('gone', 'retired').message).toBe('retired');
  });
});

describe("docs/errors.md's error table", () => {
  it('exists', () => {
    expect(existsSync(README), 'docs/errors.md must document every error code in a table of "| status | `code` | when |" rows').toBe(true);
  });

  it('lists every catalogue code with the same status', () => {
    const rows = readmeErrorRows(existsSync(README) ? readFileSync(README, 'utf8') : '');
    const missing = codes.filter((code) => !rows.some((r) => r.code === code && r.status === ERRORS[code].status));
    expect(missing.map((c) => `| ${ERRORS[c].status} | \`${c}\` |`)).toEqual([]);
  });

  it('lists no code the gateway does not have, nor one under another status', () => {
    const rows = readmeErrorRows(existsSync(README) ? readFileSync(README, 'utf8') : '');
    const wrong = rows.filter((r) => r.status >= 400 && ERRORS[r.code as ErrorCode]?.status !== r.status);
    expect(wrong).toEqual([]);
  });

  it('parses rows that share a line', () => {
    expect(readmeErrorRows('| status | code |\n|---|---|\n| 401 | `missing_api_key` / `invalid_api_key` | no key |\n| 404 | `not_found` | x |\n')).toEqual([
      { status: 401, code: 'missing_api_key' },
      { status: 401, code: 'invalid_api_key' },
      { status: 404, code: 'not_found' },
    ]);
  });
});
