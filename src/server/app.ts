// Builds the gateway's Express app around the request path (src/pipeline/request-path.ts): the ops routes, the 404 and
// the error handler. No I/O at import and no listen(): tests drive the app in-process, and only
// src/server/gateway-server.ts binds a port.
import express, { type ErrorRequestHandler, type NextFunction, type Request, type Response } from 'express';
import { sendError } from '../http/errors.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { healthz, metricsHandler, readyz, type ReadinessCheck } from '../observability/ops.js';
import { normalizeRequestTarget } from '../pipeline/request-target.js';
import { requestPath, type RequestPathParts } from '../pipeline/request-path.js';

export interface GatewayAppOptions extends RequestPathParts {
  metrics: Metrics;
  /** What /readyz checks (Redis, the upstream). */
  readiness: readonly ReadinessCheck[];
  /**
   * Whether /readyz and /metrics are served on the gateway port (the default), or only on the separate ops listener
   * (`ops` in the config: src/observability/ops.ts buildOpsApp). /healthz stays either way: load balancers probe the port they send to.
   */
  opsOnGatewayPort: boolean;
}

export function buildGatewayApp(opts: GatewayAppOptions): express.Express {
  const { runtime, logger } = opts;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', false);
  app.set('trust proxy', runtime.config.server.trustProxy);

  // Stage 0, before Express's router starts: it captures an absolute-form target's scheme and host when it starts
  // and re-applies them around every mounted handler, so the target is reduced to its path first.
  const handle = (app as unknown as { handle: (req: Request, res: Response, next?: NextFunction) => void }).handle.bind(app);
  (app as unknown as { handle: typeof handle }).handle = (req, res, next) => {
    normalizeRequestTarget(req);
    handle(req, res, next);
  };
  // The whole request path is one router layer.
  app.use(requestPath(opts));

  // After the request path, so proxied traffic does not walk past the ops routes (no path of theirs starts with /v1).
  app.get('/healthz', healthz);
  if (opts.opsOnGatewayPort) {
    app.get('/readyz', readyz(opts.readiness));
    app.get('/metrics', metricsHandler(opts.metrics));
  }

  app.use((_req: Request, res: Response) => sendError(res, 'not_found'));
  app.use(errorHandler(logger));
  return app;
}

function errorHandler(logger: Logger): ErrorRequestHandler {
  return function gatewayErrorHandler(err, req, res, _next) {
    // The proxy's own error listener has usually answered already; never answer twice.
    if (res.headersSent) {
      if (!res.writableEnded) res.destroy();
      return;
    }
    const status = typeof err?.status === 'number' ? err.status : typeof err?.statusCode === 'number' ? err.statusCode : 500;
    if (status === 413) return sendError(res, 'payload_too_large');
    if (status === 400) return sendError(res, 'invalid_request');
    if (status > 400 && status < 500) return sendError(res, 'not_found');
    logger.error({ reqId: req.id, err: { message: String(err?.message), code: err?.code } }, 'unhandled error');
    sendError(res, 'internal_error');
  };
}
