// Why a Redis connection fails, in the words an operator acts on: nothing listens (refused), no answer in time
// (timeout), something that is not Redis answers (an HTTP server on the port), the credentials are refused (auth
// failed), or TLS cannot be set up (a rediss:// URL to a plain port, an untrusted certificate). ioredis reports all of
// these as "error" events, once per reconnect attempt; the gateway logs one line per change of cause, not per retry,
// so a wrong URL is named at start instead of passing for a start that only logs "connection closed".
import type { Logger } from '../observability/logger.js';

export type ConnectionCause = 'refused' | 'timeout' | 'not a Redis server' | 'auth failed' | 'TLS failed' | 'unreachable' | 'error';

/** ioredis's errors for commands on a connection that already failed: they say nothing of why. */
const FOLLOW_UPS = /Stream isn't writeable|Connection is closed|enableOfflineQueue/;

/** Node's and OpenSSL's codes for a TLS set-up that failed (handshake, protocol, certificate). */
const TLS_CODES = /^(ERR_SSL_|ERR_TLS_|EPROTO$|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|UNABLE_TO_|CERT_|HOSTNAME_MISMATCH$)/;

/**
 * The cause of one connection error. `tls`: the connection was to use TLS; `tcpConnected`: its TCP connection was up
 * when the error came (a connect timeout then means the TLS handshake got no answer: a plain port, which waits for a
 * line of text that a ClientHello never ends).
 */
export function connectionCause(err: unknown, tls: boolean, tcpConnected = false): ConnectionCause {
  const e = err as (Error & { code?: string; name?: string }) | undefined;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : String(err);
  if (/^(WRONGPASS|NOAUTH|NOPERM)\b/.test(message) || /invalid (username-)?password|AUTH.*without any password/i.test(message)) return 'auth failed';
  if (TLS_CODES.test(code) || /\b(SSL|TLS)\b|secure TLS connection/i.test(message)) return 'TLS failed';
  // ioredis's parser on a reply that is not RESP (an HTTP server's "HTTP/1.1 400": "Unknown RESP type 72").
  if (e?.name === 'ParserError' || /Protocol error|Unknown RESP type/i.test(message)) return 'not a Redis server';
  if (code === 'ECONNREFUSED') return 'refused';
  if (tls && tcpConnected && code === 'ETIMEDOUT') return 'TLS failed';
  if (code === 'ETIMEDOUT' || /timed? ?out/i.test(message)) return 'timeout';
  // A TLS client whose peer hangs up during the handshake sees a plain reset.
  if (tls && (code === 'ECONNRESET' || code === 'EPIPE')) return 'TLS failed';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ECONNRESET') return 'unreachable';
  return 'error';
}

/**
 * Logs a connection's errors: one error line naming the target (`where`, credentials removed) and the cause, the first
 * time and whenever the cause changes; nothing for a retry that fails the same way. `connected()` is called on every
 * successful connection: a later failure is news again.
 */
export function connectionProblemLog(
  logger: Logger,
  where: string,
  tls: boolean,
  /** Passwords of this connection: removed from the error's text should it ever quote one. */
  secrets: readonly string[] = [],
): { error(err: unknown, tcpConnected?: boolean): void; connected(): void } {
  let last: ConnectionCause | undefined;
  return {
    error(err, tcpConnected = false) {
      // ioredis's own follow-ups of a failure already reported (commands failed on the closed socket): no cause.
      if (err instanceof Error && FOLLOW_UPS.test(err.message)) return;
      const cause = connectionCause(err, tls, tcpConnected);
      if (cause === last) return;
      last = cause;
      // The message is ioredis's or Node's own (codes, OpenSSL reasons, Redis's error line), cut short.
      let detail = (err instanceof Error ? err.message : String(err)).slice(0, 200);
      for (const s of secrets) if (s) detail = detail.replaceAll(s, '***');
      logger.error({ redis: where, cause, detail }, `redis connection failed: ${cause} (${where})`);
    },
    connected() {
      last = undefined;
    },
  };
}
