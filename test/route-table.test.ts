// The route table (src/routing/route-table.ts) against the plain scan it stands in for: for random configs of many
// routes and random request paths, the tree must pick exactly the route the scan of every route in file order picks
// (first match wins), whatever the patterns (parameters, wildcards, optional groups, case, trailing slashes, hosts,
// methods). And a config past the tree's threshold routes through the gateway as before.
import { describe, expect, it } from 'vitest';
import { compileRoutes, findRoute, hostName, pathOf, policyPath, type CompiledRoute } from '../src/routing/routes.js';
import { literalSegments, RouteTable } from '../src/routing/route-table.js';
import type { RouteConfig } from '../src/config/schema.js';
import { Rng } from './helpers/fuzz.js';

/** A seeded generator (the fuzz tests' mulberry32), so a failure names a seed that reproduces it. */
function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.next();
}

const WORDS = ['v1', 'V1', 'pets', 'Pets', 'orders', 'a', 'b', 'files.json', 'x-y', 'caf%C3%A9'];
const PATTERN_PARTS = [...WORDS, ':id', ':name', '{:opt}', 'pre{:opt}', '*rest'];
const PATH_PARTS = [...WORDS, 'PETS', '42', '', 'pets.json', 'K', '\u212Aeys'];
const METHODS = ['GET', 'POST', 'DELETE', '*'];

function randomRoute(next: () => number, i: number): RouteConfig {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  const depth = 1 + Math.floor(next() * 4);
  const segments = Array.from({ length: depth }, () => pick(PATTERN_PARTS));
  // A rest wildcard only ends a pattern; some patterns are prefixes ("/*").
  const starAt = segments.findIndex((s) => s.startsWith('*'));
  const parts = starAt === -1 ? segments : segments.slice(0, starAt + 1);
  let path = `/${parts.join('/')}`;
  if (starAt === -1 && next() < 0.2) path += '/*';
  else if (starAt === -1 && next() < 0.1) path += '/';
  const route: Record<string, unknown> = { method: pick(METHODS), path, cost: 1, afterSunset: 'pass', name: `r${i}` };
  if (next() < 0.1) route.host = pick(['api.example.com', 'other.example.com']);
  return route as unknown as RouteConfig;
}

function randomPath(next: () => number): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  const depth = Math.floor(next() * 5);
  return `/${Array.from({ length: depth }, () => pick(PATH_PARTS)).join('/')}${next() < 0.1 ? '?q=1' : ''}`;
}

function scan(routes: readonly CompiledRoute[], method: string, url: string, host: string): CompiledRoute | undefined {
  const path = pathOf(url);
  return findRoute(routes, method, policyPath(path), hostName(host), path);
}

describe('the route table picks what a scan of every route in file order picks', () => {
  it('over 200 random configs of 40-400 routes and 300 requests each', () => {
    let compared = 0;
    let matched = 0;
    for (let seed = 1; seed <= 200; seed++) {
      const next = rng(seed);
      const count = 40 + Math.floor(next() * 360);
      const routes = compileRoutes(Array.from({ length: count }, (_, i) => randomRoute(next, i)));
      const table = new RouteTable(routes, 0);
      for (let r = 0; r < 300; r++) {
        const url = randomPath(next);
        const method = ['GET', 'HEAD', 'POST', 'DELETE', 'PUT'][Math.floor(next() * 5)]!;
        const host = next() < 0.5 ? 'api.example.com:8080' : 'www.example.com';
        const expected = scan(routes, method, url, host);
        const got = table.match(method, url, host);
        if (got !== expected) throw new Error(`seed ${seed}: ${method} ${url} (${host}): table ${got?.limitName} but scan ${expected?.limitName}`);
        compared++;
        if (expected) matched++;
      }
    }
    expect(compared).toBe(60_000);
    // The comparison means something only if many requests match a route and many match none.
    expect(matched).toBeGreaterThan(4_000);
    expect(compared - matched).toBeGreaterThan(6_000);
  });

  it('a request tries only the routes filed along its path', () => {
    const config: RouteConfig[] = [];
    for (let i = 0; i < 500; i++) config.push({ method: 'GET', path: `/v1/things${i}/:id`, cost: 1, afterSunset: 'pass' } as RouteConfig);
    config.push({ method: '*', path: '/v1/*', cost: 1, afterSunset: 'pass' } as RouteConfig);
    const tried: string[] = [];
    const routes = compileRoutes(config).map((r) => ({ ...r, matches: (p: string) => (tried.push(r.pattern), r.matches(p)) }));
    const table = new RouteTable(routes);
    expect(table.match('GET', '/v1/things417/9')?.pattern).toBe('/v1/things417/:id');
    expect(tried).toEqual(['/v1/things417/:id']);
    tried.length = 0;
    expect(table.match('GET', '/v1/nothing')?.pattern).toBe('/v1/*');
    expect(tried).toEqual(['/v1/*']);
  });

  it('few routes are scanned whole, and the answer is the same', () => {
    const routes = compileRoutes([
      { method: 'GET', path: '/v1/pets/:id', cost: 1, afterSunset: 'pass' } as RouteConfig,
      { method: '*', path: '/v1/*', cost: 1, afterSunset: 'pass' } as RouteConfig,
    ]);
    const table = new RouteTable(routes);
    expect(table.match('GET', '/v1/pets/1')?.pattern).toBe('/v1/pets/:id');
    expect(table.match('POST', '/v1/pets/1')?.pattern).toBe('/v1/*');
    expect(table.match('GET', '/v2/x')).toBeUndefined();
  });
});

describe('literalSegments', () => {
  it('stops at the first segment that is not plainly literal', () => {
    expect(literalSegments('/v1/Pets/:id')).toEqual(['v1', 'pets']);
    expect(literalSegments('/v1/pets/*')).toEqual(['v1', 'pets']);
    expect(literalSegments('/v1/pre{:opt}/x')).toEqual(['v1']);
    expect(literalSegments('/v1//x')).toEqual(['v1']);
    expect(literalSegments('/v1/pets/')).toEqual(['v1', 'pets']);
    expect(literalSegments('/caf\u00e9/x')).toEqual([]);
    expect(literalSegments('/*')).toEqual([]);
  });
});
