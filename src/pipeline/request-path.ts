// The request path as data: every stage a request passes, in the order it runs, with its phase, the requests it runs
// for and what it does (STAGES). requestPath() assembles the gateway's handler from this table and from nothing else,
// so the table is the path; the stages themselves live by phase in src/pipeline/stages/ (entry, routing, identity,
// limits, policy, upstream) and the proxy in proxy.ts. The decisions (routes, authentication, limits, route policy)
// are plain classes and functions with no Express in them; the stages turn their outcomes into HTTP and talk through
// the request's typed context (req.ctx, context.ts). README.md and docs/request-path.md draw the same path, and
// test/docs-match-code.test.ts checks both against this table: a stage added here without its place in the picture
// fails there.
import type { Request, RequestHandler, Response } from 'express';
import { followKeySources, keyShapeText, mentionsPresentedKey, recordedKeyShapes } from '../http/credentials.js';
import type { AuthScheme } from '../identity/auth-scheme.js';
import type { AnonymousLimiter } from '../limits/anonymous.js';
import type { KeyLimiter } from '../limits/key-limits.js';
import type { PublicRouteLimiter } from '../limits/public-limits.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Tracing } from '../observability/tracing.js';
import type { Runtime } from '../routing/runtime.js';
import type { ServiceRegistry } from '../routing/services.js';
import type { Clock } from '../util/clock.js';
import type { RequestObserver } from './context.js';
import { observeRequest, ownEndpoints, securityHeaders } from './stages/entry.js';
import { authenticate, requireApiKey } from './stages/identity.js';
import { answerQuota, anonymousLimit, keyLimits, publicRouteLimits } from './stages/limits.js';
import { allowedAddress, consumerStatus, requireAllowedPlan, routePolicy, scopes, validateRequest, type UsageCounts } from './stages/policy.js';
import { matchRoute, refuseAmbiguousPaths, refuseTransferCodings, requireHealthyService } from './stages/routing.js';
import { declaredBodyLimit, prepareUpstreamHeaders } from './stages/upstream.js';

export interface RequestPathParts {
  runtime: Runtime;
  clock: Clock;
  logger: Logger;
  /** Told of every request once its response is over (the metrics). */
  observers: readonly RequestObserver[];
  /** The access log (pino-http): started for every request in stage 1, it writes its line when the response is over. */
  accessLog?: (req: Request, res: Response) => void;
  /** OpenTelemetry traces, when tracing.otlpEndpoint is set: a server span per request, child spans in stages 4, 7, 10. */
  tracing?: Tracing;
  /**
   * The key stages' decisions (4-7). Always there in the gateway composeGateway builds; left out only by tests of
   * the proxy and route policy, which then run without keys.
   */
  keys?: { auth: AuthScheme; anonymous: AnonymousLimiter; limiter: KeyLimiter; publicLimits?: PublicRouteLimiter };
  /** Stage 11, created with the services' connection pools (createProxy). */
  proxyToUpstream: RequestHandler;
  /** The services routes go to, with their targets' health (src/routing/services.ts). */
  services: ServiceRegistry;
  /**
   * Counts keyed calls of deprecated routes for the usage report (stage 8), and keyed requests that do not match their
   * operation's description (stage V: the ledger's validationFailed and the invalid-request report); absent: not counted.
   */
  usage?: UsageCounts;
  /** Counts requests that do not match their operation's description (stage V); absent: not counted. */
  metrics?: Metrics;
}

/** Which file of src/pipeline/stages/ a stage is in: what it is about, in the order the phases first act. */
export type Phase = 'entry' | 'routing' | 'identity' | 'limits' | 'policy' | 'upstream';

/**
 * The sequences a stage is assembled into: `path`, the request path; `quota`, the quota endpoint's (GET
 * selfService.path, run inside ownEndpoints); `app`, the gateway's request handler itself, before the request path
 * (server/app.ts).
 */
export type Sequence = 'path' | 'quota' | 'app';

/** What a stage's handler is made from: the parts, and what requestPath works out once from them. */
export interface PathBuild {
  readonly parts: RequestPathParts;
  /** Whether a caller's X-Request-Id carries a key (one the request presents, or any text shaped like one). */
  readonly idCarriesKey: (req: Request, id: string) => boolean;
  /** The quota endpoint's sequence (built first, from the table's `quota` rows); undefined without keys. */
  readonly quota: RequestHandler | undefined;
}

export interface StageRow {
  /** The stage's mark in the picture: a number, or a letter for stages added between them. */
  readonly mark: string;
  readonly phase: Phase;
  /** The stage's name: its factory's or handler's, as the picture names it. */
  readonly name: string;
  /** Which requests it runs for. */
  readonly runsFor: string;
  /** What it does and what it can answer, in one line. */
  readonly what: string;
  readonly in: readonly Sequence[];
  /** Skipped on the request path for a route that needs no key (auth: none). */
  readonly keyedRoutesOnly?: true;
  /** The stage's handler; undefined when this gateway has no part for it (no keys). Absent for `app` stages. */
  readonly make?: (b: PathBuild) => RequestHandler | undefined;
}

/**
 * Every stage, in the order it runs (answerQuota's place is in the quota endpoint's sequence, after the identity
 * stages it shares with the request path). A stage added to the request path is a row here, and a line in the
 * picture of README.md and docs/request-path.md.
 */
export const STAGES: readonly StageRow[] = Object.freeze([
  {
    mark: '0',
    phase: 'entry',
    name: 'normalizeRequestTarget',
    runsFor: 'every request',
    what: 'absolute-form target reduced to its path, fragment dropped (in server/app.ts, before the request path and Express)',
    in: ['app'],
  },
  {
    mark: '1',
    phase: 'entry',
    name: 'observeRequest',
    runsFor: 'every request',
    what: 'request id, context, req.log; access log, metrics and trace once the response is over',
    in: ['path'],
    make: ({ parts: p, idCarriesKey }) => observeRequest(p.observers, p.accessLog, p.tracing, idCarriesKey),
  },
  {
    mark: '2',
    phase: 'entry',
    name: 'securityHeaders',
    runsFor: 'every request',
    what: 'helmet, for a JSON API',
    in: ['path'],
    make: () => securityHeaders(),
  },
  {
    mark: 'R',
    phase: 'entry',
    name: 'ownEndpoints',
    runsFor: 'every request',
    what: "the gateway's own paths, never routed: the quota endpoint answered (Q), /healthz, /readyz, /metrics let past",
    in: ['path'],
    make: ({ parts: p, quota }) => ownEndpoints(p.runtime, quota),
  },
  {
    mark: 'M',
    phase: 'routing',
    name: 'matchRoute',
    runsFor: "requests not for the gateway's own paths",
    what: 'the route and its service, or defaultService; neither: 404; a method override it cannot route: 400',
    in: ['path'],
    make: ({ parts: p }) => matchRoute(p.runtime, p.services),
  },
  {
    mark: '3',
    phase: 'routing',
    name: 'refuseAmbiguousPaths',
    runsFor: 'routed requests',
    what: 'a path a backend may read as another (dot segments, %2F, a backslash, ;): 400',
    in: ['path'],
    make: () => refuseAmbiguousPaths,
  },
  {
    mark: 'T',
    phase: 'routing',
    name: 'refuseTransferCodings',
    runsFor: 'routed requests',
    what: 'a transfer coding the gateway does not implement (all but chunked): 501',
    in: ['path'],
    make: () => refuseTransferCodings,
  },
  {
    mark: 'H',
    phase: 'routing',
    name: 'requireHealthyService',
    runsFor: 'routed requests',
    what: 'every target of the service out: 503, nothing counted',
    in: ['path'],
    make: () => requireHealthyService,
  },
  {
    mark: '4',
    phase: 'identity',
    name: 'authenticate',
    runsFor: 'routed requests and the quota endpoint',
    what: 'the key from auth.sources -> who is calling (key cache; store read on a miss); store unavailable: 503',
    in: ['path', 'quota'],
    make: ({ parts: p }) => p.keys && authenticate(p.keys.auth, p.logger),
  },
  {
    mark: '5',
    phase: 'limits',
    name: 'anonymousLimit',
    runsFor: 'routed requests and the quota endpoint, without a valid key',
    what: 'the per-client limit: 429',
    in: ['path', 'quota'],
    make: ({ parts: p }) => p.keys && anonymousLimit(p.keys.anonymous),
  },
  {
    mark: 'P',
    phase: 'limits',
    name: 'publicRouteLimits',
    runsFor: 'public routes (auth: none) with limits, without a valid key',
    what: "the route's own windows per client address, one Redis round trip: 429",
    in: ['path'],
    make: ({ parts: p }) => p.keys && publicRouteLimits(p.keys.publicLimits),
  },
  {
    mark: '6',
    phase: 'identity',
    name: 'requireApiKey',
    runsFor: 'routes that need a key, and the quota endpoint',
    what: 'still no valid key: 401',
    in: ['path', 'quota'],
    keyedRoutesOnly: true,
    make: ({ parts: p }) => p.keys && requireApiKey,
  },
  {
    mark: 'Q',
    phase: 'limits',
    name: 'answerQuota',
    runsFor: 'the quota endpoint (GET selfService.path)',
    what: "the key's plan, windows and ban, read without counting; never the upstream",
    in: ['quota'],
    // A key of a consumer the read does not find there (moved since this instance cached it): read once more.
    make: ({ parts: p }) =>
      p.keys && answerQuota(p.keys.limiter, inSequence([authenticate(p.keys.auth, p.logger), requireApiKey, answerQuota(p.keys.limiter)])),
  },
  {
    mark: 'C',
    phase: 'policy',
    name: 'consumerStatus',
    runsFor: 'keyed requests whose key belongs to a consumer',
    what: 'a suspended consumer: 403, before any quota is taken, no Redis command',
    in: ['path'],
    make: ({ parts: p }) => p.keys && consumerStatus,
  },
  {
    mark: 'A',
    phase: 'policy',
    name: 'allowedAddress',
    runsFor: 'keyed requests whose key or consumer has allowedCidrs',
    what: 'a client address (by trustProxy) outside every allow-list: 403, before any quota is taken, no Redis command',
    in: ['path'],
    make: ({ parts: p }) => p.keys && allowedAddress,
  },
  {
    mark: 'G',
    phase: 'policy',
    name: 'scopes',
    runsFor: 'keyed requests whose key or consumer has scopes',
    what: 'a route neither scope list names (route name, service:, operation:): 403, before any quota is taken, no Redis command',
    in: ['path'],
    make: ({ parts: p }) => p.keys && scopes,
  },
  {
    mark: 'S',
    phase: 'policy',
    name: 'requireAllowedPlan',
    runsFor: "keyed requests on routes whose stability the service's openapi.stability lists",
    what: 'a plan the stability is not open to: 403, before any quota is taken',
    in: ['path'],
    make: ({ parts: p }) => p.keys && requireAllowedPlan,
  },
  {
    mark: '7',
    phase: 'limits',
    name: 'keyLimits',
    runsFor: "keyed requests (a public route's only with a valid key)",
    what: "ban and every window of the plan and route at the route's cost, one Redis round trip: 429, 403, 503",
    in: ['path'],
    // A public route's request whose key the limit check disowns is metered by its address after all (stages 5, P). A
    // key of a consumer the check does not find in that consumer (moved since this instance cached it) is read once
    // more and goes through every check again from authentication, by its new record (stages/limits.ts readAgain).
    make: ({ parts: p }) => {
      if (!p.keys) return undefined;
      const byAddress = inSequence([anonymousLimit(p.keys.anonymous), publicRouteLimits(p.keys.publicLimits)]);
      const again = inSequence([
        authenticate(p.keys.auth, p.logger),
        requireApiKey,
        consumerStatus,
        allowedAddress,
        scopes,
        requireAllowedPlan,
        keyLimits(p.keys.limiter, byAddress),
      ]);
      return keyLimits(p.keys.limiter, byAddress, again);
    },
  },
  {
    mark: '8',
    phase: 'policy',
    name: 'routePolicy',
    runsFor: 'requests that matched a route',
    what: 'Deprecation, Sunset and Link headers; retired or in a brownout: 410',
    in: ['path'],
    make: ({ parts: p }) => routePolicy(p.clock, p.usage),
  },
  {
    mark: 'V',
    phase: 'policy',
    name: 'validateRequest',
    runsFor: 'routes whose OpenAPI document validates (shadow or enforce)',
    what: "the request against its operation's description, a JSON body read whole: 400, 413, 408",
    in: ['path'],
    make: ({ parts: p }) => {
      const { server } = p.runtime.config;
      return validateRequest({ maxBodyBytes: server.maxBodyBytes, idleMs: server.responseIdleTimeoutMs, logger: p.logger, metrics: p.metrics, usage: p.usage });
    },
  },
  {
    mark: '9',
    phase: 'upstream',
    name: 'declaredBodyLimit',
    runsFor: 'routed requests',
    what: 'Content-Length over server.maxBodyBytes: 413, the backend not called',
    in: ['path'],
    make: ({ parts: p }) => declaredBodyLimit(p.runtime.config.server.maxBodyBytes),
  },
  {
    mark: '10',
    phase: 'upstream',
    name: 'prepareUpstreamHeaders',
    runsFor: 'routed requests',
    what: 'hop-by-hop headers and the key out; X-Forwarded-For, -Proto, -Host, X-Request-Id, X-Consumer-Id, -Plan, -Metadata-*, X-Credential-Id in; Via',
    in: ['path'],
    make: ({ parts: p }) =>
      prepareUpstreamHeaders(p.runtime.config.upstream, {
        via: p.runtime.config.server.via,
        // Read per request: a reload's list applies to the next one.
        forwardMetadata: () => p.runtime.config.consumers.forwardMetadata,
      }),
  },
  {
    mark: '11',
    phase: 'upstream',
    name: 'proxyToUpstream',
    runsFor: 'routed requests',
    what: 'a target of the service, retries on another; streamed there and back (proxy.ts): 502, 504, 408',
    in: ['path'],
    make: ({ parts: p }) => p.proxyToUpstream,
  },
] satisfies StageRow[]);

/**
 * The request path as one handler: the table's `path` stages in order. server/app.ts calls it for every request,
 * without Express's router; a stage that calls next('route') sends the request out of it, to the Express app behind
 * it (the gateway's own routes /healthz, /readyz, /metrics, and the 404), and an error goes to that app's error
 * handler.
 */
export function requestPath(p: RequestPathParts): RequestHandler {
  const sources = followKeySources(() => p.runtime.config.auth.sources);
  const keyShaped = keyShapeText(p.runtime.config.auth.issuedPrefix);
  const idCarriesKey = (req: Request, id: string): boolean => keyShaped.holds(id) || recordedKeyShapes().holds(id) || mentionsPresentedKey(req, sources(), id);
  const base = { parts: p, idCarriesKey, quota: undefined };
  const quota = p.keys ? inSequence(assemble('quota', base)) : undefined;
  return inSequence(assemble('path', { ...base, quota }));
}

/** The handlers of one sequence, in the table's order; a stage this gateway has no part for is left out. */
function assemble(sequence: Exclude<Sequence, 'app'>, b: PathBuild): RequestHandler[] {
  const handlers: RequestHandler[] = [];
  for (const row of STAGES) {
    if (!row.in.includes(sequence)) continue;
    if (!row.make) throw new Error(`stage ${row.name} is in the ${sequence} sequence but has no handler`);
    const handler = row.make(b);
    if (!handler) continue;
    handlers.push(sequence === 'path' && row.keyedRoutesOnly ? keyedRoutesOnly(handler) : handler);
  }
  return handlers;
}

/** A key stage that a public route (auth: none) skips: no key is required there. */
function keyedRoutesOnly(stage: RequestHandler): RequestHandler {
  return function keyedRouteStage(req, res, next) {
    if (req.ctx.matchedRoute?.auth === 'none') return next();
    return stage(req, res, next);
  };
}

/**
 * Stages as one handler that runs them in order, as Express would as separate handlers (an error or a rejected
 * promise goes to the error handler), without a router layer per stage.
 */
export function inSequence(stages: readonly RequestHandler[]): RequestHandler {
  return function stagesInSequence(req, res, done) {
    let i = 0;
    const next = (err?: unknown): void => {
      // next('route'): the request leaves the sequence for the handlers after it, as in Express.
      if (err === 'route') return done();
      if (err !== undefined && err !== null) return done(err);
      const stage = stages[i++];
      if (!stage) return done();
      try {
        const result: unknown = stage(req, res, next);
        if (result instanceof Promise) result.catch((e: unknown) => done(e ?? new Error('a request stage failed')));
      } catch (e) {
        done(e);
      }
    };
    next();
  };
}
