// The request observers: the access log line and the request metrics, written once a response is over. They watch
// every request (gateway and ops paths) from outside the request path (RequestObserver, src/pipeline/context.ts).
import type { ServerResponse } from 'node:http';
import type { RequestContext, RequestEnd, RequestObserver } from '../pipeline/context.js';
import { pathOf } from '../routes/policy.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/** The metrics' route label: the matched route pattern, an ops path, `/v1/*` for other /v1 paths, else `unmatched`. */
function routeLabel(ctx: RequestContext, url: string): string {
  if (ctx.route !== undefined) return ctx.route;
  const path = pathOf(url);
  return OPS_PATHS.has(path) ? path : path === '/v1' || path.startsWith('/v1/') ? '/v1/*' : 'unmatched';
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
 * One access-log line per request, from the root logger itself: no child logger per request (what pino-http does,
 * and most of what it cost; bench/README.md). Errors (5xx) at error level; a response cut short says `aborted`.
 */
export function accessLog(logger: Logger): RequestObserver {
  return {
    requestEnded(ctx: RequestContext, res: ServerResponse, end: RequestEnd): void {
      const status = res.statusCode;
      const failed = status >= 500;
      const level = failed ? 'error' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      const req = ctx.req as typeof ctx.req & { originalUrl?: string };
      const consumer = ctx.consumer;
      logger[level](
        {
          req: { id: ctx.id, method: req.method, url: req.originalUrl ?? req.url, remoteAddress: req.socket.remoteAddress },
          res: { statusCode: status },
          responseTime: Math.round(end.ms),
          ...(consumer ? { consumer: consumer.id } : {}),
          ...(end.finished ? {} : { aborted: true }),
        },
        failed ? 'request errored' : 'request completed',
      );
    },
  };
}
