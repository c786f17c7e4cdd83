// The bench's upstream: node:http answering every request with a small JSON body, in its own process so it
// never shares an event loop with the load generator or the proxy being measured.
// Started by bench/run.mjs with an IPC channel: it reports its port, and exits when the parent goes away.
import { createServer } from 'node:http';

const BODY = Buffer.from(JSON.stringify({ id: 1, name: 'bench', description: 'a small JSON answer from the bench upstream' }));

const server = createServer((req, res) => {
  // Drain any request body, then answer; keep-alive stays on.
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': BODY.length });
    res.end(BODY);
  });
});
// Longer than the proxies' idle-socket timeout (4 s), so the upstream never closes a pooled socket under them.
server.keepAliveTimeout = 60_000;
server.headersTimeout = 61_000;

server.listen(0, '127.0.0.1', () => {
  process.send?.({ ready: true, port: server.address().port });
});

const stop = () => process.exit(0);
process.on('disconnect', stop);
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
