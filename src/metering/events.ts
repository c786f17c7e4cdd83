// The metering export's events: one CloudEvent (1.0, structured JSON) per key-hour, `usage.hour`, and one
// `usage.hour.correction` each time an hour already acknowledged is found with other counts. Ids are deterministic
// (no '.', parts joined by ':'), so an event sent twice is the same event to whoever de-duplicates by id.
import { hourName, type KeyHour } from './hours.js';
import { HOUR_MS } from '../util/time.js';

export interface CloudEvent<D = unknown> {
  specversion: '1.0';
  id: string;
  source: string;
  type: string;
  subject: string;
  time: string;
  datacontenttype: 'application/json';
  data: D;
}

export const USAGE_HOUR = 'usage.hour';
export const USAGE_HOUR_CORRECTION = 'usage.hour.correction';

export interface HourCounts {
  admitted: number;
  refused: number;
  upstreamFailed: number;
}

/** An hour's event data: whose, which hour, and its counts. */
export interface UsageHourData extends HourCounts {
  key: string;
  /** The consumer the hour was counted under; null: none. */
  consumer: string | null;
  /** The hour's bounds, ISO-8601 (UTC): [start, end). */
  start: string;
  end: string;
}

/** A correction's data: the hour's new totals (as UsageHourData) and what changed since the last acknowledged. */
export interface CorrectionData extends UsageHourData {
  correction: number;
  /** The id of the hour's first event. */
  corrects: string;
  delta: HourCounts;
}

/**
 * A key-hour as the export decides it: the event id that names it, the checkpoint field that records it, and what goes
 * out (the hour's first event, or its n-th correction).
 */
export interface ExportItem {
  hour: KeyHour;
  /** The hour's own id (`<key id>:<hour>`, or for a split hour's other part with its consumer: see export.ts). */
  baseId: string;
  field: string;
  kind: 'hour' | 'correction';
  /** The correction's number (1, 2, ...); 0 for the hour's first event. */
  n: number;
  delta: HourCounts;
  /** The owning consumer recorded with the checkpoint ('' none). */
  owner: string;
}

/** The subject of an hour's events: `consumer:<id>`, or `key:<id>` for a key counted under none. */
export function subjectOf(h: KeyHour): string {
  return h.consumer ? `consumer:${h.consumer}` : `key:${h.keyId}`;
}

export function eventId(item: ExportItem): string {
  return item.kind === 'hour' ? item.baseId : `${item.baseId}:correction:${item.n}`;
}

export const countsOf = (h: KeyHour): HourCounts => ({ admitted: h.admitted, refused: h.refused, upstreamFailed: h.upstreamFailed });

function hourData(h: KeyHour): UsageHourData {
  return {
    key: h.keyId,
    consumer: h.consumer || null,
    start: new Date(h.hourMs).toISOString(),
    end: new Date(h.hourMs + HOUR_MS).toISOString(),
    ...countsOf(h),
  };
}

/** The item as the CloudEvent the `cloudevents` mapping and the file send. `time` is the hour's start. */
export function toCloudEvent(item: ExportItem, source: string): CloudEvent<UsageHourData | CorrectionData> {
  const base = { specversion: '1.0' as const, id: eventId(item), source, subject: subjectOf(item.hour), time: new Date(item.hour.hourMs).toISOString() };
  if (item.kind === 'hour') return { ...base, type: USAGE_HOUR, datacontenttype: 'application/json', data: hourData(item.hour) };
  return {
    ...base,
    type: USAGE_HOUR_CORRECTION,
    datacontenttype: 'application/json',
    data: { ...hourData(item.hour), correction: item.n, corrects: item.baseId, delta: item.delta },
  };
}

export { hourName };
