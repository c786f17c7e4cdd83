// CSV for billing and migration exports (`tollgate usage --csv`, `routes deprecated --csv`, the dashboard's export).
import type { DeprecatedRouteReport } from './reports.js';

/**
 * One CSV field (RFC 4180): quoted when it holds a comma, quote or line break. A field a spreadsheet would run as a
 * formula (=, +, -, @ first) is prefixed with ' so that opening an export never executes a key's name.
 */
export function csvField(v: string | number | null | undefined): string {
  if (v === null || v === undefined) return '';
  let s = String(v);
  if (typeof v === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csv(rows: ReadonlyArray<ReadonlyArray<string | number | null | undefined>>): string {
  return rows.map((r) => r.map(csvField).join(',')).join('\r\n') + '\r\n';
}

/** The deprecated-route report as CSV rows: one per route and calling key (a route nobody calls: one row, no key). */
export function deprecatedRows(list: readonly DeprecatedRouteReport[]): Array<Array<string | number | null>> {
  const rows: Array<Array<string | number | null>> = [['method', 'path', 'deprecation', 'sunset', 'key_id', 'calls', 'last_seen']];
  for (const route of list) {
    if (route.keys.length === 0) rows.push([route.method, route.path, route.deprecation, route.sunset ?? '', '', 0, '']);
    for (const k of route.keys) rows.push([route.method, route.path, route.deprecation, route.sunset ?? '', k.id, k.calls, k.lastSeen]);
  }
  return rows;
}
