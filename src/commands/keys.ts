// `tollgate keys ...`: issue, list, show, revoke, rotate and unban API keys in the shared Redis key store.
// Plaintext keys are printed once, at create and rotate; list and show never print a key or a hash.
import { type Command, Option } from 'commander';
import type { Redis } from 'ioredis';
import { systemClock } from '../util/clock.js';
import { loadConfigFile, resolveConfigPath } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { generateKey, hashKey } from '../keys/format.js';
import { RedisKeyStore } from '../keys/redis-store.js';
import { KeyService } from '../keys/service.js';
import type { KeyRecord } from '../keys/types.js';
import { Keyspace } from '../storage/keyspace.js';
import { createRedisClient, redactRedisUrl, waitForReady } from '../storage/redis.js';
import { CliError } from './cli-error.js';

interface CommonOpts {
  config?: string;
  redis?: string;
}

interface Session {
  config: Config;
  redis: Redis;
  keyspace: Keyspace;
  keys: KeyService;
}

const CONNECT_TIMEOUT_MS = 3000;

/** Loads the config and connects to Redis (--redis, else REDIS_URL, else redis.url), or fails with one clear line. */
async function openSession(opts: CommonOpts): Promise<Session> {
  const path = resolveConfigPath(opts.config, process.env);
  // REDIS_URL is applied below with its own precedence, so the file is read without env overrides here.
  const loaded = loadConfigFile(path, { ...process.env, REDIS_URL: undefined });
  if (!loaded.ok) throw new CliError(`${loaded.path}: invalid configuration: ${loaded.errors.join('; ')}`);
  const config = loaded.config;
  const url = opts.redis ?? (process.env.REDIS_URL || undefined) ?? config.redis?.url;
  if (!url) throw new CliError('no Redis to talk to: pass --redis URL, set REDIS_URL, or set redis.url in the config file');
  const redis = createRedisClient({ url, commandTimeoutMs: 5000, failFast: false, name: 'tollgate-cli' });
  try {
    await waitForReady(redis, CONNECT_TIMEOUT_MS, { failOnError: true });
  } catch {
    redis.disconnect();
    throw new CliError(`Redis unreachable at ${redactRedisUrl(url)}`);
  }
  const keyspace = new Keyspace(config.redis?.prefix ?? 'tollgate:');
  return { config, redis, keyspace, keys: new KeyService(new RedisKeyStore(redis, keyspace), systemClock) };
}

async function withSession<T>(opts: CommonOpts, fn: (s: Session) => Promise<T>): Promise<T> {
  const s = await openSession(opts);
  try {
    return await fn(s);
  } finally {
    await s.redis.quit().catch(() => s.redis.disconnect());
  }
}

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

function positiveInt(name: string) {
  return (v: string): number => {
    if (!/^[1-9]\d*$/.test(v)) throw new CliError(`${name} must be a positive whole number, got "${v}"`, 2);
    return Number(v);
  };
}

function nonNegativeInt(name: string) {
  return (v: string): number => {
    if (!/^\d+$/.test(v)) throw new CliError(`${name} must be a whole number of seconds, got "${v}"`, 2);
    return Number(v);
  };
}

/** Ban state as `keys show` reports it; written by the limits stage, read here. */
async function banState(s: Session, id: string): Promise<{ bannedUntil: string | null; banLevel: number }> {
  const [until, level, lastEnd] = await s.redis.hmget(s.keyspace.ban(id), 'until', 'level', 'lastEnd');
  const now = Date.now();
  const untilMs = Number(until ?? 0);
  const lastEndMs = Number(lastEnd ?? 0);
  const reset = s.config.ban.resetAfterSeconds * 1000;
  // The level is forgotten resetAfterSeconds after the last ban ended.
  const banLevel = lastEndMs > 0 && now >= lastEndMs + reset ? 0 : Number(level ?? 0);
  return { bannedUntil: untilMs > now ? new Date(untilMs).toISOString() : null, banLevel };
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function limitsOf(k: KeyRecord, config: Config): string {
  const plan = config.plans[k.plan];
  const perMinute = k.perMinute ?? plan?.perMinute;
  const perDay = k.perDay ?? plan?.perDay;
  return `${perMinute ?? '?'}/min ${perDay ?? '?'}/day`;
}

function statusOf(k: KeyRecord): string {
  if (k.status === 'revoked') return 'revoked';
  if (k.expiresAt && Date.now() >= Date.parse(k.expiresAt)) return 'expired';
  return 'active';
}

export function registerKeysCommands(program: Command): void {
  const keys = program.command('keys').description('issue and manage API keys (in the Redis key store)');
  const common = (cmd: Command) =>
    cmd
      .option('--config <file>', 'config file for plans and the Redis prefix (else TOLLGATE_CONFIG, else config/gateway.yaml)')
      .option('--redis <url>', 'Redis URL (else REDIS_URL, else redis.url in the config)');

  common(keys.command('create'))
    .description('issue a key; prints the plaintext key once')
    .requiredOption('--plan <plan>', 'plan name from the config')
    .option('--name <name>', 'a label, e.g. the customer')
    .addOption(new Option('--per-minute <n>', 'override the plan: requests per minute').argParser(positiveInt('--per-minute')))
    .addOption(new Option('--per-day <n>', 'override the plan: requests per day').argParser(positiveInt('--per-day')))
    .option('--expires <iso>', 'expiry, ISO-8601 (e.g. 2027-01-01T00:00:00Z)')
    .option('--json', 'print one JSON object')
    .action(async (o: CommonOpts & { plan: string; name?: string; perMinute?: number; perDay?: number; expires?: string; json?: boolean }) => {
      let expiresAt: string | undefined;
      if (o.expires !== undefined) {
        const ms = Date.parse(o.expires);
        if (!/^\d{4}-\d{2}-\d{2}/.test(o.expires) || Number.isNaN(ms)) throw new CliError(`--expires must be an ISO-8601 date-time, got "${o.expires}"`, 2);
        expiresAt = new Date(ms).toISOString();
      }
      await withSession(o, async (s) => {
        if (!Object.hasOwn(s.config.plans, o.plan)) throw new CliError(`unknown plan "${o.plan}"; plans: ${Object.keys(s.config.plans).join(', ')}`);
        const created = await s.keys.create({
          plan: o.plan,
          ...(o.name !== undefined ? { name: o.name } : {}),
          ...(o.perMinute !== undefined ? { perMinute: o.perMinute } : {}),
          ...(o.perDay !== undefined ? { perDay: o.perDay } : {}),
          ...(expiresAt !== undefined ? { expiresAt } : {}),
        });
        if (o.json) return out(JSON.stringify({ ...created.record, key: created.key }));
        out(`Created key ${created.record.id} (plan ${created.record.plan}, ${limitsOf(created.record, s.config)}).`);
        out('');
        out(`  ${created.key}`);
        out('');
        out('This is the only time the key is shown. Store it now; Tollgate keeps only its SHA-256 hash.');
      });
    });

  common(keys.command('list'))
    .description("every key's metadata (never the key or its hash)")
    .option('--json', 'print a JSON array')
    .action(async (o: CommonOpts & { json?: boolean }) => {
      await withSession(o, async (s) => {
        const all = await s.keys.list();
        if (o.json) return out(JSON.stringify(all));
        if (all.length === 0) return out('No keys. Create one with: tollgate keys create --plan <plan>');
        out(
          table([
            ['ID', 'NAME', 'PLAN', 'LIMITS', 'STATUS', 'CREATED', 'EXPIRES'],
            ...all.map((k) => [k.id, k.name ?? '', k.plan, limitsOf(k, s.config), statusOf(k), k.createdAt, k.expiresAt ?? '']),
          ]),
        );
      });
    });

  common(keys.command('show'))
    .description("one key's metadata, ban state and escalation level")
    .argument('<id>', 'key id')
    .option('--json', 'print one JSON object')
    .action(async (id: string, o: CommonOpts & { json?: boolean }) => {
      await withSession(o, async (s) => {
        const k = await s.keys.get(id);
        if (!k) throw new CliError(`no key with id "${id}"`);
        const ban = await banState(s, id);
        if (o.json) return out(JSON.stringify({ ...k, ...ban }));
        const rows: Array<[string, string]> = [
          ['id', k.id],
          ['name', k.name ?? ''],
          ['plan', k.plan],
          ['limits', limitsOf(k, s.config) + (k.perMinute || k.perDay ? ' (per-key override)' : '')],
          ['status', statusOf(k)],
          ['created', k.createdAt],
          ['expires', k.expiresAt ?? 'never'],
          ['rotated', k.rotatedAt ?? ''],
          ['revoked', k.revokedAt ?? ''],
          ['banned until', ban.bannedUntil ?? 'not banned'],
          ['ban level', String(ban.banLevel)],
        ];
        out(table(rows.filter(([, v]) => v !== '').map(([a, b]) => [`${a}:`, b])));
      });
    });

  common(keys.command('revoke'))
    .description('the key stops working on every instance within 1 second')
    .argument('<id>', 'key id')
    .action(async (id: string, o: CommonOpts) => {
      await withSession(o, async (s) => {
        if (!(await s.keys.revoke(id))) throw new CliError(`no key with id "${id}"`);
        out(`Revoked key ${id}.`);
      });
    });

  common(keys.command('rotate'))
    .description('issue a new key for the same id, plan and overrides; the old key works for the grace period')
    .argument('<id>', 'key id')
    .addOption(new Option('--grace <seconds>', 'how long the old key keeps working').default(0).argParser(nonNegativeInt('--grace')))
    .option('--json', 'print one JSON object')
    .action(async (id: string, o: CommonOpts & { grace: number; json?: boolean }) => {
      await withSession(o, async (s) => {
        let rotated: Awaited<ReturnType<typeof s.keys.rotate>>;
        try {
          rotated = await s.keys.rotate(id, o.grace);
        } catch (err) {
          throw new CliError((err as Error).message);
        }
        if (!rotated) throw new CliError(`no key with id "${id}"`);
        if (o.json) return out(JSON.stringify({ ...rotated.record, key: rotated.key, graceSeconds: o.grace }));
        out(`Rotated key ${id}. The old key ${o.grace > 0 ? `keeps working for ${o.grace} s` : 'has stopped working'}.`);
        out('');
        out(`  ${rotated.key}`);
        out('');
        out('This is the only time the new key is shown.');
      });
    });

  common(keys.command('unban'))
    .description('lift a ban and reset the escalation level')
    .argument('<id>', 'key id')
    .action(async (id: string, o: CommonOpts) => {
      await withSession(o, async (s) => {
        if (!(await s.keys.get(id))) throw new CliError(`no key with id "${id}"`);
        await s.redis.del(s.keyspace.ban(id), s.keyspace.strikes(id));
        await s.keys.store.publishChange(id);
        out(`Unbanned key ${id}; its escalation level is back to 0.`);
      });
    });

  keys
    .command('generate')
    .description("print a new key and its SHA-256 for the config's static `keys:` list (stores nothing)")
    .option('--json', 'print one JSON object')
    .action((o: { json?: boolean }) => {
      const key = generateKey();
      const sha256 = hashKey(key);
      if (o.json) return out(JSON.stringify({ key, sha256 }));
      out(`key:    ${key}`);
      out(`sha256: ${sha256}`);
      out('');
      out(`Add to the config:  keys: [{ id: <id>, plan: <plan>, sha256: "${sha256}" }]`);
    });
}
