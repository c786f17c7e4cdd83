// The portal's JSON API for a signed-in consumer, mounted by app.ts under /api after the session guard (which also
// parses the JSON body, refuses changes that are not JSON or not from the portal's origin, and sets
// cache-control: no-store): its keys and their live windows (routes-keys.ts), its usage and refusals
// (routes-usage.ts), the deprecated operations it still calls (routes-deprecated.ts) and its webhook endpoints
// (routes-webhooks.ts). Who is asking is req.portalSession alone (api-context.ts).
import { Router } from 'express';
import type { PortalApiDeps } from './api-context.js';
import { deprecatedRoutes } from './routes-deprecated.js';
import { keyRoutes } from './routes-keys.js';
import { usageRoutes } from './routes-usage.js';
import { webhookRoutes } from './routes-webhooks.js';

export type { PortalApiDeps } from './api-context.js';

export function portalApiRouter(deps: PortalApiDeps): Router {
  const router = Router();
  router.use(keyRoutes(deps), usageRoutes(deps), deprecatedRoutes(deps), webhookRoutes(deps));
  return router;
}
