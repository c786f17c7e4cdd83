// `tollgate openapi diff`: what loading a new version of a service's OpenAPI document would change in the gateway
// (operations added and removed, newly deprecated, sunsets and brownouts moved, stability and access changed), before anyone
// reloads. Both sides are loaded as the gateway loads them, hand-written operationId overrides included, so the answer
// is about the gateway's behaviour, not the document's text.
import type { Command } from 'commander';
import { parseInterval } from '../config/iso-interval.js';
import { loadConfigFile, resolveConfigPath } from '../config/load.js';
import { openapiBlocks, type Config } from '../config/schema.js';
import { changeLine, diffOperations, type OperationChange, type OperationPolicy } from '../openapi/diff.js';
import { visible } from '../util/visible.js';
import { CliError } from './cli-error.js';

/** Exit code when the new document changes something (0: nothing changes; 1 an error; 2 usage). */
export const CHANGES_EXIT_CODE = 3;

interface DiffOpts {
  config?: string;
  service?: string;
  json?: boolean;
}

export function registerOpenapiCommands(program: Command, io: { out(text: string): void }, exit: { code: number }): void {
  const openapi = program.command('openapi').description("a service's OpenAPI document");
  openapi
    .command('diff')
    .description(
      `what loading NEW as a service's OpenAPI document would change: routes added and removed, newly deprecated, sunsets and brownouts moved, stability and access changed (exit 0: nothing; ${CHANGES_EXIT_CODE}: changes)`,
    )
    .argument('<new>', 'the new version of the document (YAML or JSON)')
    .option('--config <file>', 'config file (else TOLLGATE_CONFIG, else config/gateway.yaml)')
    .option('--service <name>', 'the service whose document NEW replaces ("upstream" for upstream.openapi; needed when several have one)')
    .option('--json', 'print JSON: { service, file, new, changes: [...] }')
    .action(async (newFile: string, o: DiffOpts) => {
      const path = resolveConfigPath(o.config, process.env);
      const current = await loadConfigFile(path, process.env);
      if (!current.ok)
        throw new CliError(
          `${path}: invalid configuration, fix it first (${current.errors.length} problem${current.errors.length === 1 ? '' : 's'}): ${current.errors[0]}`,
        );
      const service = serviceOf(current.config, o.service);
      const file = openapiBlocks(current.config).find((b) => b.service === service)?.openapi.file ?? '';
      const next = await loadConfigFile(path, process.env, { service, file: newFile });
      if (!next.ok)
        throw new CliError(
          `${newFile}: cannot be loaded as service ${service}'s document (${next.errors.length} problem${next.errors.length === 1 ? '' : 's'}): ${next.errors.join('; ')}`,
        );
      const changes = diffOperations(policies(current.config, service), policies(next.config, service));
      if (o.json) io.out(`${JSON.stringify({ service, file, new: newFile, changes: changes.map(jsonOf) }, null, 2)}\n`);
      else {
        io.out(`service ${visible(service)}: ${visible(file)} -> ${visible(newFile)}\n`);
        for (const c of changes) io.out(`${visible(changeLine(c))}\n`);
        io.out(changes.length === 0 ? 'no changes\n' : `${changes.length} change${changes.length === 1 ? '' : 's'}\n`);
      }
      if (changes.length > 0) exit.code = CHANGES_EXIT_CODE;
    });
}

/** The service named, or the only one with a document ("upstream" for the upstream section's). */
function serviceOf(config: Config, named: string | undefined): string {
  const withDocuments = openapiBlocks(config)
    .filter((b) => b.openapi.file !== undefined)
    .map((b) => b.service);
  if (named !== undefined) {
    if (!withDocuments.includes(named))
      throw new CliError(`service "${visible(named)}" has no OpenAPI document (services with one: ${withDocuments.join(', ') || 'none'})`, 2);
    return named;
  }
  if (withDocuments.length === 1) return withDocuments[0]!;
  if (withDocuments.length === 0) throw new CliError('no service of this config has an OpenAPI document (services.<name>.openapi.file, upstream.openapi.file)');
  throw new CliError(`several services have an OpenAPI document (${withDocuments.join(', ')}): name one with --service`, 2);
}

/** The service's document routes as the gateway would serve them. */
function policies(config: Config, service: string): OperationPolicy[] {
  const out: OperationPolicy[] = [];
  config.routes.forEach((r, i) => {
    const op = config.openapi?.routes[i]?.operation;
    if (op === undefined || op.service !== service) return;
    out.push({
      method: op.method,
      path: op.pathTemplate,
      operationId: op.operationId,
      deprecated: r.deprecation !== undefined || r.deprecated === true,
      deprecation: instant(r.deprecation),
      sunset: instant(r.sunset),
      stability: r.stability,
      public: r.auth === 'none',
      brownouts: brownoutsOf(r.brownouts),
    });
  });
  return out;
}

/** A route's brownouts as `<start>/<end>` in UTC, sorted: the config loader has checked each is an interval. */
function brownoutsOf(texts: readonly string[] | undefined): string[] {
  return (texts ?? [])
    .map((t) => parseInterval(t))
    .flatMap((b) => (b.ok ? [b] : []))
    .sort((a, b) => a.startMs - b.startMs || a.endMs - b.endMs)
    .map((b) => `${instant(new Date(b.startMs).toISOString())}/${instant(new Date(b.endMs).toISOString())}`);
}

/** An instant as people write it: 2027-06-01T00:00:00Z, without the milliseconds the loader's dates carry. */
function instant(iso: string | undefined): string | undefined {
  return iso === undefined ? undefined : iso.replace(/\.000Z$/, 'Z');
}

function jsonOf(c: OperationChange): Record<string, unknown> {
  const { operation: op } = c;
  const base = { kind: c.kind, method: op.method, path: op.path, operationId: op.operationId ?? null };
  return 'from' in c ? { ...base, from: c.from, to: c.to } : base;
}
