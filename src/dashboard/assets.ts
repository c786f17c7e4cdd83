// What the dashboard's page and the consumer portal's page share: their files read once at start-up (each page's own
// modules and styles, and Preact, htm and uPlot as ES modules from the installed packages: no CDN, no bundler, it
// works with no internet), and the headers every answer of theirs carries, a Content-Security-Policy that allows
// scripts, styles and calls from the page's own origin only (no inline script or style), never framed.
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { RequestHandler } from 'express';
import helmet from 'helmet';

const require = createRequire(import.meta.url);

/** The content type of a served file, by its extension. */
const TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

/**
 * Every file a page needs, read once: path under /assets/ -> [content type, bytes]. The page's own scripts and
 * styles under publicDir (the .d.ts files beside them are for tsc only), and the libraries under vendor/, each one
 * dependency-free ES module file of its package, imported by the page by relative path (no import map: it would be
 * an inline script, which the policy forbids).
 */
export function pageAssets(publicDir: URL): Map<string, [string, Buffer]> {
  const files = new Map<string, [string, Buffer]>();
  for (const name of readdirSync(publicDir, { recursive: true, encoding: 'utf8' })) {
    const type = TYPES[name.slice(name.lastIndexOf('.'))];
    if (type && !name.endsWith('.d.ts')) files.set(name.split('\\').join('/'), [type, readFileSync(new URL(name, publicDir))]);
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

/**
 * The page's headers (helmet): its Content-Security-Policy, no framing, and helmet's other defaults. With
 * `referrer: 'no-referrer'` the page sends no Referer anywhere (the portal's sign-in link carries a code in its URL).
 */
export function pageHeaders(opts: { referrer?: 'no-referrer' } = {}): RequestHandler {
  return helmet({
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
    ...(opts.referrer ? { referrerPolicy: { policy: opts.referrer } } : {}),
  });
}
