// npm run bench:access: what the scope and address checks of the request path (stages A and G:
// src/pipeline/stages/policy.ts) cost per request, in one process, for the built dist: the caller's compiled access
// found for its key and consumer records (identity/access.ts accessFor, a WeakMap hit), the client address worked out
// by the trustProxy rules (limits/client-address.ts, from the socket's peer), the address checked against every
// allow-list (node:net BlockList) and the route's scope names against every scope list. Nanoseconds of this
// process's CPU time per request (process.cpuUsage: on a machine other processes share, wall time would count their
// turns too), median of --rounds rounds; the budget is 1 µs (exit 1 beyond it). The first sight of an address
// (reading its text, making its SocketAddress; both then kept) is printed apart: it is paid once per client address.
import { accessFor } from '../dist/identity/access.js';
import { clientAddress } from '../dist/limits/client-address.js';
import { compileRoutes } from '../dist/routing/routes.js';

const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 7;
const BUDGET_NS = 1000;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
/** This process's CPU time (user and system), in nanoseconds. */
const cpuNs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) * 1000;
};

const routes = compileRoutes(
  Array.from({ length: 20 }, (_, i) => ({
    method: 'GET',
    path: `/v1/r${i}`,
    name: `route${i}`,
    service: i < 10 ? 'orders' : 'billing',
    cost: 1,
    afterSunset: 'pass',
  })),
);
const route = routes[17];

const scopes = (n) => [...Array.from({ length: n - 2 }, (_, i) => `other${i}`), 'service:billing', 'route17'];
const cidrs = (n, last) => [...Array.from({ length: n - 1 }, (_, i) => `10.${Math.floor(i / 250)}.${i % 250}.0/24`), last];

const CASES = [
  {
    what: 'key: 10 scopes, 10 IPv4 CIDRs; IPv4 peer',
    key: { id: 'k1', plan: 'free', scopes: scopes(10), allowedCidrs: cidrs(10, '203.0.113.0/24') },
    peer: '203.0.113.7',
  },
  {
    what: 'key + consumer: 100 scopes and 100 CIDRs each (the bounds); IPv6 peer',
    key: { id: 'k2', plan: 'free', scopes: scopes(100), allowedCidrs: cidrs(100, '2001:db8::/32') },
    consumer: { id: 'c1', plan: 'pro', status: 'active', scopes: scopes(100), allowedCidrs: cidrs(100, '2001:db8:1::/48') },
    peer: '2001:db8:1::7',
  },
  {
    what: 'key: 10 scopes, 10 CIDRs; IPv4-mapped IPv6 peer (a dual-stack listener)',
    key: { id: 'k3', plan: 'free', scopes: scopes(10), allowedCidrs: cidrs(10, '127.0.0.0/8') },
    peer: '::ffff:127.0.0.1',
  },
];

function perRequest(c, count) {
  const req = { socket: { remoteAddress: c.peer } };
  let allowed = 0;
  const start = cpuNs();
  for (let i = 0; i < count; i++) {
    const access = accessFor(c.key, c.consumer);
    if (access.allowsAddress(clientAddress(req)) && access.allowsRoute(route.scopeNames)) allowed++;
  }
  const ns = (cpuNs() - start) / count;
  if (allowed !== count) throw new Error(`${c.what}: refused a request it should allow`);
  return ns;
}

let over = false;
console.log('ns/request  case');
for (const c of CASES) {
  perRequest(c, 50_000);
  const ns = median(Array.from({ length: rounds }, () => perRequest(c, 200_000)));
  if (ns > BUDGET_NS) over = true;
  console.log(`${ns.toFixed(0).padStart(10)}  ${c.what}`);
}

// A new address each time: the SocketAddress is made, then kept.
const first = CASES[0];
const access = accessFor(first.key);
const n = 5_000;
const start = cpuNs();
for (let i = 0; i < n; i++) access.allowsAddress(clientAddress({ socket: { remoteAddress: `2001:db8:${i.toString(16)}::1` } }));
console.log(`${((cpuNs() - start) / n).toFixed(0).padStart(10)}  first sight of an IPv6 address (once per address, then kept)`);
console.log(over ? `over the budget of ${BUDGET_NS} ns per request` : `within the budget of ${BUDGET_NS} ns per request`);
process.exitCode = over ? 1 : 0;
