// The admin API's OpenAPI 3.1 document, kept in the repository as docs/admin.openapi.yaml (the tests check every
// answer the admin tests receive against it) and served, parsed once, at GET /openapi.json.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

/** From src/admin/ and dist/admin/ alike: the repository's (or the installed package's) docs folder. */
export const ADMIN_OPENAPI_FILE = new URL('../../docs/admin.openapi.yaml', import.meta.url);

let cached: unknown;

export function adminOpenApi(): unknown {
  return (cached ??= parse(readFileSync(ADMIN_OPENAPI_FILE, 'utf8')));
}
