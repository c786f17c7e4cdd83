// The bench's Tollgate config (scenario a's, and every scenario's main gateway): run.mjs and instructions.mjs both
// start Tollgate with it, so the deterministic count and the wall-clock bench measure the same features.
import { createHash } from 'node:crypto';

/**
 * `redis`: the config's redis section without its prefix ({ url } or { cluster: { nodes } }); `routing`: services and
 * routes in place of the upstream shorthand (scenario s).
 */
export function gatewayConfig({ port, upstreamUrl, redis, workers, usage = true, routing }) {
  return {
    server: { host: '127.0.0.1', port, drainTimeoutMs: 2000, ...(workers !== undefined ? { workers } : {}) },
    ...(routing ?? { upstream: { url: upstreamUrl } }),
    redis: { ...redis, prefix: 'tollgate:' },
    log: { level: 'info' },
    // The admin API runs beside the gateway, as in production: its listener must cost the request path nothing.
    admin: { port: 0, tokens: [{ id: 'bench', sha256: createHash('sha256').update('tga_bench-admin-token').digest('hex') }] },
    usage: { enabled: usage },
    // bench: never refused (scenarios a-d); flood: one request a minute (scenario e).
    plans: { bench: { perMinute: 1_000_000_000, perDay: 1_000_000_000 }, flood: { perMinute: 1, perDay: 1_000_000 } },
  };
}
