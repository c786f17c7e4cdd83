// `Expect: 100-continue` (RFC 9110 §10.1.1), answered only once the request path has let the request through: the
// server marks a response whose client waits (awaitContinue), the proxy stage sends the 100 as it is about to read the
// body (continueIfExpected). A request refused on the way never has its body sent.
import type { ServerResponse } from 'node:http';

const AWAITING_CONTINUE = Symbol('tollgate.awaitingContinue');
type MaybeAwaiting = ServerResponse & { [AWAITING_CONTINUE]?: boolean };

/** Marks a response whose client sent `Expect: 100-continue` and waits for the go-ahead. */
export function awaitContinue(res: ServerResponse): void {
  (res as MaybeAwaiting)[AWAITING_CONTINUE] = true;
}

/** Sends `100 Continue` if the client asked for it and it has not been sent: call when the body is about to be read. */
export function continueIfExpected(res: ServerResponse): void {
  const r = res as MaybeAwaiting;
  if (!r[AWAITING_CONTINUE]) return;
  r[AWAITING_CONTINUE] = false;
  if (!res.headersSent) res.writeContinue();
}
