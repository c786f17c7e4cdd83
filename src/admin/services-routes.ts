// The admin API's services: each service's targets and their health as this instance sees them now. Health checks
// and passive ejection are judged per gateway instance (docs/routing.md), so the answer is this instance's view.
import { Router } from 'express';
import { sendError } from '../http/errors.js';
import type { ServiceSnapshot } from '../routing/services.js';

export function servicesRoutes(services: () => ServiceSnapshot[]): Router {
  const router = Router();

  router.get('/services', (_req, res) => {
    res.json({ asOf: new Date().toISOString(), services: services() });
  });

  router.get('/services/:name', (req, res) => {
    const name = String(req.params.name);
    const service = services().find((s) => s.name === name);
    if (!service) return sendError(res, 'not_found', `no service named "${name.slice(0, 64)}"`);
    res.json({ asOf: new Date().toISOString(), ...service });
  });

  return router;
}
