// The JSON error handler the admin API and the consumer portal share: the errors of key administration, reports and
// webhook endpoints as their catalogue codes, a body the parser refused as what was wrong with it, any other 4xx as
// invalid_request, and anything else (a store that did not answer, a timeout) logged once and answered 503: never a
// 500 or a stack trace. Each listener says how it words a key administration error (the portal never echoes an id
// it was asked for) and what its failure line says.
import type { ErrorRequestHandler } from 'express';
import { EndpointError } from '../events/endpoints.js';
import { HttpError, sendError, type ErrorCode } from '../http/errors.js';
import { KeyAdminError, type KeyAdminErrorCode } from '../keys/admin-errors.js';
import type { Logger } from '../observability/logger.js';
import { ReportError } from '../usage/kept-reports.js';

/** The catalogue code of each key administration error, as the admin API answers them. */
export const ADMIN_ERRORS: Record<KeyAdminErrorCode, ErrorCode> = {
  not_found: 'not_found',
  revoked: 'key_revoked',
  unknown_plan: 'unknown_plan',
  invalid_record: 'invalid_record',
  invalid: 'invalid_request',
  contended: 'service_unavailable',
  incomplete: 'service_unavailable',
  import_in_progress: 'import_in_progress',
  prefix_not_kept: 'prefix_not_kept',
  unknown_consumer: 'unknown_consumer',
  consumer_full: 'consumer_full',
  consumer_exists: 'consumer_exists',
  consumer_has_keys: 'consumer_has_keys',
};

export interface JsonErrorsOptions {
  logger: Logger;
  /** The JSON body limit, named in a 413's message. */
  maxBody: string;
  /** How a key administration error is answered here. */
  keyError(err: KeyAdminError): { code: ErrorCode; message: string };
  /** An unexpected failure: the fields and line it is logged with, and the 503's message. */
  failure: { fields?: Record<string, unknown>; line: string; message: string };
}

export function jsonErrors(o: JsonErrorsOptions): ErrorRequestHandler {
  return function jsonErrorHandler(err, req, res, _next) {
    if (res.headersSent) {
      if (!res.writableEnded) res.destroy();
      return;
    }
    if (err instanceof HttpError) return sendError(res, err.code, err.message);
    if (err instanceof KeyAdminError) {
      const { code, message } = o.keyError(err);
      return sendError(res, code, message);
    }
    if (err instanceof ReportError) return sendError(res, err.code, err.message);
    if (err instanceof EndpointError) return sendError(res, err.code, err.message);
    const type = (err as { type?: string })?.type;
    if (type === 'entity.parse.failed') return sendError(res, 'invalid_json');
    if (type === 'entity.too.large') return sendError(res, 'payload_too_large', `The request body is larger than ${o.maxBody}.`);
    if (type === 'encoding.unsupported' || type === 'charset.unsupported') return sendError(res, 'unsupported_media_type');
    const status = typeof err?.status === 'number' ? err.status : 500;
    if (status >= 400 && status < 500) return sendError(res, 'invalid_request');
    // A store did not answer (Redis down, a timeout): nothing was changed that the caller cannot retry.
    o.logger.error({ ...o.failure.fields, reqId: req.id, err: { message: String(err?.message), code: err?.code } }, o.failure.line);
    sendError(res, 'service_unavailable', o.failure.message);
  };
}
