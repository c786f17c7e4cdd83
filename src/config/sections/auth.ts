// auth: how a request's API key is found and judged: where it is read (in order), whether keys of a foreign shape are
// accepted, the prefix issued keys carry. Sources are parsed by the function the request path reads keys with
// (http/credentials.ts), so what the config accepts is exactly what the gateway can read.
import { z } from 'zod';
import { ADMIN_TOKEN_PREFIX, ISSUED_PREFIX_SHAPE, KEY_PREFIX, parseKeySource } from '../../http/credentials.js';
import type { Ctx } from './fields.js';

export const auth = z.strictObject({
  sources: z
    .array(z.string().superRefine(validKeySource))
    .min(1, 'name at least one source (bearer, header:<Name> or query:<param>)')
    .default(['bearer'])
    .describe('Where a key is read, in order: "bearer" (Authorization: Bearer), "header:<Name>", "query:<param>". The first that carries a key is used; two different keys in one request are refused (401).'),
  foreignKeys: z.boolean().default(false).describe('true: keys of any shape (16-256 visible ASCII characters, e.g. a legacy system\'s sk_live_...) are accepted and looked up by their SHA-256. A key that starts with issuedPrefix is still checked as an issued key (its checksum) first.'),
  issuedPrefix: z
    .string()
    .regex(ISSUED_PREFIX_SHAPE, 'expected 1-32 characters of A-Z a-z 0-9 . _ ~ - (they travel unescaped in headers, bearer tokens and query strings)')
    .refine((p) => !p.startsWith(ADMIN_TOKEN_PREFIX), `must not start with ${ADMIN_TOKEN_PREFIX}: admin tokens have that prefix`)
    .default(KEY_PREFIX)
    .describe('The prefix of the keys Tollgate issues (tollgate keys create, the admin API, keys generate); needs a restart.'),
});

function validKeySource(text: string, ctx: Ctx): void {
  const parsed = parseKeySource(text);
  if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed, input: text });
}

export function keySourcesDistinct(cfg: { auth: { sources: string[] } }, ctx: Ctx): void {
  const seen = new Set<string>();
  cfg.auth.sources.forEach((text, i) => {
    const s = parseKeySource(text);
    if (typeof s === 'string') return;
    // Header names are case-insensitive; query parameter names are not.
    const id = s.kind === 'header' ? `header:${s.name}` : s.kind === 'query' ? `query:${s.name}` : 'bearer';
    if (seen.has(id)) ctx.addIssue({ code: 'custom', path: ['auth', 'sources', i], message: 'this source is listed twice', input: text });
    seen.add(id);
  });
}

export type AuthConfig = z.output<typeof auth>;
