#!/usr/bin/env node
// The tollgate command: serve, petstore, dev, keys and config check (README, "Running it for real").
// Exit codes: 0 success, 1 a clear error on stderr, 2 usage.
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { loadConfigFile, resolveConfigPath } from './config/load.js';
import { runDev, runPetstore, runServe } from './commands/run.js';
import { CliError } from './commands/cli-error.js';
import { registerKeysCommands } from './commands/keys.js';

const program = new Command();
program
  .name('tollgate')
  .description('A rate-limiting API gateway: API keys, plans, quotas and bans in front of an existing backend.')
  .exitOverride()
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

program
  .command('serve')
  .description('run the gateway')
  .option('--config <file>', 'config file (else TOLLGATE_CONFIG, else config/gateway.yaml)')
  .action(async (opts: { config?: string }) => {
    await runServe(resolveConfigPath(opts.config, process.env));
  });

program
  .command('petstore')
  .description('run the reference pet store categories upstream (Redis when REDIS_URL is set, else memory)')
  .addOption(new Option('--port <n>', 'port to listen on').default(8081).argParser(parsePort))
  .option('--host <h>', 'address to listen on', '127.0.0.1')
  .action(async (opts: { port: number; host: string }) => {
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
  .description('validate a config file: exit 0 and say so, or exit 1 naming every bad field')
  .option('--config <file>', 'config file (else TOLLGATE_CONFIG, else config/gateway.yaml)')
  .action((opts: { config?: string }) => {
    const result = loadConfigFile(resolveConfigPath(opts.config, process.env), process.env);
    if (!result.ok) {
      process.stderr.write(`${result.path}: invalid configuration (${result.errors.length} problem${result.errors.length === 1 ? '' : 's'})\n`);
      for (const e of result.errors) process.stderr.write(`  ${e}\n`);
      process.exitCode = 1;
      return;
    }
    const c = result.config;
    process.stdout.write(
      `${result.path}: OK (${Object.keys(c.plans).length} plans, ${c.routes.length} routes, ${c.keys.length} static keys, ` +
        `${c.redis ? 'Redis store' : 'in-memory store'})\n`,
    );
  });

registerKeysCommands(program);

function parsePort(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || n > 65535) throw new InvalidArgumentError('expected a port number from 0 to 65535.');
  return n;
}

/** serve, petstore and dev keep running; every other command exits as soon as it has answered. */
const LONG_RUNNING = new Set(['serve', 'petstore', 'dev']);

async function main(): Promise<void> {
  let failed = false;
  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    failed = true;
    report(err);
  }
  // A long-running command that failed to start exits too: whatever it had opened (a Redis client retrying, a
  // listener) must not keep a process alive that serves nothing.
  if (failed || !LONG_RUNNING.has(process.argv[2] ?? '')) {
    // Do not wait for client timers (ioredis reconnect and disconnect timers) to run down.
    process.stdout.write('', () => process.exit(process.exitCode ?? 0));
  }
}

function report(err: unknown): void {
  if (err instanceof CommanderError) {
    // --help and --version exit 0; everything else commander refuses is a usage error.
    process.exitCode = err.exitCode === 0 ? 0 : 2;
    return;
  }
  if (err instanceof CliError) {
    process.stderr.write(`error: ${err.message}\n`);
    process.exitCode = err.exitCode;
    return;
  }
  process.stderr.write(`error: ${(err as Error).message}\n`);
  process.exitCode = 1;
}

await main();
