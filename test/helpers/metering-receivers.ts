// Receivers for the metering export's tests, one per billing system, each implementing the documented contract of the
// endpoint Tollgate posts to, on loopback:
// - OpenMeter: POST /api/v1/events, a CloudEvent (application/cloudevents+json) or a batch of them
//   (application/cloudevents-batch+json); 204 once ingested; an invalid event refuses the request with 400
//   (application/problem+json); events de-duplicated by source and id.
// - Lago: POST /api/v1/events/batch with Authorization: Bearer <api key>, {events: [...]} of at most 100; a batch is
//   atomic: any invalid event (a missing field, an unknown subscription, a transaction_id already ingested for that
//   subscription: value_already_exist) refuses it whole with 422 and error_details by the event's index; 200 with the
//   events otherwise.
// - Stripe: POST /v1/billing/meter_events, form-encoded, one event per request, a bearer secret key; event_name,
//   payload[stripe_customer_id] and a numeric payload[value] required; timestamp within the past 35 days (or 5 minutes
//   ahead); an identifier seen within 24 hours refused with 400 "An event already exists with identifier ...".
// Each records what it accepted (de-duplicated as the system does) and every request, and can be told to fail a
// request (a status, or a hook run before it answers: a test kills the exporter there).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const pathOf = (req: IncomingMessage): string => new URL(req.url ?? '/', 'http://x').pathname;

export interface ReceivedRequest {
  n: number;
  headers: IncomingMessage['headers'];
  body: string;
  status: number;
}

/** What a test may do to request n (1-based) before it is answered: answer another status, or run a hook first. */
export interface RequestPlan {
  /** Answer this status without ingesting anything. */
  failWith?: (n: number) => number | undefined;
  /** Ingest, then answer this status (an acknowledgement lost on the way back). */
  loseAckWith?: (n: number) => number | undefined;
  /** Runs after the request was ingested, before it is answered. */
  beforeAnswer?: (n: number) => Promise<void> | void;
}

abstract class Receiver {
  readonly requests: ReceivedRequest[] = [];
  plan: RequestPlan = {};
  private server: Server | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const n = this.requests.length + 1;
    const record: ReceivedRequest = { n, headers: req.headers, body, status: 0 };
    this.requests.push(record);
    const fail = this.plan.failWith?.(n);
    let answer: { status: number; type?: string; body?: unknown };
    if (fail !== undefined) answer = { status: fail, type: 'application/json', body: { error: 'planned failure' } };
    else answer = this.receive(req, body);
    if (answer.status < 300) {
      const lost = this.plan.loseAckWith?.(n);
      if (lost !== undefined) answer = { status: lost, type: 'application/json', body: { error: 'planned failure after ingesting' } };
    }
    await this.plan.beforeAnswer?.(n);
    record.status = answer.status;
    if (res.destroyed) return;
    if (answer.body === undefined) return void res.writeHead(answer.status).end();
    res.writeHead(answer.status, { 'content-type': answer.type ?? 'application/json' }).end(JSON.stringify(answer.body));
  }

  protected abstract receive(req: IncomingMessage, body: string): { status: number; type?: string; body?: unknown };
}

export interface ReceivedCloudEvent {
  specversion: string;
  id: string;
  source: string;
  type: string;
  subject?: string;
  time?: string;
  data?: Record<string, unknown>;
}

export class OpenMeterReceiver extends Receiver {
  /** By source and id, the first one ingested. */
  readonly events = new Map<string, ReceivedCloudEvent>();
  /** Events of each ingested request, as sent. */
  readonly batches: ReceivedCloudEvent[][] = [];
  /** Ids whose presence makes the request invalid (400): a test's bad event. */
  readonly invalidIds = new Set<string>();

  protected receive(req: IncomingMessage, body: string) {
    const problem = (status: number, detail: string) => ({
      status,
      type: 'application/problem+json',
      body: { type: 'about:blank', title: 'Bad Request', status, detail },
    });
    if (req.method !== 'POST' || pathOf(req) !== '/api/v1/events') return problem(404, 'not found');
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return problem(400, 'invalid JSON');
    }
    let list: unknown[];
    if (type === 'application/cloudevents-batch+json') {
      if (!Array.isArray(parsed)) return problem(400, 'a batch is a JSON array');
      list = parsed;
    } else if (type === 'application/cloudevents+json') list = [parsed];
    else return problem(415, `unsupported content type ${type}`);
    for (const e of list as ReceivedCloudEvent[]) {
      if (typeof e !== 'object' || e === null) return problem(400, 'an event is an object');
      if (e.specversion !== '1.0') return problem(400, 'specversion must be 1.0');
      for (const f of ['id', 'source', 'type', 'subject'] as const) if (typeof e[f] !== 'string' || e[f] === '') return problem(400, `${f} is required`);
      if (e.time !== undefined && Number.isNaN(Date.parse(e.time))) return problem(400, 'time must be RFC 3339');
      if (this.invalidIds.has(e.id)) return problem(400, `event ${e.id} is invalid`);
    }
    for (const e of list as ReceivedCloudEvent[]) if (!this.events.has(`${e.source}\u0000${e.id}`)) this.events.set(`${e.source}\u0000${e.id}`, e);
    this.batches.push(list as ReceivedCloudEvent[]);
    return { status: 204 };
  }
}

export interface LagoEvent {
  transaction_id: string;
  external_subscription_id: string;
  code: string;
  timestamp: number;
  properties: Record<string, unknown>;
}

export class LagoReceiver extends Receiver {
  /** By subscription and transaction id. */
  readonly events = new Map<string, LagoEvent>();
  readonly batchSizes: number[] = [];

  constructor(
    private readonly apiKey: string,
    private readonly subscriptions: ReadonlySet<string>,
  ) {
    super();
  }

  protected receive(req: IncomingMessage, body: string) {
    if (req.method !== 'POST' || pathOf(req) !== '/api/v1/events/batch') return { status: 404, body: { status: 404, error: 'Not Found', code: 'not_found' } };
    if (req.headers.authorization !== `Bearer ${this.apiKey}`) return { status: 401, body: { status: 401, error: 'Unauthorized' } };
    let parsed: { events?: unknown };
    try {
      parsed = JSON.parse(body) as { events?: unknown };
    } catch {
      return { status: 400, body: { status: 400, error: 'BadRequest: invalid JSON' } };
    }
    if (!Array.isArray(parsed.events)) return { status: 400, body: { status: 400, error: 'BadRequest: events must be an array' } };
    const events = parsed.events as LagoEvent[];
    if (events.length > 100)
      return { status: 422, body: { status: 422, error: 'Unprocessable Entity', code: 'validation_errors', error_details: { events: ['too_many_events'] } } };
    const details: Record<string, Record<string, string[]>> = {};
    const inBatch = new Set<string>();
    events.forEach((e, i) => {
      const errors: Record<string, string[]> = {};
      if (typeof e.transaction_id !== 'string' || !e.transaction_id) errors.transaction_id = ['value_is_mandatory'];
      if (typeof e.code !== 'string' || !e.code) errors.code = ['value_is_mandatory'];
      if (typeof e.external_subscription_id !== 'string' || !e.external_subscription_id) errors.external_subscription_id = ['value_is_mandatory'];
      else if (!this.subscriptions.has(e.external_subscription_id)) errors.external_subscription_id = ['subscription_not_found'];
      if (e.timestamp !== undefined && !Number.isFinite(Number(e.timestamp))) errors.timestamp = ['invalid_format'];
      if (e.properties !== undefined && (typeof e.properties !== 'object' || e.properties === null)) errors.properties = ['invalid_format'];
      const id = `${e.external_subscription_id}\u0000${e.transaction_id}`;
      if (!errors.transaction_id && (this.events.has(id) || inBatch.has(id))) errors.transaction_id = ['value_already_exist'];
      inBatch.add(id);
      if (Object.keys(errors).length) details[String(i)] = errors;
    });
    if (Object.keys(details).length)
      return { status: 422, body: { status: 422, error: 'Unprocessable Entity', code: 'validation_errors', error_details: details } };
    for (const e of events) this.events.set(`${e.external_subscription_id}\u0000${e.transaction_id}`, e);
    this.batchSizes.push(events.length);
    return { status: 200, body: { events: events.map((e) => ({ ...e, lago_id: `lago_${e.transaction_id}` })) } };
  }
}

export interface StripeMeterEvent {
  event_name: string;
  identifier: string;
  payload: { stripe_customer_id: string; value: string };
  timestamp: number;
}

export class StripeReceiver extends Receiver {
  /** By identifier. */
  readonly events = new Map<string, StripeMeterEvent & { receivedAt: number }>();
  /** How many events each request carried (the API takes one). */
  readonly perRequest: number[] = [];

  constructor(private readonly secretKey: string) {
    super();
  }

  protected receive(req: IncomingMessage, body: string) {
    const error = (status: number, message: string, code?: string) => ({
      status,
      body: { error: { type: 'invalid_request_error', message, ...(code ? { code } : {}) } },
    });
    if (req.method !== 'POST' || pathOf(req) !== '/v1/billing/meter_events') return error(404, 'Unrecognized request URL');
    if (req.headers.authorization !== `Bearer ${this.secretKey}`) return error(401, 'Invalid API Key provided');
    if (!(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) return error(400, 'Invalid request: form-encoded body expected');
    const p = new URLSearchParams(body);
    this.perRequest.push(p.getAll('event_name').length);
    const eventName = p.get('event_name');
    const customer = p.get('payload[stripe_customer_id]');
    const value = p.get('payload[value]');
    if (!eventName) return error(400, 'Missing required param: event_name.', 'parameter_missing');
    if (!customer) return error(400, 'Missing required param: payload[stripe_customer_id].', 'parameter_missing');
    if (value === null || !/^-?\d+(\.\d+)?$/.test(value)) return error(400, 'payload[value] must be a number.', 'parameter_invalid_integer');
    const now = Date.now();
    const timestamp = p.has('timestamp') ? Number(p.get('timestamp')) : Math.floor(now / 1000);
    if (timestamp * 1000 < now - 35 * 86_400_000) return error(400, 'Timestamp must be within the past 35 calendar days.', 'timestamp_too_far_in_past');
    if (timestamp * 1000 > now + 5 * 60_000) return error(400, 'Timestamp must be no more than 5 minutes in the future.', 'timestamp_in_future');
    const identifier = p.get('identifier') ?? `gen_${now}_${Math.random()}`;
    if (identifier.length > 100) return error(400, 'identifier must be at most 100 characters.');
    const seen = this.events.get(identifier);
    if (seen && now - seen.receivedAt < 24 * 3_600_000) return error(400, `An event already exists with identifier ${identifier}.`);
    const event = { event_name: eventName, identifier, payload: { stripe_customer_id: customer, value }, timestamp, receivedAt: now };
    this.events.set(identifier, event);
    return { status: 200, body: { object: 'billing.meter_event', created: Math.floor(now / 1000), livemode: false, ...event } };
  }
}
