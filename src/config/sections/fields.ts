// Field shapes and types more than one section uses: a positive integer, an ISO-8601 instant, a refinement's context.
// They sit here, under every section, so that no section imports another only for a helper.
import { z } from 'zod';

export const positiveInt = () => z.number().int().positive();
export const isoInstant = () => z.iso.datetime({ offset: true, message: 'expected an ISO-8601 date-time such as 2027-06-01T00:00:00Z' });

// Refinements only add issues, so any context will do for their signatures.
export type Ctx = z.RefinementCtx<unknown>;
