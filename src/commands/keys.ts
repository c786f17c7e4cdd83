// `tollgate keys ...`: issue, list, show, update, revoke, rotate and unban API keys and reset their windows, in the
// shared Redis key store, and export or import every record. Plaintext keys are printed once, at create and rotate;
// list and show never print a key or a hash; export prints hashes (Tollgate has no plaintext to print). Every change
// writes its audit line ("admin change", by "cli") to stderr as one JSON log line: stdout stays the command's answer.
import { type Command, Option } from 'commander';
import { systemClock } from '../util/clock.js';
import { loadConfigFile, resolveConfigPath } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { KEY_REPLICATION_WAIT_MS, KeyAdmin, KeyAdminError, unconfirmed, type KeyUpdate, type Replication } from '../keys/admin.js';
import { graceSecondsSchema, keyInputFields } from '../config/key-fields.js';
import { generateKey, hashKey } from '../keys/format.js';
import { RedisKeyStore } from '../keys/redis-store.js';
import { effectiveLimits } from '../keys/rules.js';
import type { KeyRecord } from '../keys/types.js';
import { allRouteSuffixes } from '../limits/windows.js';
import { RedisBanStore } from '../limits/redis-store.js';
import { KeyLimitAdmin } from '../limits/key-admin.js';
import { Keyspace } from '../storage/keyspace.js';
import { connectRedis, topologyMismatch, type RedisConnection, type RedisTopology } from '../storage/redis.js';
import { statSync, writeFileSync } from 'node:fs';
import { exportKeys } from '../keys/transfer.js';
import { bufferSource, fileSource, formatOf, ImportFileError, type ImportFormat } from '../keys/import-read.js';
import { PROGRESS_EVERY, type ImportOutcome, type ImportSource } from '../keys/import-run.js';
import { pino } from 'pino';
import { auditKeyChanges } from '../admin/audit.js';
import { createLogger } from '../observability/logger.js';
import { CliError } from './cli-error.js';
import { beforeRedis } from './touches.js';
import { terminalSafe, visible } from '../util/visible.js';
import type { z } from 'zod';

export interface CommonOpts {
  config?: string;
  redis?: string;
}

export interface Session {
  config: Config;
  redis: RedisConnection;
  keyspace: Keyspace;
  store: RedisKeyStore;
  keys: KeyAdmin;
  keyLimits: KeyLimitAdmin;
}

const CONNECT_TIMEOUT_MS = 3000;

/**
 * Loads the config and connects to Redis (--redis URL, else REDIS_URL, else the config's redis section: a standalone
 * URL, a cluster or Sentinel, with its credentials and TLS), or fails with one clear line.
 */
async function openSession(opts: CommonOpts): Promise<Session> {
  const path = resolveConfigPath(opts.config, process.env);
  // REDIS_URL is applied below with its own precedence, so the file is read without env overrides here.
  const loaded = loadConfigFile(path, { ...process.env, REDIS_URL: undefined });
  if (!loaded.ok) throw new CliError(`${loaded.path}: invalid configuration: ${loaded.errors.join('; ')}`);
  const config = loaded.config;
  const url = opts.redis ?? (process.env.REDIS_URL || undefined);
  const target: RedisTopology | undefined = url !== undefined ? { ...config.redis, url, cluster: undefined, sentinel: undefined } : config.redis;
  if (!target) throw new CliError('no Redis to talk to: pass --redis URL, set REDIS_URL, or set a redis section in the config file');
  beforeRedis(opts, path, target);
  const mismatch = await topologyMismatch(target, CONNECT_TIMEOUT_MS);
  if (mismatch) throw new CliError(mismatch);
  const redis = connectRedis({ redis: target, commandTimeoutMs: 5000, purpose: 'cli' });
  try {
    await redis.waitForReady(CONNECT_TIMEOUT_MS, { failOnError: redis.topology === 'standalone' });
  } catch {
    await redis.close();
    throw new CliError(`Redis unreachable at ${redis.where}`);
  }
  const keyspace = new Keyspace(config.redis?.prefix ?? 'tollgate:');
  const store = new RedisKeyStore(redis, keyspace);
  // Synchronous: the process exits right after the command, and the audit line must not be lost with it.
  const audit = createLogger(config.log.level, pino.destination({ dest: 2, sync: true }));
  const keys = new KeyAdmin(
    store,
    systemClock,
    {
      plans: () => config.plans,
      issuedPrefix: () => config.auth.issuedPrefix,
      keyShape: () => config.auth,
      keySources: () => config.auth.sources,
      routes: () => config.routes,
    },
    auditKeyChanges(audit),
  );
  const keyLimits = new KeyLimitAdmin(
    keys,
    // `keys reset` empties the key's route windows too: every one this config file has.
    new RedisBanStore(redis.client, keyspace, () => allRouteSuffixes(config)),
    { plans: () => config.plans, ban: () => config.ban },
  );
  return { config, redis, keyspace, store, keys, keyLimits };
}

/** Runs one command's work in a session; a KeyAdminError is the command's one-line error (exit 1). */
export async function withSession<T>(opts: CommonOpts, fn: (s: Session) => Promise<T>): Promise<T> {
  const s = await openSession(opts);
  try {
    return await fn(s);
  } catch (err) {
    if (err instanceof KeyAdminError) throw new CliError(err.message);
    throw err;
  } finally {
    await s.redis.close();
  }
}

/** One answer on stdout; any control character left in it (a DEL or C1 in JSON) is escaped, never sent raw. */
export function out(line: string): void {
  process.stdout.write(`${terminalSafe(line)}\n`);
}

export function positiveInt(name: string) {
  return (v: string): number => {
    if (!/^[1-9]\d*$/.test(v)) throw new CliError(`${name} must be a positive whole number, got "${v}"`, 2);
    return Number(v);
  };
}

/**
 * An option by a key field's rule (config/key-fields.ts): refused (exit 2) with the message the admin API, an import
 * and a static key give for the same value. A numeric field's text is read as a number when it is one.
 */
function keyField<T>(flag: string, schema: z.ZodType<T>, numeric = false) {
  return (v: string): T => {
    const r = schema.safeParse(numeric && /^-?\d+$/.test(v) ? Number(v) : v);
    if (!r.success) throw new CliError(`${flag}: ${r.error.issues.map((i) => [...i.path.map(String), i.message].join(': ')).join('; ')}`, 2);
    return r.data;
  };
}

/** A per-key override by its rule, or "none" (back to the plan's limit). Not null: commander turns a parser's null into ''. */
function overrideOrNone(flag: string, schema: z.ZodType<number>) {
  const parse = keyField(flag, schema, true);
  return (v: string): number | 'none' => (v === 'none' ? 'none' : parse(v));
}

export function isoOption(name: string, v: string): string {
  const ms = Date.parse(v);
  if (!/^\d{4}-\d{2}-\d{2}/.test(v) || Number.isNaN(ms)) throw new CliError(`${name} must be an ISO-8601 date-time, got "${v}"`, 2);
  return new Date(ms).toISOString();
}

/** --expires: a date-time by the key's rule, stored in UTC as an import stores it. */
function expiresOption(v: string): string {
  return new Date(Date.parse(keyField('--expires', keyInputFields.expiresAt)(v))).toISOString();
}

/** --metadata: a JSON object of strings, by the rules the admin API applies. */
function metadataOption(v: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    throw new CliError(`--metadata must be a JSON object, got "${v.slice(0, 80)}"`, 2);
  }
  const r = keyInputFields.metadata.safeParse(parsed);
  if (!r.success) throw new CliError(`--metadata: ${r.error.issues.map((i) => [...i.path.map(String), i.message].join(': ')).join('; ')}`, 2);
  return r.data;
}

/**
 * One line on stderr when replicas are expected and none confirmed the change in time: stdout stays the command's
 * answer, and a script that ignores stderr still gets it. The change is made; what is at risk is a failover.
 */
function warnUnconfirmed(what: string, r: Replication): void {
  if (!unconfirmed(r)) return;
  process.stderr.write(
    `Warning: no replica confirmed this ${what} within ${KEY_REPLICATION_WAIT_MS / 1000} s (${r.expected} expected): if the primary fails over before it replicates, the ${what} is undone. Check the replicas (INFO replication), then run the command again.\n`,
  );
}

/** Warnings about what was done (it was done): one line each on stderr, stdout staying the command's answer. */
function warnAll(warnings: readonly string[]): void {
  for (const w of warnings) process.stderr.write(`Warning: ${w}\n`);
}

function table(cells: string[][]): string {
  const rows = cells.map((r) => r.map(visible));
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
  const limits = effectiveLimits(k, config.plans[k.plan]);
  return limits ? `${limits.perMinute}/min ${limits.perDay}/day` : `${k.perMinute ?? '?'}/min ${k.perDay ?? '?'}/day`;
}

/** The options every command that talks to the key store takes. */
export const common = (cmd: Command): Command =>
  cmd
    .option('--config <file>', 'config file for plans and the Redis prefix (else TOLLGATE_CONFIG, else config/gateway.yaml)')
    .option('--redis <url>', 'a standalone Redis URL (else REDIS_URL, else the redis section of the config)');

export function registerKeysCommands(program: Command): void {
  const keys = program.command('keys').description('issue and manage API keys (in the Redis key store)');

  common(keys.command('create'))
    .description('issue a key; prints the plaintext key once')
    .requiredOption('--plan <plan>', 'plan name from the config')
    .addOption(new Option('--name <name>', 'a label, e.g. the customer').argParser(keyField('--name', keyInputFields.name)))
    .addOption(new Option('--per-minute <n>', 'override the plan: requests per minute').argParser(keyField('--per-minute', keyInputFields.perMinute, true)))
    .addOption(new Option('--per-day <n>', 'override the plan: requests per day').argParser(keyField('--per-day', keyInputFields.perDay, true)))
    .option('--expires <iso>', 'expiry, ISO-8601 (e.g. 2027-01-01T00:00:00Z)')
    .option('--metadata <json>', 'a JSON object of strings for your own ids, e.g. \'{"customer":"c_42"}\'')
    .option('--json', 'print one JSON object')
    .action(
      async (o: CommonOpts & { plan: string; name?: string; perMinute?: number; perDay?: number; expires?: string; metadata?: string; json?: boolean }) => {
        // Every field is checked before Redis is asked anything: a bad one is a usage error (exit 2).
        const expiresAt = o.expires === undefined ? undefined : expiresOption(o.expires);
        const metadata = o.metadata === undefined ? undefined : metadataOption(o.metadata);
        await withSession(o, async (s) => {
          const created = await s.keys.create({
            plan: o.plan,
            ...(o.name !== undefined ? { name: o.name } : {}),
            ...(o.perMinute !== undefined ? { perMinute: o.perMinute } : {}),
            ...(o.perDay !== undefined ? { perDay: o.perDay } : {}),
            ...(expiresAt !== undefined ? { expiresAt } : {}),
            ...(metadata !== undefined ? { metadata } : {}),
          });
          warnUnconfirmed('new key', created.replication);
          warnAll(created.warnings);
          if (o.json) return out(JSON.stringify({ ...created.record, key: created.key, replication: created.replication }));
          out(`Created key ${created.record.id} (plan ${created.record.plan}, ${limitsOf(created.record, s.config)}).`);
          out('');
          out(`  ${created.key}`);
          out('');
          out('This is the only time the key is shown. Store it now; Tollgate keeps only its SHA-256 hash.');
        });
      },
    );

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
            ...all.map((k) => [k.id, k.name ?? '', k.plan, limitsOf(k, s.config), s.keys.statusOf(k), k.createdAt, k.expiresAt ?? '']),
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
        const ban = await s.keyLimits.banState(id);
        if (o.json) return out(JSON.stringify({ ...k, ...ban }));
        const rows: Array<[string, string]> = [
          ['id', k.id],
          ['name', k.name ?? ''],
          ['plan', k.plan],
          ['limits', limitsOf(k, s.config) + (k.perMinute || k.perDay ? ' (per-key override)' : '')],
          ['status', s.keys.statusOf(k)],
          ['created', k.createdAt],
          ['expires', k.expiresAt ?? 'never'],
          ['metadata', k.metadata ? JSON.stringify(k.metadata) : ''],
          ['rotated', k.rotatedAt ?? ''],
          ['revoked', k.revokedAt ?? ''],
          ['banned until', ban.bannedUntil ?? 'not banned'],
          ['ban level', String(ban.banLevel)],
        ];
        out(table(rows.filter(([, v]) => v !== '').map(([a, b]) => [`${a}:`, b])));
      });
    });

  common(keys.command('update'))
    .description("change a key's plan, name, overrides, expiry or metadata (every instance applies it at its next request)")
    .argument('<id>', 'key id')
    .option('--plan <plan>', 'a plan name from the config')
    .addOption(new Option('--name <name>', 'a new label').argParser(keyField('--name', keyInputFields.name)))
    .addOption(
      new Option('--per-minute <n>', 'override the plan: requests per minute ("none": the plan\'s again)').argParser(
        overrideOrNone('--per-minute', keyInputFields.perMinute),
      ),
    )
    .addOption(
      new Option('--per-day <n>', 'override the plan: requests per day ("none": the plan\'s again)').argParser(
        overrideOrNone('--per-day', keyInputFields.perDay),
      ),
    )
    .option('--expires <iso>', 'expiry, ISO-8601, or "never"')
    .option('--metadata <json>', 'the whole metadata map as a JSON object of strings, or "none"')
    .option('--json', 'print one JSON object')
    .action(
      async (
        id: string,
        o: CommonOpts & {
          plan?: string;
          name?: string;
          perMinute?: number | 'none';
          perDay?: number | 'none';
          expires?: string;
          metadata?: string;
          json?: boolean;
        },
      ) => {
        const patch: KeyUpdate = {
          ...(o.plan !== undefined ? { plan: o.plan } : {}),
          ...(o.name !== undefined ? { name: o.name } : {}),
          ...(o.perMinute !== undefined ? { perMinute: o.perMinute === 'none' ? null : o.perMinute } : {}),
          ...(o.perDay !== undefined ? { perDay: o.perDay === 'none' ? null : o.perDay } : {}),
          ...(o.expires !== undefined ? { expiresAt: o.expires === 'never' ? null : expiresOption(o.expires) } : {}),
          ...(o.metadata !== undefined ? { metadata: o.metadata === 'none' ? null : metadataOption(o.metadata) } : {}),
        };
        if (Object.keys(patch).length === 0)
          throw new CliError('nothing to change: give at least one of --plan, --name, --per-minute, --per-day, --expires, --metadata', 2);
        await withSession(o, async (s) => {
          const { record: k, replication, warnings } = await s.keys.update(id, patch);
          warnUnconfirmed('change', replication);
          warnAll(warnings);
          if (o.json) return out(JSON.stringify({ ...k, status: s.keys.statusOf(k), replication }));
          out(`Updated key ${k.id} (plan ${k.plan}, ${limitsOf(k, s.config)}${k.expiresAt ? `, expires ${k.expiresAt}` : ''}).`);
        });
      },
    );

  common(keys.command('revoke'))
    .description('the key stops working on every instance within 1 second')
    .argument('<id>', 'key id')
    .option('--json', 'print one JSON object')
    .action(async (id: string, o: CommonOpts & { json?: boolean }) => {
      await withSession(o, async (s) => {
        const revoked = await s.keys.revoke(id);
        if (!revoked) throw new CliError(`no key with id "${id}"`);
        warnUnconfirmed('revocation', revoked.replication);
        if (o.json) return out(JSON.stringify({ id, status: 'revoked', replication: revoked.replication }));
        out(`Revoked key ${id}.`);
      });
    });

  common(keys.command('rotate'))
    .description('issue a new key for the same id, plan and overrides; the old key works for the grace period')
    .argument('<id>', 'key id')
    .addOption(new Option('--grace <seconds>', 'how long the old key keeps working').default(0).argParser(keyField('--grace', graceSecondsSchema, true)))
    .option('--json', 'print one JSON object')
    .action(async (id: string, o: CommonOpts & { grace: number; json?: boolean }) => {
      await withSession(o, async (s) => {
        const rotated = await s.keys.rotate(id, o.grace);
        if (!rotated) throw new CliError(`no key with id "${id}"`);
        warnUnconfirmed('rotation', rotated.replication);
        if (o.json) return out(JSON.stringify({ ...rotated.record, key: rotated.key, graceSeconds: o.grace, replication: rotated.replication }));
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
    .option('--json', 'print one JSON object')
    .action(async (id: string, o: CommonOpts & { json?: boolean }) => {
      await withSession(o, async (s) => {
        const { replication } = await s.keyLimits.unban(id);
        warnUnconfirmed('unban', replication);
        if (o.json) return out(JSON.stringify({ id, ...(await s.keyLimits.banState(id)), replication }));
        out(`Unbanned key ${id}; its escalation level is back to 0.`);
      });
    });

  common(keys.command('reset'))
    .description("empty the key's windows (plan and route windows) and its strikes (a ban stays: unban lifts it)")
    .argument('<id>', 'key id')
    .action(async (id: string, o: CommonOpts) => {
      await withSession(o, async (s) => {
        await s.keyLimits.resetWindows(id);
        out(`Reset the windows of key ${id}; its next request starts them afresh.`);
      });
    });

  common(keys.command('export'))
    .description('every key record as JSON lines, hashes included (never a plaintext): a backup, or the way to another Redis')
    .option('--out <file>', 'write to this file (mode 600) instead of stdout')
    .action(async (o: CommonOpts & { out?: string }) => {
      await withSession(o, async (s) => {
        const lines: string[] = [];
        for await (const line of exportKeys(s.store)) lines.push(line);
        const text = lines.length ? `${lines.join('\n')}\n` : '';
        if (o.out) {
          // Hashes are not secrets in the way keys are, but they are what opens an API: kept from other users.
          writeFileSync(o.out, text, { mode: 0o600 });
          process.stderr.write(`Exported ${lines.length} key records to ${o.out}.\n`);
        } else process.stdout.write(text);
      });
    });

  common(keys.command('import'))
    .description(
      'import keys: `keys export` records or your own ({id?, name?, plan, key | sha256, metadata?, perMinute?, perDay?, expiresAt?}) as JSON lines or CSV; all or nothing unless --skip-invalid; records already there as given are left alone',
    )
    .argument('[file]', 'the file (same as --file), or - for standard input')
    .option('--file <file>', 'the file to import')
    .addOption(new Option('--format <format>', 'jsonl or csv (default: csv for a .csv file name, else jsonl)').choices(['jsonl', 'csv']))
    .option('--dry-run', 'check every record and say what would be imported; write nothing')
    .option('--skip-invalid', 'import the records that pass and list the refused ones on stderr (exit 0)')
    .addOption(
      new Option('--progress-every <n>', 'a progress line on stderr every n records of each pass')
        .default(PROGRESS_EVERY)
        .argParser(positiveInt('--progress-every')),
    )
    .action(
      async (
        positional: string | undefined,
        o: CommonOpts & { file?: string; format?: ImportFormat; dryRun?: boolean; skipInvalid?: boolean; progressEvery: number },
      ) => {
        if (positional !== undefined && o.file !== undefined && positional !== o.file) throw new CliError('give the file once: as an argument or as --file', 2);
        const file = o.file ?? positional;
        if (file === undefined) throw new CliError('no file to import: give --file FILE (or - for standard input)', 2);
        const format = o.format ?? formatOf(file);
        let source: ImportSource;
        if (file === '-') {
          // Standard input cannot be read twice: held in memory (a big import gives --file).
          const chunks: Buffer[] = [];
          for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
          source = bufferSource(Buffer.concat(chunks), format);
        } else {
          try {
            if (!statSync(file).isFile()) throw Object.assign(new Error(), { code: 'not a file' });
          } catch (err) {
            throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
          }
          source = fileSource(file, format);
        }
        await withSession(o, async (s) => {
          let r: ImportOutcome;
          try {
            r = await s.keys.importKeys(source, undefined, {
              ...(o.dryRun ? { dryRun: true } : {}),
              ...(o.skipInvalid ? { skipInvalid: true } : {}),
              progressEvery: o.progressEvery,
              onProgress: (pass, lines) => process.stderr.write(`${pass === 'check' ? 'checked' : 'written'}: ${lines} records\n`),
            });
          } catch (err) {
            if (err instanceof ImportFileError) throw new CliError(`${file}: ${err.message}`);
            throw err;
          }
          for (const bad of r.refusals) process.stderr.write(`line ${bad.line}: ${bad.error}\n`);
          for (const w of r.warnings) process.stderr.write(`line ${w.line}: warning: ${w.warning}\n`);
          const counts = `${r.imported}, unchanged ${r.unchanged}${r.refusals.length > 0 ? `, refused ${r.refusals.length}` : ''}`;
          out(r.dryRun ? `Dry run (nothing written): would import ${counts}.` : `Imported ${counts}.`);
          if (r.refusals.length > 0 && !o.skipInvalid)
            throw new CliError(
              r.dryRun
                ? 'this import would be refused: every record must pass before any is written (see above), or give --skip-invalid'
                : 'nothing was imported: every record must pass before any is written (see above)',
            );
        });
      },
    );

  keys
    .command('generate')
    .description("print a new key and its SHA-256 for the config's static `keys:` list (stores nothing)")
    .option('--json', 'print one JSON object')
    .option('--config <file>', 'config file whose auth.issuedPrefix the key gets (else TOLLGATE_CONFIG; neither: the default tg_)')
    .action((o: { json?: boolean; config?: string }) => {
      const key = generateKey(issuedPrefixOf(o.config ?? (process.env.TOLLGATE_CONFIG || undefined)));
      const sha256 = hashKey(key);
      if (o.json) return out(JSON.stringify({ key, sha256 }));
      out(`key:    ${key}`);
      out(`sha256: ${sha256}`);
      out('');
      out(`Add to the config:  keys: [{ id: <id>, plan: <plan>, sha256: "${sha256}" }]`);
    });
}

/** auth.issuedPrefix of the config file named, or the default prefix when none is named. */
function issuedPrefixOf(path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  const loaded = loadConfigFile(path, process.env);
  if (!loaded.ok) throw new CliError(`${loaded.path}: invalid configuration: ${loaded.errors.join('; ')}`);
  return loaded.config.auth.issuedPrefix;
}
