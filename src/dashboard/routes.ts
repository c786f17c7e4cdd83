// The dashboard, served by the admin listener at `/`: one page (src/dashboard/public/) and its modules, Preact, htm and
// uPlot as ES modules from the installed packages (assets.ts, shared with the consumer portal), and the sign-in and
// sign-out calls that exchange an admin token for a session cookie (src/admin/guard.ts). Its data comes from the
// admin API itself, with the cookie. The page gets a Content-Security-Policy of its own: scripts, styles and calls
// from this origin only, never framed.
import { readFileSync } from 'node:fs';
import express, { type Router } from 'express';
import type { AdminGuard } from '../admin/guard.js';
import { pageAssets, pageHeaders } from './assets.js';

const PUBLIC = new URL('./public/', import.meta.url);

export function dashboardRouter(guard: AdminGuard): Router {
  const files = pageAssets(PUBLIC);
  const page = readFileSync(new URL('index.html', PUBLIC));
  const router = express.Router();
  const headers = pageHeaders();
  router.get('/', headers, (_req, res) => {
    res.setHeader('cache-control', 'no-cache');
    res.type('html').send(page);
  });
  router.get('/assets/*path', headers, (req, res, next) => {
    const file = files.get((req.params.path as string[]).join('/'));
    if (!file) return next();
    res.setHeader('cache-control', 'no-cache');
    res.type(file[0]).send(file[1]);
  });
  router.post('/session', express.json({ limit: '4kb' }), guard.signIn);
  router.post('/session/end', guard.signOut);
  return router;
}
