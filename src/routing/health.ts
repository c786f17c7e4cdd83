// Active health checks: every gateway instance asks each target of a service with `healthCheck` for its path every
// intervalMs (GET, on a connection of its own that closes after the answer, not the request pool: each check shows a
// new connection can be made; sent by the gateway's OutboundClient). An answer in expectedStatuses (default 200-399)
// within timeoutMs passes; no answer in time, a refused connection or any other status fails. unhealthyAfter failures
// in a row take the target out, healthyAfter passes in a row bring it back, and a passing check ends a passive rest.
// Over https, a check is made with the service's TLS settings (its CA, client certificate, servername): a target whose
// certificate fails verification fails its checks. Cost: N instances x M targets checks per interval, each a short GET.
import { OutboundError, type OutboundClient } from '../outbound/client.js';
import { statusMatcher } from './ejection.js';
import type { Target } from './target.js';

export interface HealthCheckSettings {
  path: string;
  intervalMs: number;
  timeoutMs: number;
  unhealthyAfter: number;
  healthyAfter: number;
  /** Statuses that pass: each a status or an inclusive range ("200-399"). */
  expectedStatuses: ReadonlyArray<number | string>;
}

/**
 * What a check found, told to the owner (metrics, logs): the checks' verdict, whether it changed, and whether this
 * check ended a passive rest.
 */
export type CheckListener = (target: Target, healthy: boolean, changed: boolean, restEnded: boolean, reason?: string) => void;

/** One target's checks: a timer (unref'd: it never keeps the process up) and at most one check in flight. */
export class HealthChecker {
  private timer: NodeJS.Timeout | undefined;
  private inFlight = false;
  private passes: (status: number) => boolean;

  constructor(
    readonly target: Target,
    private settings: HealthCheckSettings,
    private readonly onResult: CheckListener,
    /** The registry's clock: a check ends a passive rest that began before it by the same time the rest was set. */
    private readonly now: () => number,
    private readonly client: OutboundClient,
  ) {
    this.passes = statusMatcher(settings.expectedStatuses);
  }

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
    this.passes = statusMatcher(settings.expectedStatuses);
    if (restart) this.start();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  async checkOnce(): Promise<void> {
    if (this.inFlight) return;
    this.inFlight = true;
    const startedAt = this.now();
    try {
      const answer = await probe(this.client, this.target, this.settings.path, this.settings.timeoutMs);
      const passed = typeof answer === 'number' && this.passes(answer);
      this.record(passed, startedAt, passed ? undefined : typeof answer === 'number' ? `status ${answer}` : answer);
    } finally {
      this.inFlight = false;
    }
  }

  private record(passed: boolean, startedAt: number, reason: string | undefined): void {
    const t = this.target;
    const s = this.settings;
    const was = t.checkHealthy;
    let restEnded = false;
    if (passed) {
      t.checkFailures = 0;
      t.checkPasses++;
      if (!t.checkHealthy && t.checkPasses >= s.healthyAfter) t.checkHealthy = true;
      // A target that answers its check as expected is serving: a passive rest ends (the failed requests that
      // started it may have been one customer's). Only a check sent after the rest began says so.
      const now = this.now();
      if (t.checkHealthy && t.ejectedUntil > now && startedAt >= t.ejectedAt) {
        t.ejectedUntil = 0;
        restEnded = true;
      }
    } else {
      t.checkPasses = 0;
      t.checkFailures++;
      if (t.checkHealthy && t.checkFailures >= s.unhealthyAfter) t.checkHealthy = false;
      t.noteError('health_check', this.now());
    }
    this.onResult(t, t.checkHealthy, t.checkHealthy !== was, restEnded, reason);
  }
}

/**
 * One GET of the target's base URL joined with path: its status, or why there was none ("timeout", the error's code:
 * ECONNREFUSED, or a TLS one such as UNABLE_TO_VERIFY_LEAF_SIGNATURE). The status is all a check reads: the body is
 * not waited for.
 */
async function probe(client: OutboundClient, target: Target, path: string, timeoutMs: number): Promise<number | string> {
  const url = new URL(target.url);
  const basePath = url.pathname.endsWith('/') ? url.pathname.slice(0, -1) : url.pathname;
  try {
    const res = await client.request({
      url: url.origin + basePath + path,
      headers: { 'user-agent': 'tollgate-health-check' },
      timeoutMs,
      ...(url.protocol === 'https:' && target.tls ? { tls: target.tls.options } : {}),
      maxBodyBytes: 0,
      connection: 'close',
    });
    return res.status;
  } catch (err) {
    if (!(err instanceof OutboundError)) return 'error';
    return err.kind === 'timeout' ? 'timeout' : (err.code ?? 'error');
  }
}
