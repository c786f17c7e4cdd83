// A public route's own limits (routes[].limits { perMinute, perDay } with auth: none), counted per client address for
// requests without a valid key, beside the global anonymous limit. Why the key limit script rather than another
// rate-limiter-flexible limiter: its windows take a route's cost, tell enforce from shadow, and answer every window's
// count and reset in one round trip, the same script call a keyed request makes; an address check reads no key
// record, no ban (bans are off for it) and writes no usage ledger, so it runs fewer commands than a keyed one.
// No Express here: the publicRouteLimits stage (src/pipeline/stages/limits.ts) turns outcomes into headers and 429s.
import type { Clock } from '../util/clock.js';
import type { Metrics } from '../observability/metrics.js';
import { BreakerOpenError, type Breaker } from '../storage/breaker.js';
import type { CompiledRoute } from '../routing/routes.js';
import type { Runtime, RuntimeConfig } from '../routing/runtime.js';
import { DAY_MS, MINUTE_MS } from '../util/time.js';
import type { MemoryLimiterStore } from './memory-store.js';
import type { BanPolicy, Decision, LimiterStore, LimitMode, LimitRequest, WindowSpec } from './types.js';
import { addressSubject } from './subject.js';
import { limitRequest } from './windows.js';

/** No ban for an address: the check neither reads nor writes one. */
const NO_BANS: BanPolicy = Object.freeze({ enabled: false, threshold: 1, windowSeconds: 1, durationsSeconds: [1], resetAfterSeconds: 1 });

/** A public route's address windows, named "<route>:minute" and "<route>:day" like a keyed route's. */
export function addressWindows(route: Pick<CompiledRoute, 'limitName' | 'addressLimits'>, mode: LimitMode): WindowSpec[] {
  const l = route.addressLimits;
  const out: WindowSpec[] = [];
  if (!l) return out;
  const name = route.limitName;
  if (l.perMinute !== undefined) out.push({ name: `${name}:minute`, suffix: `public:${name}:minute`, limit: l.perMinute, lengthMs: MINUTE_MS, mode });
  if (l.perDay !== undefined) out.push({ name: `${name}:day`, suffix: `public:${name}:day`, limit: l.perDay, lengthMs: DAY_MS, mode });
  return out;
}

export type PublicLimitOutcome =
  { kind: 'decided'; decision: Decision; request: LimitRequest; now: number } | { kind: 'cost_exceeds_limit'; window: WindowSpec; cost: number };

export interface PublicLimiterDeps {
  runtime: Runtime;
  clock: Clock;
  metrics: Metrics;
  /** The shared store, without a usage ledger (addresses have none); absent for a Redis-less gateway. */
  shared?: { store: LimiterStore; breaker: Breaker };
  /** The only store without Redis, and the fallback while Redis fails (as the anonymous limit's). */
  memory: MemoryLimiterStore;
}

export class PublicRouteLimiter {
  private requests = new WeakMap<CompiledRoute, LimitRequest>();
  private for: RuntimeConfig | undefined;

  constructor(private readonly deps: PublicLimiterDeps) {}

  /** The route's address windows at its cost, built once per route and config (a reload's limits and modes apply). */
  requestFor(route: CompiledRoute): LimitRequest {
    const current = this.deps.runtime.current;
    if (current !== this.for) {
      this.for = current;
      this.requests = new WeakMap();
    }
    let r = this.requests.get(route);
    if (!r) this.requests.set(route, (r = limitRequest(addressWindows(route, route.mode ?? current.config.limits.mode), route.cost)));
    return r;
  }

  /**
   * Counts one request of `client` (anonymousClientKey) to a public route with limits and decides: one store call, on
   * Redis through the breaker, in memory without Redis or while it fails (this instance alone meters it then).
   */
  async check(route: CompiledRoute, client: string): Promise<PublicLimitOutcome> {
    const request = this.requestFor(route);
    if (request.unpayable) return { kind: 'cost_exceeds_limit', window: request.unpayable, cost: request.cost };
    const { clock, metrics, shared, memory } = this.deps;
    // The address is anonymousClientKey's (an IP literal or an IPv6 /64, at most 24 characters).
    const subject = addressSubject(client);
    let decision: Decision;
    if (!shared) decision = await memory.check(subject, request, NO_BANS);
    else {
      try {
        decision = await shared.breaker.run(() => shared.store.check(subject, request, NO_BANS));
      } catch (err) {
        if (!(err instanceof BreakerOpenError)) metrics.redisErrors.inc({ op: 'public_limit' });
        decision = await memory.check(subject, request, NO_BANS);
      }
    }
    metrics.publicRouteDecisions.inc({ route: route.limitName, decision: decision.outcome === 'admitted' ? 'admitted' : 'refused' });
    return { kind: 'decided', decision, request, now: clock.now() };
  }
}
