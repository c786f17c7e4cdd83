// The events Tollgate sends: their types, their data, their subjects and their ids. An id is deterministic (made of
// what the event is about, never of when an instance noticed it), so two instances that see the same fact make the
// same id, and the outbox keeps one (outbox.ts). Ids hold no '.' (parts are joined by ':'; a '.' in a part is written
// %2E), so a receiver may use them where dots mean something (a metric name, a file name).
export { EVENT_TYPES, type EventType } from '../observability/catalogue.js';
import type { EventType } from '../observability/catalogue.js';

/** A CloudEvents 1.0 event in structured mode (cloudevent.ts makes it). */
export interface CloudEvent<D = unknown> {
  specversion: '1.0';
  id: string;
  source: string;
  type: EventType;
  subject: string;
  /** RFC 3339 (ISO 8601 in UTC). */
  time: string;
  datacontenttype: 'application/json';
  data: D;
}

/** Who a key's event is about: its consumer when it has one, else the key itself. */
interface KeyFacts {
  key: string;
  consumer?: string;
  plan: string;
}

export interface QuotaThresholdData extends KeyFacts {
  /** The window's name ("day", "month", "<route>:day", "key:day"). */
  window: string;
  percent: number;
  limit: number;
  /** Points used in the window after the request that crossed. */
  used: number;
  /** ceil(limit * percent / 100): the count the window reached. */
  threshold: number;
  /** The window's period: a month's first day (YYYY-MM-DD), or a day window's end (YYYYMMDDTHHmmZ). */
  period: string;
  /** When the window ends (ISO 8601). */
  resetsAt: string;
}

export interface QuotaShadowThresholdData extends KeyFacts {
  /** The candidate limit's name ("day:shadow") or a window in shadow mode ("day"). */
  limitName: string;
  /** The window whose count it is checked on. */
  window: string;
  limit: number;
  used: number;
  period: string;
  resetsAt: string;
}

export interface KeyBannedData extends KeyFacts {
  level: number;
  /** When the ban ends (ISO 8601). */
  until: string;
  seconds: number;
}

export interface ConsumerSuspendedData {
  consumer: string;
  reason?: string;
  suspendedAt: string;
}

export interface DeprecatedCalledData {
  key: string;
  consumer?: string;
  operation: string;
  route: string;
  sunset?: string;
  successor?: string;
  /** The UTC day of the first call this instance saw (YYYY-MM-DD): one event per subject, operation and day. */
  day: string;
  firstCallAt: string;
}

export interface KeyExpiringData {
  key: string;
  consumer?: string;
  name?: string;
  plan: string;
  expiresAt: string;
}

export interface EventDataOf {
  'quota.threshold': QuotaThresholdData;
  'quota.shadow_threshold': QuotaShadowThresholdData;
  'key.banned': KeyBannedData;
  'consumer.suspended': ConsumerSuspendedData;
  'deprecated.called': DeprecatedCalledData;
  'key.expiring': KeyExpiringData;
}

/**
 * An event before it is a CloudEvent: its id, type, subject, time and data, and what the outbox entry carries beside
 * it for the dispatcher's filters (consumer, key, plan; percent for quota.threshold).
 */
export interface EventDraft<T extends EventType = EventType> {
  id: string;
  type: T;
  subject: string;
  /** When the fact happened (epoch ms, the gateway's clock). */
  at: number;
  data: EventDataOf[T];
  consumer?: string;
  key?: string;
  plan?: string;
  percent?: number;
}

/** `consumer:<id>` for a consumer or a key of one, else `key:<id>`. */
export function subjectOf(keyId: string, consumer?: string): string {
  return consumer !== undefined ? `consumer:${consumer}` : `key:${keyId}`;
}

/** One part of an id: '%' and '.' and whitespace percent-encoded, so no id holds a '.' and two parts never read alike. */
export function idPart(s: string): string {
  return s.replace(/[%.\s]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

const id = (...parts: Array<string | number>): string => parts.map((p) => idPart(String(p))).join(':');

/** YYYY-MM-DD of an instant in UTC. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** YYYYMMDDTHHmmZ of an instant in UTC, rounded to the nearest minute: a day window's period (its end). */
export function minuteStamp(ms: number): string {
  const iso = new Date(Math.round(ms / 60_000) * 60_000).toISOString();
  return `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}T${iso.slice(11, 13)}${iso.slice(14, 16)}Z`;
}

export const eventIds = {
  threshold: (subject: string, window: string, period: string, percent: number) => id('quota-threshold', subject, window, period, percent),
  shadowThreshold: (subject: string, limitName: string, period: string) => id('quota-shadow-threshold', subject, limitName, period),
  /** The ban's end rounded to the second. */
  banned: (keyId: string, level: number, banEndMs: number) => id('key-banned', keyId, level, Math.round(banEndMs / 1000)),
  suspended: (consumer: string, atMs: number) => id('consumer-suspended', consumer, atMs),
  deprecated: (subject: string, operation: string, day: string) => id('deprecated-called', subject, operation, day),
  expiring: (keyId: string, expiresAtMs: number) => id('key-expiring', keyId, expiresAtMs),
};
