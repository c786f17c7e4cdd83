// CSV for billing and migration exports (`tollgate usage --csv`, `routes deprecated --csv`, the dashboard's export).
import { terminalSafe, visibleKeepingLineBreaks } from '../util/visible.js';
import type { ConsumerSeries, ConsumerTotals, DeprecatedRouteReport, KeyTotals, UsageBucket } from './reports.js';

/**
 * Where a spreadsheet may start a cell inside a field: after any separator it may split on (comma; semicolon in
 * locales with a decimal comma; tab; pipe) or a line break. The field's own quotes do not protect what follows a
 * separator of another kind: `key_1,"x;=1+1"` split on semicolons has a cell `=1+1"`. Such a cell is a formula when
 * =, +, -, @ come first, after any spaces or quotes a lenient import drops (OWASP's CSV injection list).
 */
const FORMULA_INSIDE = /([,;\t\r\n|])(?=[ \t"]*[=+\-@])/g;

/** The same at the field's start, where a tab, CR or LF first counts too. */
const FORMULA_FIRST = /^(?:[ \t"]*[=+\-@]|[\t\r\n])/;

/** A field holding one of these is quoted (RFC 4180): the quote itself, line breaks, every separator above. */
const NEEDS_QUOTES = /[",;\t\r\n|]/;

/**
 * One CSV field (RFC 4180), made safe to open in a spreadsheet and to print on a terminal. Every place a cell could
 * start (the field's start, and after each separator in it) that looks like a formula gets a ' there, so it is shown
 * and never run, whatever separator the spreadsheet splits on; a field holding a quote, line break or separator is
 * quoted, so it stays one cell where the spreadsheet honours quotes. `x;=1+1` is written `"x;'=1+1"`. Control
 * characters other than tab, CR and LF are written as visible escapes (`\x1b`). Numbers are written as they are (-1 is
 * a number, not a formula).
 */
export function csvField(v: string | number | null | undefined): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return String(v);
  let s = visibleKeepingLineBreaks(v).replace(FORMULA_INSIDE, "$1'");
  if (FORMULA_FIRST.test(s)) s = `'${s}`;
  return NEEDS_QUOTES.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csv(rows: ReadonlyArray<ReadonlyArray<string | number | null | undefined>>): string {
  return rows.map((r) => r.map(csvField).join(',')).join('\r\n') + '\r\n';
}

/**
 * Metadata in one CSV column: the JSON object (names sorted, as stored), or empty for a key without any. Control
 * characters in it are JSON escapes (`\u001b`), so the cell still parses as the same JSON.
 */
export function metadataCell(m: Record<string, string> | undefined): string {
  if (m === undefined || Object.keys(m).length === 0) return '';
  // A formula character where a cell could start is written as its JSON escape (\u003d for =): the JSON parses to the
  // same metadata, and csvField finds nothing to guard.
  return terminalSafe(JSON.stringify(m)).replace(JSON_FORMULA, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** In JSON text (no raw tab or line break): a formula character after a separator and any spaces or quotes. */
const JSON_FORMULA = /(?<=[,;|][ "]*)[=+\-@]/g;

/**
 * The deprecated-route report as CSV rows: one per route and calling key (a route nobody calls: one row, no key).
 * The key's name and metadata come after its figures, and the consumer it belongs to now (empty: none) last, so the
 * columns before them keep their places.
 */
export function deprecatedRows(list: readonly DeprecatedRouteReport[]): Array<Array<string | number | null>> {
  const rows: Array<Array<string | number | null>> = [
    ['method', 'path', 'deprecation', 'sunset', 'key_id', 'calls', 'last_seen', 'key_name', 'key_metadata', 'consumer'],
  ];
  for (const route of list) {
    const at = [route.method, route.path, route.deprecation ?? '', route.sunset ?? ''];
    if (route.keys.length === 0) rows.push([...at, '', 0, '', '', '', '']);
    for (const k of route.keys) rows.push([...at, k.id, k.calls, k.lastSeen, k.name ?? '', metadataCell(k.metadata), k.consumer ?? '']);
  }
  return rows;
}

/**
 * The deprecated-route report grouped by consumer as CSV rows: one per route and consumer its calls were counted
 * under (empty consumer: calls under none), with how many keys made them (a route nobody calls: one row).
 */
export function deprecatedConsumerRows(list: readonly DeprecatedRouteReport[]): Array<Array<string | number | null>> {
  const rows: Array<Array<string | number | null>> = [['method', 'path', 'deprecation', 'sunset', 'consumer', 'keys', 'calls', 'last_seen']];
  for (const route of list) {
    const at = [route.method, route.path, route.deprecation ?? '', route.sunset ?? ''];
    const consumers = route.consumers ?? [];
    if (consumers.length === 0) rows.push([...at, '', 0, 0, '']);
    for (const c of consumers) rows.push([...at, c.consumer ?? '', c.keys, c.calls, c.lastSeen]);
  }
  return rows;
}

/** The figures' columns, in every totals and bucket CSV, in this order. */
const FIGURES = ['admitted', 'rate_limited', 'banned', 'upstream_failed', 'shadow_refused', 'would_ban', 'validation_failed'] as const;

/**
 * Every key's totals as CSV rows (`tollgate usage --csv`, GET /usage.csv): each key's metadata last, one JSON column,
 * and before it the consumer the key belongs to now (empty: none; its figures count the key's usage under any).
 * would_ban (requests a ban in shadow mode would have refused) and validation_failed (requests that did not match
 * their operation's OpenAPI description) are what an operator watches before turning bans or validation to enforce.
 */
export function totalsRows(keys: readonly KeyTotals[]): Array<Array<string | number>> {
  return [
    ['id', 'name', 'plan', ...FIGURES, 'consumer', 'metadata'],
    ...keys.map((k) => [
      k.id,
      k.name ?? '',
      k.plan,
      k.admitted,
      k.rateLimited,
      k.banned,
      k.upstreamFailed,
      k.shadowRefused,
      k.wouldBan,
      k.validationFailed,
      k.consumer ?? '',
      metadataCell(k.metadata),
    ]),
  ];
}

/**
 * Every consumer's totals as CSV rows (`tollgate usage --group-by consumer --csv`, GET /usage.csv?groupBy=consumer):
 * what its keys were counted while in it; the row with an empty consumer is the usage counted under none.
 */
export function consumerTotalsRows(rows: readonly ConsumerTotals[]): Array<Array<string | number>> {
  return [
    ['consumer', 'keys', ...FIGURES],
    ...rows.map((c) => [c.consumer ?? '', c.keys, c.admitted, c.rateLimited, c.banned, c.upstreamFailed, c.shadowRefused, c.wouldBan, c.validationFailed]),
  ];
}

/** One key's usage by hour or day, per consumer it was counted under (empty: none), as CSV rows. */
export function consumerBucketRows(series: readonly ConsumerSeries[]): Array<Array<string | number>> {
  return [
    ['consumer', 'start', ...FIGURES],
    ...series.flatMap((s) =>
      s.buckets.map((b) => [s.consumer ?? '', b.start, b.admitted, b.rateLimited, b.banned, b.upstreamFailed, b.shadowRefused, b.wouldBan, b.validationFailed]),
    ),
  ];
}

/** One key's usage by hour or day as CSV rows (`tollgate usage --key ID --csv`, GET /usage.csv?key=ID). */
export function bucketRows(buckets: readonly UsageBucket[]): Array<Array<string | number>> {
  return [
    ['start', ...FIGURES],
    ...buckets.map((b) => [b.start, b.admitted, b.rateLimited, b.banned, b.upstreamFailed, b.shadowRefused, b.wouldBan, b.validationFailed]),
  ];
}
