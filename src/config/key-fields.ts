// What each field of a key record may hold, written once: the admin API, the CLI, an import and the config's static
// keys all parse a key's fields with these schemas, so each refuses the same bad value with the same message. In
// config/ (not keys/) because the config's static keys need them and config/ sits below keys/ (docs/architecture.md).
import { isIP } from 'node:net';
import { z } from 'zod';

/** A key id: what KeyIssuer issues (key_...), what an import or a static key may name, what a report cursor carries. */
export const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;
export const keyIdSchema = z.string().regex(KEY_ID, 'expected 1-64 characters of A-Z a-z 0-9 _ -');

export const KEY_NAME_MAX = 200;
const nameMessage = `expected a name of 1-${KEY_NAME_MAX} characters`;
/** A key's label (a customer's name): shown in tables and reports, so bounded. */
export const keyNameSchema = z.string(nameMessage).min(1, nameMessage).max(KEY_NAME_MAX, nameMessage);

/** A plan name as a key names it; whether it is configured is checked against the plans where they are known. */
export const keyPlanSchema = z.string('a plan is required').min(1, 'a plan is required');

/**
 * The largest per-key limit (perMinute, perDay, perMonth): far above any real quota, and well inside the whole numbers a
 * double (the limit script's Lua number) holds exactly.
 */
export const KEY_LIMIT_MAX = 1_000_000_000_000;
const limitMessage = `expected a whole number from 1 to ${KEY_LIMIT_MAX}`;
/** A key's (or a consumer's) own perMinute, perDay or perMonth, over its plan's. */
export const keyLimitSchema = z.number(limitMessage).int(limitMessage).min(1, limitMessage).max(KEY_LIMIT_MAX, limitMessage);

/** A key's dates (expiresAt, createdAt, ...): ISO-8601 with a time and its offset, so no reader guesses a zone. */
export const keyInstantSchema = z.iso.datetime({ offset: true, message: 'expected an ISO-8601 date-time with its offset, e.g. 2027-01-01T00:00:00Z' });

export const REASON_MAX = 200;
const reasonMessage = `expected a reason of 1-${REASON_MAX} characters`;
/** Why own limits were given (a launch week): shown to administrators, never read by the limits. */
export const limitsReasonSchema = z.string(reasonMessage).min(1, reasonMessage).max(REASON_MAX, reasonMessage);

/** Up to 30 days: a longer overlap of two keys is a second key, not a rotation. */
export const GRACE_MAX_SECONDS = 2_592_000;
const graceMessage = `expected a whole number of seconds from 0 to ${GRACE_MAX_SECONDS} (30 days)`;
/** How long a rotated key's old plaintext keeps working. */
export const graceSecondsSchema = z.number(graceMessage).int(graceMessage).min(0, graceMessage).max(GRACE_MAX_SECONDS, graceMessage);

/** At most this many metadata entries per key: it is for a portal's ids and labels, not for data. */
export const METADATA_MAX_ENTRIES = 16;
export const METADATA_VALUE_MAX = 256;

/** A metadata entry's name (also a CSV import's `metadata.<name>` column). */
export const METADATA_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** A small string map a portal or billing system keeps on a key (customer id, subscription, ...). */
export const metadataSchema = z
  .record(
    z.string().regex(METADATA_NAME, 'metadata names are 1-64 characters of A-Z a-z 0-9 _ . -'),
    z.string(`expected a string of at most ${METADATA_VALUE_MAX} characters`).max(METADATA_VALUE_MAX, `expected a string of at most ${METADATA_VALUE_MAX} characters`),
  )
  .refine((m) => Object.keys(m).length <= METADATA_MAX_ENTRIES, `at most ${METADATA_MAX_ENTRIES} metadata entries`);

/**
 * Scopes and allowed CIDRs travel in the key record every instance caches (and in a consumer's), and are checked on
 * every request of the key: so they are bounded, and each entry too.
 */
export const SCOPES_MAX = 100;
export const SCOPE_MAX_LENGTH = 200;
export const ALLOWED_CIDRS_MAX = 100;
/** The longest CIDR text: `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255/128` is 49 characters. */
export const CIDR_MAX_LENGTH = 64;

/**
 * A scope: a route's name (routes[].name: 1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit),
 * `service:<name>` (a service name's characters), or `operation:<operationId>` (visible ASCII, no spaces).
 */
const SCOPE = /^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,63}|service:[A-Za-z0-9_.-]{1,64}|operation:[\x21-\x7e]{1,190})$/;
const scopeMessage = 'expected a route name, service:<name> or operation:<operationId> (at most 200 characters, no spaces)';

/**
 * A list of 1-`max` entries, each checked by `entry` only once the list's length is within bounds (a list of a
 * million entries is one problem, not a million), none given twice.
 */
function boundedList(max: number, what: string, message: string, entryProblem: (text: string) => string | undefined) {
  return z
    .array(z.unknown(), message)
    .min(1, message)
    .max(max, message)
    .pipe(
      z.array(
        z.string('expected a string').superRefine((text, ctx) => {
          const problem = entryProblem(text);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        }),
      ),
    )
    .superRefine((list, ctx) => {
      const seen = new Set<string>();
      list.forEach((entry, i) => {
        if (seen.has(entry)) ctx.addIssue({ code: 'custom', path: [i], message: `${JSON.stringify(entry.slice(0, 80))}: this ${what} is listed twice` });
        seen.add(entry);
      });
    });
}

/** The routes a key (or a consumer) may call: route names, `service:<name>`, `operation:<operationId>`. */
export const scopesSchema = boundedList(SCOPES_MAX, 'scope', `expected a list of 1-${SCOPES_MAX} scopes`, (text) =>
  text.length <= SCOPE_MAX_LENGTH && SCOPE.test(text) ? undefined : `${JSON.stringify(text.slice(0, 80))}: ${scopeMessage}`,
);

/**
 * Why `text` is not an allowed address or network (an IPv4 or IPv6 address, alone or with a /prefix), or undefined.
 * node:net's isIP reads the address (its strict forms: no leading zeros in IPv4, no zone id here); the prefix is a
 * plain decimal within the family's bits. The prefix names a network whatever host bits the address has
 * (`10.1.2.3/8` is `10.0.0.0/8`), as node:net's BlockList reads it.
 */
export function cidrProblem(text: string): string | undefined {
  const shown = JSON.stringify(text.length > CIDR_MAX_LENGTH ? `${text.slice(0, CIDR_MAX_LENGTH)}...` : text);
  const expected = `${shown}: expected an IPv4 or IPv6 address, alone or with a /prefix (e.g. 203.0.113.0/24, 2001:db8::/32)`;
  if (text.length === 0 || text.length > CIDR_MAX_LENGTH) return expected;
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  // A zone id (fe80::1%eth0) names an interface of one host, not an address a client comes from.
  const family = address.includes('%') ? 0 : isIP(address);
  if (family === 0) return expected;
  if (slash < 0) return undefined;
  const bits = family === 4 ? 32 : 128;
  const prefix = text.slice(slash + 1);
  if (!/^(?:0|[1-9][0-9]{0,2})$/.test(prefix) || Number(prefix) > bits) return `${shown}: the prefix after "/" must be a whole number from 0 to ${bits}`;
  return undefined;
}

/** The client addresses a key (or a consumer) may be used from: IPv4 and IPv6 addresses and CIDRs. */
export const allowedCidrsSchema = boundedList(ALLOWED_CIDRS_MAX, 'address', `expected a list of 1-${ALLOWED_CIDRS_MAX} addresses or CIDRs`, cidrProblem);

/**
 * The fields an administrator gives a key, by every way in (create, an import's customer record, a static key). Each
 * way picks those it takes and says which are optional; none writes a rule of its own.
 */
export const keyInputFields = {
  id: keyIdSchema,
  name: keyNameSchema,
  plan: keyPlanSchema,
  perMinute: keyLimitSchema,
  perDay: keyLimitSchema,
  perMonth: keyLimitSchema,
  expiresAt: keyInstantSchema,
  /** When the own limits (perMinute, perDay, perMonth) end: past it, the plan's values apply again. */
  limitsExpiresAt: keyInstantSchema,
  limitsReason: limitsReasonSchema,
  metadata: metadataSchema,
  scopes: scopesSchema,
  allowedCidrs: allowedCidrsSchema,
};

/** A key's hash as stored: the SHA-256 of the plaintext, 64 lowercase hex digits. */
export const sha256HexSchema = z.string().regex(/^[0-9a-f]{64}$/, 'expected 64 lowercase hex digits (SHA-256 of the key)');

/** Metadata with its names sorted: the same map is stored, exported and compared as the same bytes. */
export function sortedMetadata(m: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1)));
}
