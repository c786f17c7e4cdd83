// A circuit breaker in front of Redis: after a failure, calls fail at once for `cooldownMs` instead of each
// waiting out commandTimeoutMs on a dead or hung server; then one probe call decides whether it closes again.
// A timeout that came while this process was running late (its event loop behind, while Redis answered) is overload,
// not a Redis failure: it is reported, but does not open the breaker. Nor does an error reply caused by the data a
// call met (a script error over a corrupt record, WRONGTYPE): Redis answered, and that is one key's problem, not an
// outage.
import { ReplyError } from 'ioredis';
import type { Clock } from '../util/clock.js';
import { DeadlineError } from '../util/deadline.js';
import { COMMAND_TIMED_OUT, CommandTimeoutError } from './command-deadline.js';
import { TRANSIENT_REPLY, writeRefusal } from './memory-policy.js';

export class BreakerOpenError extends Error {
  constructor() {
    super('redis circuit breaker is open');
  }
}

export type BreakerState = 'closed' | 'open';

/** Why a call timed out: Redis did not answer in time, or this process ran late while Redis was answering. */
export type TimeoutCause = 'redis' | 'overload';

export interface BreakerOptions {
  /** The time a call is given unless run() says otherwise: redis.commandTimeoutMs. Without it, no call is judged. */
  budgetMs?: number;
  /** Monotonic milliseconds, to time calls (performance.now). */
  monotonic?: () => number;
  /** A count that grows whenever the Redis connection reads bytes (its socket's bytesRead). */
  bytesRead?: () => number;
}

export class Breaker {
  private openedAt = 0;
  private open = false;
  private probing = false;
  private readonly listeners: Array<(state: BreakerState, reason?: string) => void> = [];
  private readonly timeoutListeners: Array<(cause: TimeoutCause, lateMs: number, budgetMs: number) => void> = [];
  private readonly budgetMs: number | undefined;
  private readonly monotonic: () => number;
  private readonly bytesRead: (() => number) | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly cooldownMs: number,
    /** Tells whether the client could even try (ioredis status "ready"); a disconnected client keeps it open. */
    private readonly available: () => boolean = () => true,
    opts: BreakerOptions = {},
  ) {
    this.budgetMs = opts.budgetMs;
    this.monotonic = opts.monotonic ?? (() => performance.now());
    this.bytesRead = opts.bytesRead;
  }

  get state(): BreakerState {
    return this.open ? 'open' : 'closed';
  }

  onChange(fn: (state: BreakerState, reason?: string) => void): void {
    this.listeners.push(fn);
  }

  /** Every timed-out call, with its cause and how late (ms past its budget) it failed. */
  onTimeout(fn: (cause: TimeoutCause, lateMs: number, budgetMs: number) => void): void {
    this.timeoutListeners.push(fn);
  }

  /** `budgetMs`: the time `fn` was given, when less than the default (what a key lookup left of a request's). */
  async run<T>(fn: () => Promise<T>, budgetMs = this.budgetMs): Promise<T> {
    if (!this.available()) {
      this.trip('redis not connected');
      throw new BreakerOpenError();
    }
    let probe = false;
    if (this.open) {
      // One caller probes after the cool-down; the rest keep failing fast until it answers.
      if (this.probing || this.clock.now() - this.openedAt < this.cooldownMs) throw new BreakerOpenError();
      this.probing = true;
      probe = true;
    }
    const started = budgetMs === undefined ? 0 : this.monotonic();
    try {
      const result = await fn();
      this.close();
      return result;
    } catch (err) {
      if (budgetMs !== undefined && isTimeout(err)) {
        // A command's own deadline says how late its last timer fired (it may have given Redis a second window);
        // any other timeout is timed here, from the start of the call.
        const lateMs = err instanceof CommandTimeoutError ? err.lateMs : this.monotonic() - started - budgetMs;
        const cause = (await this.overloaded(lateMs, budgetMs)) ? 'overload' : 'redis';
        for (const l of this.timeoutListeners) l(cause, lateMs, budgetMs);
        if (cause === 'overload') throw err;
      }
      if (answeredAboutData(err)) {
        // Redis is up and answering: as good as a success for the breaker's state (a probe that meets one closes it).
        this.close();
        throw err;
      }
      this.trip((err as Error).message);
      throw err;
    } finally {
      // Only the probe ends probing: a call that started before the breaker opened may finish while the probe is
      // still out, and clearing the flag then would let a second probe through.
      if (probe) this.probing = false;
    }
  }

  /**
   * Whether a timed-out call failed because this process was behind rather than Redis. Timers fire in the timers
   * phase, before the poll phase reads sockets, so under event-loop lag a timeout can come due with answers already
   * in the socket. The call's own answer, had it come, was read before the call failed (the command deadline, and
   * withDeadline when its timer was late, let the poll phase run first), so it did not come in time; but a process
   * this late is no witness that Redis failed. Signs of that:
   * - the timer fired more than half the budget late, which only a stalled event loop explains;
   * - the timer was off by more than a tenth of the budget (late; or early, which happens when the command was sent
   *   late in a long loop turn, since Node arms timers on the time the turn started) and, letting the poll phase
   *   run once (one setImmediate), the connection reads bytes: answers were waiting while the timer fired, so
   *   Redis was answering. A timer on time in a healthy process says Redis itself was slow, even if answers to
   *   other commands are still trickling in.
   * A hung Redis sends nothing, and its timeouts fire on time in a healthy process. A Redis that hangs while this
   * process is also overloaded opens the breaker once the process catches up.
   */
  private async overloaded(lateMs: number, budgetMs: number): Promise<boolean> {
    if (lateMs > budgetMs / 2) return true;
    if (!this.bytesRead || Math.abs(lateMs) <= Math.max(2, budgetMs / 10)) return false;
    const before = this.bytesRead();
    await new Promise<void>((resolve) => setImmediate(resolve));
    return this.bytesRead() > before;
  }

  /** Marks Redis as failed (also used when a connection drops). */
  trip(reason: string): void {
    this.openedAt = this.clock.now();
    if (!this.open) {
      this.open = true;
      for (const fn of this.listeners) fn('open', reason);
    }
  }

  close(): void {
    if (this.open) {
      this.open = false;
      for (const fn of this.listeners) fn('closed');
    }
  }
}

/**
 * An error reply about the data the call met, not about Redis's ability to serve: anything but a write refusal
 * (OOM, READONLY, MISCONF, NOPERM: degraded mode on purpose) or a reply that says Redis is busy or failing over.
 */
function answeredAboutData(err: unknown): boolean {
  if (!(err instanceof ReplyError)) return false;
  const message = (err as Error).message;
  return writeRefusal(message) === undefined && !TRANSIENT_REPLY.test(message);
}

/** A deadline's timeout: withDeadline's, a command deadline's, or (same message) ioredis's own commandTimeout's. */
function isTimeout(err: unknown): boolean {
  return err instanceof DeadlineError || err instanceof CommandTimeoutError || (err instanceof Error && err.message === COMMAND_TIMED_OUT);
}
