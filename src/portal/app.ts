// The consumer portal, on a listener of its own (portal.host:portal.port): a page for a consumer's own people (their
// keys, windows, usage, refusals) and the JSON API behind it. This app owns what every request meets: the request log
// (the path only, never the query: a sign-in link's code is in it), the page's headers on every answer (the
// dashboard's Content-Security-Policy, and Referrer-Policy: no-referrer so the code never leaves in a Referer), the
// page and its assets, the two ways in (GET /link with a single-use code, POST /api/session with a key, limited per
// client address), signing out, the session guard and GET /api/me. The data and action routes are the `api` router,
// mounted behind the guard. No listen() here: src/server/gateway-server.ts binds it.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import express, { type Request, type RequestHandler, type Router } from 'express';
import type { PortalAccess } from '../access/portal-access.js';
import type { SignInLimit } from '../access/sign-in-limit.js';
import type { PortalSession } from '../access/types.js';
import { jsonErrors } from '../admin/json-errors.js';
import { requireJsonBody } from '../admin/requests.js';
import { limitsInForce } from '../consumers/limits-in-force.js';
import type { ConsumerRecord } from '../consumers/types.js';
import { pageAssets, pageHeaders } from '../dashboard/assets.js';
import { sendError } from '../http/errors.js';
import { formatRetryAfter, H, isSaneRequestId } from '../http/headers.js';
import { anonymousClientKey } from '../limits/client-address.js';
import type { Logger } from '../observability/logger.js';
import type { Runtime } from '../routing/runtime.js';
import { planLetsCreateKeys, portalKeyError } from './api-context.js';
import { changeGuard, clearSessionCookie, sessionGuard, sessionIdOf, setSessionCookie } from './session-guard.js';

const PUBLIC = new URL('./public/', import.meta.url);

/** Portal requests are small JSON documents: a key, a name, a webhook URL. */
const MAX_BODY = '16kb';
/** The longest key a sign-in reads: longer is no key (issued and foreign keys are at most 256 characters). */
const MAX_KEY = 1024;

export interface PortalAppOptions {
  /** Links, sign-ins and sessions (src/access/portal-access.ts). */
  access: Pick<PortalAccess, 'exchange' | 'signIn' | 'find' | 'end'>;
  /** Key sign-in attempts per client address (portal.signInsPerMinute). */
  signIns: Pick<SignInLimit, 'attempt'>;
  /** The config in force: portal.webhooks, the plans' perMonth, server.trustProxy (read at start-up: restart-only). */
  runtime: Runtime;
  /** A consumer's record as stored (ConsumerAdmin.get or ConsumerStore.get): GET /api/me. */
  consumers: { get(id: string): Promise<ConsumerRecord | undefined> };
  logger: Logger;
  /** The data and action routes under /api (portalApiRouter, src/portal/api-routes.ts), mounted after the session guard. */
  api: Router;
  /** Whether the listener serves HTTPS (portal.tls). */
  tls: boolean;
  /** portal.publicUrl: its origin is the portal's own too (a change's Origin may name it). */
  publicUrl?: string;
}

/** GET /api/me's answer: who the session is for and what it may do (docs/portal.openapi.yaml `Me`). */
export interface Me {
  consumer: { id: string; name: string; plan: string; status: 'active' | 'suspended'; maxKeys?: number; perMonth?: number };
  session: { kind: PortalSession['kind']; keyId?: string; actor?: string; scopes: PortalSession['scopes']; expiresAt: string };
  canRegisterWebhooks: boolean;
  canCreateKeys: boolean;
}

/** The answer to a link that cannot be used: the portal's own look (its stylesheet, no script), and a way on. */
const REFUSED_LINK = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="referrer" content="no-referrer" />
    <title>Sign-in link not valid</title>
    <link rel="stylesheet" href="/assets/app.css" />
  </head>
  <body>
    <header><strong class="brand">API portal</strong></header>
    <main>
      <h1>Sign-in link not valid</h1>
      <section class="panel">
        <p>This sign-in link has been used, has expired or was withdrawn. Ask for a new one where you got it.</p>
        <p class="muted">A link works once, for 15 minutes. To look without changing anything, <a href="/">sign in with one of your API keys</a>.</p>
      </section>
    </main>
  </body>
</html>
`;

export function buildPortalApp(o: PortalAppOptions): express.Express {
  const { access, runtime, logger } = o;
  const publicOrigin = o.publicUrl === undefined ? undefined : new URL(o.publicUrl).origin;
  // The session cookie is Secure whenever people reach the portal over HTTPS: the listener's own TLS, or an https
  // publicUrl in front of a plain listener (an ingress or load balancer that ends TLS), where the browser sees HTTPS.
  const secure = o.tls || o.publicUrl?.startsWith('https:') === true;
  const files = pageAssets(PUBLIC);
  const page = readFileSync(new URL('index.html', PUBLIC));

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', false);
  // The sign-in limit counts per client address: X-Forwarded-For is believed only as server.trustProxy says.
  app.set('trust proxy', runtime.config.server.trustProxy);

  app.use(portalRequestLog(logger));
  app.use(pageHeaders({ referrer: 'no-referrer' }));

  app.get('/', (_req, res) => {
    res.setHeader('cache-control', 'no-cache');
    res.type('html').send(page);
  });
  app.get('/assets/*path', (req, res, next) => {
    const file = files.get((req.params.path as string[]).join('/'));
    if (!file) return next();
    res.setHeader('cache-control', 'no-cache');
    res.type(file[0]).send(file[1]);
  });

  // A HEAD (a link checker, a mail scanner) learns nothing and does not use the link up: only a GET exchanges it.
  app.head('/link', (_req, res) => {
    res.setHeader('cache-control', 'no-store');
    res.status(204).end();
  });
  app.get('/link', async (req, res) => {
    res.setHeader('cache-control', 'no-store');
    const code = linkCode(req);
    const session = code === undefined ? undefined : await access.exchange(code);
    if (!session) return void res.status(410).type('html').send(REFUSED_LINK);
    req.portalSession = session;
    setSessionCookie(res, session, secure);
    res.redirect(303, '/');
  });

  const api = express.Router();
  api.use((_req, res, next) => {
    res.setHeader('cache-control', 'no-store');
    next();
  });
  api.use(changeGuard(publicOrigin));
  api.use(express.json({ limit: MAX_BODY, strict: true }));
  api.use(requireJsonBody);

  api.post('/session', async (req, res) => {
    const verdict = await o.signIns.attempt(anonymousClientKey(req));
    if (!verdict.ok) {
      const after = formatRetryAfter(verdict.retryAfterMs);
      res.setHeader(H.retryAfter, after);
      return sendError(res, 'rate_limit_exceeded', `Too many sign-in attempts from this address. Retry after ${after} seconds.`);
    }
    const key = (req.body as { key?: unknown } | undefined)?.key;
    if (typeof key !== 'string' || key.length === 0) return sendError(res, 'invalid_request', 'key: expected the API key, a string.');
    if (key.length > MAX_KEY) return sendError(res, 'invalid_api_key');
    const result = await access.signIn(key);
    if (!result.ok) return sendError(res, result.code, result.message);
    req.portalSession = result.session;
    const me = await meOf(result.session, o);
    if (!me) return sendError(res, 'portal_session_required');
    setSessionCookie(res, result.session, secure);
    res.json(me);
  });

  api.post('/session/end', async (req, res) => {
    const id = sessionIdOf(req);
    if (id !== undefined) await access.end(id);
    clearSessionCookie(res, secure);
    res.status(204).end();
  });

  api.use(sessionGuard(access));
  api.get('/me', async (req, res) => {
    const me = await meOf(req.portalSession!, o);
    if (!me) return sendError(res, 'portal_session_required');
    res.json(me);
  });
  api.use(o.api);
  api.use((_req, res) => sendError(res, 'not_found'));

  app.use('/api', api);
  app.use((_req, res) => sendError(res, 'not_found'));
  app.use(
    jsonErrors({
      logger,
      maxBody: MAX_BODY,
      keyError: portalKeyError,
      failure: { fields: { portal: true }, line: 'portal request failed', message: 'A store did not answer. Retry shortly.' },
    }),
  );
  return app;
}

/** The code of GET /link?code=...: exactly one, else none. */
function linkCode(req: Request): string | undefined {
  const q = req.url.indexOf('?');
  if (q === -1) return undefined;
  const codes = new URLSearchParams(req.url.slice(q + 1)).getAll('code');
  return codes.length === 1 ? codes[0] : undefined;
}

async function meOf(s: PortalSession, o: Pick<PortalAppOptions, 'consumers' | 'runtime'>): Promise<Me | undefined> {
  const c = await o.consumers.get(s.consumer);
  if (!c) return undefined;
  const config = o.runtime.config;
  const perMonth = limitsInForce(c, Date.now()).perMonth ?? config.plans[c.plan]?.perMonth;
  return {
    consumer: {
      id: c.id,
      name: c.name,
      plan: c.plan,
      status: c.status,
      ...(c.maxKeys !== undefined ? { maxKeys: c.maxKeys } : {}),
      ...(perMonth !== undefined ? { perMonth } : {}),
    },
    session: {
      kind: s.kind,
      ...(s.keyId !== undefined ? { keyId: s.keyId } : {}),
      ...(s.actor !== undefined ? { actor: s.actor } : {}),
      scopes: s.scopes,
      expiresAt: new Date(s.expiresAt).toISOString(),
    },
    canRegisterWebhooks: config.portal.webhooks && s.scopes.includes('webhooks:write'),
    // POST /api/keys would create one: keys:write, and a plan that lets its consumers create keys (selfServiceKeys).
    canCreateKeys: s.scopes.includes('keys:write') && planLetsCreateKeys(config.plans, c.plan),
  };
}

/**
 * Request id and one log line per portal request once it is answered: the path without its query (a link's code is
 * in it), never a cookie or key; the consumer once a session is known.
 */
function portalRequestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const given = req.headers[H.requestId];
    req.id = isSaneRequestId(given) ? given : randomUUID();
    res.setHeader(H.requestId, req.id);
    const started = performance.now();
    res.once('close', () => {
      const q = req.originalUrl.indexOf('?');
      logger.info(
        {
          portal: true,
          req: { id: req.id, method: req.method, path: q === -1 ? req.originalUrl : req.originalUrl.slice(0, q) },
          res: { statusCode: res.statusCode },
          responseTime: Math.round(performance.now() - started),
          ...(req.portalSession ? { consumer: req.portalSession.consumer } : {}),
        },
        'portal request',
      );
    });
    next();
  };
}
