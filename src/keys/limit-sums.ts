// A key's limits per window on its own (its overrides, else its plan's) and their sum over several keys: what keys
// may take together before they share a consumer's pool. The attach preview (src/consumers/attach-preview.ts) and an
// import's dry run (import-run.ts) show it beside the pool.
import type { KeyRecord } from './types.js';

/** A plan's limits as the config gives them (perMonth where a plan has one). */
export interface PlanLimits {
  perMinute?: number | undefined;
  perDay?: number | undefined;
  perMonth?: number | undefined;
}

/** Limits per window; null: no limit in that window (a key or plan without one), so no sum either. */
export interface WindowLimits {
  perMinute: number | null;
  perDay: number | null;
  perMonth: number | null;
}

export const WINDOWS = ['perMinute', 'perDay', 'perMonth'] as const;

/** A key's limits on its own: its own overrides, else its plan's. */
export function keyLimits(k: Pick<KeyRecord, 'plan'> & PlanLimits, plans: Readonly<Record<string, PlanLimits>>): WindowLimits {
  const plan = plans[k.plan];
  const out = { perMinute: null, perDay: null, perMonth: null } as WindowLimits;
  for (const w of WINDOWS) out[w] = k[w] ?? plan?.[w] ?? null;
  return out;
}

/** The sum of the keys' limits per window; null for a window any key has no limit in. */
export function summed(limits: readonly WindowLimits[]): WindowLimits {
  const out: WindowLimits = { perMinute: 0, perDay: 0, perMonth: 0 };
  for (const w of WINDOWS) for (const l of limits) out[w] = out[w] === null || l[w] === null ? null : out[w]! + l[w]!;
  return out;
}

/** Limits as a person reads them: "130/min 3000/day", "unlimited" where there is none. */
export function windowText(l: WindowLimits): string {
  const part = (v: number | null, unit: string) => `${v === null ? 'unlimited' : v}/${unit}`;
  return `${part(l.perMinute, 'min')} ${part(l.perDay, 'day')}${l.perMonth === null ? '' : ` ${l.perMonth}/month`}`;
}
