// The error catalogue: every error code Tollgate (gateway or petstore) can answer, with its status.
// One module so the table in docs/errors.md, the tests and the wire format cannot drift apart.
import type { Response } from 'express';

export const ERRORS = {
  invalid_request: { status: 400, message: 'The request body is missing required fields or has invalid values.' },
  invalid_method_override: { status: 400, message: "The request's method override is refused: send one known method, on a POST." },
  invalid_json: { status: 400, message: 'The request body is not valid JSON.' },
  unknown_plan: { status: 400, message: 'The plan named is not configured.' },
  unknown_consumer: { status: 400, message: 'The consumer named does not exist.' },
  webhook_url_refused: {
    status: 400,
    message: 'The webhook URL is refused: an http(s) URL without credentials, at most 2048 characters, whose host resolves to a public address.',
  },
  missing_api_key: { status: 401, message: 'An API key is required: send "Authorization: Bearer <key>".' },
  invalid_api_key: { status: 401, message: 'The API key is not valid.' },
  missing_admin_token: { status: 401, message: 'An admin token is required: send "Authorization: Bearer <admin token>".' },
  invalid_admin_token: { status: 401, message: 'The admin token is not valid.' },
  portal_session_required: { status: 401, message: 'Sign in to the portal first: no live portal session came with this request.' },
  forbidden: { status: 403, message: 'This request is not allowed from where it came.' },
  consumer_suspended: { status: 403, message: 'The consumer this API key belongs to is suspended.' },
  address_not_allowed: { status: 403, message: 'This API key may not be used from this address.' },
  scope_denied: { status: 403, message: "This route is outside this API key's scopes." },
  portal_scope_denied: { status: 403, message: "This portal session's scopes do not allow this: ask for a sign-in link that grants it." },
  webhooks_disabled: {
    status: 403,
    message: 'Webhook endpoints cannot be registered for consumers on this gateway: portal.webhooks is false in its config.',
  },
  plan_not_allowed: { status: 403, message: "This route's stability is not open to the plan of this API key." },
  cost_exceeds_limit: { status: 403, message: "This request costs more points than a window of this key's limits holds in all: it can never be admitted." },
  not_found: { status: 404, message: 'No such route or resource.' },
  key_revoked: { status: 409, message: 'The key is revoked; create a new key instead.' },
  prefix_not_kept: { status: 409, message: "The key's prefix cannot be kept: it has none recorded, or the gateway would refuse a key with it." },
  consumer_exists: { status: 409, message: 'A consumer with this id exists already.' },
  consumer_full: { status: 409, message: 'The consumer has as many keys as its maxKeys allows.' },
  consumer_has_keys: { status: 409, message: 'The consumer still has keys that are not revoked; revoke them first, or ask for it (revokeKeys=true).' },
  webhooks_full: { status: 409, message: 'The consumer has as many webhook endpoints as a consumer may have; delete one first.' },
  portal_off: { status: 409, message: 'The portal is off: set portal.port (or portal.publicUrl, for a portal another instance serves).' },
  import_in_progress: { status: 409, message: 'Another import is running; nothing was imported. Run this one again once it has finished.' },
  import_refused: { status: 422, message: 'Records of the import were refused; nothing was imported.' },
  invalid_record: { status: 409, message: "The key's stored record cannot be read; repair or delete it in Redis." },
  request_timeout: { status: 408, message: 'The request body stopped arriving.' },
  gone: { status: 410, message: 'This route has passed its sunset date (or is in a brownout before it) and is not served.' },
  report_expired: { status: 410, message: 'The report this cursor names is no longer kept: ask for its first page again.' },
  payload_too_large: { status: 413, message: 'The request body is larger than this gateway accepts.' },
  report_too_large: { status: 422, message: 'The report is too large to keep for its pages.' },
  unsupported_media_type: { status: 415, message: 'The request body must be application/json.' },
  rate_limit_exceeded: { status: 429, message: 'Rate limit exceeded. Retry after the time in Retry-After.' },
  api_key_banned: { status: 429, message: 'This API key is temporarily banned for exceeding its rate limit repeatedly.' },
  internal_error: { status: 500, message: 'An unexpected error occurred.' },
  not_implemented: { status: 501, message: 'The request uses an HTTP feature this gateway does not implement.' },
  bad_gateway: { status: 502, message: 'The upstream service could not be reached.' },
  service_unavailable: { status: 503, message: 'The service is temporarily unavailable.' },
  report_out_of_memory: { status: 503, message: 'The report needed more memory than the report thread has.' },
  no_healthy_upstream: { status: 503, message: 'No instance of the backend service is healthy right now. Retry after the time in Retry-After.' },
  gateway_timeout: { status: 504, message: 'The upstream service did not answer in time.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERRORS;

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  status: number;
  /**
   * Every problem found, each with where: the admin API's validation errors (body.plan, query.limit, ...), and request
   * validation's JSON pointers into the request (/body/name, /query/limit, /headers/x-trace, /path/petId).
   */
  problems?: Array<{ path: string; message: string }>;
}

export function errorBody(code: ErrorCode, message?: string): ErrorBody {
  const entry = ERRORS[code];
  return { code, message: message ?? entry.message, status: entry.status };
}

/** Thrown inside handlers; the error middleware turns it into the JSON error body. */
export class HttpError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  constructor(code: ErrorCode, message?: string) {
    super(message ?? ERRORS[code].message);
    this.code = code;
    this.status = ERRORS[code].status;
  }
}

/**
 * Writes an error answer, with the problems found when there are (request validation). Safe to call late: if headers
 * already went out, the connection is cut instead.
 */
export function sendError(res: Response, code: ErrorCode, message?: string, problems?: ErrorBody['problems']): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body: ErrorBody = problems ? { ...errorBody(code, message), problems } : errorBody(code, message);
  res.status(body.status).type('application/json').send(JSON.stringify(body));
}
