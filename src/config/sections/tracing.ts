// tracing: OpenTelemetry spans sent over OTLP/HTTP. Off unless otlpEndpoint is given, so a gateway that does not trace
// pays nothing for it.
import { z } from 'zod';
import { positiveInt } from './fields.js';

export const tracing = z.strictObject({
  otlpEndpoint: z
    .url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' })
    .optional()
    .describe('OTLP/HTTP endpoint of a collector (e.g. http://otel-collector:4318): spans go to <endpoint>/v1/traces. Leave out: no tracing, and no cost.'),
  serviceName: z.string().min(1).default('tollgate').describe('service.name of the spans.'),
  exportIntervalMs: positiveInt().max(60_000).default(1000).describe('How often finished spans are sent in a batch.'),
});
