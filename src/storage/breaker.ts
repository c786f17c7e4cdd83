// A circuit breaker in front of Redis: after a failure, calls fail at once for `cooldownMs` instead of each
// waiting out commandTimeoutMs on a dead or hung server; then one probe call decides whether it closes again.
import type { Clock } from '../clock.js';

export class BreakerOpenError extends Error {
  constructor() {
    super('redis circuit breaker is open');
  }
}

export type BreakerState = 'closed' | 'open';

export class Breaker {
  private openedAt = 0;
  private open = false;
  private probing = false;
  private readonly listeners: Array<(state: BreakerState, reason?: string) => void> = [];

  constructor(
    private readonly clock: Clock,
    private readonly cooldownMs: number,
    /** Tells whether the client could even try (ioredis status "ready"); a disconnected client keeps it open. */
    private readonly available: () => boolean = () => true,
  ) {}

  get state(): BreakerState {
    return this.open ? 'open' : 'closed';
  }

  onChange(fn: (state: BreakerState, reason?: string) => void): void {
    this.listeners.push(fn);
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (!this.available()) {
      this.trip('redis not connected');
      throw new BreakerOpenError();
    }
    if (this.open) {
      // One caller probes after the cool-down; the rest keep failing fast until it answers.
      if (this.probing || this.clock.now() - this.openedAt < this.cooldownMs) throw new BreakerOpenError();
      this.probing = true;
    }
    try {
      const result = await fn();
      this.close();
      return result;
    } catch (err) {
      this.trip((err as Error).message);
      throw err;
    } finally {
      this.probing = false;
    }
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
