// The dashboard, served by the admin listener at `/`: one page (src/dashboard/public/) and its assets, uPlot's
// chart script and styles from the installed package (no CDN: it works with no internet), and the sign-in and
// sign-out calls that exchange an admin token for a session cookie (src/admin/guard.ts). Its data comes from the
// admin API itself, with the cookie. The page gets a Content-Security-Policy of its own: scripts, styles and calls
// from this origin only, never framed.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import express, { type Router } from 'express';
import helmet from 'helmet';
import type { AdminGuard } from '../admin/guard.js';

const PUBLIC = new URL('./public/', import.meta.url);
const require = createRequire(import.meta.url);

/** Every file the page needs, read once at start-up: name -> [content type, bytes]. */
function assets(): Map<string, [string, Buffer]> {
  const own = (name: string, type: string): [string, [string, Buffer]] => [name, [type, readFileSync(new URL(name, PUBLIC))]];
  return new Map([
    own('app.js', 'text/javascript; charset=utf-8'),
    own('app.css', 'text/css; charset=utf-8'),
    ['uPlot.iife.min.js', ['text/javascript; charset=utf-8', readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'))]],
    ['uPlot.min.css', ['text/css; charset=utf-8', readFileSync(require.resolve('uplot/dist/uPlot.min.css'))]],
  ]);
}

export function dashboardRouter(guard: AdminGuard): Router {
  const files = assets();
  const page = readFileSync(new URL('index.html', PUBLIC));
  const router = express.Router();
  const headers = helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", 'data:'],
        connectSrc: ["'self'"],
        formAction: ["'self'"],
        baseUri: ["'none'"],
        frameAncestors: ["'none'"],
      },
    },
    xFrameOptions: { action: 'deny' },
  });
  router.get('/', headers, (_req, res) => {
    res.setHeader('cache-control', 'no-cache');
    res.type('html').send(page);
  });
  router.get('/assets/:file', headers, (req, res, next) => {
    const file = files.get(String(req.params.file));
    if (!file) return next();
    res.setHeader('cache-control', 'no-cache');
    res.type(file[0]).send(file[1]);
  });
  router.post('/session', express.json({ limit: '4kb' }), guard.signIn);
  router.post('/session/end', guard.signOut);
  return router;
}
