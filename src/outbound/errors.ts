// Why an outbound call failed, as one of a few kinds a caller can act on (retry later, tell the endpoint's owner its
// certificate is wrong, refuse the URL) plus the code it came with. The client and the address guard both throw it;
// it lives apart from both so that neither has to import the other for it.

export type OutboundErrorKind = 'timeout' | 'connect' | 'tls' | 'dns' | 'address_refused' | 'reset' | 'other';

export class OutboundError extends Error {
  override readonly name = 'OutboundError';

  constructor(
    readonly kind: OutboundErrorKind,
    message: string,
    /** The code it came with: ECONNREFUSED, UNABLE_TO_VERIFY_LEAF_SIGNATURE, ENOTFOUND; for address_refused the range. */
    readonly code?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const TIMEOUT = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const CONNECT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'EADDRNOTAVAIL', 'EADDRINUSE', 'ECONNABORTED']);
const DNS = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME', 'EAI_SERVICE', 'ENODATA', 'ESERVFAIL']);
const RESET = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'ERR_STREAM_PREMATURE_CLOSE']);
// Certificate verification results as Node reports them (OpenSSL's X509_V_ERR_* names without the prefix), plus the
// handshake's own: ERR_TLS_* (ERR_TLS_CERT_ALTNAME_INVALID) and ERR_SSL_* (alerts, protocol versions).
const TLS = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE',
  'CRL_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID',
  'CRL_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD',
  'ERROR_IN_CRL_NEXT_UPDATE_FIELD',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_CHAIN_TOO_LONG',
  'CERT_REVOKED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'HOSTNAME_MISMATCH',
]);

function codeOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * An error from a connection, a request or a response body, as an OutboundError. `timedOut`: the attempt's own timer
 * fired (whatever error the abort then surfaced as). undici reports a connection its peer closed without an answer as
 * UND_ERR_SOCKET ("other side closed"); it is given as ECONNRESET, the code node:http gives the same event, so a
 * reason shown to operators does not change with the client underneath.
 */
export function classifyError(err: unknown, timedOut: boolean): OutboundError {
  if (err instanceof OutboundError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (timedOut) return new OutboundError('timeout', 'no complete answer within the time allowed', 'ETIMEDOUT', { cause: err });
  // undici sometimes wraps the socket's error: the cause's code is the telling one.
  const own = codeOf(err);
  const cause = codeOf((err as { cause?: unknown } | null)?.cause);
  const code = own?.startsWith('UND_ERR_') && cause ? cause : (own ?? cause);
  if (code === undefined) return new OutboundError('other', message, undefined, { cause: err });
  if (TIMEOUT.has(code)) return new OutboundError('timeout', message, code, { cause: err });
  if (CONNECT.has(code)) return new OutboundError('connect', message, code, { cause: err });
  if (DNS.has(code)) return new OutboundError('dns', message, code, { cause: err });
  if (RESET.has(code)) return new OutboundError('reset', message, code === 'UND_ERR_SOCKET' ? 'ECONNRESET' : code, { cause: err });
  if (TLS.has(code) || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_')) return new OutboundError('tls', message, code, { cause: err });
  return new OutboundError('other', message, code, { cause: err });
}
