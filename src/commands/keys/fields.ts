// A key's fields as options of `keys create` and `keys update`, checked by the rules the admin API, an import and a
// static key apply to the same value (src/config/key-fields.ts): refused as a usage error (exit 2), with their message.
import type { z } from 'zod';
import { keyInputFields } from '../../config/key-fields.js';
import { CliError } from '../cli-error.js';

/** An option by a key field's rule. A numeric field's text is read as a number when it is one. */
export function keyField<T>(flag: string, schema: z.ZodType<T>, numeric = false) {
  return (v: string): T => checked(flag, schema, numeric && /^-?\d+$/.test(v) ? Number(v) : v);
}

/** The value by the rule, or a usage error naming every problem in one line. */
function checked<T>(flag: string, schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new CliError(`${flag}: ${r.error.issues.map((i) => [...i.path.map(String), i.message].join(': ')).join('; ')}`, 2);
  return r.data;
}

/** A per-key override by its rule, or "none" (back to the plan's limit). Not null: commander turns a parser's null into ''. */
export function overrideOrNone(flag: string, schema: z.ZodType<number>) {
  const parse = keyField(flag, schema, true);
  return (v: string): number | 'none' => (v === 'none' ? 'none' : parse(v));
}

/** --expires: a date-time by the key's rule, stored in UTC as an import stores it. */
export function expiresOption(v: string): string {
  return new Date(Date.parse(keyField('--expires', keyInputFields.expiresAt)(v))).toISOString();
}

/** --limits-expires-at: when the key's own limits end, by the rule, stored in UTC; "never" (update) removes the end. */
export function limitsExpiresAtOption(v: string): string | 'never' {
  if (v === 'never') return 'never';
  return new Date(Date.parse(keyField('--limits-expires-at', keyInputFields.limitsExpiresAt)(v))).toISOString();
}

/** --limits-reason: why the own limits were given, by the rule; "none" (update) removes it. */
export function reasonOrNone(v: string): string | 'none' {
  return v === 'none' ? 'none' : keyField('--limits-reason', keyInputFields.limitsReason)(v);
}

/** --metadata: a JSON object of strings, by the rules the admin API applies. */
export function metadataOption(v: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    throw new CliError(`--metadata must be a JSON object, got "${v.slice(0, 80)}"`, 2);
  }
  const r = keyInputFields.metadata.safeParse(parsed);
  if (!r.success) throw new CliError(`--metadata: ${r.error.issues.map((i) => [...i.path.map(String), i.message].join(': ')).join('; ')}`, 2);
  return r.data;
}

/**
 * A comma-separated list option (--scopes, --allowed-cidrs) by the field's rule: "a,b" is ["a", "b"], spaces around
 * each entry ignored; an empty entry is refused by the rule, as the admin API refuses an empty string.
 */
export function listOption(flag: string, schema: z.ZodType<string[]>) {
  return (v: string): string[] =>
    checked(
      flag,
      schema,
      v.split(',').map((entry) => entry.trim()),
    );
}

/** A list option of `keys update`, or "none" (the field removed: every route, or anywhere, again). */
export function listOrNone(flag: string, schema: z.ZodType<string[]>) {
  const parse = listOption(flag, schema);
  return (v: string): string[] | 'none' => (v === 'none' ? 'none' : parse(v));
}
