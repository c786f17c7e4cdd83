// The portal's JSON API for a signed-in consumer, mounted by app.ts after the session guard: its keys and their live
// windows (routes-keys.ts), its usage and refusals (routes-usage.ts), the deprecated operations it still calls
// (routes-deprecated.ts) and its webhook endpoints (routes-webhooks.ts). Every answer is cache-control: no-store and
// every error the JSON error body; who is asking is req.portalSession alone (api-context.ts).
import { Router } from 'express';
import { H, NO_STORE } from '../http/headers.js';
import { portalApiErrors, portalJson, type PortalApiDeps } from './api-context.js';
import { deprecatedRoutes } from './routes-deprecated.js';
import { keyRoutes } from './routes-keys.js';
import { usageRoutes } from './routes-usage.js';
import { webhookRoutes } from './routes-webhooks.js';

export type { PortalApiDeps } from './api-context.js';

export function portalApiRouter(deps: PortalApiDeps): Router {
  const router = Router();
  // Every answer, errors too: what a session sees is its own, and no cache may keep it.
  router.use(
    '/api',
    (_req, res, next) => {
      res.setHeader(H.cacheControl, NO_STORE);
      next();
    },
    portalJson,
  );
  router.use(keyRoutes(deps), usageRoutes(deps), deprecatedRoutes(deps), webhookRoutes(deps));
  router.use('/api', portalApiErrors(deps.logger));
  return router;
}
