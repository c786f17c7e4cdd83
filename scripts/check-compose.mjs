#!/usr/bin/env node
// Validates docker-compose.yml without a Docker engine (CI has none): structure, cross-references,
// files it mounts or names, the gateway config through the built CLI (`npm run build` first), and what the
// Dockerfile it builds promises (maintained Node.js LTS, non-root, listening on all interfaces, HEALTHCHECK).
// Usage: node scripts/check-compose.mjs [path/to/docker-compose.yml]   Exit 0 when valid, 1 listing every problem.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const composePath = resolve(process.argv[2] ?? join(repoRoot, 'docker-compose.yml'));
// Relative paths in a compose file are relative to the file's own directory.
const projectDir = dirname(composePath);
// Where the Dockerfile puts the repository (WORKDIR /app; COPY config ./config), to map in-container paths back.
const IMAGE_APP_DIR = '/app/';
const DEPENDS_CONDITIONS = new Set(['service_started', 'service_healthy', 'service_completed_successfully']);

const errors = [];
const fail = (msg) => errors.push(msg);
const rel = (p) => relative(process.cwd(), p) || '.';
const isMapping = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isFile = (p) => existsSync(p) && statSync(p).isFile();

function main() {
  if (!isFile(composePath)) {
    console.error(`check-compose: ${rel(composePath)} not found`);
    process.exit(1);
  }
  // `merge: true` lets `<<: *anchor` work as it does in Docker Compose.
  const doc = parseDocument(readFileSync(composePath, 'utf8'), { merge: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    console.error(`check-compose: ${rel(composePath)} is not valid YAML:`);
    for (const e of doc.errors) console.error(`  ${e.message}`);
    process.exit(1);
  }
  const compose = doc.toJS();
  if (!isMapping(compose) || !isMapping(compose.services) || Object.keys(compose.services).length === 0) {
    console.error(`check-compose: ${rel(composePath)} has no services mapping`);
    process.exit(1);
  }

  const services = compose.services;
  const names = new Set(Object.keys(services));
  const publishedBy = new Map(); // "ip:port/proto" -> service
  const configFiles = new Set(); // repo-relative gateway config files to run through `config check`

  for (const [name, svc] of Object.entries(services)) {
    const at = `services.${name}`;
    if (!isMapping(svc)) {
      fail(`${at}: expected a mapping`);
      continue;
    }
    checkImageOrBuild(at, svc);
    checkDependsOn(at, name, svc, services, names);
    const replicas = svc.deploy?.replicas ?? 1;
    if (!Number.isInteger(replicas) || replicas < 0) fail(`${at}.deploy.replicas: expected a whole number, found ${JSON.stringify(replicas)}`);
    if (replicas > 1 && svc.container_name) fail(`${at}: container_name cannot be set with deploy.replicas ${replicas} (names must be unique)`);
    checkPorts(at, name, svc, replicas, publishedBy);
    const mounts = checkVolumes(at, svc, compose.volumes);
    checkRedisKeepsData(at, svc);
    for (const file of configReferences(at, svc, mounts)) configFiles.add(file);
    for (const { source, target } of mounts) {
      if (target.startsWith('/etc/nginx/')) checkNginxUpstreams(`${at}.volumes (${target})`, source, names);
    }
  }

  for (const file of configFiles) runConfigCheck(file);
  for (const file of dockerfiles(services)) checkDockerfile(file);

  if (errors.length > 0) {
    console.error(`check-compose: ${rel(composePath)} has ${errors.length} problem${errors.length === 1 ? '' : 's'}:`);
    for (const e of errors) console.error(`  - ${e}`);
    process.exit(1);
  }
  console.log(
    `check-compose: ${rel(composePath)} OK (${names.size} services: ${[...names].join(', ')}; configs checked: ${[...configFiles].join(', ') || 'none'})`,
  );
}

function checkImageOrBuild(at, svc) {
  if (!svc.image && !svc.build) fail(`${at}: needs "image" or "build"`);
  if (!svc.build) return;
  const build = typeof svc.build === 'string' ? { context: svc.build } : svc.build;
  if (!isMapping(build) || typeof (build.context ?? '.') !== 'string') {
    fail(`${at}.build: expected a path or a mapping with "context"`);
    return;
  }
  const context = resolve(projectDir, build.context ?? '.');
  const dockerfile = resolve(context, build.dockerfile ?? 'Dockerfile');
  if (!existsSync(context)) fail(`${at}.build.context: ${rel(context)} does not exist`);
  else if (!isFile(dockerfile)) fail(`${at}.build: Dockerfile ${rel(dockerfile)} does not exist`);
}

/** The Dockerfiles the services build, each once. */
function dockerfiles(services) {
  const files = new Set();
  for (const svc of Object.values(services)) {
    if (!isMapping(svc) || !svc.build) continue;
    const build = typeof svc.build === 'string' ? { context: svc.build } : svc.build;
    const file = resolve(projectDir, build.context ?? '.', build.dockerfile ?? 'Dockerfile');
    if (isFile(file)) files.add(file);
  }
  return files;
}

/**
 * Node.js LTS lines still maintained (22 until April 2027, 24 until April 2028): an image built from another line
 * gets no security fixes.
 */
const MAINTAINED_NODE_LTS = new Set([22, 24]);

/**
 * What the image promises whoever runs it: built from a maintained Node.js LTS line; its final stage runs as a numeric,
 * non-root user (Kubernetes' runAsNonRoot cannot verify a named one); the gateway listens on all interfaces (else
 * neither a published port nor a Service reaches it); a HEALTHCHECK; the gateway port exposed.
 */
function checkDockerfile(file) {
  const where = rel(file);
  // Instructions with their continuation lines joined, comments dropped.
  const lines = readFileSync(file, 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const froms = lines.map((l, i) => [l, i]).filter(([l]) => /^FROM\s/i.test(l));
  if (froms.length === 0) return fail(`${where}: no FROM`);
  for (const [line] of froms) {
    const image = line.split(/\s+/)[1] ?? '';
    const m = /^(?:docker\.io\/(?:library\/)?)?node:(\d+)/.exec(image);
    if (!m) fail(`${where}: ${line}: expected an official node:<LTS> base image`);
    else if (!MAINTAINED_NODE_LTS.has(Number(m[1])))
      fail(`${where}: ${line}: Node.js ${m[1]} is not a maintained LTS line (${[...MAINTAINED_NODE_LTS].join(', ')})`);
  }
  const last = lines.slice(froms[froms.length - 1][1]);
  const users = last.filter((l) => /^USER\s/i.test(l)).map((l) => l.split(/\s+/)[1] ?? '');
  const user = users[users.length - 1];
  if (user === undefined) fail(`${where}: the final stage has no USER: the process would run as root`);
  else if (!/^\d+(:\d+)?$/.test(user) || Number(user.split(':')[0]) === 0)
    fail(`${where}: USER ${user}: expected a numeric non-root user (uid[:gid], not 0): Kubernetes' runAsNonRoot cannot verify a name`);
  const env = {};
  for (const l of last.filter((x) => /^ENV\s/i.test(x))) {
    for (const m of l.slice(4).matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)/g)) env[m[1]] = m[2].replace(/^"|"$/g, '');
  }
  if (!['0.0.0.0', '::'].includes(env.HOST))
    fail(`${where}: the final stage must set ENV HOST=0.0.0.0: config/gateway.yaml listens on 127.0.0.1, unreachable from outside the container`);
  if (!last.some((l) => /^HEALTHCHECK\s+(?!NONE)/i.test(l))) fail(`${where}: the final stage has no HEALTHCHECK`);
  if (!last.some((l) => /^EXPOSE\s+(.*\s)?8080(\/tcp)?(\s|$)/i.test(l))) fail(`${where}: the final stage does not EXPOSE 8080, the gateway port`);
}

function dockerfileHasHealthcheck(svc) {
  if (!svc.build) return false;
  const build = typeof svc.build === 'string' ? { context: svc.build } : svc.build;
  const dockerfile = resolve(projectDir, build.context ?? '.', build.dockerfile ?? 'Dockerfile');
  return isFile(dockerfile) && /^\s*HEALTHCHECK\s+(?!NONE)/im.test(readFileSync(dockerfile, 'utf8'));
}

function checkDependsOn(at, name, svc, services, names) {
  if (svc.depends_on === undefined) return;
  let deps;
  if (Array.isArray(svc.depends_on)) deps = svc.depends_on.map((d) => [d, { condition: 'service_started' }]);
  else if (isMapping(svc.depends_on)) deps = Object.entries(svc.depends_on);
  else return fail(`${at}.depends_on: expected a list or a mapping`);

  for (const [dep, opts] of deps) {
    if (dep === name) fail(`${at}.depends_on: "${name}" depends on itself`);
    else if (!names.has(dep)) fail(`${at}.depends_on: unknown service "${dep}" (services: ${[...names].join(', ')})`);
    const condition = opts?.condition ?? 'service_started';
    if (!DEPENDS_CONDITIONS.has(condition)) {
      fail(`${at}.depends_on.${dep}.condition: expected one of ${[...DEPENDS_CONDITIONS].join(', ')}, found "${condition}"`);
    } else if (condition === 'service_healthy' && names.has(dep)) {
      // Waiting for "healthy" on a service with no healthcheck blocks `docker compose up` forever.
      const target = services[dep];
      const disabled = target?.healthcheck?.disable === true;
      if (disabled || (!target?.healthcheck?.test && !dockerfileHasHealthcheck(target))) {
        fail(`${at}.depends_on.${dep}: condition service_healthy, but "${dep}" has no healthcheck`);
      }
    }
  }
}

function parsePort(entry) {
  if (isMapping(entry)) {
    return { ip: entry.host_ip ?? '', published: entry.published, proto: entry.protocol ?? 'tcp' };
  }
  // Short syntax: [HOST_IP:][PUBLISHED:]TARGET[/PROTO]
  const [spec, proto = 'tcp'] = String(entry).split('/');
  const parts = spec.split(':');
  if (parts.length === 1) return { ip: '', published: undefined, proto };
  const published = parts[parts.length - 2];
  const ip = parts.slice(0, -2).join(':');
  return { ip, published, proto };
}

function checkPorts(at, name, svc, replicas, publishedBy) {
  if (svc.ports === undefined) return;
  if (!Array.isArray(svc.ports)) return fail(`${at}.ports: expected a list`);
  for (const entry of svc.ports) {
    const { ip, published, proto } = parsePort(entry);
    if (published === undefined || published === '') continue; // ephemeral host port: never clashes
    if (!/^\d+(-\d+)?$/.test(String(published))) {
      fail(`${at}.ports: cannot read published port in ${JSON.stringify(entry)}`);
      continue;
    }
    if (replicas > 1) fail(`${at}.ports: ${published} is a fixed host port but the service has ${replicas} replicas (only one can bind it)`);
    // Binding all interfaces ('' or 0.0.0.0) clashes with any IP on the same port.
    const key = `${published}/${proto}`;
    const previous = publishedBy.get(key);
    if (previous && (previous.ip === ip || !previous.ip || previous.ip === '0.0.0.0' || !ip || ip === '0.0.0.0')) {
      fail(`${at}.ports: host port ${key} is already published by service "${previous.service}"`);
    } else {
      publishedBy.set(key, { service: name, ip });
    }
  }
}

/** Bind mounts of host files/directories: each host source must exist. Returns them as {source, target}. */
function checkVolumes(at, svc, declared) {
  const mounts = [];
  if (svc.volumes === undefined) return mounts;
  if (!Array.isArray(svc.volumes)) {
    fail(`${at}.volumes: expected a list`);
    return mounts;
  }
  for (const v of svc.volumes) {
    let source;
    let target;
    if (isMapping(v)) {
      if (v.type !== 'bind') continue;
      ({ source, target } = v);
    } else {
      [source, target] = String(v).split(':');
      // A source not starting with . / or ~ is a named volume, not a host path: Compose needs it declared.
      if (!/^[./~]/.test(source ?? '')) {
        if (source && !(isMapping(declared) && Object.hasOwn(declared, source)))
          fail(`${at}.volumes: named volume "${source}" is not declared under the top-level volumes`);
        continue;
      }
    }
    if (!source || !target) {
      fail(`${at}.volumes: cannot read ${JSON.stringify(v)}`);
      continue;
    }
    const hostPath = resolve(projectDir, source);
    if (!existsSync(hostPath)) fail(`${at}.volumes: host path ${rel(hostPath)} does not exist (mounted at ${target})`);
    else mounts.push({ source: hostPath, target });
  }
  return mounts;
}

/**
 * A Redis service holds Tollgate's API keys, bans and quotas: state that `docker compose down && up` or a restart must
 * not lose, and that eviction must not delete. So its data directory is a volume, it writes an append-only file,
 * and its memory policy is noeviction.
 */
function checkRedisKeepsData(at, svc) {
  const command = Array.isArray(svc.command) ? svc.command.map(String) : typeof svc.command === 'string' ? svc.command.split(/\s+/) : [];
  const isRedis = command[0] === 'redis-server' || (command.length === 0 && /(^|\/)redis(:|$)/.test(String(svc.image ?? '')));
  if (!isRedis) return;
  const option = (name) => {
    const i = command.indexOf(`--${name}`);
    return i >= 0 ? command[i + 1] : undefined;
  };
  if (option('appendonly') !== 'yes') fail(`${at}.command: Redis must run with --appendonly yes, or a restart loses every key created since the last snapshot`);
  if (option('maxmemory-policy') !== 'noeviction')
    fail(`${at}.command: Redis must run with --maxmemory-policy noeviction, or eviction deletes API keys, bans and windows`);
  const volumes = Array.isArray(svc.volumes) ? svc.volumes : [];
  const dataDir = option('dir') ?? '/data';
  const mountsData = volumes.some((v) => (isMapping(v) ? v.target : String(v).split(':')[1]) === dataDir);
  if (!mountsData) fail(`${at}.volumes: Redis keeps its data in ${dataDir}, which must be a volume, or \`docker compose down\` deletes every key`);
}

/** Gateway config files the service names (`--config` or TOLLGATE_CONFIG), mapped back to the repository. */
function configReferences(at, svc, mounts) {
  const found = [];
  const command = Array.isArray(svc.command) ? svc.command.map(String) : typeof svc.command === 'string' ? svc.command.split(/\s+/) : [];
  const refs = [];
  command.forEach((arg, i) => {
    if (arg === '--config' && command[i + 1]) refs.push([`${at}.command --config`, command[i + 1]]);
    else if (arg.startsWith('--config=')) refs.push([`${at}.command --config`, arg.slice('--config='.length)]);
  });
  const env = environmentOf(svc);
  if (env.TOLLGATE_CONFIG) refs.push([`${at}.environment.TOLLGATE_CONFIG`, env.TOLLGATE_CONFIG]);

  for (const [where, inContainer] of refs) {
    const mounted = mounts.find((m) => m.target === inContainer);
    let hostPath;
    if (mounted) hostPath = mounted.source;
    else if (inContainer.startsWith(IMAGE_APP_DIR)) hostPath = join(repoRoot, inContainer.slice(IMAGE_APP_DIR.length));
    else if (!inContainer.startsWith('/'))
      hostPath = join(repoRoot, inContainer); // relative to WORKDIR /app
    else {
      fail(`${where}: ${inContainer} is neither mounted nor under ${IMAGE_APP_DIR} in the image`);
      continue;
    }
    if (!isFile(hostPath)) fail(`${where}: ${inContainer} maps to ${rel(hostPath)}, which does not exist`);
    else found.push(relative(repoRoot, hostPath));
  }
  return found;
}

function environmentOf(svc) {
  if (Array.isArray(svc.environment)) {
    return Object.fromEntries(svc.environment.map((e) => String(e).split(/=(.*)/s).slice(0, 2)));
  }
  return isMapping(svc.environment) ? svc.environment : {};
}

/** Every `http://host:port` an nginx config proxies to must be a compose service. */
function checkNginxUpstreams(where, file, names) {
  if (!isFile(file)) return;
  const text = readFileSync(file, 'utf8').replace(/#.*$/gm, '');
  const hosts = [...text.matchAll(/(?:proxy_pass|set\s+\$\w+|server)\s+(?:https?:\/\/)?([A-Za-z][\w.-]*):(\d+)/g)].map((m) => m[1]);
  if (hosts.length === 0) fail(`${where}: ${rel(file)} proxies to no host:port`);
  for (const host of hosts) {
    if (!names.has(host)) fail(`${where}: ${rel(file)} proxies to "${host}", which is not a service (services: ${[...names].join(', ')})`);
  }
}

/** `tollgate config check` on the file alone: the environment overrides a container gets are left out. */
function runConfigCheck(file) {
  const cli = join(repoRoot, 'dist', 'cli.js');
  if (!isFile(cli)) {
    fail(`cannot check ${file}: ${rel(cli)} is missing (run "npm run build" first)`);
    return;
  }
  const env = { ...process.env };
  for (const k of ['TOLLGATE_CONFIG', 'PORT', 'HOST', 'UPSTREAM_URL', 'REDIS_URL', 'LOG_LEVEL']) delete env[k];
  const r = spawnSync(process.execPath, [cli, 'config', 'check', '--config', file], { cwd: repoRoot, env, encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) {
    const output = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim() || r.error?.message || `signal ${r.signal}`;
    fail(`config check --config ${file} failed (exit ${r.status}):\n      ${output.split('\n').join('\n      ')}`);
  }
}

main();
