// services: the backends by name, each a pool of targets (weighted) with its balancing, timeouts, retries, active
// health checks, passive ejection and TLS to the targets: a pool rather than a URL, so one failing instance costs a
// retry and not an outage. Rules that read a service alone are here; those that read routes or upstream too are in
// rules/.
import { z } from 'zod';
import { positiveInt, type Ctx } from './fields.js';
import { serviceOpenapi } from './openapi.js';

/** A backend address: http(s), an optional base path, nothing else (no credentials, query or fragment). */
const targetUrl = z
  .url({ protocol: /^https?$/, message: 'expected an http:// or https:// URL' })
  .refine((u) => {
    const url = new URL(u);
    return url.username === '' && url.password === '' && url.search === '' && url.hash === '';
  }, 'a target URL carries scheme, host, port and an optional base path only (no credentials, query or fragment)');

const target = z
  .union([
    targetUrl,
    z.strictObject({
      url: targetUrl.describe('The instance\'s URL (scheme, host, port, optional base path).'),
      weight: z.number().int().min(1).max(1000).default(1).describe('Its share of requests under round-robin (1-1000).'),
    }),
  ])
  .transform((t) => (typeof t === 'string' ? { url: t, weight: 1 } : t));

/** A status ("404") or an inclusive range of statuses ("200-399"), 100-599: what a passing health check answers. */
const STATUS_OR_RANGE = /^([1-5][0-9]{2})(?:-([1-5][0-9]{2}))?$/;
const expectedStatus = z
  .union([z.number().int().min(100).max(599), z.string().regex(STATUS_OR_RANGE, 'expected a status (404) or a range of statuses ("200-399"), 100-599')])
  .refine((e) => {
    const m = typeof e === 'string' ? STATUS_OR_RANGE.exec(e) : null;
    return !m || m[2] === undefined || Number(m[1]) <= Number(m[2]);
  }, 'a range of statuses goes from the lower to the higher ("200-399")');

/** What passive ejection counts as a target's failure: "connect", "reset", "timeout", a status 500-599, or "5xx". */
const ejectOutcome = z.union([z.enum(['connect', 'reset', 'timeout', '5xx']), z.number().int().min(500).max(599)]);

const healthCheck = z.strictObject({
  path: z.string().startsWith('/').describe('Path requested (GET) on every target; an answer in expectedStatuses, in time, passes.'),
  expectedStatuses: z
    .array(expectedStatus)
    .min(1, 'list at least one status or range, e.g. ["200-399"]')
    .default(['200-399'])
    .describe('Statuses a passing check answers: each a status (204) or an inclusive range ("200-399"). Any other answer fails.'),
  intervalMs: z.number().int().min(100).default(5000).describe('Time between two checks of one target.'),
  timeoutMs: positiveInt().default(1000).describe('A check without an answer in this time fails.'),
  unhealthyAfter: positiveInt().max(100).default(3).describe('Consecutive failed checks (no answer in time, or a status outside expectedStatuses) that take a target out.'),
  healthyAfter: positiveInt().max(100).default(2).describe('Consecutive passed checks that bring it back.'),
});

const eject = z.strictObject({
  consecutiveFailures: positiveInt().max(1000).default(5).describe('Failed requests in a row (each an outcome listed in eject.on) that make a target rest.'),
  forMs: positiveInt().default(30_000).describe('How long an ejected target rests before it is picked again (a passing active check ends it sooner).'),
  maxPercent: z
    .number()
    .int()
    .min(0)
    .max(100)
    .default(50)
    .describe('At most this share of the service\'s targets out at once, counting those out by checks or resting; the last available target is never ejected. 0: no passive ejection.'),
  on: z
    .array(ejectOutcome)
    .default(['connect', 'reset', 'timeout', 502, 503, 504])
    .describe('Outcomes that count as a failure of the target: "connect" (refused, connect timeout), "reset", "timeout", a status 500-599, or "5xx" (all). Default: the target\'s own failures, not the application\'s 500s.'),
});

/**
 * HTTPS to a service's targets with a private CA, and optionally a client certificate (mutual TLS). Every target of
 * such a service is https:// (refused otherwise: the block would silently do nothing for an http:// one).
 */
const serviceTls = z.strictObject({
  caFile: z.string().min(1).describe('PEM file of the CA certificate(s) that signed the targets\' certificates (instead of the system\'s trusted CAs).'),
  certFile: z.string().min(1).optional().describe('PEM file of the client certificate the gateway presents, for targets that require one (mutual TLS); goes with keyFile.'),
  keyFile: z.string().min(1).optional().describe('PEM file of the client certificate\'s private key (unencrypted); goes with certFile.'),
  servername: z.string().regex(/^[A-Za-z0-9.-]+$/, 'expected a host name such as orders.internal').optional().describe('The name the targets\' certificates must carry (SNI and verification), when it is not the host in their URLs.'),
  verify: z.boolean().default(true).describe('false accepts any certificate from the targets (warned about at start): for a test setup only.'),
});

/** Names appear in metrics labels and log lines. */
export const SERVICE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

const service = z.strictObject({
  targets: z.array(target).min(1, 'a service needs at least one target').describe('Its instances: a URL, or { url, weight } (weight default 1).'),
  balance: z.enum(['round-robin', 'least-requests']).default('round-robin').describe('round-robin (weighted), or least-requests (the less busy of two targets picked at random).'),
  timeoutMs: positiveInt().default(10_000).describe('No response headers within this time: 504 gateway_timeout (the whole request, retries included).'),
  connectTimeoutMs: positiveInt().default(2000).describe('A try that has not connected within this time counts as "could not connect".'),
  retries: z.number().int().min(0).max(5).default(1).describe('Further tries after the first, each on another target when there is one (rules in docs/routing.md).'),
  retryOn: z.array(z.number().int().min(500).max(599)).default([]).describe('Statuses that also retry an idempotent request without a body, e.g. [502, 503].'),
  perTryTimeoutMs: positiveInt().optional().describe('No response headers within this time on one try of an idempotent request without a body: that try ends (counted a timeout) and the next goes to another target, within timeoutMs. Left out: a try may take the whole timeoutMs. Armed only while a retry is left and another available target is untried: on a single-target service a try is never cut to be sent to the same target again.'),
  healthCheck: healthCheck.optional().describe('Active checks of every target by every gateway instance; leave out for passive ejection only.'),
  eject: eject.prefault({}).describe('Passive ejection: a target that fails requests in a row rests for a while.'),
  tls: serviceTls.optional().describe('HTTPS to the targets with a private CA: { caFile, certFile, keyFile, servername, verify }; every target must then be https://. Active health checks use it too. Without it, https:// targets are verified against the system\'s CAs.'),
  openapi: serviceOpenapi.optional().describe('The service\'s OpenAPI 3.0/3.1 document (every operation becomes a route to this service, after the hand-written routes: docs/routing.md, "OpenAPI document") and its API policy: stability (which plans may call routes of each stability).'),
})
  .superRefine(perTryBelowTimeout)
  .superRefine(tlsTargetsAreHttps);

export const services = z.record(z.string().regex(SERVICE_NAME, 'service names are 1-64 characters of A-Z a-z 0-9 _ . -'), service);

/** A service's tls block is for https:// targets: with an http:// one it would do nothing, a mistake either way. */
function tlsTargetsAreHttps(
  s: { targets: Array<{ url: string }>; tls?: { certFile?: string | undefined; keyFile?: string | undefined } | undefined },
  ctx: Ctx,
): void {
  if (!s.tls) return;
  s.targets.forEach((t, i) => {
    if (t.url.startsWith('http://'))
      ctx.addIssue({
        code: 'custom',
        path: ['targets', i],
        message: 'tls is set, so every target must be https:// (write https://, or drop tls for plain HTTP)',
        input: t.url,
      });
  });
  if ((s.tls.certFile === undefined) !== (s.tls.keyFile === undefined))
    ctx.addIssue({ code: 'custom', path: ['tls', s.tls.certFile === undefined ? 'certFile' : 'keyFile'], message: 'certFile and keyFile go together (the client certificate and its key)' });
}

/** A per-try bound at or over the whole request's bound never ends a try: a mistake, not a setting. */
function perTryBelowTimeout(s: { timeoutMs: number; perTryTimeoutMs?: number | undefined }, ctx: Ctx): void {
  if (s.perTryTimeoutMs !== undefined && s.perTryTimeoutMs >= s.timeoutMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['perTryTimeoutMs'],
      message: `perTryTimeoutMs (${s.perTryTimeoutMs}) must be below the service's timeoutMs (${s.timeoutMs}), which bounds every try together`,
      input: s.perTryTimeoutMs,
    });
  }
}

export type ServiceConfig = z.output<typeof service>;
export type TargetConfig = z.output<typeof target>;
export type ServiceTlsConfig = z.output<typeof serviceTls>;
