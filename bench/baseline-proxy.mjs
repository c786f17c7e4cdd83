// The BASELINE proxy: bare Express 5 + http-proxy-middleware 4 (the versions Tollgate has installed) with the
// same keep-alive upstream pool settings as Tollgate's (src/pipeline/proxy.ts createUpstreamAgent), and nothing
// else: no auth, limits, logging, metrics or header work. What Tollgate costs is measured against this.
// Started by bench/run.mjs with an IPC channel: argv[2] is the upstream URL; it reports its port, and exits when
// the parent goes away. With BENCH_BASELINE_PROTOTYPES (bench --baseline-prototypes: the path of Tollgate's built
// dist/server/http-server.js) its server gets Tollgate's fix for Express's per-request Object.setPrototypeOf, so the bench
// can show what Tollgate's features cost over a tuned Express as well as over a bare one.
import { createServer, Agent } from 'node:http';
import { pathToFileURL } from 'node:url';
import express from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';

const target = process.argv[2];
if (!target) {
  console.error('usage: baseline-proxy.mjs UPSTREAM_URL');
  process.exit(2);
}

const agent = new Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: 4_000, scheduling: 'lifo' });
const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.use(createProxyMiddleware({ target, changeOrigin: true, agent }));

// Same server timeouts as Tollgate's defaults (server.headersTimeoutMs / requestTimeoutMs / keepAliveTimeoutMs).
const prototypes = process.env.BENCH_BASELINE_PROTOTYPES
  ? (await import(pathToFileURL(process.env.BENCH_BASELINE_PROTOTYPES).href)).expressPrototypes(app)
  : {};
const server = createServer({ ...prototypes, headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 }, app);
server.listen(Number(process.argv[3] ?? 0), '127.0.0.1', () => {
  process.send?.({ ready: true, port: server.address().port });
});

const stop = () => process.exit(0);
process.on('disconnect', stop);
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
