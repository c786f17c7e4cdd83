// CloudEvents 1.0 in structured mode: the event as one JSON object (the attributes and `data`), sent with content type
// application/cloudevents+json. Written by hand: the object is ten fields, and the `cloudevents` SDK would bring
// browser polyfills (process, util, uuid, json-bigint) for them (docs/architecture.md, "Dependencies").
import type { CloudEvent, EventDraft } from './types.js';

/** The content type of a structured-mode CloudEvent over HTTP. */
export const CLOUDEVENTS_CONTENT_TYPE = 'application/cloudevents+json';

/** The CloudEvent of a draft, from `source` (events.source). */
export function toCloudEvent<D>(draft: EventDraft & { data: D }, source: string): CloudEvent<D> {
  return {
    specversion: '1.0',
    id: draft.id,
    source,
    type: draft.type,
    subject: draft.subject,
    time: new Date(draft.at).toISOString(),
    datacontenttype: 'application/json',
    data: draft.data,
  };
}

/**
 * What is wrong with an object as a CloudEvents 1.0 event (the required context attributes id, source, specversion and
 * type, non-empty strings; the optional ones Tollgate sets, of their types); empty when nothing is.
 */
export function cloudEventProblems(e: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const name of ['id', 'source', 'specversion', 'type'])
    if (typeof e[name] !== 'string' || e[name] === '') problems.push(`${name}: a required attribute, a non-empty string`);
  if (e.specversion !== undefined && e.specversion !== '1.0') problems.push('specversion: expected "1.0"');
  if (typeof e.source === 'string' && !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(e.source) && !e.source.startsWith('/'))
    problems.push('source: expected a URI-reference');
  if (e.subject !== undefined && (typeof e.subject !== 'string' || e.subject === '')) problems.push('subject: a non-empty string when present');
  if (e.time !== undefined && (typeof e.time !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(e.time)))
    problems.push('time: an RFC 3339 timestamp when present');
  if (e.datacontenttype !== undefined && typeof e.datacontenttype !== 'string') problems.push('datacontenttype: a string when present');
  // Context attribute names: lower-case a-z and 0-9 only (the spec's naming rule), data aside.
  for (const name of Object.keys(e))
    if (name !== 'data' && name !== 'data_base64' && !/^[a-z0-9]{1,20}$/.test(name)) problems.push(`${name}: not a valid attribute name`);
  return problems;
}
