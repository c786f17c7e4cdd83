// Redis's memory limit as Tollgate meets it. Tollgate's Redis data is state, not a cache: a maxmemory-policy that
// evicts deletes key records (allkeys-*: customers get 401 for good) or bans and rate windows (volatile-*: they
// carry TTLs, so bans and quotas silently reset). Only noeviction is safe; it refuses writes when Redis is full,
// which the limit check meets as an error (degraded mode). This file watches the policy (start-up, every minute,
// each reconnect) and gives /readyz its Redis check: a write probe plus the policy, each failure named.
import { ReplyError } from 'ioredis';
import type { RedisCommands } from './redis.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { NotReadyError, type ReadinessCheck } from '../observability/ops.js';
import type { Keyspace } from './keyspace.js';

/** How often the policy is read again: an operator (or a managed service) can change it on a running Redis. */
export const MEMORY_POLICY_CHECK_MS = 60_000;

/** The one policy under which Redis never deletes a key to make room. */
const SAFE_POLICY = 'noeviction';

type PolicyState =
  /** Not read yet (Redis not reached so far). */
  | { kind: 'unknown' }
  /** Redis answered CONFIG GET with a refusal: renamed or forbidden, as managed services often do. */
  | { kind: 'unreadable' }
  | { kind: 'read'; policy: string };

/** What a policy deletes under memory pressure, for the log line. */
function evictionDamage(policy: string): string {
  if (policy.startsWith('allkeys-')) return 'any key: API key records (their customers get 401 until a new key is issued), bans and rate windows';
  if (policy.startsWith('volatile-')) return 'keys with a TTL: bans, strikes and rate windows (bans and quotas silently reset)';
  return 'keys Tollgate needs';
}

/** The same, short, for the /readyz body. */
function evictionVictims(policy: string): string {
  if (policy.startsWith('allkeys-')) return 'API keys, bans and rate windows';
  if (policy.startsWith('volatile-')) return 'bans and rate windows';
  return 'keys Tollgate needs';
}

/**
 * Names a Redis refusal to write from its error message (OOM: maxmemory reached under noeviction; READONLY: a
 * replica; MISCONF: a failed snapshot with stop-writes-on-bgsave-error; NOPERM: an ACL), or undefined for anything
 * else (a timeout, a dropped connection). Fixed wording: it goes into /readyz bodies and log messages.
 */
export function writeRefusal(message: string): string | undefined {
  if (message.startsWith('OOM ')) return 'redis refuses writes (OOM: maxmemory reached)';
  if (message.startsWith('READONLY ')) return 'redis refuses writes (READONLY: a read-only replica)';
  if (message.startsWith('MISCONF ')) return 'redis refuses writes (MISCONF: it cannot persist to disk)';
  if (message.startsWith('NOPERM ')) return "redis refuses writes (NOPERM: the user's ACL forbids them)";
  return undefined;
}

/** Error replies that say Redis is busy right now (loading, running a long script, failing over), not that CONFIG is forbidden. */
export const TRANSIENT_REPLY = /^(LOADING|BUSY|TRYAGAIN|MASTERDOWN|CLUSTERDOWN) /;

export interface MemoryPolicyWatcherOptions {
  client: RedisCommands;
  /**
   * Every primary to ask (a cluster's: CONFIG GET carries no key, so the client alone would ask one node it picks);
   * default: the client.
   */
  primaries?: () => ReadonlyArray<Pick<RedisCommands, 'config'>>;
  /** redis.allowEviction: an evicting policy is then a warning, not a readiness failure. */
  allowEviction: boolean;
  logger: Logger;
  metrics: Metrics;
  /** The Redis URL without its password, for log lines. */
  where: string;
  /** Period of the re-check (tests shorten it). */
  intervalMs?: number;
}

export class MemoryPolicyWatcher {
  private state: PolicyState = { kind: 'unknown' };
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: MemoryPolicyWatcherOptions) {}

  /** Starts the periodic re-check; it never keeps the process alive. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), this.opts.intervalMs ?? MEMORY_POLICY_CHECK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** False once Redis refused CONFIG GET: /readyz then stops asking on every call (the periodic check still does). */
  get readable(): boolean {
    return this.state.kind !== 'unreadable';
  }

  /** Why Redis is unfit for Tollgate because of its policy, for /readyz; undefined when it is fine or allowed. */
  get problem(): string | undefined {
    const s = this.state;
    if (s.kind !== 'read' || s.policy === SAFE_POLICY || this.opts.allowEviction) return undefined;
    return `maxmemory-policy ${s.policy} may evict ${evictionVictims(s.policy)}; Tollgate needs ${SAFE_POLICY}`;
  }

  /** Reads the policy once, on every primary (the first that may evict decides). Never rejects. */
  async check(): Promise<void> {
    const primaries = this.opts.primaries?.() ?? [this.opts.client];
    let reply: unknown;
    try {
      const replies = await Promise.all(primaries.map((p) => p.config('GET', 'maxmemory-policy')));
      reply = replies.find((r) => Array.isArray(r) && r[1] !== SAFE_POLICY) ?? replies[0];
    } catch (err) {
      // Only a refusal of CONFIG itself (renamed: unknown command; ACL: NOPERM) makes the policy unreadable; a
      // transient reply or no answer at all teaches nothing (the breaker reports an outage).
      const message = (err as Error).message;
      if (err instanceof ReplyError && !TRANSIENT_REPLY.test(message)) this.record({ kind: 'unreadable' }, message);
      return;
    }
    const policy = Array.isArray(reply) ? reply[1] : undefined;
    // A server that answers CONFIG GET without this parameter (some Redis-compatible ones) cannot be judged either.
    if (typeof policy !== 'string' || policy === '') this.record({ kind: 'unreadable' }, 'no maxmemory-policy in the CONFIG GET reply');
    else this.record({ kind: 'read', policy });
  }

  /** Keeps the new state and reports it: the gauge every time, a log line only when the state changed. */
  private record(next: PolicyState, error?: string): void {
    const prev = this.state;
    this.state = next;
    const unsafe = next.kind === 'read' && next.policy !== SAFE_POLICY;
    this.opts.metrics.evictionUnsafe.set(unsafe ? 1 : 0);
    if (sameState(prev, next)) return;
    const { logger, where, allowEviction } = this.opts;
    if (next.kind === 'unreadable') {
      logger.warn(
        { redis: where, error },
        `redis maxmemory-policy could not be checked (CONFIG GET refused): make sure it is ${SAFE_POLICY}, or keys, bans and quotas may be evicted`,
      );
    } else if (next.kind === 'read' && unsafe) {
      const msg = `redis maxmemory-policy ${next.policy} may evict ${evictionDamage(next.policy)}; Tollgate needs ${SAFE_POLICY}`;
      if (allowEviction) logger.warn({ redis: where, policy: next.policy, allowEviction }, `${msg} (redis.allowEviction is true: the gateway stays ready)`);
      else logger.error({ redis: where, policy: next.policy, allowEviction }, `${msg}: /readyz answers 503 until it is set`);
    } else if (next.kind === 'read' && prev.kind !== 'unknown') {
      // Back to noeviction after a reported problem: say it is over. (Read first at start-up: nothing to say.)
      logger.info({ redis: where, policy: next.policy }, `redis maxmemory-policy is ${SAFE_POLICY} now`);
    }
  }
}

function sameState(a: PolicyState, b: PolicyState): boolean {
  return a.kind === b.kind && (a.kind !== 'read' || a.policy === (b as { policy: string }).policy);
}

/**
 * /readyz's Redis check: a write (a PING would pass on a full Redis that refuses every limit check) and, in the same
 * round trip, the policy; on a cluster also a PING to every primary, a silent one named by its slots. Ready means Redis takes writes and cannot evict Tollgate's state (or the operator allowed it).
 */
export function redisReadiness(
  client: RedisCommands,
  keyspace: Keyspace,
  policy: MemoryPolicyWatcher,
  silentPrimaries: (timeoutMs: number) => Promise<string[]> = async () => [],
): ReadinessCheck {
  return {
    name: 'redis',
    async check() {
      const write = client.set(keyspace.readinessProbe(), '1', 'PX', 5000).then(
        () => undefined,
        (err: unknown) => err as Error,
      );
      const policyRead = policy.readable ? policy.check() : undefined;
      // On a cluster every primary serves some keys: each one must answer, not only the probe key's. Its answer comes
      // within 500 ms and is given at once: a probe whose slot is the silent primary's may still be waiting.
      const silent = await silentPrimaries(500);
      if (silent.length > 0) throw new NotReadyError(`no answer from ${silent.join(' and from ')}`);
      const [writeError] = await Promise.all([write, policyRead]);
      if (writeError) {
        // Redis answered and refused the write: name why. Anything else (a timeout, no connection, a busy Redis) is
        // plain "down", its message kept out of the body.
        const refusal = writeError instanceof ReplyError ? writeRefusal(writeError.message) : undefined;
        throw refusal ? new NotReadyError(refusal) : writeError;
      }
      const problem = policy.problem;
      if (problem) throw new NotReadyError(problem);
    },
  };
}
