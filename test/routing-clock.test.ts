// The service registry's time is the composition root's clock, and the request path reads it there: a gateway built
// on a test clock ejects a target, answers 503 no_healthy_upstream with the Retry-After of that clock's rest, and
// picks the target again once that clock (not the wall clock) passes the rest's end.
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/util/clock.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { echo, TestUpstream } from './helpers/upstream.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

describe('the service registry on an injected clock', () => {
  it('answers Retry-After from the clock it was given, and ends a rest by it', async () => {
    // Years from the wall clock: an answer reckoned on Date.now() would be far off.
    const clock = new ManualClock(Date.UTC(2031, 0, 1));
    const failing = await TestUpstream.start();
    failing.behaviour = (_req, res) => {
      res.statusCode = 502;
      res.end('{}');
    };
    const healthy = await TestUpstream.start();
    healthy.behaviour = echo;
    cleanup.push(
      () => failing.close(),
      () => healthy.close(),
    );
    const config = testConfig({
      services: { web: { targets: [failing.url, healthy.url], retries: 0, eject: { consecutiveFailures: 1, forMs: 30_000, maxPercent: 50 } } },
      defaultService: 'web',
    });
    const g: TestGateway = await startTestGateway(config, { clock });
    cleanup.push(() => g.close());
    const web = g.gateway.services.get('web')!;
    const [a, b] = web.targets;

    // Round-robin over two targets: within two requests the failing one is tried and rests from the clock's now.
    for (let i = 0; i < 2 && a!.ejectedUntil === 0; i++) await (await fetch(`${g.url}/x`)).text();
    expect(a!.ejectedUntil).toBe(clock.now() + 30_000);

    // The other target fails its active checks (set here, as a check would): no target is available.
    b!.checkHealthy = false;
    const out = await fetch(`${g.url}/x`);
    expect(out.status).toBe(503);
    expect(((await out.json()) as { code: string }).code).toBe('no_healthy_upstream');
    expect(out.headers.get('retry-after')).toBe('30');

    clock.advance(20_000);
    const later = await fetch(`${g.url}/x`);
    await later.text();
    expect([later.status, later.headers.get('retry-after')]).toEqual([503, '10']);

    // The rest ends by the clock: the failing target is picked again (its 502 relayed), with no wall time passed.
    clock.advance(10_000);
    const back = await fetch(`${g.url}/x`);
    await back.text();
    expect(back.status).toBe(502);
  });
});
