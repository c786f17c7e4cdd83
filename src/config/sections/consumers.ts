// consumers: what the gateway does with the consumer behind a key beyond the request path's checks. Today one thing:
// which fields of a consumer's metadata go to the upstream, each as a header of its own. Nothing is forwarded unless
// listed: metadata is for a portal's and billing system's ids, and a backend should get only those it is meant to.
import { z } from 'zod';
import { METADATA_MAX_ENTRIES, METADATA_NAME } from '../key-fields.js';
import { consumerMetadataHeader } from '../../http/headers.js';

export const consumers = z.strictObject({
  forwardMetadata: z
    .array(
      z
        .string()
        .regex(METADATA_NAME, 'expected a metadata name: 1-64 characters of A-Z a-z 0-9 _ . - (it becomes part of a header name)')
        .describe('A metadata field of the consumer, sent as X-Consumer-Metadata-<field>.'),
    )
    .max(METADATA_MAX_ENTRIES, `at most ${METADATA_MAX_ENTRIES} fields (a consumer holds no more metadata entries)`)
    .default([])
    .superRefine(oneHeaderEach)
    .describe(
      "The consumer's metadata fields sent upstream, each as X-Consumer-Metadata-<field> (the field lower-cased, _ and . written -; billing_id is sent as x-consumer-metadata-billing-id). A value that is not 1-256 characters of printable ASCII without a space at either end is left out. Default: none. A client's own X-Consumer-Metadata-* headers never reach the upstream.",
    ),
});

/** Two fields that would be sent as one header (`Tier` and `tier`, `billing_id` and `billing-id`) are refused. */
function oneHeaderEach(fields: readonly string[], ctx: z.RefinementCtx): void {
  const byHeader = new Map<string, string>();
  fields.forEach((field, i) => {
    const header = consumerMetadataHeader(field);
    const first = byHeader.get(header);
    if (first === undefined) byHeader.set(header, field);
    else
      ctx.addIssue({
        code: 'custom',
        path: [i],
        message: first === field ? `"${field}" is listed twice` : `"${field}" and "${first}" would both be sent as ${header}`,
        input: field,
      });
  });
}

export type ConsumersConfig = z.output<typeof consumers>;
