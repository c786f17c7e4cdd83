// The dashboard, served by the admin listener at `/`: one page (src/dashboard/public/) and its modules, Preact, htm and
// uPlot as ES modules from the installed packages (no CDN, no bundler: it works with no internet), and the sign-in and
// sign-out calls that exchange an admin token for a session cookie (src/admin/guard.ts). Its data comes from the
// admin API itself, with the cookie. The page gets a Content-Security-Policy of its own: scripts, styles and calls
// from this origin only, never framed.
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import express, { type Router } from 'express';
import helmet from 'helmet';
import type { AdminGuard } from '../admin/guard.js';

const PUBLIC = new URL('./public/', import.meta.url);
const require = createRequire(import.meta.url);

/** The content type of a served file, by its extension. */
const TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/**
 * Every file the page needs, read once at start-up: path under /assets/ -> [content type, bytes]. The page's own
 * scripts and styles (the .d.ts files beside them are for tsc only), and the libraries under vendor/, each one
 * dependency-free ES module file of its package, imported by the page by relative path (no import map: it would be
 * an inline script, which the policy forbids).
 */
function assets(): Map<string, [string, Buffer]> {
  const files = new Map<string, [string, Buffer]>();
  for (const name of readdirSync(PUBLIC, { recursive: true, encoding: 'utf8' })) {
    const type = TYPES[name.slice(name.lastIndexOf('.'))];
    if (type && !name.endsWith('.d.ts')) files.set(name.split('\\').join('/'), [type, readFileSync(new URL(name, PUBLIC))]);
  }
  // Beside each package's main file (dist/): preact's "exports" does not list its module build by path.
  const vendor = (name: string, pkg: string, file: string, type = TYPES['.js']!) =>
    files.set(name, [type, readFileSync(join(dirname(require.resolve(pkg)), file))]);
  vendor('vendor/preact.js', 'preact', 'preact.module.js');
  vendor('vendor/htm.js', 'htm', 'htm.module.js');
  vendor('vendor/uplot.js', 'uplot', 'uPlot.esm.js');
  vendor('vendor/uPlot.min.css', 'uplot', 'uPlot.min.css', TYPES['.css']);
  return files;
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
