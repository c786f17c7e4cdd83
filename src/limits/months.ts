// Monthly windows: which period an instant is in, a calendar month in UTC or a month from a billing day. A period is
// named by its first day, and its counter carries that name (`rl:{<tag>}:month:2026-11-01`), so a new month is a new
// counter and never a reset of the last one: instances that cross midnight at slightly different times each count in
// the period their own clock says, and no counter has to be found and cleared.

/** One monthly period: [startMs, endMs) in UTC, named by its first day ("2026-11-30"). */
export interface MonthPeriod {
  readonly name: string;
  readonly startMs: number;
  readonly endMs: number;
}

/** The number of days of a month (`month` 0-11; a month past 11 or below 0 rolls over, as Date.UTC does). */
function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
}

/** When the period of `year`/`month` begins for a billing day: that day at 00:00 UTC, or the month's last if it is shorter. */
function periodStart(year: number, month: number, billingDay: number): number {
  return Date.UTC(year, month, Math.min(billingDay, daysIn(year, month)));
}

const two = (n: number): string => (n < 10 ? `0${n}` : String(n));

/**
 * The period `nowMs` is in: the calendar month in UTC (billingDay absent or 1), or the month that began on the last
 * `billingDay` (1-31; 31 means the last day of a shorter month: a period from 30 November runs to 31 December).
 */
export function monthPeriod(nowMs: number, billingDay = 1): MonthPeriod {
  const now = new Date(nowMs);
  let year = now.getUTCFullYear();
  let month = now.getUTCMonth();
  let start = periodStart(year, month, billingDay);
  if (nowMs < start) {
    month -= 1;
    if (month < 0) {
      month = 11;
      year -= 1;
    }
    start = periodStart(year, month, billingDay);
  }
  const first = new Date(start);
  return Object.freeze({
    name: `${first.getUTCFullYear()}-${two(first.getUTCMonth() + 1)}-${two(first.getUTCDate())}`,
    startMs: start,
    endMs: periodStart(year, month + 1, billingDay),
  });
}

/**
 * The current period per billing day, worked out once per period: a request asks for its period on every check, and
 * the answer changes once a month.
 */
export class MonthPeriods {
  /** By billing day (index 0: the calendar month, the same as day 1). */
  private readonly current: Array<MonthPeriod | undefined> = [];

  at(nowMs: number, billingDay?: number): MonthPeriod {
    // A billing day outside 1-31 (a record that skipped validation) counts as the calendar month.
    const day = billingDay !== undefined && Number.isInteger(billingDay) && billingDay >= 1 && billingDay <= 31 ? billingDay : 1;
    const p = this.current[day];
    if (p && nowMs >= p.startMs && nowMs < p.endMs) return p;
    const next = monthPeriod(nowMs, day);
    this.current[day] = next;
    return next;
  }
}
