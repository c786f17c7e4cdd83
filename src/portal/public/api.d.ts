// The portal API's answers as the page reads them (docs/portal.openapi.yaml, by hand): `Answers['GET /api/keys']` is
// what lib.js api() resolves for that operation, so a view reading a field the API does not answer fails tsc.

export type Scope = 'keys:read' | 'keys:write' | 'usage:read' | 'webhooks:write';
/** A time as the API writes it: an ISO 8601 string (or, where noted, milliseconds since the epoch). */
export type Time = string | number;

export interface Me {
  consumer: { id: string; name?: string; plan: string; status: string; maxKeys?: number; perMonth?: number };
  session: { kind: 'key' | 'link'; keyId?: string; actor?: string; scopes: Scope[]; expiresAt: Time };
  canRegisterWebhooks: boolean;
}

export interface KeyView {
  id: string;
  name?: string;
  masked: string;
  status: 'active' | 'expired' | 'revoked' | 'grace';
  createdAt: Time;
  expiresAt?: Time;
  rotatedAt?: Time;
  graceUntil?: Time;
}

export interface Window {
  name: string;
  limit: number;
  used: number;
  remaining: number;
  resetAt: Time;
  mode: 'enforce' | 'shadow';
}

export interface Ban {
  until: Time;
  level: number;
}

export interface Bucket {
  start: Time;
  admitted: number;
  rateLimited: number;
  banned: number;
  upstreamFailed: number;
  shadowRefused: number;
}

export interface Usage {
  granularity: 'hour' | 'day';
  from: Time;
  to: Time;
  buckets: Bucket[];
  totals: Omit<Bucket, 'start'>;
  month: { from: Time; to: Time; used: number; perMonth: number | null };
}

export interface Refusals {
  days: number;
  refusals: {
    rateLimited: number;
    banned: number;
    byDay: Array<{ day: Time; rateLimited: number; banned: number; reasons?: Record<string, number> }>;
    reasons?: Record<string, number>;
  };
  bans: Array<{ key: string; until: Time; level: number; reason: string }>;
  shadow: Array<{ window: string; limit: number; wouldHaveRefused: number; since?: Time | null }>;
}

export interface DeprecatedOperation {
  method: string;
  path: string;
  operationId?: string;
  calls7d: number;
  calls30d: number;
  lastCall: Time | null;
  deprecation?: Time;
  sunset?: Time;
  successor?: string;
  brownouts: Array<{ start: Time; end: Time }>;
}

export interface DeliveryState {
  queued: number;
  delivered: number;
  failed: number;
  dropped: number;
  undelivered: number;
  disabled: boolean;
  disabledReason: string | null;
  lastError: string | null;
  lastStatus: number | null;
  oldestDueAt: Time | null;
}

export interface Webhook {
  id: string;
  url: string;
  types: string[];
  thresholds?: number[];
  createdAt: Time;
  delivery?: DeliveryState;
}

export interface Answers {
  'POST /api/session': Me;
  'POST /api/session/end': Record<string, never>;
  'GET /api/me': Me;
  'GET /api/keys': { keys: KeyView[] };
  'POST /api/keys': KeyView & { key: string };
  'POST /api/keys/{id}/rotate': KeyView & { key: string; overlapUntil: Time };
  'POST /api/keys/{id}/revoke': KeyView;
  'GET /api/windows': { pool: Window[]; keys: Array<{ id: string; windows: Window[]; ban: Ban | null }> };
  'GET /api/usage': Usage;
  'GET /api/refusals': Refusals;
  'GET /api/deprecated': { operations: DeprecatedOperation[] };
  'GET /api/webhooks': { endpoints: Webhook[] };
  'POST /api/webhooks': Webhook & { secret: string };
  'DELETE /api/webhooks/{id}': Record<string, never>;
}
