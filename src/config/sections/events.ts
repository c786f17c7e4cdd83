// events: quota alerts and other facts sent as signed webhooks (CloudEvents, Standard Webhooks signatures), and the
// metering export. Optional; it needs Redis (the outbox, the queues and their dedupe live there: rules/events-redis.ts).
// A webhook's secret is what signs its deliveries, so it is checked here as the signing library will read it: the
// `whsec_` prefix, then base64 of 24 to 64 bytes.
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { z } from 'zod';
import { EVENT_TYPES } from '../../observability/catalogue.js';
import { positiveInt, type Ctx } from './fields.js';

/** A Standard Webhooks secret: `whsec_` then base64 (padded, standard alphabet) of 24 to 64 random bytes. */
export const webhookSecret = z
  .string()
  .refine((s) => s.startsWith('whsec_'), 'expected a secret starting whsec_ (Standard Webhooks)')
  .refine((s) => {
    const b64 = s.slice('whsec_'.length);
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || b64.length % 4 !== 0) return false;
    const bytes = Buffer.from(b64, 'base64').length;
    return bytes >= 24 && bytes <= 64;
  }, 'expected whsec_ followed by base64 of 24 to 64 bytes (e.g. whsec_ and `openssl rand -base64 32`)');

const httpUrl = () => z.url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' });

/** A webhook endpoint's id: part of its Redis names (events:{ep:<id>}:...), so a short plain name. */
const ENDPOINT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** A configured webhook's default id: "cfg-" and the first 12 hex digits of the SHA-256 of its URL (stable across restarts). */
export function defaultWebhookId(url: string): string {
  return `cfg-${createHash('sha256').update(url).digest('hex').slice(0, 12)}`;
}

const webhook = z
  .strictObject({
    id: z.string().regex(ENDPOINT_ID, 'expected 1-64 characters of A-Z a-z 0-9 _ -').optional().describe('The endpoint\'s id (in metrics, logs and Redis names); default "cfg-" and the first 12 hex digits of the SHA-256 of its url.'),
    url: httpUrl().describe('Where events are POSTed (http:// or https://), as CloudEvents 1.0 in structured mode (application/cloudevents+json).'),
    secret: webhookSecret.optional().describe('The signing secret (whsec_ and base64 of 24-64 bytes): every delivery carries webhook-id, webhook-timestamp and webhook-signature (Standard Webhooks). Give secret or secrets, not both.'),
    secrets: z.array(webhookSecret).min(1).max(4).optional().describe('Several signing secrets during a rotation (new first): each signs, the signatures space-separated, so the receiver may check with either.'),
    types: z.array(z.enum(EVENT_TYPES)).min(1).default([...EVENT_TYPES]).describe('The event types sent to it; default every type.'),
    filter: z
      .strictObject({
        consumers: z.array(z.string().min(1)).min(1).optional().describe('Only events of these consumers.'),
        plans: z.array(z.string().min(1)).min(1).optional().describe('Only events of keys on these plans (a consumer\'s plan for a key of one).'),
        keys: z.array(z.string().min(1)).min(1).optional().describe('Only events of these keys (key ids): an event naming no key (consumer.suspended) never matches; a pool\'s quota.threshold names the key whose request crossed it.'),
      })
      .optional()
      .describe('Only some events: those matching every list given.'),
  })
  .superRefine(oneSecretField)
  .transform((w) => ({ ...w, id: w.id ?? defaultWebhookId(w.url) }));

/** Exactly one of secret and secrets. */
function oneSecretField(w: { secret?: string | undefined; secrets?: string[] | undefined }, ctx: Ctx): void {
  if ((w.secret === undefined) === (w.secrets === undefined))
    ctx.addIssue({ code: 'custom', path: w.secret === undefined ? [] : ['secrets'], message: w.secret === undefined ? 'expected secret or secrets' : 'give secret or secrets, not both' });
}

/** An IPv4 or IPv6 range in CIDR notation (`127.0.0.0/8`, `fd00::/8`). */
const cidr = z.string().refine((s) => {
  const slash = s.indexOf('/');
  if (slash < 0) return false;
  const family = isIP(s.slice(0, slash));
  const bits = s.slice(slash + 1);
  return family !== 0 && /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}, 'expected a CIDR range such as 10.0.0.0/8 or fd00::/8');

/** Where the metering export writes: an http(s) URL, or a file path (anything without "://"). */
const meteringTarget = z
  .string()
  .min(1)
  .refine((s) => !s.includes('://') || /^https?:\/\/[^/\s]/.test(s), 'expected an http:// or https:// URL, or a file path');

const metering = z.strictObject({
  to: meteringTarget.describe('Where hourly usage goes: an http(s) URL (POSTed) or a file path (appended as JSON lines).'),
  format: z.enum(['cloudevents', 'openmeter', 'lago', 'stripe']).default('cloudevents').describe('The body\'s shape: CloudEvents (OpenMeter reads them too), or Lago\'s or Stripe\'s meter events.'),
  every: positiveInt().max(86_400).default(300).describe('Seconds between export runs.'),
  graceMinutes: z.number().int().min(0).max(1440).default(10).describe('Minutes after an hour ends before it is exported (late counts from other instances land first).'),
  headers: z.record(z.string().min(1), z.string()).default({}).describe('Headers sent with each request to a URL (e.g. Authorization).'),
  id: z
    .string()
    .regex(ENDPOINT_ID, 'expected 1-64 characters of A-Z a-z 0-9 _ -')
    .optional()
    .describe("The checkpoint's name in Redis; default the format and the first 12 hex digits of the SHA-256 of `to`."),
  batchSize: positiveInt().max(100).optional().describe("Most events per request (at most the format's own: 100; stripe 1); a file: 500."),
  recheckHours: z.number().int().min(0).max(840).default(48).describe('Hours behind the last complete run read again each run, so late counts go out as corrections.'),
  lago: z
    .strictObject({
      code: z.string().min(1).default('tollgate_requests').describe("The billable metric's code."),
      subscriptionField: z
        .string()
        .min(1)
        .default('lagoSubscriptionId')
        .describe("The metadata field (the consumer's, else the key's) holding the Lago external_subscription_id."),
    })
    .prefault({})
    .describe('format lago: the metric and where each hour\'s subscription comes from.'),
  stripe: z
    .strictObject({
      eventName: z.string().min(1).max(100).default('tollgate_requests').describe("The meter's event_name."),
      customerField: z
        .string()
        .min(1)
        .default('stripeCustomerId')
        .describe("The metadata field (the consumer's, else the key's) holding the Stripe customer id (payload[stripe_customer_id])."),
    })
    .prefault({})
    .describe("format stripe: the meter and where each hour's customer comes from."),
});

export const events = z
  .strictObject({
    source: z
      .string()
      .regex(/^[A-Za-z][A-Za-z0-9+.-]*:\S+$/, 'expected a URI such as urn:tollgate:prod')
      .optional()
      .describe('The CloudEvents source of every event (a stable URI); default urn:tollgate:<redis.prefix without its trailing colon, or tollgate>.'),
    thresholds: z
      .array(z.number().int().min(1).max(100))
      .min(1)
      .default([80, 100])
      .describe('Percents of a day or month window whose crossing sends quota.threshold (minute windows never do).'),
    webhooks: z.array(webhook).default([]).describe('Endpoints events are sent to, each with its signing secret.'),
    allowTargets: z.array(cidr).default([]).describe('Address ranges registered endpoints may point into (private and loopback ranges are refused otherwise; a cloud metadata address only by an entry naming it alone, such as 169.254.169.254/32); configured webhooks are trusted as written.'),
    queue: z
      .strictObject({
        maxPerEndpoint: positiveInt().max(1_000_000).default(10_000).describe('Events queued per endpoint at most; past it the oldest is dropped (counted).'),
      })
      .prefault({})
      .describe('Each endpoint\'s queue.'),
    metering: metering.optional().describe('Hourly usage per key exported to a billing system; leave out: no export.'),
  })
  .superRefine(webhookIdsUnique)
  .superRefine(thresholdsUnique);

function webhookIdsUnique(e: { webhooks: Array<{ id: string }> }, ctx: Ctx): void {
  const seen = new Set<string>();
  e.webhooks.forEach((w, i) => {
    if (seen.has(w.id)) ctx.addIssue({ code: 'custom', path: ['webhooks', i, 'id'], message: 'duplicate webhook id (two webhooks with the same url need ids of their own)', input: w.id });
    seen.add(w.id);
  });
}

function thresholdsUnique(e: { thresholds: number[] }, ctx: Ctx): void {
  if (new Set(e.thresholds).size !== e.thresholds.length) ctx.addIssue({ code: 'custom', path: ['thresholds'], message: 'each percent once', input: e.thresholds });
}

/** The CloudEvents source when events.source is left out: urn:tollgate:<redis.prefix less its trailing colon, or tollgate>. */
export function defaultEventSource(redisPrefix: string | undefined): string {
  const p = (redisPrefix ?? '').replace(/:+$/, '');
  return `urn:tollgate:${p === '' ? 'tollgate' : p}`;
}

export type EventsConfig = z.output<typeof events>;
export type WebhookConfig = EventsConfig['webhooks'][number];
export type MeteringConfig = NonNullable<EventsConfig['metering']>;
