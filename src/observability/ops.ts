// The operations endpoints outside /v1: liveness, readiness (naming what is down) and Prometheus metrics.
import express, { type Request, type Response } from 'express';
import { withDeadline } from '../util/deadline.js';
import { sendError } from '../http/errors.js';
import type { OutboundClient } from '../outbound/client.js';
import type { Metrics } from './metrics.js';

export interface ReadinessCheck {
  /** What is checked, as named in the /readyz answer: "redis", "upstream". */
  name: string;
  /**
   * Resolves when the dependency answers; rejects (or times out) when it does not. A NotReadyError rejection names
   * the problem in the 503 body; any other error only marks the dependency down (its message may hold addresses).
   */
  check(): Promise<void>;
  /** What the /readyz body shows of it besides up or down, under its own keys (the services and their targets). */
  details?(): Record<string, unknown>;
  /** Whether it is checked now (the config in force decides: the upstream check only without services); default yes. */
  applies?(): boolean;
}

/** A dependency answers but is unfit to serve; `reason` is shown in the /readyz body, so it never holds an address or secret. */
export class NotReadyError extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}

export function healthz(_req: Request, res: Response): void {
  res.status(200).json({ status: 'ok' });
}

export function readyz(checks: readonly ReadinessCheck[], timeoutMs = 1000) {
  return async function readyzHandler(_req: Request, res: Response): Promise<void> {
    const results = await Promise.all(
      checks
        .filter((c) => c.applies?.() ?? true)
        .map(async (c) => {
          try {
            await withDeadline(c.check(), timeoutMs, c.name);
            return { name: c.name, state: 'up' as const };
          } catch (err) {
            return { name: c.name, state: 'down' as const, reason: err instanceof NotReadyError ? err.reason : undefined };
          }
        }),
    );
    const down = results.filter((r) => r.state === 'down');
    const checksBody = Object.fromEntries(results.map((r) => [r.name, r.state]));
    const details = Object.assign({}, ...checks.map((c) => c.details?.() ?? {})) as Record<string, unknown>;
    if (down.length === 0) {
      res.status(200).json({ status: 'ready', checks: checksBody, ...details });
      return;
    }
    const reasons = down.filter((r) => r.reason !== undefined).map((r) => [r.name, r.reason!] as const);
    const why = reasons.length === 0 ? '' : ` (${reasons.map(([n, r]) => (down.length === 1 ? r : `${n}: ${r}`)).join('; ')})`;
    res.status(503).json({
      code: 'service_unavailable',
      message: `Not ready: ${down.map((r) => r.name).join(', ')} ${down.length === 1 ? 'is' : 'are'} down${why}.`,
      status: 503,
      checks: checksBody,
      ...(reasons.length > 0 ? { reasons: Object.fromEntries(reasons) } : {}),
      ...details,
    });
  };
}

export function metricsHandler(metrics: Metrics) {
  return async function metricsEndpoint(_req: Request, res: Response): Promise<void> {
    res.setHeader('content-type', metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  };
}

/**
 * Readiness of an HTTP upstream: any HTTP answer counts (even 404, or a redirect, which is not followed); a refused or
 * silent one does not. Its body is not read.
 */
export function httpUpstreamCheck(client: OutboundClient, url: string, path: string, timeoutMs: number, applies?: () => boolean): ReadinessCheck {
  const target = new URL(path, url).toString();
  return {
    name: 'upstream',
    ...(applies ? { applies } : {}),
    async check() {
      await client.request({ url: target, headers: { 'user-agent': 'tollgate-readiness-check' }, timeoutMs, maxBodyBytes: 0 });
    },
  };
}

/**
 * Readiness of the services: lists each with its healthy and total targets, and is down only when no service has a
 * healthy target (one service out is that service's 503 no_healthy_upstream, not the whole gateway's).
 */
export function servicesCheck(snapshot: () => Array<{ name: string; healthy: number; total: number }>, applies: () => boolean): ReadinessCheck {
  return {
    name: 'services',
    applies,
    check() {
      const all = snapshot();
      if (all.length > 0 && all.every((s) => s.healthy === 0)) return Promise.reject(new NotReadyError('no service has a healthy target'));
      return Promise.resolve();
    },
    details: () => ({ services: Object.fromEntries(snapshot().map((s) => [s.name, { healthy: s.healthy, total: s.total }])) }),
  };
}

/**
 * The ops listener's app (`ops` in the config): /healthz, /readyz and /metrics on a port of their own, usually
 * loopback or a private interface, so the public gateway port does not expose what Redis and the upstream are doing
 * or the traffic figures. Anything else: 404 not_found.
 */
export function buildOpsApp(metrics: Metrics, readiness: readonly ReadinessCheck[]): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', false);
  app.get('/healthz', healthz);
  app.get('/readyz', readyz(readiness));
  app.get('/metrics', metricsHandler(metrics));
  app.use((_req: Request, res: Response) => sendError(res, 'not_found'));
  return app;
}
