// portal: what a consumer may do for itself. For now one switch: whether webhook endpoints may be registered for a
// consumer (POST /consumers/{id}/webhooks on the admin API, on the consumer's behalf). The customer portal's own
// listener (host, port, tls) comes later in this same section. Read per request: a reload applies at once.
import { z } from 'zod';

export const portal = z.strictObject({
  webhooks: z
    .boolean()
    .default(false)
    .describe(
      "Whether webhook endpoints may be registered for a consumer (POST /consumers/{id}/webhooks): false refuses them (403 webhooks_disabled); endpoints already registered keep receiving events either way.",
    ),
});

export type PortalConfig = z.output<typeof portal>;
