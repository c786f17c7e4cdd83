// server: the gateway port (address, TLS, body size), the processes behind it (workers, heap, drain) and the
// client-side timeouts. Each timeout bounds a different way a client can hold a connection (slow headers, a slow
// request, an idle keep-alive, a response it stops reading), so each is a field of its own. Backends' timeouts are the
// services' and the upstream's.
import { z } from 'zod';
import { listenerTls } from './listener-tls.js';

export const server = z.strictObject({
  host: z.string().min(1).default('127.0.0.1').describe('Address to listen on.'),
  port: z.number().int().min(0).max(65535).default(8080).describe('TCP port to listen on (0 picks a free one).'),
  trustProxy: z.union([z.boolean(), z.number().int().min(0), z.string().min(1), z.array(z.string().min(1))]).default(false).describe('Express "trust proxy": false, true, a hop count, or addresses/subnets whose X-Forwarded-For to believe. The anonymous limit takes the address it yields only when that is an IP address, else the peer\'s (limits/client-address.ts).'),
  maxBodyBytes: z.number().int().min(0).default(1_048_576).describe('Request bodies larger than this get 413 before (or while) reaching the upstream.'),
  workers: z.union([z.number().int().min(1).max(64), z.literal('auto')]).default(1).describe('Gateway processes sharing the port (node:cluster): a number, or "auto" for one per core.'),
  heapGrowthPercent: z.number().int().min(0).max(1000).default(35).describe('How far V8\'s old generation may grow past the live heap before a full collection, in percent (0: V8\'s own dynamic choice, which reaches 300 on 64-bit hosts). Bounds the gateway\'s resident memory; applied at start-up (src/server/heap.ts).'),
  drainTimeoutMs: z.number().int().min(0).default(10_000).describe('On SIGTERM/SIGINT, how long in-flight requests may take to finish before the process exits anyway.'),
  headersTimeoutMs: z.number().int().positive().default(10_000).describe('A client must send its full request headers within this time (slowloris guard).'),
  requestTimeoutMs: z.number().int().positive().default(30_000).describe('A client must send its full request (headers and body) within this time.'),
  keepAliveTimeoutMs: z.number().int().positive().default(5_000).describe('Idle keep-alive connections from clients are closed after this time.'),
  responseIdleTimeoutMs: z.number().int().positive().default(30_000).describe('A proxied response the client stops reading, or a request body it stops sending, for this long is cut off and the backend connection it held is freed.'),
  via: z.boolean().default(true).describe('Add this hop to the Via header of every request sent to a backend (`Via: 1.1 tollgate`, after any Via the request came with), as RFC 9110 §7.6.3 asks of a gateway; false: Via passes as the client sent it. Read at start-up.'),
  watchConfig: z.boolean().default(false).describe('Reload when the config file changes (also when a mounted Kubernetes ConfigMap is swapped), as SIGHUP does; `serve --watch-config` turns it on too (read at start-up).'),
  tls: listenerTls.optional().describe('Serve HTTPS on this port: { certFile, keyFile, caFile (mutual TLS), minVersion }. The files are re-read on every reload; turning TLS or caFile on or off needs a restart.'),
});
