// upstream: the shorthand for a gateway with one backend. Its hideCredentials and maxSockets apply to every service, so
// beside services a section without url is those settings alone and no service; withUpstream (schema.ts) tells the two
// apart, since that needs services as well.
import { z } from 'zod';
import { positiveInt } from './fields.js';
import { serviceOpenapi } from './openapi.js';

/** The service the upstream section is (upstream.url): every request under /v1 and the routes that name no service. */
export const UPSTREAM_SERVICE = 'upstream';

/** The upstream shorthand: one service, named "upstream" (UPSTREAM_SERVICE), taking /v1 and the routes without a service. */
export const upstream = z.strictObject({
  url: z.url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' }).default('http://127.0.0.1:8081').describe('Base URL of the service behind the gateway. Only this origin is ever contacted.'),
  timeoutMs: positiveInt().default(10_000).describe('No response headers from the upstream within this time: 504.'),
  hideCredentials: z.boolean().default(true).describe('Strip the API key before forwarding (what the key sources read: a Bearer Authorization when bearer is one, the headers and query parameters they name), so the upstream never sees it; other credentials pass.'),
  healthPath: z.string().startsWith('/').default('/healthz').describe('Path /readyz requests on the upstream; any HTTP answer (even 404) counts as up.'),
  maxSockets: positiveInt().default(256).describe('Most keep-alive sockets held open to the upstream.'),
  openapi: serviceOpenapi
    .optional()
    .describe('The upstream\'s own OpenAPI 3.0/3.1 document, as services.<name>.openapi: every operation becomes a route to the upstream (a route without service, so under /v1), and its stability map gates them. UPSTREAM_URL moves them with the rest of /v1.'),
});

export type UpstreamConfig = z.output<typeof upstream>;
