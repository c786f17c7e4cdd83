// The Prometheus rules and the Grafana dashboard (docs: "Operations"), checked by a real Prometheus (Debian's
// package; .ci/run installs it when missing) scraping a real gateway under a little traffic: `promtool check rules`,
// `check config` and the rules' unit tests (`promtool test rules deploy/prometheus/alerts.test.yml`) pass, every rule loads and evaluates without error, and every expression of the rules and of the
// dashboard is valid PromQL evaluated through Prometheus's HTTP API and names only metrics Tollgate exports.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { CliProcess, runCli } from './helpers/cli.js';
import { freePort, TestRedis } from './helpers/redis-server.js';
import { TestUpstream } from './helpers/upstream.js';
import { waitFor } from './helpers/wait.js';
import { track } from './helpers/children.js';

const run = promisify(execFile);
const PROMETHEUS = process.env.PROMETHEUS_PATH ?? '/usr/bin/prometheus';
const PROMTOOL = process.env.PROMTOOL_PATH ?? '/usr/bin/promtool';
const RULES = fileURLToPath(new URL('../deploy/prometheus/alerts.yml', import.meta.url));
const RULE_TESTS = fileURLToPath(new URL('../deploy/prometheus/alerts.test.yml', import.meta.url));
const DASHBOARD = JSON.parse(readFileSync(new URL('../deploy/grafana/tollgate-dashboard.json', import.meta.url), 'utf8')) as {
  panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
};

let dir: string;
let redis: TestRedis;
let up: TestUpstream;
let gateway: CliProcess;
let gatewayUrl: string;
let prometheus: ChildProcess;
let promUrl: string;
let exported: Set<string>;

async function query(expr: string): Promise<{ status: string; error?: string; data?: { result: unknown[] } }> {
  const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`, { signal: AbortSignal.timeout(5000) });
  return (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
}

/** A Grafana expression as Prometheus takes it: the dashboard's variables filled in as Grafana would. */
function grafanaToPromQL(expr: string): string {
  return expr.replaceAll('$__rate_interval', '1m').replaceAll('$instance', '.*');
}

/** The Tollgate metric names an expression reads (a histogram's _bucket, _sum and _count are its own name's). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(tollgate_[a-z0-9_]+)/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, ''));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tollgate-prom-'));
  redis = await TestRedis.start();
  up = await TestUpstream.start();
  const config = join(dir, 'gateway.yaml');
  writeFileSync(
    config,
    stringify({
      server: { host: '127.0.0.1', port: 0 },
      upstream: { url: up.url },
      redis: { url: redis.url, prefix: 'prom:' },
      plans: { free: { perMinute: 3, perDay: 100 } },
      anonymous: { perMinute: 2 },
    }),
  );
  gateway = CliProcess.start(['serve', '--config', config]);
  gatewayUrl = String((await gateway.waitForLog('tollgate gateway listening')).url);
  // A little of everything: admitted, refused by the window, unknown keys, no key.
  const created = await runCli(['keys', 'create', '--plan', 'free', '--json', '--config', config]);
  const key = (JSON.parse(created.stdout) as { key: string }).key;
  for (const auth of [key, key, key, key, key, 'tg_nope', undefined, undefined, undefined]) {
    const res = await fetch(`${gatewayUrl}/v1/categories`, { headers: auth ? { authorization: `Bearer ${auth}` } : {} });
    await res.arrayBuffer();
  }
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  exported = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));

  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  const promConfig = join(dir, 'prometheus.yml');
  writeFileSync(
    promConfig,
    stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [RULES],
      scrape_configs: [{ job_name: 'tollgate', static_configs: [{ targets: [new URL(gatewayUrl).host] }] }],
    }),
  );
  prometheus = track(
    spawn(
      PROMETHEUS,
      [`--config.file=${promConfig}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    ),
  );
  let stderr = '';
  prometheus.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  await waitFor(
    async () => {
      if (prometheus.exitCode !== null) throw new Error(`prometheus exited: ${stderr}`);
      const r = await query('up{job="tollgate"} == 1').catch(() => undefined);
      return (r?.data?.result.length ?? 0) === 1;
    },
    'Prometheus to scrape the gateway',
    30_000,
    200,
  );
  // Two more scrapes, so that rate() over the traffic has two points.
  await new Promise((r) => setTimeout(r, 2500));
}, 60_000);

afterAll(async () => {
  prometheus?.kill('SIGKILL');
  await gateway?.stop();
  await up?.close();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('deploy/prometheus/alerts.yml and deploy/grafana/tollgate-dashboard.json', () => {
  it('promtool accepts the rules and the config that loads them', async () => {
    const rules = await run(PROMTOOL, ['check', 'rules', RULES]);
    expect(rules.stdout).toMatch(/SUCCESS: \d+ rules found/);
    const config = await run(PROMTOOL, ['check', 'config', join(dir, 'prometheus.yml')]);
    expect(config.stdout).toContain('SUCCESS');
  });

  it("promtool's unit tests of the rules pass (a service with no healthy target on any instance pages after 1m)", async () => {
    const tests = await run(PROMTOOL, ['test', 'rules', RULE_TESTS]);
    expect(tests.stdout).toContain('SUCCESS');
    expect(readFileSync(RULE_TESTS, 'utf8')).toContain('alertname: TollgateServiceNoHealthyTarget');
  });

  it('every rule loads and evaluates in Prometheus without error', async () => {
    const names = (parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<{ alert: string }> }> }).groups.flatMap((g) =>
      g.rules.map((r) => r.alert),
    );
    await waitFor(
      async () => {
        const res = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as {
          data: { groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> };
        };
        const loaded = res.data.groups.flatMap((g) => g.rules);
        return loaded.length === names.length && loaded.every((r) => r.health === 'ok' && !r.lastError);
      },
      'every rule evaluated with health ok',
      10_000,
      200,
    );
  });

  it('every expression is valid PromQL, evaluates, and names only metrics Tollgate exports', async () => {
    const rules = (parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> }).groups.flatMap((g) =>
      g.rules.map((r) => ({ where: `rule ${r.alert}`, expr: String(r.expr) })),
    );
    const panels = DASHBOARD.panels.flatMap((p) => p.targets.map((t) => ({ where: `panel "${p.title}"`, expr: grafanaToPromQL(t.expr) })));
    // A bound: the dashboard gains panels over time.
    expect(panels.length).toBeGreaterThanOrEqual(21);
    const problems: string[] = [];
    for (const { where, expr } of [...rules, ...panels]) {
      const r = await query(expr);
      if (r.status !== 'success') problems.push(`${where}: ${r.error}`);
      for (const name of metricNames(expr)) if (!exported.has(name)) problems.push(`${where}: ${name} is not a metric Tollgate exports`);
    }
    expect(problems).toEqual([]);
    // And the data is there: the traffic above shows in the dashboard's first panel.
    const requests = await query(grafanaToPromQL(DASHBOARD.panels[0]!.targets[0]!.expr));
    expect(requests.data!.result.length).toBeGreaterThan(0);
    // The services panels read the upstream shorthand's service: its tries and its one healthy target.
    const panel = (title: string, i = 0) => grafanaToPromQL(DASHBOARD.panels.find((p) => p.title === title)!.targets[i]!.expr);
    const tries = (await query(panel('Service tries by target and outcome'))).data!.result as Array<{ metric: Record<string, string> }>;
    expect(tries.map((r) => r.metric)).toContainEqual({ service: 'upstream', target: up.url, outcome: '2xx' });
    const healthy = (await query(panel('Healthy targets per service'))).data!.result as Array<{ metric: Record<string, string>; value: [number, string] }>;
    expect(healthy.map((r) => [r.metric.service, r.value[1]])).toEqual([['upstream', '1']]);
    const total = (await query(panel('Healthy targets per service', 1))).data!.result as Array<{ value: [number, string] }>;
    expect(total.map((r) => r.value[1])).toEqual(['1']);
    // And the alert's expression finds nothing to page about.
    expect((await query('max by (service) (tollgate_target_healthy{job="tollgate"}) == 0')).data!.result).toEqual([]);
  });

  it('the check itself catches a wrong metric name and invalid PromQL', async () => {
    expect((await query('sum(rate(tollgate_requests_total[1m]')).status).toBe('error');
    expect(metricNames('rate(tollgate_http_requests_totl[1m])').filter((n) => !exported.has(n))).toEqual(['tollgate_http_requests_totl']);
  });
});
