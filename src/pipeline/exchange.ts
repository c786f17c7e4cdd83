// The per-request proxy state (req.ctx.proxy): where a request stands among its tries. In a module of its own so
// that the request context can name its type without importing the proxy, which reads the context.
import type { RequestBody } from './request-body.js';
import type { ExchangeState } from './proxy-rules.js';
import type { UpstreamTry } from './upstream-try.js';
import type { Service } from '../routing/services.js';
import type { Target } from '../routing/target.js';

/** The per-request proxy state (req.ctx.proxy): where the request stands among its tries. */
export class ProxyExchange implements ExchangeState {
  /** The target of the current try, and every target tried so far (a retry goes to another while there is one). */
  target: Target | undefined = undefined;
  readonly tried = new Set<Target>();
  current: UpstreamTry | undefined = undefined;
  /** Tries made so far, every one counted (a retry on the same target, a stale socket's re-send). */
  tries = 0;
  retries = 0;
  staleRetries = 0;
  reached = false;
  clientGone = false;
  /** Set as the deadline passes (RequestBody.awaitingClient then): later chunks cannot change whose slowness it was. */
  clientBodyPending = false;
  /** The gateway has answered, or is streaming the response: no more tries, no timers. */
  done = false;
  body: RequestBody | undefined = undefined;
  deadlineTimer: NodeJS.Timeout | undefined = undefined;
  tryTimer: NodeJS.Timeout | undefined = undefined;

  constructor(
    readonly service: Service,
    /** Clock time by which response headers must have arrived: timeoutMs from the proxy stage. */
    readonly deadlineAt: number,
    readonly repeatable: boolean,
    /** process.hrtime.bigint() at the proxy stage (the upstream duration metric). */
    readonly startedAt: bigint,
  ) {}

  /**
   * No further try: timers cleared and, unless the response is being streamed (the target may still be reading the
   * rest of the body), the body no longer read for the proxy.
   */
  finish(stopBody = true): void {
    this.done = true;
    clearTimeout(this.deadlineTimer);
    clearTimeout(this.tryTimer);
    if (stopBody) this.body?.stop();
  }
}
