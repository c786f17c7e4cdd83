// Passive ejection that no customer can turn against a service, and active checks that mean what they say
// (docs/routing.md, Health): the rules as tables (src/routing/ejection.ts), then the gateway on real upstreams on
// loopback that hang, answer 500 or answer their health path with 404.
import { afterEach, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { countsAsTargetFailure, DEFAULT_EJECT_ON, mayEject, statusMatcher, type EjectOutcome } from '../src/routing/ejection.js';
import { Target } from '../src/routing/target.js';
import { validateConfig } from '../src/config/load.js';
import { startTestGateway, testConfig, type TestGateway } from './helpers/gateway.js';
import { echo, TestUpstream, type Behaviour } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** An upstream that answers `special` for the paths it names and echoes the rest; a hang is ended when the client leaves. */
async function upstream(special: Record<string, 'hang' | number> = {}): Promise<TestUpstream> {
  const u = await TestUpstream.start();
  u.behaviour = ((req, res, body) => {
    const what = special[req.url ?? ''];
    if (what === 'hang') return; // never answers; close() destroys the socket
    if (typeof what === 'number') {
      res.statusCode = what;
      return res.end(`{"status":${what}}`);
    }
    echo(req, res, body);
  }) satisfies Behaviour;
  cleanup.push(() => u.close());
  return u;
}

async function gateway(raw: Record<string, unknown>, keyStages = false): Promise<TestGateway> {
  const g = await startTestGateway(testConfig(raw), { keyStages });
  cleanup.push(() => g.close());
  return g;
}

function web(g: TestGateway) {
  return g.gateway.services.snapshot().find((s) => s.name === 'web')!;
}

async function ejections(g: TestGateway): Promise<number> {
  const text = await (await fetch(`${g.url}/metrics`)).text();
  return [...text.matchAll(/^tollgate_target_ejections_total\{service="web",[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

describe('which outcomes count against a target (eject.on), as a table', () => {
  const all5xx: EjectOutcome[] = ['5xx'];
  const rows: Array<[kind: string | undefined, failed: boolean, on: readonly EjectOutcome[], counts: boolean]> = [
    ['refused', true, DEFAULT_EJECT_ON, true],
    ['connect_timeout', true, DEFAULT_EJECT_ON, true],
    ['reset', true, DEFAULT_EJECT_ON, true],
    ['timeout', true, DEFAULT_EJECT_ON, true],
    ['per_try_timeout', true, DEFAULT_EJECT_ON, true],
    ['status_502', true, DEFAULT_EJECT_ON, true],
    ['status_503', true, DEFAULT_EJECT_ON, true],
    ['status_504', true, DEFAULT_EJECT_ON, true],
    ['status_500', true, DEFAULT_EJECT_ON, false],
    ['status_501', true, DEFAULT_EJECT_ON, false],
    ['status_200', false, DEFAULT_EJECT_ON, false],
    ['status_404', false, DEFAULT_EJECT_ON, false],
    ['status_500', true, all5xx, true],
    ['status_599', true, all5xx, true],
    ['status_404', false, all5xx, false],
    ['refused', true, all5xx, false],
    ['status_500', true, [500], true],
    ['status_503', true, [500], false],
    ['timeout', true, ['connect'], false],
    ['tls', true, DEFAULT_EJECT_ON, true],
    ['tls', true, ['connect'], true],
    ['tls', true, ['reset'], false],
    ['bad_status', true, DEFAULT_EJECT_ON, true],
    ['bad_status', true, ['reset'], true],
    ['bad_status', true, ['connect'], false],
    ['refused', true, [], false],
    ['too_large', true, DEFAULT_EJECT_ON, false],
    [undefined, true, DEFAULT_EJECT_ON, false],
  ];
  it.each(rows)('%s (failed %s) with on=%j counts: %s', (kind, failed, on, counts) => {
    expect(countsAsTargetFailure(kind, failed, on)).toBe(counts);
  });
});

describe('whether one more target may be ejected (mayEject), as a table', () => {
  const NOW = 1_000_000;
  /** n targets; `out` of them resting, `failingChecks` of them out by their checks. */
  function service(n: number, out = 0, failingChecks = 0): Target[] {
    const ts = Array.from({ length: n }, (_, i) => new Target(`http://127.0.0.1:${10_000 + i}`, 1, { maxSockets: 1 }));
    cleanup.push(() => ts.forEach((t) => t.agent.destroy()));
    ts.slice(0, out).forEach((t) => (t.ejectedUntil = NOW + 1000));
    ts.slice(out, out + failingChecks).forEach((t) => (t.checkHealthy = false));
    return ts;
  }
  const rows: Array<[targets: number, resting: number, failingChecks: number, maxPercent: number, may: boolean]> = [
    [1, 0, 0, 100, false], // the only target
    [2, 0, 0, 50, true],
    [2, 1, 0, 50, false],
    [2, 1, 0, 100, false], // the last available, whatever maxPercent says
    [2, 0, 1, 100, false], // the other is out by its checks
    [3, 0, 0, 50, true],
    [3, 1, 0, 50, false], // 2 of 3 is over 50%
    [4, 0, 0, 50, true],
    [4, 1, 0, 50, true], // 2 of 4
    [4, 2, 0, 50, false],
    [4, 1, 1, 50, false], // one resting, one failing checks: 3 of 4 would be out
    [4, 0, 0, 25, true],
    [4, 1, 0, 25, false],
    [4, 0, 0, 10, false], // less than one target's share: none
    [4, 0, 0, 0, false],
    [10, 2, 0, 30, true],
    [10, 3, 0, 30, false],
  ];
  it.each(rows)('%i targets, %i resting, %i failing checks, maxPercent %i: may eject %s', (n, out, failing, maxPercent, may) => {
    const ts = service(n, out, failing);
    expect(mayEject(ts, ts[n - 1]!, NOW, maxPercent)).toBe(may);
  });
  it('a target already resting is not ejected again (its rest is not lengthened)', () => {
    const ts = service(4, 1);
    expect(mayEject(ts, ts[0]!, NOW, 100)).toBe(false);
  });
});

describe('healthCheck.expectedStatuses', () => {
  it.each([
    [['200-399'], 200, true],
    [['200-399'], 302, true],
    [['200-399'], 399, true],
    [['200-399'], 404, false],
    [['200-399'], 199, false],
    [['200-399'], 500, false],
    [[200, '204'], 204, true],
    [[200, '204'], 201, false],
    [['200-299', 404], 404, true],
  ] as Array<[Array<number | string>, number, boolean]>)('%j passes %i: %s', (expected, status, passes) => {
    expect(statusMatcher(expected)(status)).toBe(passes);
  });

  it('the schema refuses a range upside down, a status out of 100-599 and text', () => {
    const check = (expectedStatuses: unknown) =>
      validateConfig({ services: { web: { targets: ['http://127.0.0.1:1'], healthCheck: { path: '/healthz', expectedStatuses } } } });
    for (const bad of [['399-200'], [600], ['2xx'], ['200-'], [], [99]]) {
      const r = check(bad);
      expect(r.ok, JSON.stringify(bad)).toBe(false);
      if (!r.ok) expect(r.errors.join('\n')).toContain('services.web.healthCheck.expectedStatuses');
    }
    const ok = check(undefined);
    expect(ok.ok).toBe(true);
    if (ok.ok) expect(ok.config.services!.web!.healthCheck!.expectedStatuses).toEqual(['200-399']);
  });

  it("the schema defaults eject.maxPercent to 50 and eject.on to the target's own failures; refuses unknown outcomes", () => {
    const r = validateConfig({ services: { web: { targets: ['http://127.0.0.1:1'] } } });
    expect(r.ok).toBe(true);
    if (r.ok)
      expect(r.config.services!.web!.eject).toEqual({
        consecutiveFailures: 5,
        forMs: 30_000,
        maxPercent: 50,
        on: ['connect', 'reset', 'timeout', 502, 503, 504],
      });
    for (const eject of [{ maxPercent: 101 }, { on: ['500s'] }, { on: [404] }]) {
      const bad = validateConfig({ services: { web: { targets: ['http://127.0.0.1:1'], eject } } });
      expect(bad.ok, JSON.stringify(eject)).toBe(false);
    }
  });
});

describe('no customer can take a service down', () => {
  it('a key making ten requests that time out cannot take a two-target service offline: its public route still answers', async () => {
    const a = await upstream({ '/web/slow': 'hang' });
    const b = await upstream({ '/web/slow': 'hang' });
    const key = generateKey();
    const g = await gateway(
      {
        services: { web: { targets: [a.url, b.url], timeoutMs: 200, retries: 0 } },
        routes: [
          { path: '/web/*', service: 'web' },
          { path: '/status', service: 'web', auth: 'none' },
        ],
        keys: [{ id: 'key_free', plan: 'free', sha256: hashKey(key) }],
      },
      true,
    );
    const statuses = [];
    for (let i = 0; i < 10; i++) statuses.push((await fetch(`${g.url}/web/slow`, { headers: { authorization: `Bearer ${key}` } })).status);
    expect(statuses).toEqual(Array(10).fill(504));
    // Each target failed five in a row; one rests, the other is the last available and stays in.
    expect(web(g)).toMatchObject({ healthy: 1, total: 2 });
    expect(
      web(g)
        .targets.map((t) => t.state)
        .sort(),
    ).toEqual(['ejected', 'healthy']);
    expect(await ejections(g)).toBe(1);
    for (let i = 0; i < 4; i++) {
      const r = await fetch(`${g.url}/status`);
      expect(r.status).toBe(200);
      await r.text();
    }
  });

  it('a 500 from the application ejects nothing by default; with eject.on: [5xx] it does, one target of two at most', async () => {
    const a = await upstream({ '/boom': 500 });
    const b = await upstream({ '/boom': 500 });
    const g = await gateway({ services: { web: { targets: [a.url, b.url], retries: 0 } }, defaultService: 'web' });
    for (let i = 0; i < 12; i++) expect((await fetch(`${g.url}/boom`)).status).toBe(500);
    expect(web(g)).toMatchObject({ healthy: 2, total: 2 });
    expect(web(g).targets.map((t) => t.recentErrors.at(-1)?.kind)).toEqual(['status_500', 'status_500']);
    expect(await ejections(g)).toBe(0);

    const c = await upstream({ '/boom': 500 });
    const d = await upstream({ '/boom': 500 });
    const strict = await gateway({ services: { web: { targets: [c.url, d.url], retries: 0, eject: { on: ['5xx'] } } }, defaultService: 'web' });
    for (let i = 0; i < 12; i++) expect((await fetch(`${strict.url}/boom`)).status).toBe(500);
    expect(web(strict)).toMatchObject({ healthy: 1, total: 2 });
    expect(await ejections(strict)).toBe(1);
  });

  it('a 500 between failures ends the run: the target answered', async () => {
    const flaky = await upstream({ '/slow': 'hang', '/boom': 500 });
    const other = await upstream();
    const g = await gateway({
      // A timeout long enough that only the hanging path ever reaches it, on a loaded machine too.
      services: { web: { targets: [flaky.url, other.url], balance: 'round-robin', timeoutMs: 1000, retries: 0, eject: { consecutiveFailures: 2 } } },
      defaultService: 'web',
    });
    // Round-robin: requests 0, 2, 4 go to the flaky target: timeout, 500, timeout. Never two failures in a row.
    for (const path of ['/slow', '/x', '/boom', '/x', '/slow', '/x']) await (await fetch(`${g.url}${path}`)).text();
    expect(web(g).targets[0]).toMatchObject({ url: flaky.url, state: 'healthy', consecutiveFailures: 1 });
  });

  it('maxPercent with 4 targets: 50% lets two of them rest, 25% one; a target out by its checks counts', async () => {
    const run = async (eject: Record<string, unknown>, healthCheck?: Record<string, unknown>) => {
      const ups = [];
      for (let i = 0; i < 4; i++) ups.push(await upstream({ '/slow': 'hang', '/healthz': i === 0 && healthCheck ? 503 : 200 }));
      const g = await gateway({
        services: {
          web: { targets: ups.map((u) => u.url), timeoutMs: 150, retries: 0, eject: { consecutiveFailures: 2, forMs: 60_000, ...eject }, healthCheck },
        },
        defaultService: 'web',
      });
      if (healthCheck) await waitFor(() => web(g).healthy === 3, 'the first target failing its checks');
      // Enough failures for every target still in: each gets at least two in a row.
      for (let i = 0; i < 12; i++) expect((await fetch(`${g.url}/slow`)).status).toBe(504);
      return web(g);
    };
    const half = await run({});
    expect(half).toMatchObject({ healthy: 2, total: 4 });
    expect(half.targets.filter((t) => t.state === 'ejected')).toHaveLength(2);

    const quarter = await run({ maxPercent: 25 });
    expect(quarter).toMatchObject({ healthy: 3, total: 4 });
    expect(quarter.targets.filter((t) => t.state === 'ejected')).toHaveLength(1);

    const withCheck = await run({}, { path: '/healthz', intervalMs: 100, timeoutMs: 500, unhealthyAfter: 1, healthyAfter: 1 });
    expect(withCheck).toMatchObject({ healthy: 2, total: 4 });
    expect(
      withCheck.targets
        .map((t) => t.state)
        .filter((s) => s !== 'healthy')
        .sort(),
    ).toEqual(['ejected', 'health_check']);
  });
});

describe('active checks', () => {
  it('a health path answering 404 fails the check; expectedStatuses can say otherwise', async () => {
    const missing = await upstream({ '/healthz': 404 });
    const fine = await upstream({ '/healthz': 200 });
    const hc = { path: '/healthz', intervalMs: 100, timeoutMs: 500, unhealthyAfter: 2, healthyAfter: 1 };
    const g = await gateway({ services: { web: { targets: [missing.url, fine.url], healthCheck: hc } }, defaultService: 'web' });
    await waitFor(() => web(g).targets[0]!.state === 'health_check', 'the 404 target failing its checks');
    expect(web(g)).toMatchObject({ healthy: 1, total: 2 });
    expect(web(g).targets[0]!.recentErrors.at(-1)!.kind).toBe('health_check');

    const checksBefore = missing.seen.filter((s) => s.url === '/healthz').length;
    const lenient = await gateway({
      services: { web: { targets: [missing.url, fine.url], healthCheck: { ...hc, expectedStatuses: ['200-299', 404] } } },
      defaultService: 'web',
    });
    // Six more checks of the 404 target by each gateway (two would take it out): it stays in.
    await waitFor(() => missing.seen.filter((s) => s.url === '/healthz').length >= checksBefore + 12, 'six more checks by each gateway', 30_000);
    expect(web(lenient)).toMatchObject({ healthy: 2, total: 2 });
  });

  it('a passing check ends a passive rest long before eject.forMs', async () => {
    const resting = await upstream({ '/slow': 'hang', '/healthz': 200 });
    const other = await upstream({ '/healthz': 200 });
    const g = await gateway({
      services: {
        web: {
          targets: [resting.url, other.url],
          timeoutMs: 600,
          retries: 0,
          eject: { consecutiveFailures: 2, forMs: 60_000 },
          healthCheck: { path: '/healthz', intervalMs: 200, timeoutMs: 500, unhealthyAfter: 2, healthyAfter: 2 },
        },
      },
      defaultService: 'web',
    });
    // Round-robin: the first and third requests reach the resting target and time out; then it is ejected.
    for (const path of ['/slow', '/x', '/slow']) await (await fetch(`${g.url}${path}`)).text();
    expect(await ejections(g)).toBe(1);
    const ejectedAt = Date.now();
    await waitFor(() => web(g).targets[0]!.state === 'healthy', 'the rest ended by a passing check', 30_000);
    expect(Date.now() - ejectedAt).toBeLessThan(3000);
    const before = resting.seen.filter((s) => s.url === '/y').length;
    for (let i = 0; i < 4; i++) await (await fetch(`${g.url}/y`)).text();
    expect(resting.seen.filter((s) => s.url === '/y').length - before).toBe(2);
  });
});
