// Which thresholds one limit decision crossed: pure functions of the decision as the catalogue carries it. Exactly one
// request crosses each threshold of a window, because the limit script counts atomically: the one whose points take
// the count from below ceil(limit * p / 100) to it or past it (`used - cost < ceil(limit * p / 100) <= used`). Only an
// admitted request counts (a refused one takes nothing), only day and monthly windows (a minute window would alert
// every minute), and only a window that took the cost (a shadow window without room took nothing).
import type { DecidedMessage, DecidedWindow } from '../observability/catalogue.js';
import { DAY_MS } from '../util/time.js';
import { minuteStamp } from './types.js';

/** Whether a window that went from `used - cost` to `used` points crossed `percent` of `limit`. */
export function crossed(used: number, cost: number, limit: number, percent: number): boolean {
  const at = Math.ceil((limit * percent) / 100);
  return used - cost < at && at <= used;
}

/** A day window (a day long, not monthly) or a monthly one: the windows thresholds watch. */
export function watched(w: Pick<DecidedWindow, 'lengthMs' | 'endsAt'>): 'day' | 'month' | undefined {
  if (w.endsAt !== undefined) return 'month';
  return w.lengthMs === DAY_MS ? 'day' : undefined;
}

/**
 * A window's period as event ids name it: a monthly window's first day (YYYY-MM-DD), a day window's end on the gateway's
 * clock rounded to the minute (YYYYMMDDTHHmmZ): the same for every request of that window, another for the next one.
 */
export function periodOf(w: DecidedWindow, at: number): string {
  if (w.endsAt !== undefined) return w.period ?? new Date(w.endsAt).toISOString().slice(0, 10);
  return minuteStamp(at + w.resetMs);
}

export interface Crossing {
  /** 'threshold': an enforced window crossed `percent`; 'shadow': a candidate limit (or a window in shadow mode) reached 100%. */
  kind: 'threshold' | 'shadow';
  /** The window (its index in the message) whose count crossed. */
  window: number;
  /** The window's name; for a shadow crossing of a candidate limit, the candidate's ("day:shadow"). */
  name: string;
  limit: number;
  used: number;
  percent: number;
  period: string;
  /** When the window ends (epoch ms, the gateway's clock). */
  endsAt: number;
}

/**
 * Every threshold the decision crossed: for each enforced day or monthly window, each of `percents` it crossed; for
 * each candidate limit on such a window, and each such window in shadow mode, its 100%. None for a refused request.
 */
export function crossings(m: DecidedMessage, percents: readonly number[]): Crossing[] {
  if (m.outcome !== 'admitted') return [];
  const out: Crossing[] = [];
  const n = m.windows.length;
  for (let i = 0; i < n; i++) {
    const w = m.windows[i]!;
    // A window in shadow mode without room took nothing: its count did not move.
    if (!watched(w) || m.short & (1 << i)) continue;
    const base = { window: i, name: w.name, limit: w.limit, used: w.used, period: periodOf(w, m.at), endsAt: m.at + w.resetMs };
    if (w.mode === 'shadow') {
      if (crossed(w.used, m.cost, w.limit, 100)) out.push({ kind: 'shadow', percent: 100, ...base });
      continue;
    }
    for (const p of percents) if (crossed(w.used, m.cost, w.limit, p)) out.push({ kind: 'threshold', percent: p, ...base });
  }
  for (const c of m.candidates) {
    const w = m.windows[c.of];
    if (!w || !watched(w) || m.short & (1 << c.of)) continue;
    if (crossed(w.used, m.cost, c.limit, 100))
      out.push({ kind: 'shadow', window: c.of, name: c.name, limit: c.limit, used: w.used, percent: 100, period: periodOf(w, m.at), endsAt: m.at + w.resetMs });
  }
  return out;
}
