// A metering run's figures as the main thread's Prometheus metrics: the events thread sends each run's summary (plain
// data) across the thread boundary, and the host records it here.
import type { Metrics } from '../observability/metrics.js';
import type { RunReport } from './export.js';

/** What crosses the thread boundary of a run. */
export interface RunSummary {
  destination: string;
  events: number;
  corrections: number;
  refused: number;
  skipped: number;
  stopped: boolean;
  /** The mark after the run, ms; null before the first complete one. */
  markMs: number | null;
}

export function runSummary(r: RunReport): RunSummary {
  return {
    destination: r.destination,
    events: r.events,
    corrections: r.corrections,
    refused: r.refused.length,
    skipped: r.skipped.length,
    stopped: r.failed !== undefined,
    markMs: r.checkpoint.mark === null ? null : Date.parse(r.checkpoint.mark),
  };
}

export function recordMeteringRun(metrics: Metrics, s: RunSummary): void {
  const destination = s.destination;
  if (s.events) metrics.meteringEvents.inc({ destination, kind: 'hour' }, s.events);
  if (s.corrections) metrics.meteringEvents.inc({ destination, kind: 'correction' }, s.corrections);
  if (s.refused) metrics.meteringNotSent.inc({ destination, why: 'refused' }, s.refused);
  if (s.skipped) metrics.meteringNotSent.inc({ destination, why: 'skipped' }, s.skipped);
  metrics.meteringRuns.inc({ destination, outcome: s.stopped ? 'stopped' : 'complete' });
  if (s.markMs !== null) metrics.meteringMark.set({ destination }, s.markMs / 1000);
}
