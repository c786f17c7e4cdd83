// The rules of passive ejection and active checks as pure functions, tested as tables: which outcome of a try counts
// as a failure of the target (eject.on), whether one more target may be taken out of its service (never the last
// available one, never more than eject.maxPercent of them), and which statuses pass a health check.
import type { Target } from './target.js';

/** One entry of eject.on: "connect", "reset", "timeout", "5xx", or one status 500-599. */
export type EjectOutcome = 'connect' | 'reset' | 'timeout' | '5xx' | number;

export const DEFAULT_EJECT_ON: readonly EjectOutcome[] = ['connect', 'reset', 'timeout', 502, 503, 504];

/**
 * Whether a try's outcome counts toward ejecting its target. `kind` is what the proxy reports: "status_<code>",
 * "refused", "connect_timeout", "tls" (no TLS session: counted as could not connect), "reset", "bad_status" (a status
 * line it cannot pass on: counted as a reset, as Node's parse errors are), "timeout" (also "per_try_timeout"). An outcome the gateway cannot pin on the
 * target (an unknown kind, a status below 500) never counts: a customer's requests must not be able to take a
 * healthy target out by failing in ways the target did not cause.
 */
export function countsAsTargetFailure(kind: string | undefined, failed: boolean, on: readonly EjectOutcome[]): boolean {
  if (!failed) return false;
  const status = kind?.startsWith('status_') ? Number(kind.slice('status_'.length)) : undefined;
  if (status !== undefined) return status >= 500 && status <= 599 && (on.includes(status) || on.includes('5xx'));
  switch (kind) {
    case 'refused':
    case 'connect_timeout':
    case 'tls':
      return on.includes('connect');
    case 'reset':
    case 'bad_status':
      return on.includes('reset');
    case 'timeout':
    case 'per_try_timeout':
      return on.includes('timeout');
    default:
      return false;
  }
}

/**
 * Whether `target` may be ejected now: it is available (a resting target is not ejected again), another target stays
 * available, and the targets out (by checks, resting, and this one) stay within maxPercent of the service's targets.
 * Envoy's max_ejection_percent, without its "at least one host whatever the percentage": the limit is the operator's.
 */
export function mayEject(targets: readonly Target[], target: Target, now: number, maxPercent: number): boolean {
  if (!target.available(now)) return false;
  const available = targets.filter((t) => t.available(now)).length;
  if (available < 2) return false;
  const outAfter = targets.length - available + 1;
  return outAfter * 100 <= maxPercent * targets.length;
}

/** expectedStatuses as a test: each entry a status (204, "204") or an inclusive range ("200-399"). */
export function statusMatcher(expected: ReadonlyArray<number | string>): (status: number) => boolean {
  const ranges = expected.map((e): [number, number] => {
    if (typeof e === 'number') return [e, e];
    const [lo, hi = lo] = e.split('-').map(Number) as [number, number?];
    return [lo, hi];
  });
  return (status) => ranges.some(([lo, hi]) => status >= lo && status <= hi);
}
