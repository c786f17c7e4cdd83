// What the admin API accepts, as zod schemas: request bodies and the list query. Unknown fields are refused, and
// every problem is reported with where it is (body.plan, query.limit), not just the first.
import { z } from 'zod';
import { graceSecondsSchema, KEY_NAME_MAX, keyInputFields, keyLimitSchema } from '../config/key-fields.js';
import { KEY_SEARCH_MAX } from '../keys/key-search.js';

// A key's fields by the rules every way in shares (config/key-fields.ts): the CLI, an import and a static key refuse
// what these refuse, with the same message.
const { name, plan, perMinute, perDay, expiresAt, metadata } = keyInputFields;

export const createKeyBody = z.strictObject({
  plan,
  name: name.optional(),
  perMinute: perMinute.optional(),
  perDay: perDay.optional(),
  expiresAt: expiresAt.optional(),
  metadata: metadata.optional(),
});

/** null removes a field (an override, the expiry, the name, the metadata); a field left out stays as it is. */
export const patchKeyBody = z
  .strictObject({
    plan: plan.optional(),
    name: name.nullable().optional(),
    perMinute: perMinute.nullable().optional(),
    perDay: perDay.nullable().optional(),
    expiresAt: expiresAt.nullable().optional(),
    metadata: metadata.nullable().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, 'nothing to change: give at least one of plan, name, perMinute, perDay, expiresAt, metadata');

export const rotateKeyBody = z.strictObject({
  graceSeconds: graceSecondsSchema.default(0),
  keepPrefix: z.boolean().default(false),
});

export const emptyBody = z.strictObject({});

export const MAX_PAGE = 1000;

export const listKeysQuery = z.strictObject({
  limit: z
    .string()
    .regex(/^[1-9]\d{0,3}$/, `expected a whole number from 1 to ${MAX_PAGE}`)
    .transform(Number)
    .refine((n) => n <= MAX_PAGE, `expected a whole number from 1 to ${MAX_PAGE}`)
    .default(100),
  cursor: z.string().min(1).optional(),
  plan: z.string().min(1).optional(),
  status: z.enum(['active', 'revoked', 'expired']).optional(),
  name: z.string().min(1).max(KEY_NAME_MAX).optional(),
  /** An id prefix, or a piece of the name or a metadata value (keys/key-search.ts); counted in characters. */
  q: z
    .string()
    .refine((s) => s.length > 0 && [...s].length <= KEY_SEARCH_MAX, `expected 1-${KEY_SEARCH_MAX} characters`)
    .optional(),
  /** true: each key with its live state (windows, ban), as GET /keys/{id} gives it: a list page in one request. */
  windows: z.enum(['true', 'false'], { message: 'expected true or false' }).optional(),
});

const instantParam = z.iso.datetime({ offset: true, message: 'expected an ISO-8601 date-time, e.g. 2026-11-24T00:00:00Z' });

/** A period: from and to (ISO-8601), both optional; the handlers fill the defaults and check the order. */
const period = {
  from: instantParam.optional(),
  to: instantParam.optional(),
};

export const keyUsageQuery = z.strictObject({
  ...period,
  granularity: z.enum(['hour', 'day']).default('hour'),
});

export const usageQuery = z.strictObject({
  ...period,
  sort: z.enum(['admitted', 'rateLimited', 'banned', 'upstreamFailed', 'shadowRefused', 'id']).default('admitted'),
  order: z.enum(['asc', 'desc']).default('desc'),
  limit: listKeysQuery.shape.limit,
  cursor: z.string().min(1).optional(),
  /** Sorted by a figure: only keys whose figure is above 0. */
  nonzero: z.enum(['true', 'false']).optional(),
});

/**
 * GET /usage.csv: the CLI's `usage --csv` over HTTP, so the whole report (no limit, no cursor). With key: that key by
 * hour or day; without: every key's totals, sorted (by id ascending, else descending, unless order says).
 */
export const usageCsvQuery = z.strictObject({
  ...period,
  key: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,128}$/, 'expected a key id')
    .optional(),
  granularity: z.enum(['hour', 'day']).optional(),
  sort: z.enum(['admitted', 'rateLimited', 'banned', 'upstreamFailed', 'shadowRefused', 'id']).optional(),
  order: z.enum(['asc', 'desc']).optional(),
  nonzero: z.enum(['true', 'false']).optional(),
});

export const deprecatedQuery = z.strictObject(period);

/** Keys per page of the what-if: the keys most refused come first. */
export const WHATIF_PAGE = 100;

/**
 * The what-if: a plan and at least one new value; the period as a report's (from, to: ISO-8601, both optional); or the
 * cursor of a previous answer (it carries its question: nothing else but limit). limit: keys per page.
 */
export const simulateBody = z
  .strictObject({
    plan: z.string().min(1).max(200).optional(),
    perMinute: keyLimitSchema.optional(),
    perDay: keyLimitSchema.optional(),
    perMonth: keyLimitSchema.optional(),
    ...period,
    limit: z.number().int().min(1).max(MAX_PAGE).default(WHATIF_PAGE),
    cursor: z.string().min(1).max(200).optional(),
  })
  .superRefine((b, ctx) => {
    if (b.cursor !== undefined) {
      for (const f of ['plan', 'perMinute', 'perDay', 'perMonth', 'from', 'to'] as const)
        if (b[f] !== undefined) ctx.addIssue({ code: 'custom', path: [f], message: "a cursor carries its what-if's question: leave this out" });
      return;
    }
    if (b.plan === undefined) ctx.addIssue({ code: 'custom', path: ['plan'], message: 'the plan to simulate: required (without a cursor)' });
    if (b.perMinute === undefined && b.perDay === undefined && b.perMonth === undefined)
      ctx.addIssue({ code: 'custom', path: [], message: 'nothing to simulate: give perMinute, perDay, perMonth or several' });
  });

export interface Problem {
  path: string;
  message: string;
}

/** Every issue zod found, each with its path under `where` ("body", "query"); unknown fields one problem each. */
export function problemsOf(error: z.ZodError, where: string): Problem[] {
  const out: Problem[] = [];
  for (const issue of error.issues) {
    const at = [where, ...issue.path.map(String)].join('.');
    if (issue.code === 'unrecognized_keys') for (const k of issue.keys) out.push({ path: `${at}.${k}`, message: 'unknown field' });
    // A map's name refused (a metadata name): its own rule's words, not zod's "Invalid key in record".
    else if (issue.code === 'invalid_key') out.push({ path: at, message: issue.issues[0]?.message ?? issue.message });
    else out.push({ path: at, message: issue.message });
  }
  return out;
}
