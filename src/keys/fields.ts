// The rules for what an administrator may put in a key record, as schemas: the admin API validates request bodies
// with them, `keys import` validates records with them, and KeyAdmin keeps metadata in one shape.
import { z } from 'zod';

/** At most this many metadata entries per key: it is for a portal's ids and labels, not for data. */
export const METADATA_MAX_ENTRIES = 16;

/** A small string map a portal or billing system keeps on a key (customer id, subscription, ...). */
export const metadataSchema = z
  .record(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'metadata names are 1-64 characters of A-Z a-z 0-9 _ . -'), z.string().max(256))
  .refine((m) => Object.keys(m).length <= METADATA_MAX_ENTRIES, `at most ${METADATA_MAX_ENTRIES} metadata entries`);

export const keyNameSchema = z.string().min(1).max(200);

/** Metadata with its names sorted: the same map is stored, exported and compared as the same bytes. */
export function sortedMetadata(m: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1)));
}
