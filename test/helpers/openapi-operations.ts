// OpenAPI operations from a document in test/fixtures/openapi/, as the loader (src/openapi/) hands them to routes:
// one per method and path, path-level parameters merged with the operation's, the path under basePath (the first
// server's path by default): what the validator's unit tests compile. startDocumentGateway mounts the same documents
// through the config's services.<name>.openapi, read by the loader itself.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { OpenApiOperation } from '../../src/openapi/operations.js';
import { hashAdminToken } from '../../src/admin/tokens.js';
import { composeGateway, type ComposedGateway } from '../../src/compose.js';
import { validateConfigWithDocuments } from '../../src/config/load.js';
import { Metrics } from '../../src/observability/metrics.js';
import type { Logger } from '../../src/observability/logger.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway-server.js';
import { silentLogger } from './gateway.js';
import type { TestRedis } from './redis-server.js';
import type { TestUpstream } from './upstream.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

export interface FixtureOptions {
  service?: string;
  basePath?: string;
  validate?: OpenApiOperation['validate'];
}

/** Every operation of a fixture document (file name under test/fixtures/openapi/). */
export function fixtureOperations(file: string, o: FixtureOptions = {}): OpenApiOperation[] {
  const url = new URL(`../fixtures/openapi/${file}`, import.meta.url);
  const document = parse(readFileSync(url, 'utf8')) as {
    openapi: string;
    servers?: Array<{ url: string }>;
    paths: Record<string, Record<string, unknown>>;
  };
  const basePath = o.basePath ?? document.servers?.[0]?.url ?? '';
  const out: OpenApiOperation[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    const shared = (item.parameters as object[] | undefined) ?? [];
    for (const method of METHODS) {
      const op = item[method] as { operationId?: string; parameters?: object[]; requestBody?: object } | undefined;
      if (!op) continue;
      const own = op.parameters ?? [];
      const key = (p: object): string => {
        const r = p as { name?: string; in?: string; $ref?: string };
        return r.$ref ?? `${r.in}:${r.name}`;
      };
      const parameters = [...shared.filter((p) => !own.some((q) => key(q) === key(p))), ...own];
      out.push({
        service: o.service ?? 'shop',
        file: `test/fixtures/openapi/${file}`,
        pointer: `/paths/${path.replaceAll('~', '~0').replaceAll('/', '~1')}/${method}`,
        operationId: op.operationId,
        method: method.toUpperCase(),
        pathTemplate: `${basePath}${path}`,
        document,
        parameters,
        requestBody: op.requestBody,
        openapiVersion: document.openapi.startsWith('3.1') ? '3.1' : '3.0',
        validate: o.validate ?? 'enforce',
      });
    }
  }
  return out;
}

/** One operation of a fixture document by its operationId. */
export function fixtureOperation(file: string, operationId: string, o: FixtureOptions = {}): OpenApiOperation {
  const op = fixtureOperations(file, o).find((x) => x.operationId === operationId);
  if (!op) throw new Error(`${file} has no operation ${operationId}`);
  return op;
}

/** A fixture document served by one service under basePath, in a validate mode. */
export interface DocumentMount {
  file: string;
  service: string;
  basePath: string;
  validate: OpenApiOperation['validate'];
}

/**
 * A gateway composed as `tollgate serve` composes it (Redis, its admin listener taking `token`), whose services read
 * the mounted fixture documents through `services.<name>.openapi: { file, basePath, validate }` (the loader, as a
 * config file would); `config` adds to the rest (its services are merged with the mounts', its routes come first).
 */
export async function startDocumentGateway(
  { redis, up }: { redis: TestRedis; up: TestUpstream },
  token: string,
  prefix: string,
  mounts: readonly DocumentMount[],
  config: Record<string, unknown> = {},
  logger: Logger = silentLogger,
): Promise<RunningGateway & { adminUrl: string; composed: ComposedGateway }> {
  const services: Record<string, unknown> = { ...((config.services as Record<string, unknown>) ?? {}) };
  for (const m of mounts) {
    const file = fileURLToPath(new URL(`../fixtures/openapi/${m.file}`, import.meta.url));
    services[m.service] = { targets: [up.url], ...((services[m.service] as object) ?? {}), openapi: { file, basePath: m.basePath, validate: m.validate } };
  }
  const raw = {
    server: { host: '127.0.0.1', port: 0 },
    upstream: { url: up.url },
    redis: { url: redis.url, prefix, commandTimeoutMs: 2000 },
    admin: { port: 0, tokens: [{ id: 'ops', sha256: hashAdminToken(token) }] },
    ...config,
    services,
  };
  const result = await validateConfigWithDocuments(raw, process.cwd());
  if (!result.ok) throw new Error(`invalid test config:\n${result.errors.join('\n')}`);
  const composed = await composeGateway({ config: result.config, logger, metrics: new Metrics(), upstreamCheckTimeoutMs: 500, healthChecks: false });
  const running = await startGateway({ gateway: composed, logger });
  return Object.assign(running, { adminUrl: running.adminUrl!, composed });
}
