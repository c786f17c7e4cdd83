// Monthly periods (src/limits/months.ts): the calendar month in UTC, a month from a billing day (31: the last day of a
// shorter month), the year's turn and February; and the monthly window a request gets (src/limits/windows.ts): its
// counter named by its period, its length the time left to the period's end once taken at an instant.
import { describe, expect, it } from 'vitest';
import { monthPeriod, MonthPeriods } from '../src/limits/months.js';
import { atInstant, capWindows, limitRequest, planWindows } from '../src/limits/windows.js';

const at = (iso: string): number => Date.parse(iso);
const period = (iso: string, billingDay?: number) => {
  const p = monthPeriod(at(iso), billingDay);
  return { name: p.name, start: new Date(p.startMs).toISOString(), end: new Date(p.endMs).toISOString() };
};

describe('monthly periods', () => {
  it('the calendar month in UTC, from its first instant to the next month', () => {
    expect(period('2026-11-15T10:00:00Z')).toEqual({ name: '2026-11-01', start: '2026-11-01T00:00:00.000Z', end: '2026-12-01T00:00:00.000Z' });
    expect(period('2026-11-30T23:59:59.999Z').name).toBe('2026-11-01');
    expect(period('2026-12-01T00:00:00Z').name).toBe('2026-12-01');
    expect(period('2026-12-31T23:59:59.999Z')).toEqual({ name: '2026-12-01', start: '2026-12-01T00:00:00.000Z', end: '2027-01-01T00:00:00.000Z' });
    // billingDay 1 is the calendar month.
    expect(period('2026-11-15T10:00:00Z', 1)).toEqual(period('2026-11-15T10:00:00Z'));
  });

  it('from a billing day: the month that began on its last occurrence', () => {
    expect(period('2026-11-20T00:00:00Z', 15)).toEqual({ name: '2026-11-15', start: '2026-11-15T00:00:00.000Z', end: '2026-12-15T00:00:00.000Z' });
    expect(period('2026-11-14T23:59:59.999Z', 15)).toEqual({ name: '2026-10-15', start: '2026-10-15T00:00:00.000Z', end: '2026-11-15T00:00:00.000Z' });
    expect(period('2027-01-10T00:00:00Z', 15)).toEqual({ name: '2026-12-15', start: '2026-12-15T00:00:00.000Z', end: '2027-01-15T00:00:00.000Z' });
  });

  it('billingDay 31 means the last day of a shorter month: 30 November, 28 or 29 February', () => {
    // A 30-day month: the period from 31 October ends on 30 November, and the next runs to 31 December.
    expect(period('2026-11-29T12:00:00Z', 31)).toEqual({ name: '2026-10-31', start: '2026-10-31T00:00:00.000Z', end: '2026-11-30T00:00:00.000Z' });
    expect(period('2026-11-30T00:00:00Z', 31)).toEqual({ name: '2026-11-30', start: '2026-11-30T00:00:00.000Z', end: '2026-12-31T00:00:00.000Z' });
    expect(period('2027-02-10T00:00:00Z', 31)).toEqual({ name: '2027-01-31', start: '2027-01-31T00:00:00.000Z', end: '2027-02-28T00:00:00.000Z' });
    expect(period('2028-02-29T00:00:00Z', 31)).toEqual({ name: '2028-02-29', start: '2028-02-29T00:00:00.000Z', end: '2028-03-31T00:00:00.000Z' });
    expect(period('2028-02-29T00:00:00Z', 30).end).toBe('2028-03-30T00:00:00.000Z');
  });

  it('worked out once per period and billing day; a billing day outside 1-31 counts as the calendar month', () => {
    const periods = new MonthPeriods();
    const a = periods.at(at('2026-11-02T00:00:00Z'));
    expect(periods.at(at('2026-11-29T00:00:00Z'))).toBe(a);
    expect(periods.at(at('2026-12-01T00:00:00Z')).name).toBe('2026-12-01');
    expect(periods.at(at('2026-11-20T00:00:00Z'), 15).name).toBe('2026-11-15');
    expect(periods.at(at('2026-11-20T00:00:00Z'), 0).name).toBe('2026-11-01');
    expect(periods.at(at('2026-11-20T00:00:00Z'), 32).name).toBe('2026-11-01');
  });
});

describe('a monthly window', () => {
  const month = monthPeriod(at('2026-11-10T00:00:00Z'));

  it('named "month", its counter carrying the period, its policy length the period; a cap inside a pool is "key:month"', () => {
    const r = limitRequest([
      ...planWindows({ perMinute: 10, perDay: 100, perMonth: 1000 }, 'enforce', month),
      ...capWindows({ perMonth: 50 }, 'enforce', month),
    ]);
    expect(r.windows.map((w) => [w.name, w.suffix, w.cap ?? false])).toEqual([
      ['minute', 'minute', false],
      ['day', 'day', false],
      ['month', 'month:2026-11-01', false],
      ['key:month', 'month:2026-11-01', true],
    ]);
    expect(r.policy).toBe('"minute";q=10;w=60, "day";q=100;w=86400, "month";q=1000;w=2592000, "key:month";q=50;w=2592000');
    expect(r.calendar).toEqual([2, 3]);
    // No monthly window without perMonth, or without a period.
    expect(planWindows({ perMinute: 10, perDay: 100 }, 'enforce', month)).toHaveLength(2);
    expect(planWindows({ perMinute: 10, perDay: 100, perMonth: 5 })).toHaveLength(2);
  });

  it('taken at an instant: its length (the counter expiry, the script argument) is the time left to the period end', () => {
    const r = limitRequest(planWindows({ perMinute: 10, perDay: 100, perMonth: 1000 }, 'enforce', month), 2);
    const now = at('2026-11-30T23:59:00Z');
    const taken = atInstant(r, now);
    expect(taken.windows[2]!.lengthMs).toBe(60_000);
    expect(taken.scriptArgs).toEqual([10, 60_000, 100, 86_400_000, 1000, 60_000]);
    expect(taken.policy).toBe(r.policy);
    expect(taken.cost).toBe(2);
    // Unchanged: the cached request, and one without a monthly window (not copied).
    expect(r.windows[2]!.lengthMs).toBe(30 * 86_400_000);
    const plain = limitRequest(planWindows({ perMinute: 10, perDay: 100 }));
    expect(atInstant(plain, now)).toBe(plain);
  });
});
