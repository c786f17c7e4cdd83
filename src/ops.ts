// The operations endpoints outside /v1: liveness, readiness (naming what is down) and Prometheus metrics.
import express, { type Request, type Response } from 'express';
import { withDeadline } from './deadline.js';
import { sendError } from './errors.js';
import type { Metrics } from './metrics.js';

export interface ReadinessCheck {
  /** What is checked, as named in the /readyz answer: "redis", "upstream". */
  name: string;
  /** Resolves when the dependency answers; rejects (or times out) when it does not. */
  check(): Promise<void>;
}

export function healthz(_req: Request, res: Response): void {
  res.status(200).json({ status: 'ok' });
}

export function readyz(checks: readonly ReadinessCheck[], timeoutMs = 1000) {
  return async function readyzHandler(_req: Request, res: Response): Promise<void> {
    const results = await Promise.all(
      checks.map(async (c) => {
        try {
          await withDeadline(c.check(), timeoutMs, c.name);
          return [c.name, 'up'] as const;
        } catch {
          return [c.name, 'down'] as const;
        }
      }),
    );
    const down = results.filter(([, s]) => s === 'down').map(([n]) => n);
    const checksBody = Object.fromEntries(results);
    if (down.length === 0) {
      res.status(200).json({ status: 'ready', checks: checksBody });
      return;
    }
    res.status(503).json({
      code: 'service_unavailable',
      message: `Not ready: ${down.join(', ')} ${down.length === 1 ? 'is' : 'are'} down.`,
      status: 503,
      checks: checksBody,
    });
  };
}

export function metricsHandler(metrics: Metrics) {
  return async function metricsEndpoint(_req: Request, res: Response): Promise<void> {
    res.setHeader('content-type', metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  };
}

/** Readiness of an HTTP upstream: any HTTP answer counts (even 404); a refused or silent one does not. */
export function httpUpstreamCheck(url: string, path: string, timeoutMs: number): ReadinessCheck {
  const target = new URL(path, url).toString();
  return {
    name: 'upstream',
    async check() {
      const res = await fetch(target, { signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
      await res.body?.cancel();
    },
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
