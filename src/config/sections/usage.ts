// usage: the per-key, per-hour usage ledger in Redis and the thread that reads it for reports. Retention and the flush
// interval bound what the ledger costs Redis; the report thread's heap is a setting of its own so that a report too
// large for it fails alone, never the gateway.
import { z } from 'zod';
import { positiveInt } from './fields.js';

export const usage = z.strictObject({
  enabled: z.boolean().default(true).describe('The per-key, per-hour usage ledger and the deprecated-route report (Redis only).'),
  retentionDays: positiveInt().max(3660).default(35).describe('How many days of usage are kept (each day expires this long after it ends).'),
  flushIntervalMs: positiveInt().min(100).max(60_000).default(5000).describe('How often each instance writes what it counts locally (ban-cache refusals, deprecated-route calls).'),
  reportMemoryMb: positiveInt().min(32).max(16_384).default(128).describe("The report thread's heap (V8 old generation) in MB, shared by the reports running at once: a report that needs more fails alone (503 report_out_of_memory), never the gateway. Size the container's memory limit above the gateway's own use plus this (docs/kubernetes.md)."),
});

export type UsageConfig = z.output<typeof usage>;
