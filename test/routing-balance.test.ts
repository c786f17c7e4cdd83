// Target choice within a service (docs/routing.md, "Balancing"): weighted round-robin gives each target its weight's
// share, interleaved; least-requests (power of two choices) steers away from a target that is slow to answer. Real
// upstream servers on loopback count what reaches each.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slow } from './helpers/fault-upstream.js';
import { startTestGateway, testConfig } from './helpers/gateway.js';
import { TestUpstream } from './helpers/upstream.js';

let ups: TestUpstream[];
beforeAll(async () => {
  ups = await Promise.all([TestUpstream.start(), TestUpstream.start(), TestUpstream.start()]);
});
afterAll(async () => {
  await Promise.all(ups.map((u) => u.close()));
});

async function get(url: string): Promise<number> {
  const res = await fetch(url);
  await res.arrayBuffer();
  return res.status;
}

describe('weighted round-robin', () => {
  it('spreads requests by weight (1:2:3), interleaved rather than in runs', async () => {
    for (const u of ups) u.seen.length = 0;
    const g = await startTestGateway(
      testConfig({
        services: { web: { targets: [ups[0]!.url, { url: ups[1]!.url, weight: 2 }, { url: ups[2]!.url, weight: 3 }] } },
        routes: [{ path: '/w/*', service: 'web' }],
      }),
    );
    try {
      const order: number[] = [];
      for (let i = 0; i < 120; i++) {
        expect(await get(`${g.url}/w/${i}`)).toBe(200);
        order.push(ups.findIndex((u) => u.seen.some((s) => s.url === `/w/${i}`)));
      }
      const counts = [0, 1, 2].map((t) => order.filter((o) => o === t).length);
      // Within 5% of 20/40/60 (the smooth algorithm gives them exactly).
      expect(Math.abs(counts[0]! - 20)).toBeLessThanOrEqual(6);
      expect(Math.abs(counts[1]! - 40)).toBeLessThanOrEqual(6);
      expect(Math.abs(counts[2]! - 60)).toBeLessThanOrEqual(6);
      // Interleaved: the heaviest target never gets more than 2 in a row.
      let run = 0;
      let longest = 0;
      for (const o of order) {
        run = o === 2 ? run + 1 : 0;
        longest = Math.max(longest, run);
      }
      expect(longest).toBeLessThanOrEqual(2);
    } finally {
      await g.close();
    }
  });
});

describe('least-requests', () => {
  it('sends fewer requests to a target that is slow to answer; round-robin would give it half', async () => {
    for (const u of ups) u.seen.length = 0;
    ups[0]!.behaviour = slow(300);
    const g = await startTestGateway(
      testConfig({
        services: { web: { targets: [ups[0]!.url, ups[1]!.url], balance: 'least-requests' } },
        routes: [{ path: '/l/*', service: 'web' }],
      }),
    );
    try {
      // 4 clients, each sending its next request when the last one is answered, 15 each: the slow target keeps the
      // ones it got in flight, so the other is the less busy of the two most of the time.
      const statuses = (
        await Promise.all(
          Array.from({ length: 4 }, async (_, c) => {
            const mine: number[] = [];
            for (let i = 0; i < 15; i++) mine.push(await get(`${g.url}/l/${c}-${i}`));
            return mine;
          }),
        )
      ).flat();
      expect(statuses.every((s) => s === 200)).toBe(true);
      const slowCount = ups[0]!.seen.length;
      const fastCount = ups[1]!.seen.length;
      expect(slowCount + fastCount).toBe(60);
      expect(slowCount).toBeLessThan(15);
    } finally {
      ups[0]!.behaviour = (await import('./helpers/upstream.js')).echo;
      await g.close();
    }
  });
});
