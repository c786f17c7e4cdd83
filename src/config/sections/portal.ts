// portal: what a consumer's own people may do for themselves. `webhooks` says whether webhook endpoints may be
// registered for a consumer (on the admin API on its behalf, and in the portal). The consumer portal is a listener of
// its own (host, port, tls), off unless port is set: a page and a JSON API where a consumer's people see their keys,
// windows, usage and refusals, signed in with one of their keys or with a single-use link the platform's backend asks
// the admin API for. The listener's fields are bound at start-up; sessionHours and signInsPerMinute are read per request.
import { z } from 'zod';
import { positiveInt } from './fields.js';
import { listenerTls } from './listener-tls.js';

export const portal = z.strictObject({
  webhooks: z
    .boolean()
    .default(false)
    .describe(
      "Whether webhook endpoints may be registered for a consumer (POST /consumers/{id}/webhooks, and the portal's own webhook page): false refuses them (403 webhooks_disabled); endpoints already registered keep receiving events either way.",
    ),
  port: z
    .number()
    .int()
    .min(0)
    .max(65535)
    .optional()
    .describe('Port of the consumer portal\'s listener (0 picks a free one); absent (the default), there is no portal listener. Must differ from server.port, admin.port and ops.port. Restart-only.'),
  host: z.string().min(1).default('127.0.0.1').describe('Address the portal listener binds; loopback by default (put a TLS proxy or ingress in front). Restart-only.'),
  tls: listenerTls.optional().describe('HTTPS on the portal listener, as admin.tls; with it the session cookie is Secure. Restart-only (a rotated certificate reloads).'),
  publicUrl: z
    .url({ protocol: /^https?$/, message: 'expected an http(s) URL such as https://portal.example.com' })
    .refine((u) => !/[?#]/.test(u), 'expected a base URL without query or fragment')
    .optional()
    .describe('The base of the sign-in links POST /consumers/{id}/portal-links returns (https://portal.example.com); absent, the portal listener\'s own URL. Restart-only.'),
  sessionHours: z.number().int().min(1).max(24).default(8).describe('A portal session\'s lifetime from sign-in, in hours (1-24): it ends then, whatever is done with it.'),
  signInsPerMinute: positiveInt()
    .max(10_000)
    .default(10)
    .describe('Key sign-in attempts one client address may make per minute on the portal; past it, 429 rate_limit_exceeded until the minute ends.'),
});

export type PortalConfig = z.output<typeof portal>;
