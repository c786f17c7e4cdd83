// What choosing the target per request costs the gateway's process, two ways http-proxy-middleware allows:
//   router     one proxy, its `router` hook naming the target (and its keep-alive agent) per request: what
//              src/pipeline/proxy.ts does;
//   instances  one proxy per target, each with its target and agent fixed, the request handed to the chosen one.
// The proxy runs in this process; two upstream servers and the load client run in a child process, so this
// process's CPU time (process.cpuUsage) is the proxy's alone. Rounds alternate the two ways; the answer is the median
// CPU per request of each and their ratio.
//
//   node bench/target-choice.mjs [--requests 4000] [--rounds 6] [--concurrency 16]
import { fork } from 'node:child_process';
import { createServer, Agent } from 'node:http';
import { parseArgs } from 'node:util';
import { createProxyMiddleware } from 'http-proxy-middleware';

const { values: opts } = parseArgs({
  options: {
    requests: { type: 'string', default: '4000' },
    rounds: { type: 'string', default: '6' },
    concurrency: { type: 'string', default: '16' },
    child: { type: 'boolean', default: false },
  },
});

if (opts.child) {
  // The child: two upstreams, and on request a load of N requests against the proxy's port.
  const { request } = await import('node:http');
  const ports = [];
  for (let i = 0; i < 2; i++) {
    const s = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    });
    await new Promise((r) => s.listen(0, '127.0.0.1', r));
    ports.push(s.address().port);
  }
  process.send({ ports });
  process.on('message', async ({ port, requests, concurrency }) => {
    const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
    let sent = 0;
    const one = () =>
      new Promise((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: `/x/${sent}`, agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', reject);
        req.end();
      });
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (sent < requests) {
          sent++;
          await one();
        }
      }),
    );
    agent.destroy();
    process.send({ done: true });
  });
} else {
  const requests = Number(opts.requests);
  const rounds = Number(opts.rounds);
  const concurrency = Number(opts.concurrency);
  const child = fork(new URL(import.meta.url).pathname, ['--child'], { stdio: 'inherit' });
  const { ports } = await new Promise((r) => child.once('message', r));
  const targets = ports.map((p) => ({ url: `http://127.0.0.1:${p}`, agent: new Agent({ keepAlive: true, maxSockets: 64 }) }));
  let next = 0;
  const pick = () => targets[next++ % targets.length];

  const routerProxy = createProxyMiddleware({
    router: (req, _res, options) => {
      const t = req.target;
      options.agent = t.agent;
      return t.url;
    },
    changeOrigin: true,
  });
  const instances = new Map(targets.map((t) => [t, createProxyMiddleware({ target: t.url, agent: t.agent, changeOrigin: true })]));
  const ways = {
    router: (req, res) => {
      req.target = pick();
      routerProxy(req, res, () => {});
    },
    instances: (req, res) => {
      instances.get(pick())(req, res, () => {});
    },
  };
  const results = { router: [], instances: [] };
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 === 0 ? ['router', 'instances'] : ['instances', 'router']) {
      const server = createServer(ways[name]);
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      const cpu0 = process.cpuUsage();
      child.send({ port: server.address().port, requests, concurrency });
      await new Promise((r) => child.once('message', r));
      const cpu = process.cpuUsage(cpu0);
      results[name].push((cpu.user + cpu.system) / requests);
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const r = median(results.router);
  const i = median(results.instances);
  console.log(`CPU per request (median of ${rounds} rounds, ${requests} requests each, concurrency ${concurrency}):`);
  console.log(`  router hook:        ${r.toFixed(1)} µs`);
  console.log(`  proxy per target:   ${i.toFixed(1)} µs`);
  console.log(`  router / instances: ${(r / i).toFixed(3)}`);
  child.kill();
  for (const t of targets) t.agent.destroy();
}
