// What the admin API accepts, as zod schemas: request bodies and the list query. Unknown fields are refused, and
// every problem is reported with where it is (body.plan, query.limit), not just the first.
import { z } from 'zod';
import { graceSecondsSchema, KEY_NAME_MAX, keyInputFields, keyLimitSchema, METADATA_NAME } from '../config/key-fields.js';
import { PORTAL_ACTOR } from '../access/portal-access.js';
import { PORTAL_SCOPES } from '../access/types.js';
import { consumerInputFields } from '../consumers/record-schema.js';
import { ENDPOINT_EVENT_TYPES, MAX_ENDPOINT_THRESHOLDS } from '../events/endpoints.js';
import { KEY_SEARCH_MAX } from '../keys/key-search.js';

// A key's fields by the rules every way in shares (config/key-fields.ts): the CLI, an import and a static key refuse
// what these refuse, with the same message.
const { name, plan, perMinute, perDay, perMonth, limitsExpiresAt, limitsReason, expiresAt, metadata, scopes, allowedCidrs } = keyInputFields;

export const createKeyBody = z.strictObject({
  plan,
  name: name.optional(),
  perMinute: perMinute.optional(),
  perDay: perDay.optional(),
  perMonth: perMonth.optional(),
  limitsExpiresAt: limitsExpiresAt.optional(),
  limitsReason: limitsReason.optional(),
  expiresAt: expiresAt.optional(),
  metadata: metadata.optional(),
  scopes: scopes.optional(),
  allowedCidrs: allowedCidrs.optional(),
  /** The consumer the key belongs to from the start. */
  consumer: keyInputFields.id.optional(),
});

/** null removes a field (an override, the expiry, the name, the metadata, the scopes or CIDRs); a field left out stays as it is. */
export const patchKeyBody = z
  .strictObject({
    plan: plan.optional(),
    name: name.nullable().optional(),
    perMinute: perMinute.nullable().optional(),
    perDay: perDay.nullable().optional(),
    perMonth: perMonth.nullable().optional(),
    limitsExpiresAt: limitsExpiresAt.nullable().optional(),
    limitsReason: limitsReason.nullable().optional(),
    expiresAt: expiresAt.nullable().optional(),
    metadata: metadata.nullable().optional(),
    scopes: scopes.nullable().optional(),
    allowedCidrs: allowedCidrs.nullable().optional(),
    /** Attach to (or move to) this consumer; null detaches. */
    consumer: keyInputFields.id.nullable().optional(),
  })
  .refine(
    (b) => Object.keys(b).length > 0,
    'nothing to change: give at least one of plan, name, perMinute, perDay, perMonth, limitsExpiresAt, limitsReason, expiresAt, metadata, scopes, allowedCidrs, consumer',
  );

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

// A consumer's fields by the rules the CLI and the store share (src/consumers/record-schema.ts).
const cf = consumerInputFields;

export const createConsumerBody = z.strictObject({
  id: cf.id.optional(),
  name: cf.name,
  plan: cf.plan,
  metadata: cf.metadata.optional(),
  maxKeys: cf.maxKeys.optional(),
  billingDay: cf.billingDay.optional(),
  perMinute: cf.perMinute.optional(),
  perDay: cf.perDay.optional(),
  perMonth: cf.perMonth.optional(),
  limitsExpiresAt: cf.limitsExpiresAt.optional(),
  limitsReason: cf.limitsReason.optional(),
  scopes: cf.scopes.optional(),
  allowedCidrs: cf.allowedCidrs.optional(),
});

/** null removes an optional field; a field left out stays as it is. */
export const patchConsumerBody = z
  .strictObject({
    name: cf.name.optional(),
    plan: cf.plan.optional(),
    metadata: cf.metadata.nullable().optional(),
    maxKeys: cf.maxKeys.nullable().optional(),
    billingDay: cf.billingDay.nullable().optional(),
    perMinute: cf.perMinute.nullable().optional(),
    perDay: cf.perDay.nullable().optional(),
    perMonth: cf.perMonth.nullable().optional(),
    limitsExpiresAt: cf.limitsExpiresAt.nullable().optional(),
    limitsReason: cf.limitsReason.nullable().optional(),
    scopes: cf.scopes.nullable().optional(),
    allowedCidrs: cf.allowedCidrs.nullable().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, 'nothing to change: give at least one field');

/** Keys one bulk attach may name. */
export const ATTACH_KEYS_MAX = 1000;

/**
 * Bulk attach: keys grouped by a metadata field (fromMetadata, with the plan and maxKeys of the consumers it creates),
 * or given keys into one consumer (consumer, keys). dryRun defaults to true: only a preview, nothing changed.
 */
export const attachBody = z
  .strictObject({
    fromMetadata: z.string().regex(METADATA_NAME, 'metadata names are 1-64 characters of A-Z a-z 0-9 _ . -').optional(),
    plan: cf.plan.optional(),
    maxKeys: cf.maxKeys.optional(),
    consumer: cf.id.optional(),
    keys: z
      .array(keyInputFields.id, 'expected a list of key ids')
      .min(1, 'expected at least one key id')
      .max(ATTACH_KEYS_MAX, `at most ${ATTACH_KEYS_MAX} keys`)
      .optional(),
    dryRun: z.boolean('expected true or false').default(true),
  })
  .superRefine((b, ctx) => {
    const byField = b.fromMetadata !== undefined;
    const byKeys = b.consumer !== undefined || b.keys !== undefined;
    if (byField === byKeys) ctx.addIssue({ code: 'custom', path: [], message: 'give fromMetadata (with plan), or consumer and keys: one of the two' });
    else if (byField && b.plan === undefined)
      ctx.addIssue({ code: 'custom', path: ['plan'], message: 'the plan of the consumers fromMetadata creates: required' });
    else if (byKeys && (b.consumer === undefined || b.keys === undefined))
      ctx.addIssue({ code: 'custom', path: [b.consumer === undefined ? 'consumer' : 'keys'], message: 'consumer and keys go together' });
    if (byKeys && (b.plan !== undefined || b.maxKeys !== undefined))
      ctx.addIssue({
        code: 'custom',
        path: [b.plan !== undefined ? 'plan' : 'maxKeys'],
        message: 'only with fromMetadata (the consumer named exists already)',
      });
  });

export const listConsumersQuery = z.strictObject({
  limit: listKeysQuery.shape.limit,
  cursor: z.string().min(1).optional(),
  status: z.enum(['active', 'suspended']).optional(),
  plan: z.string().min(1).max(200).optional(),
  /** An id prefix, or a piece of the name or a metadata value (as GET /keys?q= searches keys). */
  q: listKeysQuery.shape.q,
});

export const consumerKeysQuery = z.strictObject({
  limit: listKeysQuery.shape.limit,
  cursor: z.string().min(1).optional(),
});

export const deleteConsumerQuery = z.strictObject({
  revokeKeys: z.enum(['true', 'false'], { message: 'expected true or false' }).optional(),
});

/**
 * A webhook endpoint registered for a consumer. The URL is any text here: the registry judges it (scheme, credentials,
 * length, where its host resolves) and refuses it with webhook_url_refused, one code for every reason.
 */
export const createWebhookBody = z.strictObject({
  url: z.string('expected the URL events are sent to'),
  types: z
    .array(z.enum(ENDPOINT_EVENT_TYPES, { message: `expected one of ${ENDPOINT_EVENT_TYPES.join(', ')}` }), 'expected a list of event types')
    .min(1, 'expected at least one event type (leave types out for every type)')
    .max(ENDPOINT_EVENT_TYPES.length, `at most ${ENDPOINT_EVENT_TYPES.length} types`)
    .refine((t) => new Set(t).size === t.length, 'each type at most once')
    .optional(),
  thresholds: z
    .array(
      z
        .number('expected a percent from 1 to 100')
        .int('expected a whole percent')
        .min(1, 'expected a percent from 1 to 100')
        .max(100, 'expected a percent from 1 to 100'),
      'expected a list of percents',
    )
    .min(1, "expected at least one percent (leave thresholds out for the gateway's own)")
    .refine((t) => new Set(t).size <= MAX_ENDPOINT_THRESHOLDS, `at most ${MAX_ENDPOINT_THRESHOLDS} distinct percents`)
    .optional(),
});

/** Who a portal link or an ending of sessions is for, as the platform names them: 1-200 printable characters. */
const portalActor = z
  .string('expected who it is for, as your platform names them (1-200 characters)')
  .min(1, 'expected 1-200 characters')
  .max(200, 'expected 1-200 characters')
  .regex(PORTAL_ACTOR, 'expected printable characters only (no control characters)');

/** POST /consumers/{id}/portal-links. The list's length is checked before its items: a long list is one problem. */
export const createPortalLinkBody = z.strictObject({
  actor: portalActor,
  scopes: z
    .array(z.unknown(), 'expected a list of scopes')
    .min(1, 'expected at least one scope')
    .max(PORTAL_SCOPES.length, `at most ${PORTAL_SCOPES.length} scopes`)
    .pipe(z.array(z.enum(PORTAL_SCOPES, { message: `expected one of ${PORTAL_SCOPES.join(', ')}` })))
    .refine((t) => new Set(t).size === t.length, 'each scope at most once'),
  sessionHours: z
    .number('expected hours from 1 to 24')
    .int('expected whole hours')
    .min(1, 'expected hours from 1 to 24')
    .max(24, 'expected hours from 1 to 24')
    .optional(),
});

/** DELETE /consumers/{id}/portal-sessions: every session of the consumer, or one actor's. */
export const endPortalSessionsQuery = z.strictObject({ actor: portalActor.optional() });

/** POST /events/endpoints/{id}/replay: every undelivered event (no body, or no ids), or the ones named. */
export const replayBody = z.strictObject({
  ids: z
    .array(z.string().min(1).max(512), 'expected a list of event ids')
    .min(1, 'expected at least one event id (leave ids out to replay every undelivered event)')
    .max(MAX_PAGE, `at most ${MAX_PAGE} ids`)
    .optional(),
});

/** GET /events/endpoints/{id}/undelivered: a page of the endpoint's undelivered events, oldest first. */
export const undeliveredQuery = z.strictObject({
  limit: z
    .string()
    .regex(/^[1-9]\d{0,3}$/, `expected a whole number from 1 to ${MAX_PAGE}`)
    .transform(Number)
    .refine((n) => n <= MAX_PAGE, `expected a whole number from 1 to ${MAX_PAGE}`)
    .default(50),
  cursor: z.string().min(1).max(1024).optional(),
});

const instantParam = z.iso.datetime({ offset: true, message: 'expected an ISO-8601 date-time, e.g. 2026-11-24T00:00:00Z' });

/** A period: from and to (ISO-8601), both optional; the handlers fill the defaults and check the order. */
const period = {
  from: instantParam.optional(),
  to: instantParam.optional(),
};

/** How a report's rows are made: per key (the default) or per consumer the usage was counted under. */
const groupBy = z.enum(['key', 'consumer'], { message: 'expected key or consumer' });

/** GET /usage/summary: every key added up, by hour or day. */
export const summaryQuery = z.strictObject({
  ...period,
  granularity: z.enum(['hour', 'day']).default('hour'),
});

/** GET /keys/{id}/usage: with groupBy consumer, also the key's usage split by the consumer it was counted under. */
export const keyUsageQuery = summaryQuery.extend({ groupBy: groupBy.default('key') });

export const usageQuery = z.strictObject({
  ...period,
  sort: z.enum(['admitted', 'rateLimited', 'banned', 'upstreamFailed', 'shadowRefused', 'id']).default('admitted'),
  order: z.enum(['asc', 'desc']).default('desc'),
  limit: listKeysQuery.shape.limit,
  cursor: z.string().min(1).optional(),
  /** Sorted by a figure: only keys whose figure is above 0. */
  nonzero: z.enum(['true', 'false']).optional(),
  /** Left out: by key, or as the cursor's report was made. */
  groupBy: groupBy.optional(),
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
  groupBy: groupBy.default('key'),
});

/** The deprecated-route and invalid-request reports: a period; with groupBy consumer, also the callers' consumers. */
export const deprecatedQuery = z.strictObject({ ...period, groupBy: groupBy.default('key') });

/** GET /routes/deprecated.csv: its period is everything kept; groupBy consumer makes its rows per consumer. */
export const deprecatedCsvQuery = z.strictObject({ groupBy: groupBy.default('key') });

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
    /** 'consumer': the plan's consumers' pools instead of its keys. */
    groupBy: groupBy.optional(),
  })
  .superRefine((b, ctx) => {
    if (b.cursor !== undefined) {
      for (const f of ['plan', 'perMinute', 'perDay', 'perMonth', 'from', 'to', 'groupBy'] as const)
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
