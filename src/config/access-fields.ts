// What a key or a consumer may be narrowed to, as fields: `scopes` (which routes it may call) and `allowedCidrs`
// (from which addresses). Written once here, beside key-fields.ts, so a key and a consumer refuse the same bad value
// with the same message. Both lists travel with every cached copy of their record, so they are bounded.
import { isIP } from 'node:net';
import { z } from 'zod';

/** At most this many scopes or address ranges per record: a cached record's size stays small. */
export const ACCESS_LIST_MAX = 64;
/** The longest scope: a route name, `service:<name>` or `operation:<operationId>` (operationIds run to 200). */
export const SCOPE_MAX = 220;

const ROUTE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** A route without a name is named by its path (/v1/pets/:petId, /orders/*). */
const ROUTE_PATH = /^\/[^\s]{0,199}$/;
const SERVICE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const OPERATION_ID = /^[^\s]{1,200}$/;

const scopeMessage = `expected a route name, service:<name> or operation:<operationId> (at most ${SCOPE_MAX} characters, no spaces)`;

/** Why `s` is not a scope, or undefined when it is one. */
export function scopeProblem(s: string): string | undefined {
  if (s.length > SCOPE_MAX || /[\s\p{Cc}]/u.test(s)) return scopeMessage;
  if (s.startsWith('service:')) return SERVICE_NAME.test(s.slice(8)) ? undefined : 'service:<name>: service names are 1-64 characters of A-Z a-z 0-9 _ . -';
  if (s.startsWith('operation:')) return OPERATION_ID.test(s.slice(10)) ? undefined : 'operation:<operationId>: 1-200 characters, no spaces';
  return ROUTE_NAME.test(s) || ROUTE_PATH.test(s) ? undefined : scopeMessage;
}

/** Why `s` is not an IPv4 or IPv6 address or CIDR range, or undefined when it is one. */
export function cidrProblem(s: string): string | undefined {
  const message = 'expected an IPv4 or IPv6 address or CIDR range, e.g. 203.0.113.0/24 or 2001:db8::/32';
  if (s.length > 64) return message;
  const slash = s.indexOf('/');
  const address = slash < 0 ? s : s.slice(0, slash);
  const family = isIP(address);
  if (family === 0) return message;
  if (slash < 0) return undefined;
  const bits = s.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > (family === 4 ? 32 : 128)) return `${message} (a prefix length of 0-${family === 4 ? 32 : 128})`;
  return undefined;
}

function listOf(what: string, problem: (s: string) => string | undefined) {
  return z
    .array(z.string(`expected a list of ${what}, each a string`), `expected a list of ${what}`)
    .max(ACCESS_LIST_MAX, `at most ${ACCESS_LIST_MAX} ${what}`)
    .superRefine((list, ctx) => {
      list.forEach((s, i) => {
        const p = problem(s);
        if (p) ctx.addIssue({ code: 'custom', path: [i], message: p });
      });
      if (new Set(list).size !== list.length) ctx.addIssue({ code: 'custom', message: `the same ${what.replace(/s$/, '')} twice` });
    });
}

/** Route names, `service:<name>`, `operation:<operationId>`: where a key or consumer may call. */
export const scopesSchema = listOf('scopes', scopeProblem);

/** IPv4 and IPv6 addresses and CIDR ranges: where a key's or consumer's requests may come from. */
export const allowedCidrsSchema = listOf('address ranges', cidrProblem);
