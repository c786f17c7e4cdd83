// Warnings about a key that is unusual but allowed: its own perMinute/perDay below the cost of a configured route
// (every request it makes there is refused), or a plaintext no Bearer header can carry. Warned, never refused: the
// admin API answers them in `warnings`, the CLI on stderr, an import per line.

/** What a warning needs of a configured route. */
export interface CostedRoute {
  method: string;
  path: string;
  name?: string | undefined;
  cost: number;
  auth?: 'key' | 'none' | undefined;
}

/** A route as the operator reads it in the config: "POST /v1/categories", or its name when it has one. */
function routeLabel(r: CostedRoute): string {
  const where = r.name ?? r.path;
  return r.method === '*' ? where : `${r.method} ${where}`;
}

/**
 * One warning per override (perMinute, perDay) smaller than the cost of some keyed route: such a route refuses every
 * request of the key (403 cost_exceeds_limit), whatever its usage. Routes without keys (auth: none) never count a key.
 */
export function overrideWarnings(k: { perMinute?: number | undefined; perDay?: number | undefined }, routes: readonly CostedRoute[]): string[] {
  const out: string[] = [];
  for (const field of ['perMinute', 'perDay'] as const) {
    const limit = k[field];
    if (limit === undefined) continue;
    const above = routes.filter((r) => r.auth !== 'none' && r.cost > limit);
    if (above.length === 0) continue;
    const list = above.map((r) => `${routeLabel(r)} (cost ${r.cost})`).join(', ');
    out.push(
      above.length === 1
        ? `${field} ${limit} is below the cost of route ${list}: this key can never call it (403 cost_exceeds_limit)`
        : `${field} ${limit} is below the cost of routes ${list}: this key can never call them (403 cost_exceeds_limit)`,
    );
  }
  return out;
}

/** RFC 6750's token68: what an `Authorization: Bearer` header can carry. */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

/** Whether a plaintext key can be sent as `Authorization: Bearer <key>`. */
export function isBearerToken(key: string): boolean {
  return TOKEN68.test(key);
}

/** The warning for a key that is not token68, in words that never quote it. */
export const NOT_BEARER_WARNING =
  'key: holds characters a Bearer token cannot carry (token68: A-Z a-z 0-9 - . _ ~ + / then "=" at the end only): it can never be sent as "Authorization: Bearer"; send it through another of auth.sources';
