// The openapi block: one shape for services.<name>.openapi and upstream.openapi, so the upstream's document and
// stability map behave as any service's. The stability token is here too, since routes[].stability shares it.
import { z } from 'zod';

/** A route's stability (routes[].stability, an OpenAPI document's x-stability): a token, sent as X-API-Stability. */
export const STABILITY = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;
export const STABILITY_SHAPE = 'expected a stability token of 1-64 characters of A-Z a-z 0-9 - (starting with a letter or digit), such as experimental or beta';

/**
 * A service's own OpenAPI document as its routes (src/openapi/): read when the config is loaded and on every reload;
 * and its API policy. stability: for each stability value, the plans whose keys may call the service's routes of
 * that stability (403 plan_not_allowed for others, before any quota is taken); a value not listed is open to all.
 * `file` may be left out: the stability map then applies to the service's hand-written routes alone.
 */
export const serviceOpenapi = z.strictObject({
  file: z.string().min(1).optional().describe('The document (YAML or JSON, OpenAPI 3.0 or 3.1), relative to the config file; $refs to files beside it are read too. Leave out for a stability map over hand-written routes only.'),
  basePath: z
    .string()
    .regex(/^(\/[A-Za-z0-9._~!$&'()+,;=@%-]+)*$/, 'expected a path such as /v1 (or "" for none)')
    .optional()
    .describe('Where the document\'s paths are served; default: the path of its servers[0].url, else none.'),
  validate: z.enum(['off', 'shadow', 'enforce']).default('off').describe('Request validation against the operation: off, shadow (counted and logged) or enforce (400).'),
  stability: z
    .record(z.string().regex(STABILITY, STABILITY_SHAPE), z.array(z.string()))
    .default({})
    .describe('Stability value -> the plans whose keys may call this service\'s routes of that stability, e.g. { experimental: [business, enterprise] }; values not listed are open to every plan.'),
}).superRefine((o, ctx) => {
  // A stability map alone is for hand-written routes; basePath and validate describe a document.
  if (o.file === undefined && (o.basePath !== undefined || o.validate !== 'off'))
    ctx.addIssue({ code: 'custom', path: ['file'], message: 'basePath and validate describe a document: give its file, or leave them out', input: o });
});

export type ServiceOpenapiConfig = z.output<typeof serviceOpenapi>;
