// Builds the gateway's request handler: stage 0 and the request path (src/pipeline/request-path.ts), called directly,
// then an Express app for what the path leaves to it (the ops routes, the 404, the error handler). No I/O at import
// and no listen(): tests drive the app in-process, and only src/server/gateway-server.ts binds a port.
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

  // What the request path leaves to Express: the gateway's own endpoints, the 404 and the error handler. A request
  // comes here only after the path (below) called next() or next('route'), or failed: then this first layer hands its
  // error on to the error handler, as Express's router would have.
  app.use(function requestPathFailed(req: Request, _res: Response, next: NextFunction) {
    next((req as Request & { [PATH_FAILED]?: unknown })[PATH_FAILED]);
  });
  app.get('/healthz', healthz);
  if (opts.opsOnGatewayPort) {
    app.get('/readyz', readyz(opts.readiness));
    app.get('/metrics', metricsHandler(opts.metrics));
  }
  app.use((_req: Request, res: Response) => sendError(res, 'not_found'));
  app.use(errorHandler(logger));

  // Every request runs stage 0 and then the request path itself, called here directly rather than as a layer of
  // Express's router: the path's own route table decides where a request goes, and the router's work per request
  // (its layer walk, path matching, the final handler made for each request) decided nothing. Express's request and
  // response methods stay (the prototypes, req.res and res.req: enterExpress); only its router is skipped until the
  // path hands the request on.
  const path = requestPath(opts);
  const handleInExpress = (app as unknown as { handle: ExpressHandle }).handle.bind(app);
  (app as unknown as { handle: ExpressHandle }).handle = function gatewayHandle(req, res, callback) {
    normalizeRequestTarget(req);
    enterExpress(app, req, res);
    path(req, res, (err?: unknown) => {
      if (err !== undefined && err !== null) (req as Request & { [PATH_FAILED]?: unknown })[PATH_FAILED] = err;
      handleInExpress(req, res, callback);
    });
  };
  return app;
}

type ExpressHandle = (req: Request, res: Response, callback?: NextFunction) => void;

/** Where a failed request path leaves its error for the Express app's error handler (requestPathFailed). */
const PATH_FAILED = Symbol('tollgate.requestPathFailed');

/**
 * What Express's app.handle and router give a request before its first handler, as far as the request path reads
 * it: the app's prototypes (already there when the gateway's server made the objects: expressPrototypes in
 * http-server.ts; set here for any other server, a test's), the links between request and response (res.json and
 * res.send read res.req), and originalUrl (the target as stage 0 left it, before anything mounted could trim it).
 */
function enterExpress(app: express.Express, req: Request, res: Response): void {
  if (Object.getPrototypeOf(req) !== app.request) Object.setPrototypeOf(req, app.request);
  if (Object.getPrototypeOf(res) !== app.response) Object.setPrototypeOf(res, app.response);
  req.res = res;
  res.req = req;
  req.originalUrl ||= req.url;
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
