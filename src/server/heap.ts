// How far V8 lets the old generation grow past what is live before its next full collection (server.heapGrowthPercent).
// Left to itself on a 64-bit host, V8 grows it up to four times the live size; a gateway's heap is mostly short-lived
// request garbage, so that headroom is resident memory spent on nothing (bench/history/2026-11.md, "RSS: the log backlog and
// V8's heap growth").
import v8 from 'node:v8';

/**
 * Sets V8's heap growing factor to 1 + percent/100 for this process, from now on (V8 reads it at every full
 * collection). 0 leaves V8's own dynamic factor, or whatever `--heap-growing-percent` Node was started with.
 * Returns the percent in force as far as this process set it (undefined: V8's choice).
 */
export function applyHeapGrowth(percent: number): number | undefined {
  if (!Number.isInteger(percent) || percent < 0) throw new RangeError(`heap growth percent must be a whole number >= 0, got ${percent}`);
  if (percent === 0) return undefined;
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return percent;
}
