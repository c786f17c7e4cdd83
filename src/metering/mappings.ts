// How each kind of destination wants the hours: the wire form of one event, the request that carries a batch, and
// what a refusal (a 4xx) says about the events in it. `cloudevents` POSTs the CloudEvents as a batch; `openmeter`
// does too, shaped for a SUM meter (a correction carries its delta as the amounts); `lago` POSTs its batch body of at
// most 100 events; `stripe` POSTs one meter event per request, form-encoded. What a refusal resends is decided here.
import { countsOf, eventId, toCloudEvent, type ExportItem } from './events.js';
import type { PostRequest, PostResponse } from './http.js';
import { DAY_MS } from '../util/time.js';

export const FORMATS = ['cloudevents', 'openmeter', 'lago', 'stripe'] as const;
export type Format = (typeof FORMATS)[number];

/** The metadata an item's customer ids come from: its consumer's, then its key's. */
export interface ItemMetadata {
  consumer?: Record<string, string> | undefined;
  key?: Record<string, string> | undefined;
}

export interface MappingSettings {
  source: string;
  /** Added to every request (an Authorization header, say). */
  headers: Record<string, string>;
  lago: { code: string; subscriptionField: string };
  stripe: { eventName: string; customerField: string };
}

/** An item and its wire form. */
export interface Prepared {
  item: ExportItem;
  wire: unknown;
}

/** What a refusal says: events the destination already holds, events it refused (and why), events to send again. */
export interface RefusalVerdict {
  acked: Prepared[];
  refused: Array<{ p: Prepared; reason: string }>;
  resend: Prepared[];
}

export interface Mapping {
  format: Format;
  /** Most events per request. */
  maxBatch: number;
  /** The wire form, or why the item cannot go to this destination (it is skipped and reported, never sent). */
  prepare(item: ExportItem, meta: ItemMetadata, nowMs: number): { wire: unknown } | { skip: string };
  request(url: string, batch: readonly Prepared[], timeoutMs: number): PostRequest;
  /** After a 4xx: what it says of each event; undefined when it cannot tell (the batch is then split in halves). */
  refusal(res: PostResponse, batch: readonly Prepared[]): RefusalVerdict | undefined;
}

/** The first part of an answer's body, for a report line. */
export function bodyText(res: PostResponse): string {
  return res.body.toString('utf8').replace(/\s+/g, ' ').slice(0, 300);
}

function metadataValue(meta: ItemMetadata, field: string): string | undefined {
  return meta.consumer?.[field] ?? meta.key?.[field];
}

function whose(item: ExportItem): string {
  return item.hour.consumer ? `consumer ${item.hour.consumer} or key ${item.hour.keyId}` : `key ${item.hour.keyId}`;
}

/** The CloudEvents batch format (application/cloudevents-batch+json): a JSON array of structured events. */
function cloudEventsBatch(url: string, batch: readonly Prepared[], headers: Record<string, string>, timeoutMs: number): PostRequest {
  return {
    url,
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/cloudevents-batch+json' },
    body: JSON.stringify(batch.map((p) => p.wire)),
    timeoutMs,
  };
}

/** A refusal of a whole CloudEvents batch names no event: split it, so the one bad event ends up alone. */
const noVerdict = (): undefined => undefined;

export function cloudEventsMapping(s: MappingSettings): Mapping {
  return {
    format: 'cloudevents',
    maxBatch: 100,
    prepare: (item) => ({ wire: toCloudEvent(item, s.source) }),
    request: (url, batch, timeoutMs) => cloudEventsBatch(url, batch, s.headers, timeoutMs),
    refusal: noVerdict,
  };
}

/**
 * OpenMeter ingests CloudEvents (POST /api/v1/events, a batch as application/cloudevents-batch+json) and de-duplicates
 * them by source and id; its meters match one event type and read a value from `data` by JSON path. So every event is
 * `usage.hour`, the subject is the consumer's id (or `key:<id>`), and `data.admitted`, `data.refused`,
 * `data.upstreamFailed` are amounts to add: a correction carries its delta there (and the new totals in `totals`), so a
 * SUM meter over `$.admitted` equals the ledger.
 */
export function openMeterMapping(s: MappingSettings): Mapping {
  return {
    format: 'openmeter',
    maxBatch: 100,
    prepare(item) {
      const ce = toCloudEvent(item, s.source);
      const subject = item.hour.consumer || `key:${item.hour.keyId}`;
      if (item.kind === 'hour') return { wire: { ...ce, subject } };
      const d = ce.data;
      return {
        wire: {
          ...ce,
          type: 'usage.hour',
          subject,
          data: {
            key: d.key,
            consumer: d.consumer,
            start: d.start,
            end: d.end,
            ...item.delta,
            correction: item.n,
            corrects: item.baseId,
            totals: countsOf(item.hour),
          },
        },
      };
    },
    request: (url, batch, timeoutMs) => cloudEventsBatch(url, batch, s.headers, timeoutMs),
    refusal: noVerdict,
  };
}

/** Lago's error_details: by the event's index in the batch, each field's error codes. */
type LagoDetails = Record<string, Record<string, unknown>>;

/**
 * Lago (POST /api/v1/events/batch, at most 100 events): transaction_id the event id, external_subscription_id from the
 * consumer's metadata field (else the key's), timestamp the hour's start in unix seconds, properties the amounts (a
 * correction's: its delta). A batch is atomic: one invalid event refuses it whole with a 422 naming events by index,
 * and an already-ingested transaction_id is such an error (value_already_exist). So those events count as
 * acknowledged (Lago has them), the others named are refused, and the rest go again as a batch of their own.
 */
export function lagoMapping(s: MappingSettings): Mapping {
  return {
    format: 'lago',
    maxBatch: 100,
    prepare(item, meta) {
      const sub = metadataValue(meta, s.lago.subscriptionField);
      if (!sub) return { skip: `no ${s.lago.subscriptionField} in the metadata of ${whose(item)}` };
      const amounts = item.kind === 'hour' ? countsOf(item.hour) : item.delta;
      return {
        wire: {
          transaction_id: eventId(item),
          external_subscription_id: sub,
          code: s.lago.code,
          timestamp: Math.floor(item.hour.hourMs / 1000),
          properties: { ...amounts, key: item.hour.keyId, ...(item.kind === 'correction' ? { correction: item.n } : {}) },
        },
      };
    },
    request: (url, batch, timeoutMs) => ({
      url,
      method: 'POST',
      headers: { ...s.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ events: batch.map((p) => p.wire) }),
      timeoutMs,
    }),
    refusal(res, batch) {
      if (res.status !== 422) return undefined;
      let details: LagoDetails | undefined;
      try {
        details = (JSON.parse(res.body.toString('utf8')) as { error_details?: LagoDetails }).error_details;
      } catch {
        return undefined;
      }
      if (!details || typeof details !== 'object') return undefined;
      const named = Object.keys(details).filter((k) => /^\d+$/.test(k) && Number(k) < batch.length);
      if (named.length === 0) return undefined;
      const verdict: RefusalVerdict = { acked: [], refused: [], resend: [] };
      batch.forEach((p, i) => {
        const errors = details[String(i)];
        if (!errors) return void verdict.resend.push(p);
        const codes = Object.values(errors).flatMap((v) => (Array.isArray(v) ? v.map(String) : [String(v)]));
        if (codes.length > 0 && codes.every((c) => c === 'value_already_exist')) verdict.acked.push(p);
        else verdict.refused.push({ p, reason: `HTTP 422 ${JSON.stringify(errors)}` });
      });
      return verdict;
    },
  };
}

/** Stripe takes meter events whose timestamp is within the past 35 days; a margin for the time a run takes. */
export const STRIPE_MAX_AGE_MS = 35 * DAY_MS - 10 * 60_000;
/** Stripe's longest identifier. */
const STRIPE_MAX_IDENTIFIER = 100;

/**
 * Stripe (POST /v1/billing/meter_events, form-encoded, one event per request): event_name, payload[stripe_customer_id]
 * from the consumer's metadata field (else the key's), payload[value] the admitted requests (a correction's: its delta,
 * negative when the hour lost requests, which Stripe sums like any value), identifier the event id (Stripe keeps
 * identifiers unique for at least 24 hours), timestamp the hour's start. Hours older than 35 days are refused by
 * Stripe: skipped before sending and reported. A 400 saying the identifier already exists: Stripe has the event.
 */
export function stripeMapping(s: MappingSettings): Mapping {
  return {
    format: 'stripe',
    maxBatch: 1,
    prepare(item, meta, nowMs) {
      const customer = metadataValue(meta, s.stripe.customerField);
      if (!customer) return { skip: `no ${s.stripe.customerField} in the metadata of ${whose(item)}` };
      if (item.hour.hourMs < nowMs - STRIPE_MAX_AGE_MS) return { skip: 'older than the 35 days Stripe takes meter events for' };
      const identifier = eventId(item);
      if (identifier.length > STRIPE_MAX_IDENTIFIER) return { skip: `its id is longer than the ${STRIPE_MAX_IDENTIFIER} characters Stripe takes` };
      const value = item.kind === 'hour' ? item.hour.admitted : item.delta.admitted;
      return {
        wire: {
          event_name: s.stripe.eventName,
          'payload[stripe_customer_id]': customer,
          'payload[value]': String(value),
          identifier,
          timestamp: String(Math.floor(item.hour.hourMs / 1000)),
        },
      };
    },
    request: (url, batch, timeoutMs) => ({
      url,
      method: 'POST',
      headers: { ...s.headers, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(batch[0]!.wire as Record<string, string>).toString(),
      timeoutMs,
    }),
    refusal(res, batch) {
      let message = '';
      try {
        message = (JSON.parse(res.body.toString('utf8')) as { error?: { message?: string } }).error?.message ?? '';
      } catch {
        message = bodyText(res);
      }
      const p = batch[0]!;
      if (/already exists with identifier/i.test(message)) return { acked: [p], refused: [], resend: [] };
      return { acked: [], refused: [{ p, reason: `HTTP ${res.status} ${message || bodyText(res)}` }], resend: [] };
    },
  };
}

export function mappingFor(format: Format, s: MappingSettings): Mapping {
  switch (format) {
    case 'cloudevents':
      return cloudEventsMapping(s);
    case 'openmeter':
      return openMeterMapping(s);
    case 'lago':
      return lagoMapping(s);
    case 'stripe':
      return stripeMapping(s);
  }
}
