// OpenTelemetry traces (docs: "Operations"): with tracing.otlpEndpoint set, a small OTLP/HTTP receiver in this test
// gets a server span per request, a child of the caller's traceparent, with child spans for authentication, the limit
// check and the upstream call; the upstream receives the same trace id with the upstream call's span as parent; no
// span carries the key. Without an endpoint, traceparent and tracestate reach the upstream exactly as sent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { testConfig } from './helpers/gateway.js';
import { startLimitsGateway, type LimitsGateway } from './helpers/limits.js';
import { TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
}

let redis: TestRedis;
let up: TestUpstream;
let receiver: Server;
let receiverUrl: string;
const exported: string[] = [];
const spans: OtlpSpan[] = [];

function attr(s: OtlpSpan, key: string): unknown {
  const v = s.attributes.find((a) => a.key === key)?.value;
  return v === undefined ? undefined : Object.values(v)[0];
}

function config(tracing: Record<string, unknown>) {
  return testConfig({
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix: 'trace:' },
    plans: { free: { perMinute: 100, perDay: 1000 } },
    routes: [{ method: 'GET', path: '/v1/things/:id' }],
    tracing,
  });
}

beforeAll(async () => {
  redis = await TestRedis.start();
  up = await TestUpstream.start();
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      exported.push(text);
      if (req.url === '/v1/traces' && String(req.headers['content-type']).startsWith('application/json')) {
        const body = JSON.parse(text) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
        for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  await new Promise((r) => receiver?.close(r));
  await up?.close();
  await redis?.stop();
});

describe('tracing', () => {
  it("exports a server span under the caller's traceparent, with authentication, limit check and upstream spans", async () => {
    const gw: LimitsGateway = await startLimitsGateway(config({ otlpEndpoint: receiverUrl, exportIntervalMs: 100 }));
    try {
      const { id, key } = await gw.createKey({ plan: 'free' });
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const callerSpan = '00f067aa0ba902b7';
      up.seen.length = 0;
      const res = await fetch(`${gw.url}/v1/things/7`, {
        headers: { authorization: `Bearer ${key}`, traceparent: `00-${traceId}-${callerSpan}-01`, tracestate: 'vendor=abc' },
      });
      expect(res.status).toBe(200);
      await waitFor(() => spans.some((s) => s.traceId === traceId && s.kind === 2), 'the server span exported', 30_000, 50);
      await waitFor(() => spans.filter((s) => s.traceId === traceId).length >= 4, 'all four spans exported', 30_000, 50);
      const mine = spans.filter((s) => s.traceId === traceId);
      const server = mine.find((s) => s.kind === 2)!;
      expect(server.parentSpanId).toBe(callerSpan);
      expect(server.name).toBe('GET /v1/things/:id');
      expect(attr(server, 'http.route')).toBe('/v1/things/:id');
      expect(Number(attr(server, 'http.response.status_code'))).toBe(200);
      expect(attr(server, 'tollgate.plan')).toBe('free');
      expect(attr(server, 'tollgate.key_id')).toBe(id);
      expect(attr(server, 'tollgate.limit.decision')).toBe('admitted');
      const byName = new Map(mine.map((s) => [s.name, s]));
      for (const name of ['tollgate.authenticate', 'tollgate.limit_check', 'tollgate.upstream'])
        expect(byName.get(name)?.parentSpanId, name).toBe(server.spanId);
      expect(attr(byName.get('tollgate.limit_check')!, 'tollgate.outcome')).toBe('admitted');
      // The upstream joined the trace: the same trace id, the upstream call's span as parent, the tracestate carried.
      const upstream = byName.get('tollgate.upstream')!;
      expect(up.seen[0]!.headers.traceparent).toBe(`00-${traceId}-${upstream.spanId}-01`);
      expect(up.seen[0]!.headers.tracestate).toBe('vendor=abc');
      // Never the key, anywhere in what was exported.
      expect(exported.join('\n')).not.toContain(key);
    } finally {
      await gw.close();
    }
  });

  it('without an endpoint, traceparent and tracestate reach the upstream exactly as sent, and nothing is exported', async () => {
    const before = exported.length;
    const gw = await startLimitsGateway(config({}));
    try {
      const { key } = await gw.createKey({ plan: 'free' });
      up.seen.length = 0;
      const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      const res = await fetch(`${gw.url}/v1/things/1`, { headers: { authorization: `Bearer ${key}`, traceparent, tracestate: 'congo=t61rcWkgMzE' } });
      expect(res.status).toBe(200);
      expect(up.seen[0]!.headers.traceparent).toBe(traceparent);
      expect(up.seen[0]!.headers.tracestate).toBe('congo=t61rcWkgMzE');
      await new Promise((r) => setTimeout(r, 300));
      expect(exported.length).toBe(before);
    } finally {
      await gw.close();
    }
  });
});
