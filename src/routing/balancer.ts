// Target choice within a service: weighted round-robin (nginx's smooth algorithm: over any run of sum(weights)
// picks, each target gets exactly its weight, interleaved rather than in bursts) or least-requests (power of two
// choices: of two targets picked at random, the one with fewer requests in flight). Only available targets are
// picked; a retry passes the targets already tried, which are avoided while another is available.
import type { Target } from './target.js';

export type Balance = 'round-robin' | 'least-requests';

export function pickTarget(balance: Balance, targets: readonly Target[], now: number, avoid?: ReadonlySet<Target>, random = Math.random): Target | undefined {
  let candidates = targets.filter((t) => t.available(now) && !avoid?.has(t));
  if (candidates.length === 0 && avoid && avoid.size > 0) candidates = targets.filter((t) => t.available(now));
  if (candidates.length <= 1) return candidates[0];
  return balance === 'least-requests' ? leastRequests(candidates, random) : roundRobin(candidates);
}

function roundRobin(candidates: readonly Target[]): Target {
  let total = 0;
  let best = candidates[0]!;
  for (const t of candidates) {
    t.current += t.weight;
    total += t.weight;
    if (t.current > best.current) best = t;
  }
  best.current -= total;
  return best;
}

function leastRequests(candidates: readonly Target[], random: () => number): Target {
  const i = Math.floor(random() * candidates.length);
  let j = Math.floor(random() * (candidates.length - 1));
  if (j >= i) j++;
  const a = candidates[i]!;
  const b = candidates[j]!;
  // Weighted: in-flight requests per unit of weight, so a heavier target is allowed proportionally more.
  return b.active / b.weight < a.active / a.weight ? b : a;
}
