// anonymous: the limit for requests without a valid key. There is no key to count by, so it counts per client address
// (server.trustProxy says which address that is).
import { z } from 'zod';
import { positiveInt } from './fields.js';

export const anonymous = z.strictObject({
  perMinute: positiveInt().default(30).describe('Requests per minute per client IP for requests without a valid key.'),
});
