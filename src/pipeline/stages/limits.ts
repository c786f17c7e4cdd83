// Limits: the anonymous per-client limit and a public route's own limits for requests without a valid key, the key
// limits (ban and windows, one Redis round trip) for those with one, and the quota endpoint's read of them. The
// decisions are in src/limits/; these stages turn their outcomes into RateLimit headers, 429s and 403s.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { sendError } from '../../http/errors.js';
import { formatRetryAfter, H, rateLimitItemStart, setRateLimitHeaders, type RateWindow } from '../../http/headers.js';
import type { AnonymousDecision, AnonymousLimiter } from '../../limits/anonymous.js';
import type { KeyLimiter, KeyLimitOutcome, QuotaOutcome } from '../../limits/key-limits.js';
import type { PublicLimitOutcome, PublicRouteLimiter } from '../../limits/public-limits.js';
import type { LimitRequest, WindowSpec, WindowState } from '../../limits/types.js';
import { disownKey } from './identity.js';

/** The anonymous limit's one window's RateLimit item, formatted once. */
const ANONYMOUS_ITEMS: readonly string[] = Object.freeze([rateLimitItemStart('minute')]);

/** 5. Requests without a valid key are metered per client address; a keyed request passes untouched. */
export function anonymousLimit(anonymous: AnonymousLimiter): RequestHandler {
  const answer = (res: Response, next: NextFunction, d: AnonymousDecision): void => {
    setRateLimitHeaders(
      res,
      [{ name: 'minute', limit: d.limit, remaining: d.remaining, resetMs: d.resetMs, windowSeconds: 60 }],
      d.policy,
      d.now,
      ANONYMOUS_ITEMS,
    );
    if (d.admitted) return next();
    res.setHeader(H.retryAfter, formatRetryAfter(d.resetMs));
    sendError(res, 'rate_limit_exceeded', `Too many requests without a valid API key from this address. Retry after ${formatRetryAfter(d.resetMs)} seconds.`);
  };
  return function anonymousLimitStage(req, res, next) {
    const ctx = req.ctx;
    if (ctx.caller) return next();
    const client = ctx.clientKey();
    // Still refused: answered from memory, no Redis call.
    const known = anonymous.knownRefusal(client, ctx.anonymousRefusedUntil);
    if (known) return answer(res, next, known);
    anonymous
      .consume(client)
      .then((d) => {
        ctx.anonymousDecision = d;
        answer(res, next, d);
      })
      .catch(next);
  };
}

/**
 * P. A public route's own limits per client address, for a request without a valid key the anonymous limit admitted:
 * both must pass. The RateLimit headers list the anonymous limit's window and the route's enforced ones together.
 */
export function publicRouteLimits(limiter: PublicRouteLimiter | undefined): RequestHandler {
  const answer = (req: Request, res: Response, next: NextFunction, o: PublicLimitOutcome): void => {
    if (o.kind === 'cost_exceeds_limit') {
      const w = o.window;
      return sendError(
        res,
        'cost_exceeds_limit',
        `This request costs ${o.cost} points, more than the ${w.name} window of this route holds for one address in all (${w.limit}): it can never be admitted without an API key.`,
      );
    }
    const { decision: d, request, now } = o;
    const windows = request.shown.map((i) => rateWindow(request.windows[i]!, d.windows[i]!));
    const anon = req.ctx.anonymousDecision;
    if (anon) windows.unshift({ name: 'minute', limit: anon.limit, remaining: anon.remaining, resetMs: anon.resetMs - (now - anon.now), windowSeconds: 60 });
    if (windows.length > 0) setRateLimitHeaders(res, windows, [anon?.policy ?? '', request.policy].filter((p) => p !== '').join(', '), now);
    if (d.outcome === 'admitted') return next();
    res.setHeader(H.retryAfter, formatRetryAfter(d.retryMs));
    sendError(
      res,
      'rate_limit_exceeded',
      `Too many requests without a valid API key from this address to this route (${shortNames(request, d.short)} window). Retry after ${formatRetryAfter(d.retryMs)} seconds.`,
    );
  };
  return function publicRouteLimitsStage(req, res, next) {
    const ctx = req.ctx;
    const route = ctx.matchedRoute;
    if (!limiter || ctx.caller || !route || route.auth !== 'none' || !route.addressLimits) return next();
    limiter
      .check(route, ctx.clientKey())
      .then((o) => answer(req, res, next, o))
      .catch(next);
  };
}

/**
 * 7. Ban check and every window that applies (the plan's, the matched route's, with its cost): RateLimit headers of
 * the enforced windows on every answer, 429 for a refusal, 403 for a cost an enforced window can never hold. A window
 * in shadow mode or a candidate limit that would refuse only reports (metrics, ledger), never in the headers.
 */
export function keyLimits(limiter: KeyLimiter, byAddress?: RequestHandler, reread?: RequestHandler): RequestHandler {
  const answer = (req: Request, res: Response, next: NextFunction, o: KeyLimitOutcome): void => {
    if (o.kind === 'no_plan') return sendError(res, 'service_unavailable', 'This API key has no usable plan right now.');
    if (o.kind === 'unavailable') return sendError(res, 'service_unavailable', 'Rate limits cannot be checked right now. Retry shortly.');
    if (o.kind === 'invalid_key' && byAddress && req.ctx.matchedRoute?.auth === 'none') {
      // A public route: a key the store no longer accepts leaves the request anonymous, metered by its address.
      req.ctx.caller = undefined;
      req.ctx.authFailure = 'invalid_api_key';
      void byAddress(req, res, next);
      return;
    }
    if (o.kind === 'invalid_key' && reread && req.ctx.caller?.consumer) return readAgain(req, res, next, reread);
    if (o.kind === 'invalid_key') return disownKey(req, res, next);
    if (o.kind === 'cost_exceeds_limit') {
      // No Retry-After and no window headers: waiting never helps, and no store was read.
      const w = o.window;
      return sendError(
        res,
        'cost_exceeds_limit',
        `This request costs ${o.cost} points, more than the ${w.name} window of this key holds in all (${w.limit}): it can never be admitted.`,
      );
    }
    const { decision: d, request } = o;
    setWindowHeaders(res, request, d.windows, o.now);
    if (d.outcome === 'admitted') return next();
    res.setHeader(H.retryAfter, formatRetryAfter(d.retryMs));
    if (d.outcome === 'banned' || d.outcome === 'banned_now') {
      return sendError(
        res,
        'api_key_banned',
        `This API key is banned for ${formatRetryAfter(d.retryMs)} more seconds after repeated 429s (ban level ${d.banLevel}).`,
      );
    }
    sendError(res, 'rate_limit_exceeded', `Rate limit exceeded (${shortNames(request, d.short)} window). Retry after ${formatRetryAfter(d.retryMs)} seconds.`);
  };
  return function keyLimitsStage(req, res, next) {
    // A public route's request without a valid key was metered by its address (stages 5 and P).
    if (!req.ctx.caller && req.ctx.matchedRoute?.auth === 'none') return next();
    const traced = req.ctx.trace;
    const span = traced?.start('tollgate.limit_check', 'client', { 'db.system.name': 'redis' });
    limiter
      .check(req.ctx.caller!, req.ctx, req.ctx.matchedRoute)
      .then((o) => {
        if (span) traced!.end(span, o.kind === 'decided' ? o.decision.outcome : o.kind, o.kind === 'unavailable');
        answer(req, res, next, o);
      })
      .catch((err: unknown) => {
        if (span) traced!.end(span, 'error', true);
        next(err);
      });
  };
}

/**
 * Q. The quota endpoint's answer: the plan in force, its windows (limit, remaining, reset: the plan's, then every
 * route window that applies to its plan; for a key of a consumer those are the pool's, then the key's caps inside it)
 * and ban, with RateLimit headers listing them all, from one read-only store
 * call; nothing is counted and the upstream is never called. Errors as the key limits stage answers them (503 without
 * a plan or Redis with failMode closed, 401 for a key the store no longer accepts).
 */
export function answerQuota(limiter: KeyLimiter, reread?: RequestHandler): RequestHandler {
  const answer = (req: Request, res: Response, next: NextFunction, o: QuotaOutcome): void => {
    if (o.kind === 'no_plan') return sendError(res, 'service_unavailable', 'This API key has no usable plan right now.');
    if (o.kind === 'unavailable') return sendError(res, 'service_unavailable', 'Rate limits cannot be read right now. Retry shortly.');
    if (o.kind === 'invalid_key' && reread && req.ctx.caller?.consumer) return readAgain(req, res, next, reread);
    if (o.kind === 'invalid_key') return disownKey(req, res, next);
    const { snapshot: s, request, now } = o;
    setWindowHeaders(res, request, s.windows, now);
    res.setHeader('cache-control', 'no-store');
    const listed = (w: RateWindow, mode: string) => ({
      name: w.name,
      limit: w.limit,
      remaining: w.remaining,
      resetAt: new Date(now + w.resetMs).toISOString(),
      mode,
    });
    res.status(200).json({
      // The plan the windows were worked out from: for a key of a consumer, the consumer's.
      plan: o.plan,
      // Every window with its mode, the shadow ones too (the headers show only the enforced), then the candidate
      // limits, each on its window's count.
      windows: [
        ...request.windows.map((w, i) => listed(rateWindow(w, s.windows[i]!), w.mode)),
        ...request.candidates.map((c) => listed(rateWindow(c, s.windows[c.of]!), 'shadow')),
      ],
      banned: s.banMs > 0 ? { until: new Date(now + s.banMs).toISOString() } : null,
    });
  };
  return function answerQuotaStage(req, res, next) {
    limiter
      .quota(req.ctx.caller!, req.ctx)
      .then((o) => answer(req, res, next, o))
      .catch(next);
  };
}

/**
 * A key of a consumer the limit script did not find in its consumer's copy of its keys: revoked, or moved to another
 * consumer (or detached) since this instance cached it, the change message not here yet. The script's answer already
 * dropped the cached copy, so `reread` (authentication and every check after it, then the limit check without a
 * second retry) reads the record again: a moved key is checked, and counted, as its new consumer's from this very
 * request; a revoked one is answered 401 by it. Once per request, and only on this refusal: the usual path is unchanged.
 */
function readAgain(req: Request, res: Response, next: NextFunction, reread: RequestHandler): void {
  req.ctx.caller = undefined;
  void reread(req, res, next);
}

/** A window as it stands (remaining: limit less points used). */
function rateWindow(w: Pick<WindowSpec, 'name' | 'limit' | 'lengthMs'>, state: WindowState): RateWindow {
  return { name: w.name, limit: w.limit, remaining: Math.max(0, w.limit - state.used), resetMs: state.resetMs, windowSeconds: w.lengthMs / 1000 };
}

/**
 * The rate-limit headers of a request's enforced windows as they stand: a window in shadow mode or a candidate limit
 * is never shown (a client must not slow down for a limit not in force); none enforced, no such headers.
 */
function setWindowHeaders(res: Response, request: LimitRequest, states: readonly WindowState[], now: number): void {
  const { shown } = request;
  if (shown.length === 0) return;
  const windows: RateWindow[] = [];
  for (const i of shown) windows.push(rateWindow(request.windows[i]!, states[i]!));
  setRateLimitHeaders(res, windows, request.policy, now, request.rateLimitItems);
}

/** The names of the windows a refusal found short, as its message says them: "minute", "minute and store:day". */
function shortNames(request: LimitRequest, short: number): string {
  const names = request.windows.filter((w, i) => w.mode === 'enforce' && short & (1 << i)).map((w) => w.name);
  return names.join(' and ');
}
