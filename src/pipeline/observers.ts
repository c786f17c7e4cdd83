// What every request leaves behind: the request metrics (a RequestObserver, src/pipeline/context.ts, once the
// response is over) and the access log line (pino-http, started in stage 1). Both watch every request, gateway and
// ops paths alike, from outside the request path's decisions; they read its context, so they live beside it, above
// the logger and the metrics they write to.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { RequestContext, RequestEnd, RequestObserver } from './context.js';
import { redactParams } from '../http/credentials.js';
import { pathOf } from '../routing/routes.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * The metrics' route label: the matched route's pattern (set before authentication, so a 401 or 429 carries it too;
 * `/v1/*` for the upstream shorthand's other /v1 paths, `(default)` for defaultService), an ops path, else `unmatched`.
 */
function routeLabel(ctx: RequestContext, url: string): string {
  if (ctx.route !== undefined) return ctx.route;
  const path = pathOf(url);
  return OPS_PATHS.has(path) ? path : 'unmatched';
}

/** Requests by route, method and status, and their durations; only for responses sent in full. */
export function requestMetrics(metrics: Metrics): RequestObserver {
  return {
    requestEnded(ctx: RequestContext, res: ServerResponse, end: RequestEnd): void {
      if (!end.finished) return;
      const req = ctx.req as typeof ctx.req & { originalUrl?: string };
      const route = routeLabel(ctx, req.originalUrl ?? req.url ?? '/');
      const method = req.method ?? 'OTHER';
      metrics.requests.inc({ route, method: KNOWN_METHODS.has(method) ? method : 'OTHER', status: String(res.statusCode) });
      metrics.requestDuration.observe({ route }, end.ms / 1000);
    },
  };
}

/**
 * The access log: pino-http, one line per request once the response is over ("request completed", or "request
 * errored" at error level for a 5xx), `req.log` for every stage (bound to the request). Configured lean: the request
 * id is the one stage 1 gave it (req.id, also in X-Request-Id), `req` is id, method, URL and peer address only (never a
 * header: no key, no cookie), `res` the status; the consumer (key id) and `aborted` (the client left first) are added
 * to the line itself, so no second child logger is made per request. Its cost is measured in the bench
 * (bench/README.md, "pino-http").
 */
/**
 * pino-http, loaded without its type declarations: they re-declare node:http's IncomingMessage (`id`, `log`) in a way
 * that clashes with this project's own (src/pipeline/context.ts). The options used here are typed below.
 */
interface PinoHttpOptions {
  logger: Logger;
  wrapSerializers: boolean;
  serializers: { req: (req: IncomingMessage & { originalUrl?: string }) => object; res: (res: ServerResponse) => object };
  customLogLevel: (req: IncomingMessage, res: ServerResponse, err?: Error) => 'info' | 'error';
  customSuccessObject: (req: IncomingMessage, res: ServerResponse, fields: object) => object;
  customErrorObject: (req: IncomingMessage, res: ServerResponse, err: Error, fields: object) => object;
}
const { pinoHttp } = createRequire(import.meta.url)('pino-http') as { pinoHttp: (o: PinoHttpOptions) => (req: IncomingMessage, res: ServerResponse) => void };

/**
 * `keyParams`: the query parameters that carry API keys (auth.sources), read per request: the URL is logged with
 * their values replaced by `[redacted]`, whatever the key's shape, and whether or not the request got as far as
 * authentication.
 */
export function accessLog(logger: Logger, keyParams: () => readonly string[] = () => []): (req: IncomingMessage, res: ServerResponse) => void {
  const middleware = pinoHttp({
    logger,
    wrapSerializers: false,
    serializers: {
      req: (req: IncomingMessage & { originalUrl?: string }) => ({
        id: req.id,
        method: req.method,
        url: redactParams(req.originalUrl ?? req.url ?? '/', keyParams()),
        remoteAddress: req.socket.remoteAddress,
      }),
      res: (res: ServerResponse) => ({ statusCode: res.statusCode }),
    },
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : 'info'),
    customSuccessObject: (req, res, fields) => withOutcome(req, res, fields as Record<string, unknown>),
    customErrorObject: (req, res, _err, fields) =>
      withOutcome(req, res, { res: (fields as { res: unknown }).res, responseTime: (fields as { responseTime: number }).responseTime }),
  });
  return (req, res) => middleware(req, res);
}

/**
 * The line's fields after pino-http's own (res, responseTime), in this order when present. `fields` is the object
 * pino-http made for this one line: written to in place, not copied.
 */
function withOutcome(req: IncomingMessage, res: ServerResponse, fields: Record<string, unknown>): object {
  const caller = req.ctx?.caller;
  const from = req.ctx?.overriddenFrom;
  if (caller) fields.consumer = caller.id;
  // req.method is the method an honoured override named; the one the client sent is said beside it.
  if (from !== undefined) fields.overriddenFrom = from;
  if (!res.writableFinished) fields.aborted = true;
  return fields;
}
