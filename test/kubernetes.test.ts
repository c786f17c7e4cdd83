// deploy/kubernetes as CI checks it, from a clean clone and without a cluster: each kustomization (the base and the
// Redis Sentinel and Cluster overlays) rendered by `kubectl kustomize`; every object validated against the Kubernetes
// 1.33 API schemas and the Prometheus Operator 0.65 CRDs (kubernetes-models, compiled schemas, no network); and the
// manifests cross-checked against the gateway itself: the ConfigMap's config passes `tollgate config check`, the
// probes' ports and paths are the ones the built gateway answers on, every environment variable is one the code reads,
// secrets come only from a Secret, the drain fits the grace period, and the PrometheusRule is deploy/prometheus's.
// Needs dist/ (npm test builds first) and kubectl (Debian's kubernetes-client; .ci/run installs it).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { parseConfigText } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import { CliProcess, REPO, assertBuilt, runCli } from './helpers/cli.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are untyped YAML, checked field by field */
type Obj = Record<string, any>;

const KUBERNETES = join(REPO, 'deploy', 'kubernetes');
const VARIANTS = [
  ['base', KUBERNETES],
  ['redis-sentinel', join(KUBERNETES, 'redis-sentinel')],
  ['redis-cluster', join(KUBERNETES, 'redis-cluster')],
] as const;

/** The model (compiled JSON Schema) of every kind the manifests may hold, by apiVersion and kind. */
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

function render(dir: string): Obj[] {
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 60_000 });
  if (r.error) throw new Error(`kubectl kustomize could not run (${r.error.message}): install kubectl (Debian: kubernetes-client)`);
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${r.stderr}`);
  return parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj);
}

/** Schema errors of every object, as "Kind/name: message"; a kind the manifests should not hold is one too. */
function schemaProblems(objects: Obj[]): string[] {
  return objects.flatMap((o) => {
    const Model = MODELS[`${o.apiVersion}/${o.kind}`];
    const at = `${o.kind}/${o.metadata?.name}`;
    if (!Model) return [`${at}: no schema for ${o.apiVersion} ${o.kind}`];
    try {
      // On a copy: validation fills in schema defaults, which would change what the other checks see.
      new Model(structuredClone(o)).validate();
      return [];
    } catch (err) {
      return [`${at}: ${(err as Error).message}`];
    }
  });
}

/** Environment variables the gateway's code reads (`env.NAME`, or an override table's `env: 'NAME'`). */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? sourceFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}
const SOURCE = sourceFiles(join(REPO, 'src'))
  .map((f) => readFileSync(f, 'utf8'))
  .join('\n');
const readByCode = (name: string): boolean => new RegExp(`env\\)?\\??\\.${name}\\b|env: '${name}'`).test(SOURCE);

const matches = (selector: Obj | undefined, labels: Obj | undefined): boolean =>
  !!selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

const ALERTS = readFileSync(join(REPO, 'deploy', 'prometheus', 'alerts.yml'), 'utf8');
const VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
/** The namespaces the NetworkPolicy admits: the ingress controller's to the gateway port, Prometheus's to the ops port. */
const INGRESS_NAMESPACE = 'ingress-nginx';
const MONITORING_NAMESPACE = 'monitoring';
/**
 * The memory the Deployment asks for, from measured peaks (docs/kubernetes.md): 202 MiB with a 20,000-key export and
 * the overview under load, 257 MiB with a what-if over the same keys; the request covers the higher one, the limit
 * leaves 99% above it.
 */
const MEMORY_REQUEST = '320Mi';
const MEMORY_LIMIT = '512Mi';
const namespaceOf = (peer: Obj | undefined): unknown => peer?.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'];
const DOCKERFILE_UID = Number(/^USER\s+(\d+)/m.exec(readFileSync(join(REPO, 'Dockerfile'), 'utf8'))?.[1]);

/**
 * Everything the rendered objects must agree on with each other and with the gateway's code, as a list of problems.
 * `config` is the ConfigMap's gateway config as the code parses it.
 */
function crossProblems(objects: Obj[]): string[] {
  const problems: string[] = [];
  const fail = (m: string) => problems.push(m);
  const of = (kind: string) => objects.filter((o) => o.kind === kind);
  for (const s of of('Secret')) fail(`Secret/${s.metadata?.name}: secrets are never kept in the repository`);

  const [deployment, ...moreDeployments] = of('Deployment');
  if (!deployment || moreDeployments.length) return [...problems, 'expected exactly one Deployment'];
  const pod = deployment.spec.template;
  const podLabels = pod.metadata?.labels;
  const [container, ...sidecars] = pod.spec.containers as Obj[];
  if (!container || sidecars.length) return [...problems, 'expected one container'];
  if (deployment.spec.replicas !== 2) fail(`Deployment replicas: ${deployment.spec.replicas}, expected 2`);
  if (!matches(deployment.spec.selector?.matchLabels, podLabels)) fail('Deployment selector does not match its pod labels');

  // Non-root (the image's numeric user), read-only root filesystem, no privilege escalation.
  const podSec = pod.spec.securityContext ?? {};
  const sec = container.securityContext ?? {};
  if (podSec.runAsNonRoot !== true && sec.runAsNonRoot !== true) fail('runAsNonRoot is not true');
  if ((sec.runAsUser ?? podSec.runAsUser) !== DOCKERFILE_UID) fail(`runAsUser is not the image's user ${DOCKERFILE_UID}`);
  if (sec.readOnlyRootFilesystem !== true) fail('readOnlyRootFilesystem is not true');
  if (sec.allowPrivilegeEscalation !== false) fail('allowPrivilegeEscalation is not false');
  for (const kind of ['requests', 'limits'])
    for (const r of ['cpu', 'memory']) if (!container.resources?.[kind]?.[r]) fail(`resources.${kind}.${r} is missing`);
  if (!(pod.spec.topologySpreadConstraints?.length > 0)) fail('no topologySpreadConstraints');

  // The config: mounted whole (a subPath is never updated), named by TOLLGATE_CONFIG, watched.
  const env = (container.env ?? []) as Obj[];
  for (const e of env) {
    if (!readByCode(e.name)) fail(`env ${e.name}: not read by the gateway's code`);
    if (/TOKEN|PASSWORD|SECRET/.test(e.name) && (e.value !== undefined || !e.valueFrom?.secretKeyRef))
      fail(`env ${e.name}: a secret must come from a Secret (secretKeyRef), never a literal value`);
  }
  for (const name of ['TOLLGATE_ADMIN_TOKEN', 'REDIS_PASSWORD']) if (!env.some((e) => e.name === name)) fail(`env ${name}: not taken from the Secret`);
  const configPath = env.find((e) => e.name === 'TOLLGATE_CONFIG')?.value as string | undefined;
  const configMaps = of('ConfigMap');
  const volume = (pod.spec.volumes as Obj[]).find((v) => configMaps.some((c) => c.metadata.name === v.configMap?.name));
  const mount = (container.volumeMounts as Obj[]).find((m) => m.name === volume?.name);
  const configMap = configMaps.find((c) => c.metadata.name === volume?.configMap?.name);
  if (!volume || !mount || !configMap) return [...problems, 'no ConfigMap volume mounted'];
  if (mount.subPath) fail('the config volume is mounted with subPath: the kubelet never updates it, so --watch-config sees nothing');
  const key = configPath?.startsWith(`${mount.mountPath}/`) ? configPath.slice(mount.mountPath.length + 1) : undefined;
  if (!key || typeof configMap.data?.[key] !== 'string') return [...problems, `TOLLGATE_CONFIG ${configPath} is not a key of the mounted ConfigMap`];
  if (!(container.args ?? []).includes('--watch-config')) fail('serve runs without --watch-config: a ConfigMap change would not be reloaded');
  const parsed = parseConfigText(configMap.data[key] as string);
  if (!parsed.ok) return [...problems, `the ConfigMap's config is invalid: ${parsed.errors.join('; ')}`];
  const config: Config = parsed.config;

  // Probes: liveness /healthz on the gateway port, readiness /readyz on the ops port, both listening on all interfaces.
  const ports = new Map<string, number>((container.ports as Obj[]).map((p) => [p.name, p.containerPort]));
  const portOf = (p: unknown) => (typeof p === 'number' ? p : ports.get(String(p)));
  const live = container.livenessProbe?.httpGet;
  const ready = container.readinessProbe?.httpGet;
  if (live?.path !== '/healthz' || portOf(live?.port) !== config.server.port)
    fail(`livenessProbe: expected /healthz on the gateway port ${config.server.port}, found ${live?.path} on ${portOf(live?.port)}`);
  if (!config.ops) fail('the config has no ops listener for /readyz and /metrics');
  else if (ready?.path !== '/readyz' || portOf(ready?.port) !== config.ops.port)
    fail(`readinessProbe: expected /readyz on the ops port ${config.ops.port}, found ${ready?.path} on ${portOf(ready?.port)}`);
  if (config.server.host !== '0.0.0.0') fail(`server.host ${config.server.host}: the kubelet and the Service cannot reach it`);
  if (config.ops && config.ops.host !== '0.0.0.0') fail(`ops.host ${config.ops.host}: the kubelet and Prometheus cannot reach it`);

  // Termination: the preStop pause plus the drain must end before SIGKILL.
  const pause = Number(container.lifecycle?.preStop?.exec?.command?.[1] ?? container.lifecycle?.preStop?.sleep?.seconds ?? NaN);
  if (!(pause > 0)) fail('no preStop pause: new connections still arrive while the drain starts');
  const grace = pod.spec.terminationGracePeriodSeconds ?? 30;
  if (grace < pause + config.server.drainTimeoutMs / 1000 + 1)
    fail(`terminationGracePeriodSeconds ${grace} < preStop ${pause} s + drainTimeoutMs ${config.server.drainTimeoutMs / 1000} s + 1`);

  // Services, PDB, HPA, ServiceMonitor reach the pods and ports they name.
  const services = of('Service');
  for (const s of services) {
    if (!matches(s.spec.selector, podLabels)) fail(`Service/${s.metadata.name}: selector does not match the pods`);
    for (const p of s.spec.ports as Obj[])
      if (portOf(p.targetPort) === undefined) fail(`Service/${s.metadata.name}: targetPort ${p.targetPort} is no container port`);
  }
  if (!services.some((s) => (s.spec.ports as Obj[]).some((p) => portOf(p.targetPort) === config.server.port))) fail('no Service reaches the gateway port');
  const [pdb] = of('PodDisruptionBudget');
  if (!matches(pdb?.spec.selector?.matchLabels, podLabels)) fail('no PodDisruptionBudget selecting the pods');
  const [hpa] = of('HorizontalPodAutoscaler');
  if (hpa?.spec.scaleTargetRef?.kind !== 'Deployment' || hpa.spec.scaleTargetRef.name !== deployment.metadata.name)
    fail('the HorizontalPodAutoscaler does not scale the Deployment');
  if (!(hpa?.spec.metrics as Obj[] | undefined)?.some((m) => m.resource?.name === 'cpu')) fail('the HorizontalPodAutoscaler does not scale on CPU');
  if ((hpa?.spec.minReplicas ?? 1) < 2) fail('the HorizontalPodAutoscaler may scale below 2');

  const [monitor] = of('ServiceMonitor');
  const scraped = services.filter((s) => matches(monitor?.spec.selector?.matchLabels, s.metadata.labels));
  if (scraped.length !== 1) fail(`the ServiceMonitor selects ${scraped.length} Services, expected 1`);
  const endpoint = (monitor?.spec.endpoints as Obj[] | undefined)?.[0];
  const scrapedPort = (scraped[0]?.spec.ports as Obj[] | undefined)?.find((p) => p.name === endpoint?.port);
  if (endpoint?.path !== '/metrics' || !config.ops || portOf(scrapedPort?.targetPort) !== config.ops.port)
    fail(`the ServiceMonitor does not scrape /metrics on the ops port (${endpoint?.path} on ${endpoint?.port})`);
  const job = monitor?.spec.jobLabel ? scraped[0]?.metadata.labels?.[monitor.spec.jobLabel] : scraped[0]?.metadata.name;
  for (const [, alertsJob] of ALERTS.matchAll(/job="([^"]+)"/g)) if (alertsJob !== job) fail(`scrape job "${job}" is not alerts.yml's "${alertsJob}"`);

  // Behind the ingress: one trusted hop, so the client address is the one the ingress saw, not the ingress pod's.
  if (config.server.trustProxy !== 1) fail(`server.trustProxy ${JSON.stringify(config.server.trustProxy)}: behind the ingress it must be 1`);
  // A version tag (the package's), never latest.
  const image = String(container.image);
  if (!image.endsWith(`:${VERSION}`) && !/@sha256:[0-9a-f]{64}$/.test(image)) fail(`image ${image}: expected the tag ${VERSION} or a digest`);

  // The NetworkPolicy: the gateway port only from the ingress namespace, the ops port only from monitoring, nothing
  // else in; out only DNS, Redis and the upstream.
  const [policy, ...morePolicies] = of('NetworkPolicy');
  if (!policy || morePolicies.length) fail('expected exactly one NetworkPolicy');
  else {
    if (!matches(policy.spec.podSelector?.matchLabels, podLabels)) fail('the NetworkPolicy does not select the pods');
    const types = [...(policy.spec.policyTypes ?? [])].sort();
    if (!isDeepStrictEqual(types, ['Egress', 'Ingress'])) fail(`NetworkPolicy policyTypes ${types.join(',')}: expected Ingress and Egress`);
    const admitted = new Map<number | undefined, unknown[]>();
    for (const rule of (policy.spec.ingress ?? []) as Obj[]) {
      const from = (rule.from ?? []) as Obj[];
      if (from.length === 0) fail('a NetworkPolicy ingress rule admits every source');
      for (const peer of from) if (peer.ipBlock || !namespaceOf(peer)) fail('a NetworkPolicy ingress rule admits a source other than a named namespace');
      const rulePorts = (rule.ports ?? []) as Obj[];
      if (rulePorts.length === 0) fail('a NetworkPolicy ingress rule admits every port');
      for (const p of rulePorts) admitted.set(portOf(p.port), [...(admitted.get(portOf(p.port)) ?? []), ...from.map(namespaceOf)]);
    }
    const expectedIn = new Map<number | undefined, unknown[]>([[config.server.port, [INGRESS_NAMESPACE]]]);
    if (config.ops) expectedIn.set(config.ops.port, [MONITORING_NAMESPACE]);
    if (!isDeepStrictEqual(admitted, expectedIn))
      fail(`NetworkPolicy ingress admits ${JSON.stringify([...admitted])}, expected ${JSON.stringify([...expectedIn])}`);
    const egressPorts = ((policy.spec.egress ?? []) as Obj[]).flatMap((r) => ((r.ports ?? []) as Obj[]).map((p) => `${p.protocol ?? 'TCP'}/${p.port}`));
    const redisPorts = [config.redis?.url, ...(config.redis?.sentinel?.sentinels ?? []), ...(config.redis?.cluster?.nodes ?? [])]
      .filter((u): u is string => typeof u === 'string')
      .map((u) => new URL(u).port || '6379');
    const upstreamPort = new URL(config.upstream.url).port || '80';
    const dataPort = config.redis ? ['TCP/6379'] : [];
    for (const need of ['UDP/53', 'TCP/53', ...dataPort, ...redisPorts.map((p) => `TCP/${p}`), `TCP/${upstreamPort}`])
      if (!egressPorts.includes(need)) fail(`NetworkPolicy egress does not allow ${need}`);
  }

  const [rule] = of('PrometheusRule');
  // Compared as data: kubectl kustomize writes keys in its own order.
  if (!isDeepStrictEqual(rule?.spec.groups, (parse(ALERTS) as Obj).groups)) fail('the PrometheusRule is not deploy/prometheus/alerts.yml');
  return problems;
}

describe('deploy/kubernetes', () => {
  let dir: string;
  const rendered = new Map<string, Obj[]>();

  beforeAll(() => {
    assertBuilt();
    dir = mkdtempSync(join(tmpdir(), 'tollgate-k8s-'));
    for (const [name, path] of VARIANTS) rendered.set(name, render(path));
  });
  afterAll(async () => {
    await CliProcess.killAll();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(VARIANTS.map(([name]) => name))('%s: renders the expected objects, each valid against its API schema', (name) => {
    const objects = rendered.get(name)!;
    expect(objects.map((o) => o.kind).sort()).toEqual(
      [
        'ConfigMap',
        'Deployment',
        'HorizontalPodAutoscaler',
        'NetworkPolicy',
        'PodDisruptionBudget',
        'PrometheusRule',
        'Service',
        'Service',
        'ServiceMonitor',
      ].sort(),
    );
    expect(schemaProblems(objects)).toEqual([]);
  });

  it.each(VARIANTS.map(([name]) => name))('%s: agrees with the gateway code, the image and the alerting rules', (name) => {
    expect(crossProblems(rendered.get(name)!)).toEqual([]);
  });

  it.each(VARIANTS.map(([name]) => name))('%s: its ConfigMap passes `tollgate config check` with the built CLI', async (name) => {
    const cm = rendered.get(name)!.find((o) => o.kind === 'ConfigMap')!;
    const file = join(dir, `${name}.yaml`);
    writeFileSync(file, cm.data['gateway.yaml'] as string);
    const r = await runCli(['config', 'check', '--config', file]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('the overlays change only the redis topology: the rest of the config is the base one', () => {
    const configOf = (name: string) => parse(rendered.get(name)!.find((o) => o.kind === 'ConfigMap')!.data['gateway.yaml'] as string) as Obj;
    const base = configOf('base');
    for (const [name, topology] of [
      ['redis-sentinel', 'sentinel'],
      ['redis-cluster', 'cluster'],
    ] as const) {
      const overlay = configOf(name);
      expect(Object.keys(overlay.redis), name).toContain(topology);
      expect({ ...overlay, redis: undefined }, name).toEqual({ ...base, redis: undefined });
      const others = (o: Obj[]) => o.filter((x) => x.kind !== 'ConfigMap');
      expect(others(rendered.get(name)!), name).toEqual(others(rendered.get('base')!));
    }
  });

  it('base: the security fields as a reviewer reads them (NetworkPolicy, trustProxy, image tag, memory)', () => {
    const objects = rendered.get('base')!;
    const policy = objects.find((o) => o.kind === 'NetworkPolicy')!;
    expect(policy.metadata.name).toBe('tollgate');
    expect(policy.spec).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'tollgate' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': INGRESS_NAMESPACE } } }], ports: [{ protocol: 'TCP', port: 'http' }] },
        { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': MONITORING_NAMESPACE } } }], ports: [{ protocol: 'TCP', port: 'ops' }] },
      ],
      egress: [
        {
          to: [
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } },
          ],
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 53 },
          ],
        },
        {
          ports: [
            { protocol: 'TCP', port: 6379 },
            { protocol: 'TCP', port: 26379 },
          ],
        },
        { to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'default' } } }], ports: [{ protocol: 'TCP', port: 8080 }] },
      ],
    });
    const container = containerOf(objects);
    expect(container.image).toBe(`tollgate:${VERSION}`);
    expect(container.resources).toEqual({ requests: { cpu: '500m', memory: MEMORY_REQUEST }, limits: { cpu: '1', memory: MEMORY_LIMIT } });
    const config = parse(objects.find((o) => o.kind === 'ConfigMap')!.data['gateway.yaml'] as string) as Obj;
    expect(config.server.trustProxy).toBe(1);
  });

  it('the PrometheusRule file is what scripts/gen-prometheus-rule.mjs makes of deploy/prometheus/alerts.yml', () => {
    const r = spawnSync(process.execPath, [join(REPO, 'scripts', 'gen-prometheus-rule.mjs'), '--check'], { cwd: REPO, encoding: 'utf8', timeout: 30_000 });
    expect(r.stdout + r.stderr).toContain('up to date');
    expect(r.status).toBe(0);
  });

  it("the built gateway, run on the base ConfigMap's config, answers the probes where the Deployment points them", async () => {
    const cm = rendered.get('base')!.find((o) => o.kind === 'ConfigMap')!;
    // Free ports instead of the fixed ones (other tests run beside this one); a Redis nobody listens on.
    const text = (cm.data['gateway.yaml'] as string).replace(/^( {2}port:) \d+/gm, '$1 0');
    const file = join(dir, 'live.yaml');
    writeFileSync(file, text);
    const proc = CliProcess.start(['serve', '--config', file], { REDIS_URL: 'redis://127.0.0.1:1/0', UPSTREAM_URL: 'http://127.0.0.1:1' });
    try {
      const line = await proc.waitForLog('tollgate gateway listening');
      const local = (u: unknown) => String(u).replace('0.0.0.0', '127.0.0.1');
      const get = async (url: string) => {
        const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
        await res.body?.cancel();
        return res.status;
      };
      expect(await get(`${local(line.url)}/healthz`)).toBe(200);
      // Not ready (no Redis, no upstream here), but answered: 503, not 404.
      expect(await get(`${local(line.opsUrl)}/readyz`)).toBe(503);
      expect(await get(`${local(line.opsUrl)}/metrics`)).toBe(200);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit(15_000);
    }
  });

  // The checks above are only as good as their ability to fail: each broken variant is caught, naming the problem.
  const deploymentOf = (objects: Obj[]) => objects.find((o) => o.kind === 'Deployment')!;
  const containerOf = (objects: Obj[]) => deploymentOf(objects).spec.template.spec.containers[0] as Obj;
  it.each<[string, (o: Obj[]) => void, string]>([
    ['a port given by a string', (o) => (containerOf(o).ports[0].containerPort = '8080'), 'containerPort must be integer'],
    ['replicas as text', (o) => (deploymentOf(o).spec.replicas = 'two'), 'replicas must be integer'],
    ['a container without a name', (o) => delete containerOf(o).name, 'containers/0 must have required property name'],
    [
      'an HPA with no target',
      (o) => delete o.find((x) => x.kind === 'HorizontalPodAutoscaler')!.spec.scaleTargetRef,
      'spec must have required property scaleTargetRef',
    ],
    ['an alert with a bad duration', (o) => (o.find((x) => x.kind === 'PrometheusRule')!.spec.groups[0].rules[0].for = 'a minute'), '/for must match pattern'],
    [
      'a scrape endpoint with a bad interval',
      (o) => (o.find((x) => x.kind === 'ServiceMonitor')!.spec.endpoints[0].interval = '15 s'),
      'interval must match pattern',
    ],
  ])('schema: %s is refused', (_what, mutate, problem) => {
    const objects = structuredClone(rendered.get('base')!);
    mutate(objects);
    expect(schemaProblems(objects).join('\n')).toContain(problem);
  });

  it.each<[string, (o: Obj[]) => void, string]>([
    ['readiness on the gateway port', (o) => (containerOf(o).readinessProbe.httpGet.port = 'http'), 'readinessProbe: expected /readyz on the ops port'],
    ['liveness on a path the gateway does not answer', (o) => (containerOf(o).livenessProbe.httpGet.path = '/health'), 'livenessProbe: expected /healthz'],
    ['a misspelt environment variable', (o) => containerOf(o).env.push({ name: 'REDIS_PASWORD', value: 'x' }), 'env REDIS_PASWORD: not read by'],
    [
      'a literal password',
      (o) => (containerOf(o).env.find((e: Obj) => e.name === 'REDIS_PASSWORD').valueFrom = undefined),
      'env REDIS_PASSWORD: a secret must come from a Secret',
    ],
    [
      'a Secret with data',
      (o) => o.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 's' }, stringData: { 'redis-password': 'x' } }),
      'Secret/s: secrets are never kept',
    ],
    ['the config mounted with subPath', (o) => (containerOf(o).volumeMounts[0].subPath = 'gateway.yaml'), 'mounted with subPath'],
    [
      'a grace period shorter than the drain',
      (o) => (deploymentOf(o).spec.template.spec.terminationGracePeriodSeconds = 10),
      'terminationGracePeriodSeconds 10 <',
    ],
    ['running as root', (o) => (deploymentOf(o).spec.template.spec.securityContext.runAsUser = 0), "runAsUser is not the image's user"],
    ['a writable root filesystem', (o) => (containerOf(o).securityContext.readOnlyRootFilesystem = false), 'readOnlyRootFilesystem is not true'],
    [
      'a config listening on loopback',
      (o) => {
        const cm = o.find((x) => x.kind === 'ConfigMap')!;
        cm.data['gateway.yaml'] = (cm.data['gateway.yaml'] as string).replace('host: 0.0.0.0', 'host: 127.0.0.1');
      },
      'server.host 127.0.0.1',
    ],
    [
      'a PrometheusRule edited by hand',
      (o) => (o.find((x) => x.kind === 'PrometheusRule')!.spec.groups[0].rules[0].expr = 'up == 0'),
      'the PrometheusRule is not deploy/prometheus/alerts.yml',
    ],
    ["a ServiceMonitor whose job is not alerts.yml's", (o) => delete o.find((x) => x.kind === 'ServiceMonitor')!.spec.jobLabel, 'scrape job "tollgate-ops"'],
    [
      'no NetworkPolicy',
      (o) =>
        o.splice(
          o.findIndex((x) => x.kind === 'NetworkPolicy'),
          1,
        ),
      'expected exactly one NetworkPolicy',
    ],
    [
      'a NetworkPolicy admitting every source to the gateway port',
      (o) => delete o.find((x) => x.kind === 'NetworkPolicy')!.spec.ingress[0].from,
      'a NetworkPolicy ingress rule admits every source',
    ],
    [
      'a NetworkPolicy admitting the monitoring namespace to the gateway port',
      (o) => (o.find((x) => x.kind === 'NetworkPolicy')!.spec.ingress[1].ports[0].port = 'http'),
      'NetworkPolicy ingress admits',
    ],
    ['a NetworkPolicy without DNS', (o) => o.find((x) => x.kind === 'NetworkPolicy')!.spec.egress.splice(0, 1), 'NetworkPolicy egress does not allow UDP/53'],
    [
      'a config without trustProxy',
      (o) => {
        const cm = o.find((x) => x.kind === 'ConfigMap')!;
        cm.data['gateway.yaml'] = (cm.data['gateway.yaml'] as string).replace('trustProxy: 1', 'trustProxy: false');
      },
      'server.trustProxy false',
    ],
    ['the latest image', (o) => (containerOf(o).image = 'tollgate:latest'), `image tollgate:latest: expected the tag ${VERSION}`],
  ])('cross-check: %s is refused', (_what, mutate, problem) => {
    const objects = structuredClone(rendered.get('base')!);
    mutate(objects);
    expect(crossProblems(objects).join('\n')).toContain(problem);
  });
});
