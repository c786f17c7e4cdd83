// The tollgate command line, built fresh for each run: commands, options and how errors become exit codes (0 success,
// 1 a clear error on stderr, 2 usage). src/cli.ts runs it for the process; tests run it in-process, so a usage
// error costs no child process.
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { configJsonSchema } from './config/json-schema.js';
import { loadConfigFile, resolveConfigPath } from './config/load.js';
import { CliError } from './commands/cli-error.js';
import { candidateWarnings } from './limits/candidate-warnings.js';
import { costWarnings } from './limits/cost-warnings.js';
import { stabilityWarnings } from './routing/stability.js';
import { tlsWarnings } from './config/tls-files.js';
import { generateAdminToken, hashAdminToken } from './admin/tokens.js';
import { registerKeysCommands } from './commands/keys/index.js';
import { registerConsumersCommands } from './commands/consumers/index.js';
import { registerUsageCommands } from './commands/usage.js';
import { registerPlansCommands } from './commands/plans.js';
import { registerOpenapiCommands } from './commands/openapi.js';
import { guardRedisCommands } from './commands/touches.js';
import { runDev, runPetstore, runServe } from './server/run.js';

/** Where commander's own output (help, usage errors) and the error line go. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

export const processIo: CliIo = { out: (s) => void process.stdout.write(s), err: (s) => void process.stderr.write(s) };

/** serve, petstore and dev keep running; every other command exits as soon as it has answered. */
export const LONG_RUNNING = new Set(['serve', 'petstore', 'dev']);

/** `exit.code`: what a command that answered without throwing asks to exit with (config check's 1). */
export function buildProgram(io: CliIo = processIo, exit: { code: number } = { code: 0 }): Command {
  const program = new Command();
  program
    .name('tollgate')
    .description('A rate-limiting API gateway: API keys, plans, quotas and bans in front of an existing backend.')
    .exitOverride()
    // Each command's options are its own, read after its name: `usage --to` (a report's end) and `usage export --to`
    // (a destination) are different options.
    .enablePositionalOptions()
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) });

  program
    .command('serve')
    .description('run the gateway')
    .option('--config <file>', 'config file (else TOLLGATE_CONFIG, else config/gateway.yaml)')
    .option('--watch-config', 'reload when the config file changes (a mounted ConfigMap too), as SIGHUP does')
    .action(async (opts: { config?: string; watchConfig?: boolean }) => {
      await runServe(resolveConfigPath(opts.config, process.env), { watchConfig: opts.watchConfig === true });
    });

  program
    .command('petstore')
    .description("run the reference pet store categories upstream (Redis: the config's redis section with --config, else REDIS_URL; else memory)")
    .addOption(new Option('--port <n>', 'port to listen on').default(8081).argParser(parsePort))
    .option('--host <h>', 'address to listen on', '127.0.0.1')
    .option('--config <file>', "a gateway config file whose redis section (any topology) holds the pet store's data")
    .action(async (opts: { port: number; host: string; config?: string }) => {
      await runPetstore(opts);
    });

  program
    .command('dev')
    .description('gateway and petstore in one process on the in-memory store, with demo keys')
    .addOption(new Option('--port <n>', 'gateway port').default(8080).argParser(parsePort))
    .action(async (opts: { port: number }) => {
      await runDev(opts);
    });

  const configCmd = program.command('config').description('configuration tools');
  configCmd
    .command('check')
    .description('validate a config file: exit 0 and say so (warnings on stderr), or exit 1 naming every bad field')
    .option('--config <file>', 'config file (else TOLLGATE_CONFIG, else config/gateway.yaml)')
    .action(async (opts: { config?: string }) => {
      const result = await loadConfigFile(resolveConfigPath(opts.config, process.env), process.env);
      if (!result.ok) {
        io.err(`${result.path}: invalid configuration (${result.errors.length} problem${result.errors.length === 1 ? '' : 's'})\n`);
        for (const e of result.errors) io.err(`  ${e}\n`);
        exit.code = 1;
        return;
      }
      const c = result.config;
      // Unusual but legitimate (a small trial plan beside expensive routes): said, never refused.
      for (const w of [...result.warnings, ...costWarnings(c), ...candidateWarnings(c), ...stabilityWarnings(c), ...tlsWarnings(c)]) io.err(`warning: ${w}\n`);
      io.out(
        `${result.path}: OK (${Object.keys(c.plans).length} plans, ${c.routes.length} routes, ${c.keys.length} static keys, ` +
          `${c.redis ? 'Redis store' : 'in-memory store'})\n`,
      );
    });

  configCmd
    .command('schema')
    .description("print the config file's JSON Schema (for editors; config/gateway.schema.json is this output)")
    .action(() => {
      io.out(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
    });

  registerKeysCommands(program);
  registerConsumersCommands(program);
  registerUsageCommands(program);
  registerPlansCommands(program);
  registerOpenapiCommands(program, io, exit);
  // After every command is registered: each one that opens a Redis session says what it touches and guards writes.
  guardRedisCommands(program);

  program
    .command('admin')
    .description('admin API tools')
    .command('token')
    .description("print a new admin token and its SHA-256 for the config's admin.tokens (stores nothing)")
    .option('--id <id>', 'the id to give it in the config (audit lines name it)', 'portal')
    .option('--json', 'print one JSON object')
    .action((o: { id: string; json?: boolean }) => {
      if (!/^[A-Za-z0-9_.-]{1,64}$/.test(o.id) || o.id === 'cli' || o.id === 'env')
        throw new CliError(`--id must be 1-64 characters of A-Z a-z 0-9 _ . - other than "cli" and "env", got "${o.id}"`, 2);
      const token = generateAdminToken();
      const sha256 = hashAdminToken(token);
      if (o.json) return io.out(`${JSON.stringify({ id: o.id, token, sha256 })}\n`);
      io.out(`token:  ${token}\nsha256: ${sha256}\n\nAdd to the config:  admin: { tokens: [{ id: ${o.id}, sha256: "${sha256}" }] }\n`);
      io.out('The token is shown only now; the config keeps its hash. Callers send "Authorization: Bearer <token>".\n');
    });
  return program;
}

function parsePort(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || n > 65535) throw new InvalidArgumentError('expected a port number from 0 to 65535.');
  return n;
}

/**
 * Runs the command line `argv` (without node and the script): the exit code it asks for. Commands that keep running
 * (serve, petstore, dev) return once they are up; the caller decides when the process ends.
 */
export async function runProgram(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const exit = { code: 0 };
  try {
    await buildProgram(io, exit).parseAsync([...argv], { from: 'user' });
    return exit.code;
  } catch (err) {
    return exitCodeOf(err, io);
  }
}

function exitCodeOf(err: unknown, io: CliIo): number {
  // --help and --version exit 0; everything else commander refuses is a usage error.
  if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
  if (err instanceof CliError) {
    io.err(`error: ${err.message}\n`);
    return err.exitCode;
  }
  io.err(`error: ${(err as Error).message}\n`);
  return 1;
}
