// Active health checks: every gateway instance asks each target of a service with `healthCheck` for its path every
// intervalMs (GET, on a connection of its own, not the request pool). An answer below 500 within timeoutMs passes;
// no answer in time, a refused connection or a 5xx fails. unhealthyAfter failures in a row take the target out,
// healthyAfter passes in a row bring it back. Cost: N instances x M targets checks per interval, each a short GET.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Target } from './target.js';

export interface HealthCheckSettings {
  path: string;
  intervalMs: number;
  timeoutMs: number;
  unhealthyAfter: number;
  healthyAfter: number;
}

/** What a check found, told to the owner (metrics, logs). */
export type CheckListener = (target: Target, healthy: boolean, changed: boolean) => void;

/** One target's checks: a timer (unref'd: it never keeps the process up) and at most one check in flight. */
export class HealthChecker {
  private timer: NodeJS.Timeout | undefined;
  private inFlight = false;

  constructor(
    readonly target: Target,
    private settings: HealthCheckSettings,
    private readonly onResult: CheckListener,
  ) {}

  start(): void {
    this.stop();
    this.timer = setInterval(() => void this.checkOnce(), this.settings.intervalMs);
    this.timer.unref();
    void this.checkOnce();
  }

  /** New settings from a reload; the target's verdict and counts stay. */
  update(settings: HealthCheckSettings): void {
    const restart = settings.intervalMs !== this.settings.intervalMs;
    this.settings = settings;
    if (restart) this.start();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  async checkOnce(): Promise<void> {
    if (this.inFlight) return;
    this.inFlight = true;
    try {
      this.record(await probe(this.target.url, this.settings.path, this.settings.timeoutMs));
    } finally {
      this.inFlight = false;
    }
  }

  private record(passed: boolean): void {
    const t = this.target;
    const s = this.settings;
    const was = t.checkHealthy;
    if (passed) {
      t.checkFailures = 0;
      t.checkPasses++;
      if (!t.checkHealthy && t.checkPasses >= s.healthyAfter) t.checkHealthy = true;
      // Back in by its checks: a passive rest it was serving ends too.
      if (t.checkHealthy && !was) t.ejectedUntil = 0;
    } else {
      t.checkPasses = 0;
      t.checkFailures++;
      if (t.checkHealthy && t.checkFailures >= s.unhealthyAfter) t.checkHealthy = false;
      t.noteError('health_check', Date.now());
    }
    this.onResult(t, t.checkHealthy, t.checkHealthy !== was);
  }
}

/** One GET of the target's base URL joined with path; true for an answer below 500 in time. */
function probe(base: string, path: string, timeoutMs: number): Promise<boolean> {
  const url = new URL(base);
  const basePath = url.pathname.endsWith('/') ? url.pathname.slice(0, -1) : url.pathname;
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const req = request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port || undefined,
        path: basePath + path,
        method: 'GET',
        agent: false,
        headers: { 'user-agent': 'tollgate-health-check' },
      },
      (res) => {
        res.resume();
        resolve((res.statusCode ?? 500) < 500);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}
