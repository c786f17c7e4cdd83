// What a command that talks to Redis is about to touch, said before it does: the config file it read and the Redis it
// uses (never a credential), one line on stderr per run, so that stdout stays the command's answer. And a command that
// changes Redis with the example config (the fallback when neither --config nor TOLLGATE_CONFIG names one) is refused
// unless --yes: the example points at the local Redis, and a key issued there by mistake is issued for real.
import { resolve } from 'node:path';
import type { Command } from 'commander';
import type { RedisTopology } from '../storage/redis.js';
import { DEFAULT_CONFIG_PATH } from '../config/load.js';
import { CliError } from './cli-error.js';

/** The commands that open a Redis session and only read it; every other one that opens a session writes. */
const READS = new Set(['keys list', 'keys show', 'keys export', 'consumers list', 'consumers show', 'usage', 'routes deprecated', 'plans simulate']);

export type ConfigOrigin = '--config' | 'TOLLGATE_CONFIG' | 'example';

/** Where the config path came from (as resolveConfigPath picks it). */
export function configOrigin(flag: string | undefined, env: NodeJS.ProcessEnv): ConfigOrigin {
  if (flag !== undefined) return '--config';
  return env.TOLLGATE_CONFIG !== undefined ? 'TOLLGATE_CONFIG' : 'example';
}

/** host:port/db of a Redis URL: no user, no password, no query. */
function endpoint(url: string): string {
  try {
    const u = new URL(url);
    const db = /^\/(\d+)$/.exec(u.pathname)?.[1] ?? '0';
    return `${u.hostname}:${u.port || '6379'}/${db}`;
  } catch {
    return '(unparseable URL)';
  }
}

function hostPort(url: string): string {
  return endpoint(url).replace(/\/\d+$/, '');
}

/** The Redis a target names, without credentials: a standalone's host:port/db, a cluster's nodes, or a Sentinel's. */
export function describeRedis(target: RedisTopology): string {
  const urls = target.url !== undefined ? [target.url] : (target.cluster?.nodes ?? target.sentinel?.sentinels ?? []);
  const tls = urls.some((u) => u.startsWith('rediss:')) ? 'tls on' : 'tls off';
  if (target.url !== undefined) return `${endpoint(target.url)}, ${tls}`;
  if (target.cluster) return `cluster nodes ${target.cluster.nodes.map(hostPort).join(', ')}, ${tls}`;
  if (target.sentinel) return `sentinel "${target.sentinel.masterName}" via ${target.sentinel.sentinels.map(hostPort).join(', ')}, ${tls}`;
  return 'none';
}

/** The one line: which config file (absolute path, and how it was chosen) and which Redis (and how it was chosen). */
export function touchesLine(configPath: string, origin: ConfigOrigin, target: RedisTopology, redisFrom: '--redis' | 'REDIS_URL' | 'config'): string {
  const how = origin === 'example' ? "the repository's example, as neither --config nor TOLLGATE_CONFIG names one" : `from ${origin}`;
  return `tollgate: config ${resolve(configPath)} (${how}); Redis ${describeRedis(target)} (from ${redisFrom === 'config' ? 'the config' : redisFrom})\n`;
}

/** Each run's command name, by its options object (commander passes the action the same object). */
const runs = new WeakMap<object, { name: string; announced: boolean }>();

interface SessionOpts {
  config?: string;
  redis?: string;
  quiet?: boolean;
  yes?: boolean;
  dryRun?: boolean;
}

/**
 * Called as a session is about to connect, after the command's own checks of its options (a usage error stays exit 2):
 * refuses a write with the example config unless --yes, then says on stderr what the command touches, once per run,
 * unless --quiet. A session whose command is unknown here is taken for a write.
 */
export function beforeRedis(opts: SessionOpts, configPath: string, target: RedisTopology): void {
  const run = runs.get(opts) ?? { name: '', announced: false };
  runs.set(opts, run);
  const origin = configOrigin(opts.config, process.env);
  if (origin === 'example' && opts.yes !== true && isWrite(run.name, opts))
    throw new CliError(
      `refusing to change Redis with the example config (${DEFAULT_CONFIG_PATH}, used because neither --config nor TOLLGATE_CONFIG names one): name your config with --config FILE or TOLLGATE_CONFIG, or pass --yes to use the example`,
    );
  if (opts.quiet === true || run.announced) return;
  run.announced = true;
  const redisFrom = opts.redis !== undefined ? '--redis' : process.env.REDIS_URL ? 'REDIS_URL' : 'config';
  process.stderr.write(touchesLine(configPath, origin, target, redisFrom));
}

/** "keys create", "usage": a command's name below the program. */
function fullName(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Whether the command with these options may change Redis. */
function isWrite(name: string, opts: { dryRun?: boolean }): boolean {
  if (READS.has(name)) return false;
  return !(name === 'keys import' && opts.dryRun === true);
}

function opensSession(cmd: Command): boolean {
  return cmd.options.some((o) => o.long === '--redis');
}

/** Gives every command that opens a Redis session --quiet (and the writing ones --yes), and notes each run's command. */
export function guardRedisCommands(program: Command): void {
  const visit = (cmd: Command): void => {
    for (const sub of cmd.commands) {
      if (opensSession(sub)) {
        sub.option('--quiet', 'do not say on stderr which config and Redis the command uses');
        if (isWrite(fullName(sub), {})) sub.option('--yes', 'change Redis even with the example config (no --config, no TOLLGATE_CONFIG)');
      }
      visit(sub);
    }
  };
  visit(program);
  program.hook('preAction', (_program, action) => {
    if (opensSession(action)) runs.set(action.opts(), { name: fullName(action), announced: false });
  });
}
