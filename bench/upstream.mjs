// The bench's upstream: node:http answering every request with a small JSON body, in its own process so it
// never shares an event loop with the load generator or the proxy being measured.
// Started by bench/run.mjs with an IPC channel: it reports its port, and exits when the parent goes away.
// `--extra-ports N` opens N more listeners in the same process (the several targets of scenario s, and the health
// checks' targets): every proxy under test then talks to the same process, whatever port it was given.
import { createServer } from 'node:http';

const BODY = Buffer.from(JSON.stringify({ id: 1, name: 'bench', description: 'a small JSON answer from the bench upstream' }));

/** Health checks answered (GET /healthz on any port), told to the parent when it asks: bench/health-cost.mjs. */
let healthChecks = 0;

function answer(req, res) {
  if (req.url === '/healthz') healthChecks++;
  // Drain any request body, then answer; keep-alive stays on.
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': BODY.length });
    res.end(BODY);
  });
}

function listen() {
  const server = createServer(answer);
  // Longer than the proxies' idle-socket timeout (4 s), so the upstream never closes a pooled socket under them.
  server.keepAliveTimeout = 60_000;
  server.headersTimeout = 61_000;
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

const at = process.argv.indexOf('--extra-ports');
const extra = at === -1 ? 0 : Number(process.argv[at + 1]);
if (!Number.isInteger(extra) || extra < 0 || extra > 1000) {
  process.stderr.write('upstream.mjs: --extra-ports takes a whole number 0-1000\n');
  process.exit(2);
}
const ports = [];
for (let i = 0; i <= extra; i++) ports.push(await listen());
process.send?.({ ready: true, port: ports[0], ports });
process.on('message', (m) => {
  if (m?.count) process.send?.({ healthChecks });
});

const stop = () => process.exit(0);
process.on('disconnect', stop);
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
