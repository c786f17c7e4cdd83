// What every request leaves behind: the request metrics (a RequestObserver, src/pipeline/context.ts, once the
// response is over) and the access log line (started in stage 1). Both watch every request, gateway and
// ops paths alike, from outside the request path's decisions; they read its context, so they live beside it, above
// the logger and the metrics they write to.
import type { IncomingMessage, ServerResponse } from 'node:http';
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
 * The access log: one line per request once the response is over ("request completed", "request aborted" when the
 * client left first, or "request errored" at error level for a 5xx or a response that failed), in the shape pino-http gave it before (the same fields, in the same
 * order): `req` is id, method, URL and peer address only (never a header: no key, no cookie), taken as the request
 * starts, `res` the status, `responseTime` in ms, then the consumer (key id) and `aborted` (the client left first).
 * Written here rather than through pino-http: pino-http made a child logger per request (its bindings serialized,
 * its `req.log`, which nothing in the gateway reads) and spread the line's fields twice; the request path paid for
 * them on every request (bench/README.md, "Winning the CPU back").
 *
 * `keyParams`: the query parameters that carry API keys (auth.sources), read per request: the URL is logged with
 * their values replaced by `[redacted]`, whatever the key's shape, and whether or not the request got as far as
 * authentication.
 */
export function accessLog(logger: Logger, keyParams: () => readonly string[] = () => []): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const startedAt = Date.now();
    const reqFields = {
      id: req.id,
      method: req.method,
      url: redactParams((req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '/', keyParams()),
      remoteAddress: req.socket.remoteAddress,
    };
    const ended = (err?: unknown): void => {
      res.removeListener('close', ended);
      res.removeListener('finish', ended);
      res.removeListener('error', ended);
      const line: Record<string, unknown> = { req: reqFields, res: { statusCode: res.statusCode }, responseTime: Date.now() - startedAt };
      const consumer = req.ctx?.consumer;
      if (consumer) line.consumer = consumer.id;
      if (!res.writableFinished) line.aborted = true;
      if (err || res.statusCode >= 500) logger.error(line, 'request errored');
      else logger.info(line, !req.readableAborted && res.writableEnded ? 'request completed' : 'request aborted');
    };
    res.on('close', ended);
    res.on('finish', ended);
    res.on('error', ended);
  };
}
