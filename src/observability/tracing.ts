// OpenTelemetry traces, with OpenTelemetry's own SDK packages: when tracing.otlpEndpoint is set, one server span per
// request (its parent taken from the caller's W3C traceparent) with child spans for authentication, the limit check
// (the Redis round trip) and the upstream call, exported over OTLP/HTTP in batches. The upstream receives the trace
// context of its call span, so its spans join the same trace. Attributes: route, method, status, plan, key id and the
// limit decision; never the key itself. Off (no endpoint), nothing here runs or is even loaded (compose.ts imports
// this module only for an endpoint: OpenTelemetry's packages take about 17 MB of memory): the request path only
// tests that `ctx.trace` is undefined, and traceparent/tracestate pass to the upstream as the client sent them. The
// stages use RequestTrace's methods and import only its type.
import { context as otelContext, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';

export interface TracingConfig {
  otlpEndpoint?: string | undefined;
  serviceName: string;
  /** How often finished spans are sent (the batch processor's delay). */
  exportIntervalMs: number;
}

const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (h: IncomingHttpHeaders) => Object.keys(h),
  get: (h: IncomingHttpHeaders, key: string) => h[key],
};
const setter = { set: (h: Record<string, string | string[]>, key: string, value: string) => void (h[key] = value) };

/** One request's trace: its server span, and child spans started under it. */
export class RequestTrace {
  readonly parent: Context;

  constructor(
    private readonly tracer: Tracer,
    readonly server: Span,
    readonly method: string,
  ) {
    this.parent = trace.setSpan(ROOT_CONTEXT, server);
  }

  /** A child span of the request's server span (kind internal, or client for calls out). */
  start(name: string, kind: 'internal' | 'client' = 'internal', attributes?: Record<string, string | number>): Span {
    return this.tracer.startSpan(name, { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL, ...(attributes ? { attributes } : {}) }, this.parent);
  }

  /** Ends a child span: the outcome as an attribute, an error status for failures, and a status code when given. */
  end(span: Span, outcome?: string, failed = false, statusCode?: number): void {
    if (outcome) span.setAttribute('tollgate.outcome', outcome);
    if (statusCode !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, statusCode);
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }

  /** Puts `span`'s trace context on outgoing headers (traceparent, and the caller's tracestate carried along). */
  inject(span: Span, headers: Record<string, string | string[]>): void {
    propagator.inject(trace.setSpan(otelContext.active(), span), headers, setter);
  }
}

export class Tracing {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;

  constructor(config: TracingConfig & { otlpEndpoint: string }, version: string) {
    const exporter = new OTLPTraceExporter({ url: `${config.otlpEndpoint.replace(/\/$/, '')}/v1/traces` });
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName, [ATTR_SERVICE_VERSION]: version }),
      spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: config.exportIntervalMs })],
    });
    this.tracer = this.provider.getTracer('tollgate', version);
    propagation.setGlobalPropagator(propagator);
  }

  /** Starts the server span of a request, as a child of the caller's traceparent when it sent a valid one. */
  startRequest(req: IncomingMessage): RequestTrace {
    const parent = propagator.extract(ROOT_CONTEXT, req.headers, getter);
    const span = this.tracer.startSpan(
      `${req.method ?? 'GET'}`,
      { kind: SpanKind.SERVER, attributes: { [ATTR_HTTP_REQUEST_METHOD]: req.method ?? '', [ATTR_URL_PATH]: (req.url ?? '/').split('?')[0]! } },
      parent,
    );
    return new RequestTrace(this.tracer, span, req.method ?? 'GET');
  }

  /** Ends a request's server span with what the request came to. */
  endRequest(
    t: RequestTrace,
    res: ServerResponse,
    facts: { route?: string | undefined; plan?: string | undefined; keyId?: string | undefined; decision?: string | undefined; finished: boolean },
  ): void {
    const s = t.server;
    if (facts.route) {
      s.setAttribute(ATTR_HTTP_ROUTE, facts.route);
      s.updateName(`${t.method} ${facts.route}`);
    }
    s.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, res.statusCode);
    if (facts.plan) s.setAttribute('tollgate.plan', facts.plan);
    if (facts.keyId) s.setAttribute('tollgate.key_id', facts.keyId);
    if (facts.decision) s.setAttribute('tollgate.limit.decision', facts.decision);
    if (!facts.finished) s.setAttribute('tollgate.aborted', true);
    if (res.statusCode >= 500) s.setStatus({ code: SpanStatusCode.ERROR });
    s.end();
  }

  /** Sends what is still buffered and stops (the gateway's close). */
  async shutdown(): Promise<void> {
    await this.provider.shutdown().catch(() => {});
  }
}
