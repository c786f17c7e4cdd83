// deploy/kubernetes as CI checks it, from a clean clone and without a cluster: each kustomization (the base; the Redis
// Sentinel and Cluster overlays; the first install with its own Redis; the Ingress with TLS; the gateway's own TLS)
// rendered by `kubectl kustomize`; every object validated against the Kubernetes 1.36 API schemas and the Prometheus
// Operator 0.91 API (kubernetes-models, compiled schemas, no network); and the manifests cross-checked against the
// gateway itself: the ConfigMap's config passes `tollgate config check`, the probes' ports and paths are the ones the
// built gateway answers on, every environment variable is one the code reads, secrets come only from a Secret, the
// drain fits the grace period, every image is pinned, the TLS files are mounted where the config reads them, the
// consumer portal has a Service of its own and is admitted from the ingress alone (never beside the admin port), the
// first install's Redis runs with AOF on a volume, and the PrometheusRule is deploy/prometheus's. The release workflow
// (.github/workflows/release.yml) is checked by running its shell steps.
// Needs dist/ (npm test builds first) and kubectl (Debian's kubernetes-client; .ci/run installs it).
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { get as httpsGet } from 'node:https';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { parseConfigText } from '../src/config/load.js';
import type { Config } from '../src/config/schema.js';
import { CliProcess, REPO, assertBuilt, runCli } from './helpers/cli.js';
import { freePort } from './helpers/redis-server.js';
import { makeCertificates, type TestCertificates } from './helpers/tls.js';
import { track } from './helpers/children.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered manifests are untyped YAML, checked field by field */
type Obj = Record<string, any>;

const KUBERNETES = join(REPO, 'deploy', 'kubernetes');
const VARIANTS = [
  ['base', KUBERNETES],
  ['redis-sentinel', join(KUBERNETES, 'redis-sentinel')],
  ['redis-cluster', join(KUBERNETES, 'redis-cluster')],
  ['first-install', join(KUBERNETES, 'first-install')],
  ['ingress-tls', join(KUBERNETES, 'ingress-tls')],
  ['gateway-tls', join(KUBERNETES, 'gateway-tls')],
] as const;
type Variant = (typeof VARIANTS)[number][0];

/** The kinds every variant renders: the base's, and what each overlay adds to them. */
const BASE_KINDS = [
  'ConfigMap',
  'Deployment',
  'HorizontalPodAutoscaler',
  'NetworkPolicy',
  'PodDisruptionBudget',
  'PrometheusRule',
  'Service',
  'Service',
  'Service',
  'ServiceMonitor',
];
const ADDED_KINDS: Record<Variant, string[]> = {
  base: [],
  'redis-sentinel': [],
  'redis-cluster': [],
  'first-install': ['ConfigMap', 'Service', 'StatefulSet', 'NetworkPolicy'],
  'ingress-tls': ['Ingress', 'Ingress'],
  'gateway-tls': ['Ingress', 'Ingress'],
};
/** The parts of the gateway's config an overlay may change; the rest must stay the base's. */
const CHANGED_CONFIG: Record<Variant, string[][]> = {
  base: [],
  'redis-sentinel': [['redis']],
  'redis-cluster': [['redis']],
  'first-install': [],
  'ingress-tls': [],
  'gateway-tls': [
    ['server', 'tls'],
    ['admin', 'tls'],
    ['portal', 'tls'],
  ],
};

/**
 * The certificate files the listeners' tls blocks name exist only where the pod mounts its Secrets, and the gateway
 * refuses a config whose files it cannot read. The config is checked as the pod would read it: those paths pointed at
 * certificates made here (what is mounted where is checked separately, on the config as written).
 */
let certs: TestCertificates | undefined;

/** The config sections that are listeners of their own, each with its host, port and tls. */
const LISTENERS = ['server', 'admin', 'ops', 'portal'] as const;

/** The config text with each listener's certificate, key and CA file replaced by a readable file of its kind. */
function checkableConfig(text: string): string {
  const doc = parse(text) as Obj;
  if (!LISTENERS.some((l) => doc[l]?.tls)) return text;
  certs ??= makeCertificates();
  for (const listener of LISTENERS) {
    const tls = doc[listener]?.tls as Obj | undefined;
    if (!tls) continue;
    if (tls.certFile) tls.certFile = certs.certFile;
    if (tls.keyFile) tls.keyFile = certs.keyFile;
    if (tls.caFile) tls.caFile = certs.caFile;
  }
  return stringify(doc);
}

/** The model (compiled JSON Schema) of every kind the manifests may hold, by apiVersion and kind. */
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'networking.k8s.io/v1/Ingress': Ingress,
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

/** Why an image reference is not pinned (a version tag other than latest, or a digest), or undefined when it is. */
function imagePinProblem(image: string): string | undefined {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return undefined;
  if (image.includes('@')) return `image ${image}: a digest is sha256: and 64 hex digits`;
  // The tag follows the last ':' of the last path segment (a registry's ':5000' is not a tag).
  const tag = /:([\w][\w.-]{0,127})$/.exec(image.slice(image.lastIndexOf('/') + 1))?.[1];
  if (tag === undefined) return `image ${image} has no tag, which means latest`;
  if (tag === 'latest') return `image ${image} is latest`;
  return undefined;
}

/** The not-for-production marker a first install's own Redis objects carry, as a label and an annotation. */
const NOT_FOR_PRODUCTION = 'tollgate/not-for-production';

/** Redis's config file as a map of directive to its (last) value. */
function redisConf(text: string): Map<string, string> {
  const conf = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\s*([a-z-]+)\s+(.*?)\s*$/i.exec(line);
    if (m && !line.trimStart().startsWith('#')) conf.set(m[1]!.toLowerCase(), m[2]!);
  }
  return conf;
}

/**
 * The first install's own Redis, as a list of problems: one StatefulSet pod running redis-server on the mounted
 * config file, AOF on and no eviction, its data directory on a volumeClaimTemplate, marked not for production on every
 * object, reached at the address and with the password the gateway's config and environment give.
 */
function firstInstallRedisProblems(objects: Obj[]): string[] {
  const problems: string[] = [];
  const fail = (m: string) => problems.push(m);
  const [set, ...more] = objects.filter((o) => o.kind === 'StatefulSet');
  if (!set || more.length) return ['expected exactly one StatefulSet'];
  if (set.spec.replicas !== 1) fail(`StatefulSet replicas ${set.spec.replicas}: a single Redis has exactly one`);
  const pod = set.spec.template;
  const podLabels = pod.metadata?.labels;
  if (!matches(set.spec.selector?.matchLabels, podLabels)) fail('StatefulSet selector does not match its pod labels');
  const [redis] = pod.spec.containers as Obj[];
  if (!redis) return [...problems, 'the StatefulSet has no container'];
  const script = [...(redis?.command ?? []), ...(redis?.args ?? [])].join(' ');
  const confPath = /redis-server (\S+\.conf)/.exec(script)?.[1];
  const confMount = (redis?.volumeMounts as Obj[] | undefined)?.find((m) => m.mountPath === (confPath && dirname(confPath)));
  const confVolume = (pod.spec.volumes as Obj[] | undefined)?.find((v) => v.name === confMount?.name);
  const confMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === confVolume?.configMap?.name);
  const confText = confPath && confMap?.data?.[confPath.slice(confPath.lastIndexOf('/') + 1)];
  if (typeof confText !== 'string') return [...problems, `redis-server's config file ${confPath} is not a key of a mounted ConfigMap`];
  const conf = redisConf(confText);
  if (conf.get('appendonly') !== 'yes') fail(`redis.conf appendonly ${conf.get('appendonly')}: expected yes`);
  if (conf.get('maxmemory-policy') !== 'noeviction') fail(`redis.conf maxmemory-policy ${conf.get('maxmemory-policy')}: expected noeviction`);
  const dataDir = conf.get('dir');
  const dataMount = (redis.volumeMounts as Obj[]).find((m) => m.mountPath === dataDir);
  const claim = (set.spec.volumeClaimTemplates as Obj[] | undefined)?.find((c) => c.metadata.name === dataMount?.name);
  if (!claim) fail(`redis.conf dir ${dataDir}: not a volumeClaimTemplate's mount (the AOF would die with the pod)`);
  else if (!claim.spec.resources?.requests?.storage) fail('the volumeClaimTemplate requests no storage');

  // Marked, every object of its own: a label to select them by, an annotation saying why.
  const own = objects.filter((o) => o === set || o === confMap || matches(o.spec?.selector, podLabels) || matches(o.spec?.podSelector?.matchLabels, podLabels));
  for (const o of [...own, { kind: 'pod template', metadata: pod.metadata }, ...(claim ? [{ kind: 'volumeClaimTemplate', metadata: claim.metadata }] : [])]) {
    if (o.metadata?.labels?.[NOT_FOR_PRODUCTION] !== 'true') fail(`${o.kind}/${o.metadata?.name ?? ''}: no label ${NOT_FOR_PRODUCTION}: 'true'`);
  }
  for (const o of own.filter((x) => x.kind !== 'NetworkPolicy'))
    if (!/first install/.test(o.metadata?.annotations?.[NOT_FOR_PRODUCTION] ?? ''))
      fail(`${o.kind}/${o.metadata.name}: no annotation ${NOT_FOR_PRODUCTION} saying why`);

  // Wired to the gateway: redis.url names its Service and port, the port is redis-server's, the password the same key.
  const cm = objects.find((o) => o.kind === 'ConfigMap' && typeof o.data?.['gateway.yaml'] === 'string');
  const url = new URL(String((parse(cm?.data['gateway.yaml'] as string) as Obj).redis?.url));
  const service = objects.find((o) => o.kind === 'Service' && o.metadata.name === url.hostname.split('.')[0]);
  if (!service) return [...problems, `redis.url ${url.href}: no Service ${url.hostname} here`];
  if (!matches(service.spec.selector, podLabels)) fail(`Service/${service.metadata.name} does not select the Redis pod`);
  const servicePort = (service.spec.ports as Obj[]).find((p) => p.port === Number(url.port || 6379));
  if (!servicePort) fail(`redis.url port ${url.port || 6379} is no port of Service/${service.metadata.name}`);
  const containerPort = (redis.ports as Obj[]).find((p) => p.name === servicePort?.targetPort || p.containerPort === servicePort?.targetPort)?.containerPort;
  if (containerPort === undefined || String(containerPort) !== (conf.get('port') ?? '6379'))
    fail(`Service/${service.metadata.name} targets ${containerPort}, redis-server listens on ${conf.get('port') ?? 6379}`);
  const gateway = objects.find((o) => o.kind === 'Deployment')?.spec.template.spec.containers[0] as Obj | undefined;
  const secretOf = (c: Obj | undefined) => (c?.env as Obj[] | undefined)?.find((e) => e.name === 'REDIS_PASSWORD')?.valueFrom?.secretKeyRef;
  if (!secretOf(redis) || !isDeepStrictEqual(secretOf(redis), secretOf(gateway))) fail("the Redis's REDIS_PASSWORD is not the gateway's Secret key");
  if (!/requirepass "\$REDIS_PASSWORD"/.test(script)) fail('redis-server is not given REDIS_PASSWORD as its password');
  return problems;
}

/**
 * Everything the rendered objects must agree on with each other and with the gateway's code, as a list of problems.
 * `config` is the ConfigMap's gateway config as the code parses it.
 */
function crossProblems(objects: Obj[]): string[] {
  const problems: string[] = [];
  const fail = (m: string) => problems.push(m);
  const of = (kind: string) => objects.filter((o) => o.kind === kind);
  for (const s of of('Secret')) fail(`Secret/${s.metadata?.name}: secrets are never kept in the repository`);
  for (const w of [...of('Deployment'), ...of('StatefulSet')])
    for (const c of [...(w.spec.template.spec.initContainers ?? []), ...w.spec.template.spec.containers] as Obj[]) {
      const problem = imagePinProblem(String(c.image));
      if (problem) fail(`${w.kind}/${w.metadata.name} container ${c.name}: ${problem}`);
    }
  // Objects of other workloads (the first install's Redis) are checked on their own.
  const otherPods = of('StatefulSet').map((s) => s.spec.template.metadata?.labels as Obj | undefined);
  const ofOthers = (selector: Obj | undefined) => otherPods.some((labels) => matches(selector, labels));

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
  const parsed = parseConfigText(checkableConfig(configMap.data[key] as string));
  if (!parsed.ok) return [...problems, `the ConfigMap's config is invalid: ${parsed.errors.join('; ')}`];
  const config: Config = parsed.config;
  // As written: the listeners' certificate paths where the pod mounts them.
  const raw = parse(configMap.data[key] as string) as Obj;
  const gatewayScheme = raw.server?.tls ? 'HTTPS' : 'HTTP';

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
  if ((live?.scheme ?? 'HTTP') !== gatewayScheme) fail(`livenessProbe: scheme ${live?.scheme ?? 'HTTP'}, but the gateway port speaks ${gatewayScheme}`);
  if (config.server.host !== '0.0.0.0') fail(`server.host ${config.server.host}: the kubelet and the Service cannot reach it`);
  if (config.ops && config.ops.host !== '0.0.0.0') fail(`ops.host ${config.ops.host}: the kubelet and Prometheus cannot reach it`);
  // The consumer portal: on, reachable from its Service, in the scheme its tls block says.
  const portalPort = config.portal.port;
  const adminPort = config.admin?.port;
  const portalScheme = raw.portal?.tls ? 'HTTPS' : 'HTTP';
  if (portalPort === undefined) fail('the config has no portal listener (portal.port)');
  else {
    if (config.portal.host !== '0.0.0.0') fail(`portal.host ${config.portal.host}: its Service and the ingress controller cannot reach it`);
    if (![...ports.values()].includes(portalPort)) fail(`no container port is the portal port ${portalPort}`);
  }

  // Termination: the preStop pause plus the drain must end before SIGKILL.
  const pause = Number(container.lifecycle?.preStop?.exec?.command?.[1] ?? container.lifecycle?.preStop?.sleep?.seconds ?? NaN);
  if (!(pause > 0)) fail('no preStop pause: new connections still arrive while the drain starts');
  const grace = pod.spec.terminationGracePeriodSeconds ?? 30;
  if (grace < pause + config.server.drainTimeoutMs / 1000 + 1)
    fail(`terminationGracePeriodSeconds ${grace} < preStop ${pause} s + drainTimeoutMs ${config.server.drainTimeoutMs / 1000} s + 1`);

  // Services, PDB, HPA, ServiceMonitor reach the pods and ports they name.
  const services = of('Service').filter((s) => !ofOthers(s.spec.selector));
  for (const s of services) {
    if (!matches(s.spec.selector, podLabels)) fail(`Service/${s.metadata.name}: selector does not match the pods`);
    for (const p of s.spec.ports as Obj[])
      if (portOf(p.targetPort) === undefined) fail(`Service/${s.metadata.name}: targetPort ${p.targetPort} is no container port`);
  }
  if (!services.some((s) => (s.spec.ports as Obj[]).some((p) => portOf(p.targetPort) === config.server.port))) fail('no Service reaches the gateway port');
  // The portal has a Service of its own (never the clients' or the ops one); no Service reaches the admin listener.
  const reached = (s: Obj) => new Set((s.spec.ports as Obj[]).map((p) => portOf(p.targetPort)));
  if (portalPort !== undefined) {
    const portalServices = services.filter((s) => reached(s).has(portalPort));
    if (portalServices.length === 0) fail('no Service reaches the portal port');
    for (const s of portalServices)
      if (reached(s).size > 1) fail(`Service/${s.metadata.name} reaches the portal port beside another: the portal has a Service of its own`);
  }
  for (const s of services)
    if (adminPort !== undefined && reached(s).has(adminPort))
      fail(`Service/${s.metadata.name} reaches the admin port ${adminPort}: the admin API is loopback only`);
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
  const [policy, ...morePolicies] = of('NetworkPolicy').filter((p) => !ofOthers(p.spec.podSelector?.matchLabels));
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
    // The admin API is reached by `kubectl port-forward`: no rule names its port, and a rule that did (an "admin
    // rule") must never open the portal port with it. The portal port is admitted from where the gateway port is.
    for (const rule of (policy.spec.ingress ?? []) as Obj[]) {
      const named = ((rule.ports ?? []) as Obj[]).map((p) => portOf(p.port));
      if (adminPort === undefined || !named.includes(adminPort)) continue;
      fail(`a NetworkPolicy ingress rule admits the admin port ${adminPort}: the admin API is reached by kubectl port-forward alone`);
      if (portalPort !== undefined && named.includes(portalPort)) fail(`the NetworkPolicy's admin rule opens the portal port ${portalPort} too`);
    }
    if (portalPort !== undefined && !isDeepStrictEqual(admitted.get(portalPort), admitted.get(config.server.port)))
      fail(
        `NetworkPolicy admits ${JSON.stringify(admitted.get(portalPort) ?? [])} to the portal port, ` +
          `${JSON.stringify(admitted.get(config.server.port) ?? [])} to the gateway port: expected the same (the ingress)`,
      );
    const expectedIn = new Map<number | undefined, unknown[]>([[config.server.port, [INGRESS_NAMESPACE]]]);
    if (config.ops) expectedIn.set(config.ops.port, [MONITORING_NAMESPACE]);
    if (portalPort !== undefined) expectedIn.set(portalPort, [INGRESS_NAMESPACE]);
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

  // The listeners' certificates: each file in a Secret volume mounted at its directory, under the key a
  // kubernetes.io/tls Secret gives it, readable by the gateway's user.
  for (const listener of ['server', 'admin', 'portal'] as const) {
    const tls = raw[listener]?.tls as Obj | undefined;
    if (!tls) continue;
    for (const [field, secretKey] of [
      ['certFile', 'tls.crt'],
      ['keyFile', 'tls.key'],
      ['caFile', 'ca.crt'],
    ] as const) {
      const file = tls[field] as string | undefined;
      if (file === undefined) {
        if (field !== 'caFile') fail(`${listener}.tls.${field} is missing`);
        continue;
      }
      const at = `${listener}.tls.${field} ${file}`;
      const m = (container.volumeMounts as Obj[]).find((x) => x.mountPath === dirname(file));
      const secret = (pod.spec.volumes as Obj[]).find((v) => v.name === m?.name)?.secret as Obj | undefined;
      if (!m || !secret?.secretName) {
        fail(`${at}: no Secret volume is mounted at ${dirname(file)}`);
        continue;
      }
      if (m.subPath) fail(`${at}: mounted with subPath, which the kubelet never updates when the certificate is renewed`);
      if (file.slice(dirname(file).length + 1) !== secretKey) fail(`${at}: a kubernetes.io/tls Secret names it ${secretKey}`);
      const mode = (secret.defaultMode as number | undefined) ?? 0o644;
      if ((mode & 0o004) === 0 && ((mode & 0o040) === 0 || podSec.fsGroup === undefined))
        fail(`${at}: mode ${mode.toString(8)} without a readable group (fsGroup): the gateway's user cannot read it`);
    }
  }

  // An Ingress: TLS for every host it serves, to the Service port that reaches the gateway or the portal, in the
  // scheme that listener speaks; with Ingresses, portal.publicUrl (the links' base) is an HTTPS host sent to the portal.
  const portalHosts = new Set<string>();
  for (const ingress of of('Ingress')) {
    const at = `Ingress/${ingress.metadata.name}`;
    const tlsHosts = new Set(((ingress.spec.tls ?? []) as Obj[]).flatMap((t) => (t.secretName ? ((t.hosts ?? []) as string[]) : [])));
    if (tlsHosts.size === 0) fail(`${at}: no TLS (spec.tls with a secretName)`);
    const listeners = new Set<'gateway' | 'portal'>();
    for (const r of (ingress.spec.rules ?? []) as Obj[]) {
      if (!tlsHosts.has(r.host)) fail(`${at}: host ${r.host} has no TLS certificate`);
      for (const path of (r.http?.paths ?? []) as Obj[]) {
        const b = path.backend?.service as Obj | undefined;
        const svc = services.find((x) => x.metadata.name === b?.name);
        const sp = (svc?.spec.ports as Obj[] | undefined)?.find((x) => (b?.port?.name !== undefined ? x.name === b.port.name : x.port === b?.port?.number));
        const target = portOf(sp?.targetPort);
        if (target === config.server.port) listeners.add('gateway');
        else if (portalPort !== undefined && target === portalPort) {
          listeners.add('portal');
          portalHosts.add(r.host);
        } else fail(`${at}: backend ${b?.name}:${b?.port?.name ?? b?.port?.number} does not reach the gateway port or the portal port`);
      }
    }
    const backend = ingress.metadata.annotations?.['nginx.ingress.kubernetes.io/backend-protocol'] ?? 'HTTP';
    for (const l of listeners) {
      const scheme = l === 'portal' ? portalScheme : gatewayScheme;
      if (backend !== scheme) fail(`${at}: backend-protocol ${backend}, but the ${l} port speaks ${scheme}`);
    }
  }
  if (of('Ingress').length > 0 && portalPort !== undefined) {
    const publicUrl = config.portal.publicUrl;
    const url = publicUrl ? new URL(publicUrl) : undefined;
    if (url?.protocol !== 'https:' || !portalHosts.has(url.hostname))
      fail(`portal.publicUrl ${publicUrl}: expected https:// and a host an Ingress sends to the portal port (${[...portalHosts].join(', ')})`);
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
    certs?.remove();
  });

  it.each(VARIANTS.map(([name]) => name))('%s: renders the expected objects, each valid against its API schema', (name) => {
    const objects = rendered.get(name)!;
    expect(objects.map((o) => o.kind).sort()).toEqual([...BASE_KINDS, ...ADDED_KINDS[name]].sort());
    expect(schemaProblems(objects)).toEqual([]);
  });

  it.each(VARIANTS.map(([name]) => name))('%s: agrees with the gateway code, the image and the alerting rules', (name) => {
    expect(crossProblems(rendered.get(name)!)).toEqual([]);
  });

  it.each(VARIANTS.map(([name]) => name))('%s: its ConfigMap passes `tollgate config check` with the built CLI', async (name) => {
    const cm = rendered.get(name)!.find((o) => o.kind === 'ConfigMap')!;
    const file = join(dir, `${name}.yaml`);
    writeFileSync(file, checkableConfig(cm.data['gateway.yaml'] as string));
    const r = await runCli(['config', 'check', '--config', file]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('gateway-tls: its ConfigMap, server.tls and admin.tls included, passes `tollgate config check`', async () => {
    const text = rendered.get('gateway-tls')!.find((o) => o.kind === 'ConfigMap')!.data['gateway.yaml'] as string;
    expect((parse(text) as Obj).server.tls).toBeDefined();
    const certs = makeCertificates();
    try {
      // The files where the Secrets' volumes would put them.
      const file = join(dir, 'gateway-tls-full.yaml');
      writeFileSync(
        file,
        text
          .replaceAll('/etc/tollgate-tls/server/tls.crt', certs.certFile)
          .replaceAll('/etc/tollgate-tls/server/tls.key', certs.keyFile)
          .replaceAll('/etc/tollgate-tls/admin/tls.crt', certs.certFile)
          .replaceAll('/etc/tollgate-tls/admin/tls.key', certs.keyFile),
      );
      const r = await runCli(['config', 'check', '--config', file]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
    } finally {
      certs.remove();
    }
  });

  it('gateway-tls: the built gateway serves HTTPS from the mounted files, where the liveness probe asks', async () => {
    const objects = rendered.get('gateway-tls')!;
    const cm = objects.find((o) => o.kind === 'ConfigMap')!;
    const certs = makeCertificates();
    // Each Secret volume's directory, as the kubelet would fill it: tls.crt and tls.key.
    const mounted = (mountPath: string) => {
      const d = join(dir, mountPath.replaceAll('/', '_'));
      mkdirSync(d, { recursive: true });
      copyFileSync(certs.certFile, join(d, 'tls.crt'));
      copyFileSync(certs.keyFile, join(d, 'tls.key'));
      return d;
    };
    let text = (cm.data['gateway.yaml'] as string).replace(/^( {2}port:) \d+/gm, '$1 0');
    for (const m of containerOf(objects).volumeMounts as Obj[])
      if (m.mountPath.startsWith('/etc/tollgate-tls/')) text = text.replaceAll(`${m.mountPath}/`, `${mounted(m.mountPath)}/`);
    const file = join(dir, 'live-tls.yaml');
    writeFileSync(file, text);
    const proc = CliProcess.start(['serve', '--config', file], { REDIS_URL: 'redis://127.0.0.1:1/0', UPSTREAM_URL: 'http://127.0.0.1:1' });
    try {
      const line = await proc.waitForLog('tollgate gateway listening');
      const url = new URL(String(line.url).replace('0.0.0.0', '127.0.0.1'));
      expect(url.protocol).toBe(`${containerOf(objects).livenessProbe.httpGet.scheme.toLowerCase()}:`);
      const status = await new Promise<number | undefined>((resolve, reject) => {
        const req = httpsGet(
          { host: '127.0.0.1', port: url.port, path: '/healthz', ca: readFileSync(certs.caFile), servername: 'localhost', timeout: 5000 },
          (res) => {
            res.resume();
            resolve(res.statusCode);
          },
        );
        req.on('error', reject);
      });
      expect(status).toBe(200);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
      certs.remove();
    }
  });

  it('each overlay changes only its own part of the config: the rest is the base one', () => {
    const configOf = (name: string) =>
      parse(rendered.get(name)!.find((o) => o.kind === 'ConfigMap' && o.data?.['gateway.yaml'])!.data['gateway.yaml'] as string) as Obj;
    const base = configOf('base');
    const without = (config: Obj, paths: string[][]) => {
      const copy = structuredClone(config);
      for (const path of paths) delete path.slice(0, -1).reduce((o, k) => o?.[k], copy)?.[path.at(-1)!];
      return copy;
    };
    expect(Object.keys(configOf('redis-sentinel').redis)).toContain('sentinel');
    expect(Object.keys(configOf('redis-cluster').redis)).toContain('cluster');
    for (const [name] of VARIANTS) {
      const overlay = configOf(name);
      for (const path of CHANGED_CONFIG[name])
        expect(
          path.reduce((o: Obj | undefined, k) => o?.[k], overlay),
          `${name}: ${path.join('.')}`,
        ).not.toEqual(path.reduce((o: Obj | undefined, k) => o?.[k], base));
      expect(without(overlay, CHANGED_CONFIG[name]), name).toEqual(without(base, CHANGED_CONFIG[name]));
    }
    // The Redis topologies change the config alone.
    const others = (o: Obj[]) => o.filter((x) => x.kind !== 'ConfigMap');
    for (const name of ['redis-sentinel', 'redis-cluster']) expect(others(rendered.get(name)!), name).toEqual(others(rendered.get('base')!));
  });

  it.each(VARIANTS.map(([name]) => name))('%s: every image is pinned: a version tag that is not latest, or a digest', (name) => {
    const images = rendered
      .get(name)!
      .filter((o) => o.spec?.template?.spec?.containers)
      .flatMap((o) => [...(o.spec.template.spec.initContainers ?? []), ...o.spec.template.spec.containers] as Obj[])
      .map((c) => String(c.image));
    expect(images.length).toBeGreaterThan(0);
    expect(images.map(imagePinProblem).filter(Boolean)).toEqual([]);
    expect(images).toContain(`tollgate:${VERSION}`);
  });

  it.each<[string, string | undefined]>([
    ['tollgate:0.1.0', undefined],
    ['registry.example.com:5000/team/tollgate:0.1.0', undefined],
    [`registry.example.com/tollgate:0.1.0@sha256:${'a'.repeat(64)}`, undefined],
    [`registry.example.com/tollgate@sha256:${'b'.repeat(64)}`, undefined],
    ['tollgate:latest', 'image tollgate:latest is latest'],
    ['tollgate', 'image tollgate has no tag, which means latest'],
    ['registry.example.com:5000/tollgate', 'image registry.example.com:5000/tollgate has no tag, which means latest'],
    ['tollgate:0.1.0@sha256:short', 'image tollgate:0.1.0@sha256:short: a digest is sha256: and 64 hex digits'],
  ])('image pinning: %s', (image, problem) => {
    expect(imagePinProblem(image)).toBe(problem);
  });

  it('pinning a digest as docs/kubernetes.md says (kustomize images: digest) renders the image by digest, which the checks accept', () => {
    const overlay = mkdtempSync(join(tmpdir(), 'tollgate-k8s-digest-'));
    try {
      const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;
      writeFileSync(
        join(overlay, 'kustomization.yaml'),
        stringify({
          resources: [relative(overlay, join(KUBERNETES, 'first-install'))],
          images: [{ name: 'tollgate', newName: 'registry.example.com/tollgate', newTag: VERSION, digest }],
        }),
      );
      const objects = render(overlay);
      expect(containerOf(objects).image).toBe(`registry.example.com/tollgate:${VERSION}@${digest}`);
      expect(crossProblems(objects)).toEqual([]);
    } finally {
      rmSync(overlay, { recursive: true, force: true });
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
        {
          from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': INGRESS_NAMESPACE } } }],
          ports: [
            { protocol: 'TCP', port: 'http' },
            { protocol: 'TCP', port: 'portal' },
          ],
        },
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
    // The portal: on all interfaces for its own Service, the links' base the Ingress host of ../ingress-tls.
    expect(config.portal).toEqual({ host: '0.0.0.0', port: 8081, publicUrl: 'https://portal.example.com' });
    const portalService = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'tollgate-portal')!;
    expect(portalService.spec.ports).toEqual([{ name: 'http', port: 80, targetPort: 'portal' }]);
    expect(container.ports).toContainEqual({ name: 'portal', containerPort: 8081 });
  });

  it('the PrometheusRule file is what scripts/gen-prometheus-rule.mjs makes of deploy/prometheus/alerts.yml', () => {
    const r = spawnSync(process.execPath, [join(REPO, 'scripts', 'gen-prometheus-rule.mjs'), '--check'], { cwd: REPO, encoding: 'utf8', timeout: 30_000 });
    expect(r.stdout + r.stderr).toContain('up to date');
    expect(r.status).toBe(0);
  });

  it("the built gateway, run on the base ConfigMap's config, answers the probes where the Deployment points them, and serves the portal", async () => {
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
      // The consumer portal on its own port (the tollgate-portal Service's target): its page.
      const portal = await proc.waitForLog('portal listening');
      expect(await get(`${local(portal.url)}/`)).toBe(200);
    } finally {
      proc.signal('SIGTERM');
      await proc.waitForExit();
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
    // The portal: its own Service and port, from the ingress alone, never beside the admin port.
    [
      'the portal port opened to the monitoring namespace',
      (o) => o.find((x) => x.kind === 'NetworkPolicy')!.spec.ingress[1].ports.push({ protocol: 'TCP', port: 'portal' }),
      'NetworkPolicy admits ["ingress-nginx","monitoring"] to the portal port',
    ],
    [
      'the portal port left out of the ingress rule',
      (o) => (o.find((x) => x.kind === 'NetworkPolicy')!.spec.ingress[0].ports = [{ protocol: 'TCP', port: 'http' }]),
      'NetworkPolicy admits [] to the portal port, ["ingress-nginx"] to the gateway port',
    ],
    [
      'an admin rule that opens the portal port',
      (o) =>
        o
          .find((x) => x.kind === 'NetworkPolicy')!
          .spec.ingress.push({
            from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'support' } } }],
            ports: [
              { protocol: 'TCP', port: 8079 },
              { protocol: 'TCP', port: 'portal' },
            ],
          }),
      "the NetworkPolicy's admin rule opens the portal port 8081 too",
    ],
    [
      'a rule admitting the admin port',
      (o) => o.find((x) => x.kind === 'NetworkPolicy')!.spec.ingress[0].ports.push({ protocol: 'TCP', port: 8079 }),
      'a NetworkPolicy ingress rule admits the admin port 8079',
    ],
    [
      'the portal Service pointed at the admin port',
      (o) => (o.find((x) => x.kind === 'Service' && x.metadata.name === 'tollgate-portal')!.spec.ports[0].targetPort = 8079),
      'Service/tollgate-portal reaches the admin port 8079',
    ],
    [
      "the portal on the clients' Service instead of its own",
      (o) => {
        o.splice(
          o.findIndex((x) => x.kind === 'Service' && x.metadata.name === 'tollgate-portal'),
          1,
        );
        o.find((x) => x.kind === 'Service' && x.metadata.name === 'tollgate')!.spec.ports.push({ name: 'portal', port: 8081, targetPort: 'portal' });
      },
      'Service/tollgate reaches the portal port beside another',
    ],
    [
      'no container port for the portal',
      (o) => (containerOf(o).ports = (containerOf(o).ports as Obj[]).filter((p) => p.name !== 'portal')),
      'no container port is the portal port 8081',
    ],
    [
      'a portal listening on loopback',
      (o) => {
        const cm = o.find((x) => x.kind === 'ConfigMap')!;
        cm.data['gateway.yaml'] = (cm.data['gateway.yaml'] as string).replace('host: 0.0.0.0\n  port: 8081', 'host: 127.0.0.1\n  port: 8081');
      },
      'portal.host 127.0.0.1',
    ],
  ])('cross-check: %s is refused', (_what, mutate, problem) => {
    const objects = structuredClone(rendered.get('base')!);
    mutate(objects);
    expect(crossProblems(objects).join('\n')).toContain(problem);
  });

  // The first install's own Redis.
  const statefulSetOf = (objects: Obj[]) => objects.find((o) => o.kind === 'StatefulSet')!;
  const redisConfMapOf = (objects: Obj[]) => objects.find((o) => o.kind === 'ConfigMap' && o.data?.['redis.conf'])!;

  it('first-install: one Redis with AOF on a volumeClaimTemplate, marked not for production, wired to the gateway config', () => {
    const objects = rendered.get('first-install')!;
    expect(firstInstallRedisProblems(objects)).toEqual([]);
    const set = statefulSetOf(objects);
    expect(redisConf(redisConfMapOf(objects).data['redis.conf'] as string).get('appendonly')).toBe('yes');
    expect(set.spec.volumeClaimTemplates).toHaveLength(1);
    expect(set.metadata.labels[NOT_FOR_PRODUCTION]).toBe('true');
    // Said where a reader of the files sees it first, too.
    for (const f of ['kustomization.yaml', 'redis.yaml', 'redis.conf'])
      expect(readFileSync(join(KUBERNETES, 'first-install', f), 'utf8').split('\n')[0], f).toContain('NOT FOR PRODUCTION');
    // The other variants hold no Redis of their own.
    for (const [name] of VARIANTS)
      if (name !== 'first-install')
        expect(
          rendered.get(name)!.some((o) => o.kind === 'StatefulSet'),
          name,
        ).toBe(false);
  });

  it.each<[string, (o: Obj[]) => void, string]>([
    ['AOF off', (o) => (redisConfMapOf(o).data['redis.conf'] += '\nappendonly no\n'), 'appendonly no: expected yes'],
    ['an evicting Redis', (o) => (redisConfMapOf(o).data['redis.conf'] += 'maxmemory-policy allkeys-lru\n'), 'maxmemory-policy allkeys-lru'],
    ['no volumeClaimTemplate', (o) => delete statefulSetOf(o).spec.volumeClaimTemplates, 'not a volumeClaimTemplate'],
    ['the data on the container filesystem', (o) => (redisConfMapOf(o).data['redis.conf'] += 'dir /tmp\n'), 'dir /tmp: not a volumeClaimTemplate'],
    ['two replicas', (o) => (statefulSetOf(o).spec.replicas = 2), 'StatefulSet replicas 2'],
    [
      'the marker label dropped',
      (o) => delete statefulSetOf(o).metadata.labels[NOT_FOR_PRODUCTION],
      `StatefulSet/tollgate-redis: no label ${NOT_FOR_PRODUCTION}`,
    ],
    ['the marker annotation dropped', (o) => delete statefulSetOf(o).metadata.annotations, 'no annotation'],
    [
      'a gateway config naming another Redis',
      (o) => {
        const cm = o.find((x) => x.kind === 'ConfigMap' && x.data?.['gateway.yaml'])!;
        cm.data['gateway.yaml'] = (cm.data['gateway.yaml'] as string).replace('redis://tollgate-redis:6379/0', 'redis://redis:6379/0');
      },
      'no Service redis here',
    ],
    [
      'a Service on another port',
      (o) => (o.find((x) => x.kind === 'Service' && x.metadata.name === 'tollgate-redis')!.spec.ports[0].port = 6380),
      'redis.url port 6379 is no port',
    ],
    [
      'a password from another Secret',
      (o) => (statefulSetOf(o).spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name = 'redis'),
      "not the gateway's Secret key",
    ],
  ])('first-install check: %s is refused', (_what, mutate, problem) => {
    const objects = structuredClone(rendered.get('first-install')!);
    mutate(objects);
    expect(firstInstallRedisProblems(objects).join('\n')).toContain(problem);
  });

  it.each<[string, (o: Obj[]) => void, string]>([
    [
      'a Redis image by latest',
      (o) => (statefulSetOf(o).spec.template.spec.containers[0].image = 'redis:latest'),
      'container redis: image redis:latest is latest',
    ],
    ['a Redis image without a tag', (o) => (statefulSetOf(o).spec.template.spec.containers[0].image = 'redis'), 'container redis: image redis has no tag'],
  ])('cross-check (first-install): %s is refused', (_what, mutate, problem) => {
    const objects = structuredClone(rendered.get('first-install')!);
    expect(crossProblems(objects)).toEqual([]);
    mutate(objects);
    expect(crossProblems(objects).join('\n')).toContain(problem);
  });

  it("first-install: redis-server run as the StatefulSet runs it, on the rendered redis.conf, keeps an AOF and the gateway's password, and the gateway on that config sees a persistent, non-evicting Redis", async () => {
    const objects = rendered.get('first-install')!;
    const container = statefulSetOf(objects).spec.template.spec.containers[0] as Obj;
    const [shell, flag, script] = container.command as string[];
    expect([shell, flag]).toEqual(['sh', '-c']);
    const data = mkdtempSync(join(tmpdir(), 'tollgate-k8s-redis-'));
    const confFile = join(data, 'redis.conf');
    const conf = redisConfMapOf(objects).data['redis.conf'] as string;
    // The mounted paths (the config file, the data volume) moved to a temporary directory, on loopback and a free port:
    // the rest is the pod's command and file.
    expect(conf).toMatch(/^dir \/data$/m);
    writeFileSync(confFile, conf.replace(/^dir \/data$/m, `dir ${data}`));
    const port = await freePort();
    const local = `${script!.replace('/etc/redis/redis.conf', confFile)} --port ${port} --bind 127.0.0.1 --daemonize no --loglevel warning`;
    const password = 'first-install-pw';
    const redis = track(spawn('sh', ['-c', local], { env: { PATH: process.env.PATH, REDIS_PASSWORD: password }, stdio: 'ignore' }));
    let gateway: CliProcess | undefined;
    let client: Redis | undefined;
    try {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const c = new Redis(port, '127.0.0.1', { password, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        c.on('error', () => {});
        try {
          // Answered, not only accepted: Redis takes connections while it still loads its AOF.
          await c.connect();
          await c.ping();
          client = c;
          break;
        } catch (err) {
          c.disconnect();
          if (Date.now() > deadline) throw err;
          await sleep(100);
        }
      }
      expect(await client!.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await client.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
      // No password, no access: the gateway's REDIS_PASSWORD is the one this Redis asks for (a bare socket, as a client
      // without the password would talk).
      const refused = await new Promise<string>((resolve, reject) => {
        const socket = createConnection({ host: '127.0.0.1', port }, () => socket.write('GET tollgate:x\r\n'));
        socket.setTimeout(5000, () => socket.destroy(new Error('no answer')));
        socket.once('data', (d) => {
          resolve(d.toString());
          socket.destroy();
        });
        socket.on('error', reject);
      });
      expect(refused).toMatch(/^-NOAUTH/);

      const cm = objects.find((o) => o.kind === 'ConfigMap' && o.data?.['gateway.yaml'])!;
      const file = join(dir, 'first-install-live.yaml');
      writeFileSync(file, (cm.data['gateway.yaml'] as string).replace(/^( {2}port:) \d+/gm, '$1 0'));
      gateway = CliProcess.start(['serve', '--config', file], {
        REDIS_URL: `redis://127.0.0.1:${port}/0`,
        REDIS_PASSWORD: password,
        UPSTREAM_URL: 'http://127.0.0.1:1',
      });
      const line = await gateway.waitForLog('tollgate gateway listening');
      const metricsUrl = `${String(line.opsUrl).replace('0.0.0.0', '127.0.0.1')}/metrics`;
      let metrics = '';
      const until = Date.now() + 10_000;
      while (Date.now() < until && !/^tollgate_redis_persistence_disabled 0$/m.test(metrics)) {
        metrics = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) })).text();
        await sleep(200);
      }
      expect(metrics).toMatch(/^tollgate_redis_persistence_disabled 0$/m);
      expect(metrics).toMatch(/^tollgate_redis_eviction_unsafe 0$/m);
      expect(metrics).toMatch(/^tollgate_redis_degraded 0$/m);
      // The gateway's writes reach the append-only file on the volume.
      await client.set('tollgate:first-install-probe', '1');
      expect(existsSync(join(data, 'appendonlydir'))).toBe(true);
    } finally {
      client?.disconnect();
      if (gateway) {
        gateway.signal('SIGTERM');
        await gateway.waitForExit();
      }
      redis.kill('SIGTERM');
      await new Promise((r) => (redis.exitCode !== null ? r(undefined) : redis.once('exit', r)));
      rmSync(data, { recursive: true, force: true });
    }
  });

  // TLS: the Ingress's and the gateway's own.
  const ingressOf = (objects: Obj[]) => objects.find((o) => o.kind === 'Ingress' && o.metadata.name === 'tollgate')!;
  it.each<['ingress-tls' | 'gateway-tls', string, (o: Obj[]) => void, string]>([
    ['ingress-tls', 'an Ingress without TLS', (o) => delete ingressOf(o).spec.tls, 'no TLS (spec.tls with a secretName)'],
    [
      'ingress-tls',
      'a host without a certificate',
      (o) => (ingressOf(o).spec.rules[0].host = 'other.example.com'),
      'host other.example.com has no TLS certificate',
    ],
    [
      'ingress-tls',
      'a backend on the ops Service',
      (o) => (ingressOf(o).spec.rules[0].http.paths[0].backend.service = { name: 'tollgate-ops', port: { name: 'ops' } }),
      'does not reach the gateway port',
    ],
    [
      'ingress-tls',
      'HTTPS to a gateway that speaks HTTP',
      (o) => (ingressOf(o).metadata.annotations['nginx.ingress.kubernetes.io/backend-protocol'] = 'HTTPS'),
      'backend-protocol HTTPS, but the gateway port speaks HTTP',
    ],
    [
      'ingress-tls',
      'sign-in links naming a host no Ingress sends to the portal',
      (o) => {
        const portal = o.find((x) => x.kind === 'Ingress' && x.metadata.name === 'tollgate-portal')!;
        portal.spec.rules[0].host = 'people.example.com';
        portal.spec.tls[0].hosts = ['people.example.com'];
      },
      'portal.publicUrl https://portal.example.com: expected https:// and a host an Ingress sends to the portal port (people.example.com)',
    ],
    [
      'ingress-tls',
      "the portal's Ingress sent to the clients' Service",
      (o) => (o.find((x) => x.kind === 'Ingress' && x.metadata.name === 'tollgate-portal')!.spec.rules[0].http.paths[0].backend.service.name = 'tollgate'),
      'portal.publicUrl https://portal.example.com: expected https:// and a host an Ingress sends to the portal port ()',
    ],
    [
      'gateway-tls',
      'HTTP to a portal that speaks HTTPS',
      (o) =>
        delete o.find((x) => x.kind === 'Ingress' && x.metadata.name === 'tollgate-portal')!.metadata.annotations[
          'nginx.ingress.kubernetes.io/backend-protocol'
        ],
      'Ingress/tollgate-portal: backend-protocol HTTP, but the portal port speaks HTTPS',
    ],
    [
      'gateway-tls',
      'HTTP to a gateway that speaks HTTPS',
      (o) => delete ingressOf(o).metadata.annotations['nginx.ingress.kubernetes.io/backend-protocol'],
      'backend-protocol HTTP, but the gateway port speaks HTTPS',
    ],
    [
      'gateway-tls',
      'a liveness probe in HTTP',
      (o) => delete containerOf(o).livenessProbe.httpGet.scheme,
      'livenessProbe: scheme HTTP, but the gateway port speaks HTTPS',
    ],
    [
      'gateway-tls',
      'the certificate Secret not mounted',
      (o) => (containerOf(o).volumeMounts = (containerOf(o).volumeMounts as Obj[]).filter((m) => m.name !== 'tls')),
      'server.tls.certFile /etc/tollgate-tls/server/tls.crt: no Secret volume is mounted at /etc/tollgate-tls/server',
    ],
    [
      'gateway-tls',
      'the config naming a file the Secret does not have',
      (o) => {
        const cm = o.find((x) => x.kind === 'ConfigMap')!;
        cm.data['gateway.yaml'] = (cm.data['gateway.yaml'] as string).replace('/etc/tollgate-tls/server/tls.key', '/etc/tollgate-tls/server/server.key');
      },
      'server.tls.keyFile /etc/tollgate-tls/server/server.key: a kubernetes.io/tls Secret names it tls.key',
    ],
    [
      'gateway-tls',
      'the admin certificate in the ConfigMap directory',
      (o) => {
        const cm = o.find((x) => x.kind === 'ConfigMap')!;
        cm.data['gateway.yaml'] = (cm.data['gateway.yaml'] as string).replace('/etc/tollgate-tls/admin/tls.crt', '/etc/tollgate/tls.crt');
      },
      'admin.tls.certFile /etc/tollgate/tls.crt: no Secret volume is mounted at /etc/tollgate',
    ],
    [
      'gateway-tls',
      'a key only root can read',
      (o) => {
        delete deploymentOf(o).spec.template.spec.securityContext.fsGroup;
        (deploymentOf(o).spec.template.spec.volumes as Obj[]).find((v) => v.name === 'tls')!.secret.defaultMode = 0o400;
      },
      "mode 400 without a readable group (fsGroup): the gateway's user cannot read it",
    ],
  ])('cross-check (%s): %s is refused', (variant, _what, mutate, problem) => {
    const objects = structuredClone(rendered.get(variant)!);
    expect(crossProblems(objects)).toEqual([]);
    mutate(objects);
    expect(crossProblems(objects).join('\n')).toContain(problem);
  });

  it('gateway-tls: the TLS Secrets are mounted where the config reads them, apart from the ConfigMap', () => {
    const objects = rendered.get('gateway-tls')!;
    const config = parse(objects.find((o) => o.kind === 'ConfigMap')!.data['gateway.yaml'] as string) as Obj;
    const container = containerOf(objects);
    const volumes = deploymentOf(objects).spec.template.spec.volumes as Obj[];
    const secretAt = (path: string) =>
      volumes.find((v) => v.name === (container.volumeMounts as Obj[]).find((m) => m.mountPath === dirname(path))?.name)?.secret?.secretName;
    expect(config.server.tls).toEqual({ certFile: '/etc/tollgate-tls/server/tls.crt', keyFile: '/etc/tollgate-tls/server/tls.key' });
    expect([secretAt(config.server.tls.certFile), secretAt(config.server.tls.keyFile)]).toEqual(['tollgate-tls', 'tollgate-tls']);
    expect([secretAt(config.admin.tls.certFile), secretAt(config.admin.tls.keyFile)]).toEqual(['tollgate-admin-tls', 'tollgate-admin-tls']);
    expect([secretAt(config.portal.tls.certFile), secretAt(config.portal.tls.keyFile)]).toEqual(['tollgate-tls', 'tollgate-tls']);
    expect(container.livenessProbe.httpGet.scheme).toBe('HTTPS');
    // Readiness and metrics stay plain HTTP on the ops port.
    expect(container.readinessProbe.httpGet.scheme).toBeUndefined();
    expect(ingressOf(objects).spec.tls).toEqual([{ hosts: ['api.example.com'], secretName: 'tollgate-ingress-tls' }]);
  });

  // The release workflow: it can only run on GitHub Actions, so its shell steps are run here as Actions would.
  describe('.github/workflows/release.yml', () => {
    const workflow = parse(readFileSync(join(REPO, '.github', 'workflows', 'release.yml'), 'utf8')) as Obj;
    const steps = workflow.jobs.image.steps as Obj[];
    const runStep = (step: Obj, env: Record<string, string>) => {
      const out = mkdtempSync(join(tmpdir(), 'tollgate-release-'));
      const files = { GITHUB_OUTPUT: join(out, 'output'), GITHUB_STEP_SUMMARY: join(out, 'summary') };
      for (const f of Object.values(files)) writeFileSync(f, '');
      // Actions runs a `run:` step with bash -e, in the checkout.
      const r = spawnSync('bash', ['-e', '-c', step.run as string], {
        cwd: REPO,
        encoding: 'utf8',
        timeout: 30_000,
        env: { PATH: process.env.PATH, ...files, ...env },
      });
      const read = (f: string) => readFileSync(f, 'utf8');
      const result = { code: r.status, stdout: r.stdout, output: read(files.GITHUB_OUTPUT), summary: read(files.GITHUB_STEP_SUMMARY) };
      rmSync(out, { recursive: true, force: true });
      return result;
    };
    const versionStep = steps.find((s) => s.id === 'version')!;
    const buildStep = steps.find((s) => s.id === 'build')!;
    const digestStep = steps.find((s) => String(s.run ?? '').includes('digest') || String(s.env?.DIGEST ?? '').includes('digest'))!;

    it('builds the Dockerfile and pushes it on a version tag, with third-party actions on a release, never a branch', () => {
      expect(workflow.on.push.tags).toEqual(['v*.*.*']);
      expect(workflow.permissions).toEqual({ contents: 'read', packages: 'write' });
      expect(buildStep.uses).toMatch(/^docker\/build-push-action@v\d+$/);
      expect(buildStep.with).toMatchObject({ context: '.', file: 'Dockerfile', push: true });
      expect(existsSync(join(REPO, buildStep.with.file as string))).toBe(true);
      expect(buildStep.with.tags).toBe('${{ steps.version.outputs.image }}:${{ steps.version.outputs.version }}');
      for (const s of steps.filter((x) => x.uses)) expect(s.uses, s.uses).toMatch(/@v\d+$/);
      expect(digestStep.env.DIGEST).toBe('${{ steps.build.outputs.digest }}');
    });

    it("refuses a tag that is not package.json's version, and names the image by the owner in lower case", () => {
      const wrong = runStep(versionStep, { GITHUB_REF_NAME: 'v9.9.9', GITHUB_REPOSITORY_OWNER: 'Acme' });
      expect(wrong.code).toBe(1);
      expect(wrong.stdout).toContain(`::error::tag v9.9.9 is not v${VERSION} (package.json)`);
      expect(wrong.output).toBe('');
      const right = runStep(versionStep, { GITHUB_REF_NAME: `v${VERSION}`, GITHUB_REPOSITORY_OWNER: 'Acme' });
      expect(right.code).toBe(0);
      expect(right.output).toBe(`version=${VERSION}\nimage=ghcr.io/acme/tollgate\n`);
    });

    it('prints the pushed digest, and the images: entry it writes renders the gateway by that digest', () => {
      const digest = `sha256:${'fedcba9876543210'.repeat(4)}`;
      const r = runStep(digestStep, { IMAGE: 'ghcr.io/acme/tollgate', VERSION, DIGEST: digest });
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`pushed ghcr.io/acme/tollgate:${VERSION}@${digest}`);
      const block = /```yaml\n([\s\S]*?)```/.exec(r.summary)?.[1];
      const entry = parse(block ?? '') as Obj;
      const overlay = mkdtempSync(join(tmpdir(), 'tollgate-k8s-release-'));
      try {
        writeFileSync(join(overlay, 'kustomization.yaml'), stringify({ resources: [relative(overlay, KUBERNETES)], ...entry }));
        const objects = render(overlay);
        expect(containerOf(objects).image).toBe(`ghcr.io/acme/tollgate:${VERSION}@${digest}`);
        expect(crossProblems(objects)).toEqual([]);
      } finally {
        rmSync(overlay, { recursive: true, force: true });
      }
    });
  });
});
