// A bounded keep-alive HTTP client in its own process, for bench/instructions.mjs: sends exactly --requests requests
// (GET, or --method with a JSON --body) over
// --connections keep-alive sockets (one request in flight per socket), then prints one JSON line
// { done, statuses, retried, ms } and exits. A time limit (--timeout-ms) ends it with exit code 1 whatever happens, so a
// measured process that stops answering never holds the bench.
//   node bench/lib/keepalive-client.mjs --url http://127.0.0.1:PORT/v1/bench --requests 3000 --connections 50 [--key K]
//     [--method POST --body '{"name":"Dog"}']
import { Agent, request } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    requests: { type: 'string', default: '1000' },
    connections: { type: 'string', default: '50' },
    key: { type: 'string' },
    method: { type: 'string', default: 'GET' },
    body: { type: 'string' },
    'timeout-ms': { type: 'string', default: '600000' },
  },
});
const total = Number(values.requests);
const conns = Number(values.connections);
if (!values.url || !Number.isInteger(total) || total < 1 || !Number.isInteger(conns) || conns < 1) {
  process.stderr.write('usage: keepalive-client.mjs --url URL --requests N --connections C [--key KEY] [--timeout-ms MS]\n');
  process.exit(2);
}
const limit = setTimeout(() => {
  process.stderr.write(`keepalive-client: not done after ${values['timeout-ms']} ms (${done} of ${total} answered)\n`);
  process.exit(1);
}, Number(values['timeout-ms']));

const url = new URL(values.url);
const agent = new Agent({ keepAlive: true, maxSockets: conns });
const headers = values.key ? { authorization: `Bearer ${values.key}` } : {};
const body = values.body === undefined ? undefined : Buffer.from(values.body);
if (body) Object.assign(headers, { 'content-type': 'application/json', 'content-length': body.length });
const statuses = {};
let sent = 0;
let done = 0;
let retried = 0;
const MAX_RETRIES = 2 * conns;
const t0 = performance.now();

await new Promise((resolve, reject) => {
  const one = () => {
    if (sent >= total) return;
    sent++;
    const req = request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: values.method, agent, headers }, (res) => {
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      res.resume();
      res.once('end', () => {
        if (++done === total) resolve();
        else one();
      });
    });
    req.once('error', (err) => {
      // A kept-alive socket the server closed as this request went out on it (its keep-alive timer ran out while its
      // event loop, 50 times slower under valgrind, was busy): nothing of it was answered, so it is sent again on a new
      // socket, as Node's documentation advises for a reused socket. A bounded number of times; anything else ends the run.
      if (req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE') && retried < MAX_RETRIES) {
        retried++;
        sent--;
        one();
        return;
      }
      reject(err);
    });
    req.end(body);
  };
  for (let i = 0; i < Math.min(conns, total); i++) one();
}).catch((err) => {
  process.stderr.write(`keepalive-client: ${err.message}\n`);
  process.exit(1);
});

clearTimeout(limit);
agent.destroy();
process.stdout.write(`${JSON.stringify({ done, statuses, retried, ms: performance.now() - t0 })}\n`);
