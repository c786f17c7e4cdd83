// One instance of a backend service: its address, keep-alive pool, and what the gateway knows of its health: the
// requests in flight on it (least-requests), failures in a row (passive ejection), the active checks' verdict, and its
// last errors (the read-only snapshot). A target keeps this state across a reload for as long as its URL stays; new
// TLS material (a service's tls block, its files re-read) gives it a new pool, the old one finishing what it carries.
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { TargetTlsMaterial } from '../config/tls-files.js';

export interface TargetSettings {
  maxSockets: number;
  /** The service's tls block, read: its CA, client certificate, servername and verify. Else the system's CAs. */
  tls?: TargetTlsMaterial | undefined;
}

/** Errors kept per target for the snapshot: the last few, newest last. */
const RECENT_ERRORS = 5;

export interface TargetError {
  at: string;
  kind: string;
}

export class Target {
  readonly url: string;
  agent: HttpAgent;
  tls: TargetTlsMaterial | undefined;
  private readonly maxSockets: number;
  weight: number;
  /** Tries on this target that have not ended. */
  active = 0;
  /** Failed requests in a row (passive); a success resets it. */
  consecutiveFailures = 0;
  /** The registry's clock time until which the target rests after passive ejection (0: not ejected). */
  ejectedUntil = 0;
  /** When its last passive rest began (only checks sent after it may end that rest). */
  ejectedAt = 0;
  /** The active checks' verdict (true until checks say otherwise, and always without checks). */
  checkHealthy = true;
  checkPasses = 0;
  checkFailures = 0;
  /** Taken out of its service by a reload: picks never choose it; its pool closes once its last request ends. */
  removed = false;
  /** Smooth weighted round-robin's running weight (nginx's algorithm). */
  current = 0;
  readonly recentErrors: TargetError[] = [];

  constructor(url: string, weight: number, settings: TargetSettings) {
    this.url = url;
    this.weight = weight;
    this.maxSockets = settings.maxSockets;
    this.tls = settings.tls;
    this.agent = this.newAgent();
  }

  private newAgent(): HttpAgent {
    const opts = {
      keepAlive: true,
      maxSockets: this.maxSockets,
      maxFreeSockets: Math.min(this.maxSockets, 64),
      // Free sockets are dropped before a typical backend's own 5 s keep-alive timeout closes them under us.
      timeout: 4_000,
      scheduling: 'lifo' as const,
    };
    return new URL(this.url).protocol === 'https:' ? new HttpsAgent({ ...opts, ...this.tls?.options }) : new HttpAgent(opts);
  }

  /**
   * New TLS material (a reload): new tries go out on a new pool made with it. The old pool keeps no socket once its
   * request ends (an agent without keepAlive closes a freed socket), so requests in flight finish where they are.
   */
  useTls(tls: TargetTlsMaterial | undefined): void {
    if (tls?.id === this.tls?.id) return;
    const old = this.agent;
    this.tls = tls;
    this.agent = this.newAgent();
    (old as HttpAgent & { keepAlive: boolean }).keepAlive = false;
    for (const sockets of Object.values(old.freeSockets)) for (const s of sockets ?? []) s.destroy();
  }

  /** Whether it may be picked now: not removed, passed its checks, not resting. */
  available(now: number): boolean {
    return !this.removed && this.checkHealthy && this.ejectedUntil <= now;
  }

  noteError(kind: string, now: number): void {
    this.recentErrors.push({ at: new Date(now).toISOString(), kind });
    if (this.recentErrors.length > RECENT_ERRORS) this.recentErrors.shift();
  }

  /** A try started on it; returns the function that ends it (once). */
  begin(): () => void {
    this.active++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.active--;
      if (this.removed && this.active === 0) this.agent.destroy();
    };
  }

  /** Removed by a reload: requests in flight finish on their sockets; the pool closes when the last one ends. */
  retire(): void {
    this.removed = true;
    if (this.active === 0) this.agent.destroy();
  }
}
