// Which routes a request tries. The rule stays "the first route in file order that matches" (src/routing/routes.ts),
// and a config of a few dozen routes is scanned whole. An OpenAPI document brings hundreds or thousands of routes,
// and trying every matcher would cost each request tens of microseconds: so with more than LINEAR_UP_TO routes, each
// route is filed in a tree under its pattern's literal leading segments ("/v1/pets/:id" under v1 -> pets), and a
// request tries only the routes filed along its own path, still in file order, with the same matchers. It is a
// filter in front of the matchers, not a router of its own: routers such as find-my-way order routes by specificity
// (static before parameter), which would change which route a request takes.
import { hostName, pathOf, policyPath, routeTakes, type CompiledRoute } from './routes.js';

/** Up to this many routes, every request tries them all: a tree costs more than it saves. */
export const LINEAR_UP_TO = 16;

interface Node {
  readonly children: Map<string, Node>;
  /** Indexes (file order) of the routes filed here, ascending. */
  readonly routes: number[];
}

/** A pattern segment that only ever matches itself (no parameter, wildcard, group or escape; ASCII). */
const LITERAL_SEGMENT = /^[A-Za-z0-9\-._~!$&'()+,;=@%]+$/;
const PATH_TO_REGEXP_SPECIAL = /[:*{}\\()[\]?+!]/;

export class RouteTable {
  private readonly root: Node | undefined;

  constructor(
    readonly routes: readonly CompiledRoute[],
    linearUpTo = LINEAR_UP_TO,
  ) {
    if (routes.length <= linearUpTo) return;
    this.root = { children: new Map(), routes: [] };
    routes.forEach((route, index) => {
      let node = this.root!;
      // Routes matched against the path as sent (the upstream shorthand's catch-all) are tried by every request.
      if (!route.asSent)
        for (const segment of literalSegments(route.pattern)) {
          let child = node.children.get(segment);
          if (!child) node.children.set(segment, (child = { children: new Map(), routes: [] }));
          node = child;
        }
      node.routes.push(index);
    });
  }

  /** The route a request takes: the first in file order whose method, host and pattern match (routes.ts matchRoute). */
  match(method: string, requestPath: string, hostHeader?: string): CompiledRoute | undefined {
    const path = pathOf(requestPath);
    return this.find(method, policyPath(path), hostHeader === undefined ? undefined : hostName(hostHeader), path);
  }

  /**
   * The first route in file order that takes this request. `path` is the policy path (src/routing/routes.ts
   * policyPath), `asSent` the path as the client sent it, `host` the Host header's name.
   */
  find(method: string, path: string, host: string | undefined, asSent: string): CompiledRoute | undefined {
    if (this.root === undefined) {
      for (const r of this.routes) if (routeTakes(r, method, path, host, asSent)) return r;
      return undefined;
    }
    const lists = this.candidates(path);
    if (lists.length === 1) {
      for (const i of lists[0]!) if (routeTakes(this.routes[i]!, method, path, host, asSent)) return this.routes[i];
      return undefined;
    }
    // Several nodes along the path hold routes: try them in file order (a merge of ascending lists).
    const at = lists.map(() => 0);
    for (;;) {
      let best = -1;
      let from = -1;
      for (let l = 0; l < lists.length; l++) {
        const i = lists[l]![at[l]!];
        if (i !== undefined && (best === -1 || i < best)) {
          best = i;
          from = l;
        }
      }
      if (best === -1) return undefined;
      at[from]!++;
      if (routeTakes(this.routes[best]!, method, path, host, asSent)) return this.routes[best];
    }
  }

  /** The route lists of the nodes along the path: the root's, then each literal segment's that the path spells. */
  private candidates(path: string): number[][] {
    const lists: number[][] = [];
    let node = this.root!;
    if (node.routes.length > 0) lists.push(node.routes);
    let start = path.charCodeAt(0) === 47 /* / */ ? 1 : 0;
    while (start < path.length) {
      let end = path.indexOf('/', start);
      if (end === -1) end = path.length;
      const next = node.children.get(path.slice(start, end).toLowerCase());
      if (next === undefined) break;
      node = next;
      if (node.routes.length > 0) lists.push(node.routes);
      start = end + 1;
    }
    return lists;
  }
}

/**
 * A pattern's leading segments that match only themselves, lower-cased (route patterns match case-insensitively).
 * The walk stops at the first segment that is not plainly literal (a parameter, a wildcard, an optional group, an
 * escape, an empty segment, anything outside ASCII): filing a route higher in the tree only makes it a candidate
 * for more requests, never fewer.
 */
export function literalSegments(pattern: string): string[] {
  const base = pattern.endsWith('/*') ? pattern.slice(0, -2) : pattern;
  const out: string[] = [];
  const parts = base.split('/');
  for (let i = 1; i < parts.length; i++) {
    const s = parts[i]!;
    if (s === '' || PATH_TO_REGEXP_SPECIAL.test(s) || !LITERAL_SEGMENT.test(s)) break;
    out.push(s.toLowerCase());
  }
  return out;
}
