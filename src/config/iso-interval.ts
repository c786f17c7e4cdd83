// ISO 8601 time intervals, as routes[].brownouts writes them: `<start>/<end>`, `<start>/<duration>` or
// `<duration>/<end>` (`2027-03-01T14:00:00Z/PT1H`), each instant a full date-time with its offset. Read once per
// config load (the schema checks them, compileRoutes turns them into milliseconds), never per request.
//
// The duration's syntax is iso8601-duration's (parse: PnYnMnWnDTnHnMnS, a fraction on the smallest unit only); its
// pattern is not anchored, so a duration is tested against it whole here first. Its `end()` adds the calendar units
// in the process's local time zone (a P1D across a change to summer time would be 23 hours), so the arithmetic is
// done here, on the UTC calendar, the way Temporal's ZonedDateTime.add does it in UTC: years and months first (the
// day kept within the month: Jan 31 + P1M is Feb 28), then weeks and days, then the time units exactly.
import { parse as parseDuration, pattern as durationPattern, type Duration } from 'iso8601-duration';
import { z } from 'zod';

export type IntervalResult = { ok: true; startMs: number; endMs: number } | { ok: false; message: string };

const WHOLE_DURATION = new RegExp(`^(?:${durationPattern.source})$`);
const INSTANT = z.iso.datetime({ offset: true });
const EXPECTED = 'expected an ISO 8601 interval: <start>/<end>, <start>/<duration> or <duration>/<end>, such as 2027-03-01T14:00:00Z/PT1H';

/** An interval's start and end in milliseconds since the epoch, or why it is not one (end not after start included). */
export function parseInterval(text: string): IntervalResult {
  const parts = text.split('/');
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') return { ok: false, message: EXPECTED };
  const [a, b] = parts as [string, string];
  const aIsDuration = a.startsWith('P');
  const bIsDuration = b.startsWith('P');
  if (aIsDuration && bIsDuration) return { ok: false, message: `${EXPECTED}; two durations name no time` };
  let startMs: number;
  let endMs: number;
  if (aIsDuration) {
    const end = instant(b, 'end');
    const d = duration(a);
    if (typeof end === 'string') return { ok: false, message: end };
    if (typeof d === 'string') return { ok: false, message: d };
    [startMs, endMs] = [shift(end, d, -1), end];
  } else {
    const start = instant(a, 'start');
    if (typeof start === 'string') return { ok: false, message: start };
    const end = bIsDuration ? duration(b) : instant(b, 'end');
    if (typeof end === 'string') return { ok: false, message: end };
    [startMs, endMs] = [start, typeof end === 'number' ? end : shift(start, end, 1)];
  }
  if (!Number.isFinite(startMs) || !Number.isFinite(endMs)) return { ok: false, message: 'the interval lies outside the dates JavaScript can hold' };
  if (endMs <= startMs) return { ok: false, message: `the interval must end after it starts (${iso(startMs)} to ${iso(endMs)})` };
  return { ok: true, startMs, endMs };
}

function instant(text: string, which: 'start' | 'end'): number | string {
  if (!INSTANT.safeParse(text).success) return `${EXPECTED}; its ${which} "${text}" is not a date-time with an offset such as 2027-03-01T14:00:00Z`;
  return Date.parse(text);
}

function duration(text: string): Duration | string {
  const bad = `${EXPECTED}; "${text}" is not an ISO 8601 duration such as PT1H or P1DT12H`;
  if (!WHOLE_DURATION.test(text) || text.endsWith('T')) return bad;
  try {
    return parseDuration(text);
  } catch {
    return bad;
  }
}

/** `at` plus (sign 1) or minus (sign -1) the duration, on the UTC calendar. */
function shift(at: number, d: Duration, sign: 1 | -1): number {
  const t = new Date(at);
  const months = t.getUTCMonth() + sign * ((d.years ?? 0) * 12 + (d.months ?? 0));
  const year = t.getUTCFullYear() + Math.floor(months / 12);
  const month = ((months % 12) + 12) % 12;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  t.setUTCFullYear(year, month, Math.min(t.getUTCDate(), lastDay));
  t.setUTCDate(t.getUTCDate() + sign * ((d.weeks ?? 0) * 7 + (d.days ?? 0)));
  return t.getTime() + sign * Math.round(((d.hours ?? 0) * 3600 + (d.minutes ?? 0) * 60 + (d.seconds ?? 0)) * 1000);
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
