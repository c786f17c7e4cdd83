// Routes whose cost is more than a window of some plan holds in all: keys of that plan are refused there with 403
// cost_exceeds_limit. A warning, not an error: a small trial plan beside expensive routes is a legitimate config.
import { planRouteLimits, type Config } from '../config/schema.js';
import { candidatesFor, planCandidates, planMode, planWindows, routeWindows } from './windows.js';

/**
 * One line per (route, plan, window) whose limit is below the route's cost, naming all three, in config order: the
 * plan's windows and candidate limits, then the route's own for that plan. Keys' own overrides are not in the config
 * (the key commands warn about those).
 */
export function costWarnings(config: Config): string[] {
  const out: string[] = [];
  config.routes.forEach((r, i) => {
    // A public route's own limits count per address (the schema refuses a cost above them); a key there still pays its
    // plan's windows.
    if (r.cost === 1) return;
    const limits = planRouteLimits(r);
    const route = `routes[${i}] (${r.method === '*' ? '' : `${r.method} `}${r.host ?? ''}${r.path}, cost ${r.cost})`;
    for (const [plan, p] of Object.entries(config.plans)) {
      const windows = planWindows(p, planMode(config, plan));
      const own = limits && (Object.hasOwn(limits, plan) ? limits[plan] : limits.default);
      const from = windows.length;
      if (own) windows.push(...routeWindows(r.name ?? r.path, own, r.mode ?? config.limits.mode));
      for (const w of windows) {
        if (w.limit >= r.cost) continue;
        const outcome =
          w.mode === 'enforce' ? 'its keys are refused there with 403 cost_exceeds_limit' : 'in shadow mode: every such request is a shadow refusal';
        out.push(`${route}: more than plan ${plan}'s ${w.name} window holds in all (${w.limit}): ${outcome}`);
      }
      const candidates = candidatesFor(windows, 0, 2, planCandidates(config, plan));
      candidatesFor(windows, from, windows.length, own?.shadow, candidates);
      for (const c of candidates) {
        if (c.limit >= r.cost) continue;
        out.push(
          `${route}: more than plan ${plan}'s candidate limit ${c.name} (${c.limit}): once enforced, its keys would be refused there with 403 cost_exceeds_limit`,
        );
      }
    }
  });
  return out;
}
