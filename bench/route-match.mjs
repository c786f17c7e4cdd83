// npm run bench:route-match: what finding a request's route costs with many routes (an OpenAPI document of hundreds
// or thousands of operations), in one process, for the built dist: the route table (src/routing/route-table.ts)
// against the plain scan of every route in file order, to the last-but-one route of 50, 500 and 10,000. Nanoseconds
// per lookup, median of --rounds rounds; both find the same route (checked).
import { compileRoutes } from '../dist/routing/routes.js';
import { RouteTable } from '../dist/routing/route-table.js';

const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 5;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function timeLookups(table, path, count) {
  let found;
  const start = process.hrtime.bigint();
  for (let i = 0; i < count; i++) found = table.match('GET', path, 'api.example.com');
  return { ns: Number(process.hrtime.bigint() - start) / count, found };
}

console.log('routes  table ns/lookup  scan ns/lookup  route found');
for (const n of [50, 500, 10_000]) {
  // Four operations per resource, as a REST document has them: /v1/res<k>/{id} and sub-resources.
  const config = Array.from({ length: n }, (_, i) => ({
    method: i % 2 ? 'GET' : 'POST',
    path: `/v1/res${Math.floor(i / 4)}/${i % 4 < 2 ? ':id' : `sub${i % 4}`}`,
    cost: 1,
    afterSunset: 'pass',
  }));
  const routes = compileRoutes(config);
  const table = new RouteTable(routes);
  const scan = new RouteTable(routes, Number.POSITIVE_INFINITY);
  const path = `/v1/res${Math.floor((n - 1) / 4)}/42`;
  const scanCount = n >= 10_000 ? 300 : 20_000;
  const t = [];
  const s = [];
  let found;
  for (let r = 0; r < rounds; r++) {
    const a = timeLookups(table, path, 20_000);
    const b = timeLookups(scan, path, scanCount);
    if (a.found !== b.found) throw new Error(`the table found ${a.found?.pattern}, the scan ${b.found?.pattern}`);
    t.push(a.ns);
    s.push(b.ns);
    found = a.found;
  }
  console.log(`${String(n).padStart(6)}  ${median(t).toFixed(0).padStart(16)}  ${median(s).toFixed(0).padStart(14)}  ${found?.method} ${found?.pattern}`);
}
