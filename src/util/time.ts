// Lengths of time in milliseconds, and the UTC day of an instant: one definition for the windows, the ledger and the
// reports (limits/ and usage/ each had their own copy).
export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** Days since 1970-01-01 (UTC) of an instant. */
export function dayOf(ms: number): number {
  return Math.floor(ms / DAY_MS);
}
