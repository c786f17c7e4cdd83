// `tollgate keys list` and `keys show`: a key's metadata as administrators read it, never the key nor its hash (only
// `keys export` prints hashes). They change nothing.
import type { Command } from 'commander';
import { CliError } from '../cli-error.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { aligned, out } from '../terminal.js';
import { limitsOf } from './answers.js';

export function addList(keys: Command): void {
  common(keys.command('list')).description("every key's metadata (never the key or its hash)").option('--json', 'print a JSON array').action(listKeys);
}

export function addShow(keys: Command): void {
  common(keys.command('show'))
    .description("one key's metadata, ban state and escalation level")
    .argument('<id>', 'key id')
    .option('--json', 'print one JSON object')
    .action(showKey);
}

async function listKeys(o: CommonOpts & { json?: boolean }): Promise<void> {
  await withSession(o, async (s) => {
    const all = await s.keys.listing.list();
    if (o.json) return out(JSON.stringify(all));
    if (all.length === 0) return out('No keys. Create one with: tollgate keys create --plan <plan>');
    out(
      aligned([
        ['ID', 'NAME', 'PLAN', 'LIMITS', 'STATUS', 'CREATED', 'EXPIRES'],
        ...all.map((k) => [k.id, k.name ?? '', k.plan, limitsOf(k, s.config), s.keys.listing.statusOf(k), k.createdAt, k.expiresAt ?? '']),
      ]),
    );
  });
}

async function showKey(id: string, o: CommonOpts & { json?: boolean }): Promise<void> {
  await withSession(o, async (s) => {
    const k = await s.keys.listing.get(id);
    if (!k) throw new CliError(`no key with id "${id}"`);
    const ban = await s.keyLimits.banState(id);
    if (o.json) return out(JSON.stringify({ ...k, ...ban }));
    const rows: Array<[string, string]> = [
      ['id', k.id],
      ['name', k.name ?? ''],
      ['plan', k.plan],
      ['limits', limitsOf(k, s.config) + (k.perMinute || k.perDay ? ' (per-key override)' : '')],
      ['per month', k.perMonth !== undefined ? `${k.perMonth} (per-key override)` : ''],
      ['limits end', k.perMinute || k.perDay || k.perMonth || k.limitsExpiresAt ? ownLimitsEnd(k, Date.now()) : ''],
      ['limits reason', k.limitsReason ?? ''],
      ['status', s.keys.listing.statusOf(k)],
      ['created', k.createdAt],
      ['expires', k.expiresAt ?? 'never'],
      ['metadata', k.metadata ? JSON.stringify(k.metadata) : ''],
      ['scopes', k.scopes ? k.scopes.join(', ') : ''],
      ['allowed from', k.allowedCidrs ? k.allowedCidrs.join(', ') : ''],
      ['consumer', k.consumer !== undefined ? `${k.consumer} (its plan and pooled quota apply)` : ''],
      ['rotated', k.rotatedAt ?? ''],
      ['revoked', k.revokedAt ?? ''],
      ['banned until', ban.bannedUntil ?? 'not banned'],
      ['ban level', String(ban.banLevel)],
    ];
    out(aligned(rows.filter(([, v]) => v !== '').map(([a, b]) => [`${a}:`, b])));
  });
}

/** When the key's own limits end, as `keys show` says it: never, a date to come, or a date past (the plan's apply). */
function ownLimitsEnd(k: { limitsExpiresAt?: string | undefined }, now: number): string {
  if (k.limitsExpiresAt === undefined) return 'never';
  return Date.parse(k.limitsExpiresAt) > now ? k.limitsExpiresAt : `${k.limitsExpiresAt} (ended: the plan's limits apply)`;
}
