// `tollgate keys update`: changes a key's plan, name, overrides, expiry, metadata, scopes, allowed CIDRs or consumer in
// place (the key and its hash stay); "none"/"never" remove an override, the metadata, the scopes, the CIDRs or the
// expiry; --no-consumer detaches it.
import { type Command, Option } from 'commander';
import { keyInputFields } from '../../config/key-fields.js';
import { keyLimits, poolLimits, windowText, type PlanLimits } from '../../consumers/attach-preview.js';
import type { KeyUpdate } from '../../keys/lifecycle.js';
import { CliError } from '../cli-error.js';
import { ESTIMATE_NOTE, refusalsText } from '../estimated-refusals.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { limitsOf, warnAll, warnUnconfirmed } from './answers.js';
import { expiresOption, keyField, limitsExpiresAtOption, listOrNone, metadataOption, overrideOrNone, reasonOrNone } from './fields.js';

interface UpdateOpts extends CommonOpts {
  plan?: string;
  name?: string;
  perMinute?: number | 'none';
  perDay?: number | 'none';
  perMonth?: number | 'none';
  limitsExpiresAt?: string;
  limitsReason?: string | 'none';
  expires?: string;
  metadata?: string;
  scopes?: string[] | 'none';
  allowedCidrs?: string[] | 'none';
  /** An id, or false for --no-consumer. */
  consumer?: string | false;
  json?: boolean;
}

export function addUpdate(keys: Command): void {
  common(keys.command('update'))
    .description("change a key's plan, name, overrides, expiry, metadata, scopes, allowed CIDRs or consumer (every instance applies it at its next request)")
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
    .addOption(
      new Option('--per-month <n>', 'override the plan: requests per month ("none": the plan\'s again)').argParser(
        overrideOrNone('--per-month', keyInputFields.perMonth),
      ),
    )
    .option('--limits-expires-at <iso>', 'when the key\'s own limits end, ISO-8601 (then the plan\'s apply again), or "never"')
    .addOption(new Option('--limits-reason <text>', 'why the own limits were given, or "none"').argParser(reasonOrNone))
    .option('--expires <iso>', 'expiry, ISO-8601, or "never"')
    .option('--metadata <json>', 'the whole metadata map as a JSON object of strings, or "none"')
    .addOption(
      new Option('--scopes <list>', 'the whole list of routes it may call, comma-separated, or "none" (every route)').argParser(
        listOrNone('--scopes', keyInputFields.scopes),
      ),
    )
    .addOption(
      new Option('--allowed-cidrs <list>', 'the whole list of addresses it may be used from, comma-separated, or "none" (anywhere)').argParser(
        listOrNone('--allowed-cidrs', keyInputFields.allowedCidrs),
      ),
    )
    .addOption(
      new Option(
        '--consumer <id>',
        'attach the key to this consumer, or move it there from its own (refused past its maxKeys); its own plan is kept',
      ).argParser(keyField('--consumer', keyInputFields.id)),
    )
    .option('--no-consumer', 'detach the key from its consumer: its own plan and windows apply again')
    .option('--json', 'print one JSON object')
    .action(updateKey);
}

async function updateKey(id: string, o: UpdateOpts): Promise<void> {
  const limitsEnd = o.limitsExpiresAt === undefined ? undefined : limitsExpiresAtOption(o.limitsExpiresAt);
  const patch: KeyUpdate = {
    ...(o.plan !== undefined ? { plan: o.plan } : {}),
    ...(o.name !== undefined ? { name: o.name } : {}),
    ...(o.perMinute !== undefined ? { perMinute: o.perMinute === 'none' ? null : o.perMinute } : {}),
    ...(o.perDay !== undefined ? { perDay: o.perDay === 'none' ? null : o.perDay } : {}),
    ...(o.perMonth !== undefined ? { perMonth: o.perMonth === 'none' ? null : o.perMonth } : {}),
    ...(limitsEnd !== undefined ? { limitsExpiresAt: limitsEnd === 'never' ? null : limitsEnd } : {}),
    ...(o.limitsReason !== undefined ? { limitsReason: o.limitsReason === 'none' ? null : o.limitsReason } : {}),
    ...(o.expires !== undefined ? { expiresAt: o.expires === 'never' ? null : expiresOption(o.expires) } : {}),
    ...(o.metadata !== undefined ? { metadata: o.metadata === 'none' ? null : metadataOption(o.metadata) } : {}),
    ...(o.scopes !== undefined ? { scopes: o.scopes === 'none' ? null : o.scopes } : {}),
    ...(o.allowedCidrs !== undefined ? { allowedCidrs: o.allowedCidrs === 'none' ? null : o.allowedCidrs } : {}),
    ...(o.consumer !== undefined ? { consumer: o.consumer === false ? null : o.consumer } : {}),
  };
  if (Object.keys(patch).length === 0)
    throw new CliError(
      'nothing to change: give at least one of --plan, --name, --per-minute, --per-day, --per-month, --limits-expires-at, --limits-reason, --expires, --metadata, --scopes, --allowed-cidrs, --consumer, --no-consumer',
      2,
    );
  await withSession(o, async (s) => {
    const { record: k, replication, warnings } = await s.keys.lifecycle.update(id, patch);
    warnUnconfirmed('change', replication);
    warnAll(warnings);
    if (o.json) return out(JSON.stringify({ ...k, status: s.keys.listing.statusOf(k), replication }));
    const where = k.consumer === undefined ? '' : `, consumer ${k.consumer}: its plan and pool apply`;
    out(`Updated key ${k.id} (plan ${k.plan}, ${limitsOf(k, s.config)}${k.expiresAt ? `, expires ${k.expiresAt}` : ''}${where}).`);
    // Joining a consumer changes what the key may take: its own limits before, the pool it now shares after.
    if (typeof o.consumer === 'string') {
      const c = await s.consumers.get(o.consumer);
      const plans = s.config.plans as Readonly<Record<string, PlanLimits>>;
      if (c) {
        out(
          `Limits before: ${windowText(keyLimits(k, plans))} (the key on its own); after: ${windowText(poolLimits(c, plans, Date.now()))} (consumer ${c.id}'s pool, shared).`,
        );
        // And what the ledger says the pool would have refused over the last 7 days, had the key been in it: said when
        // any. The key is attached already: a ledger that cannot be read is a warning, not a failed command.
        const e = await s.consumers.estimateRefusals(c, [k.id]).catch((err: unknown) => {
          process.stderr.write(`Warning: the usage ledger could not be read for what the pool would have refused: ${(err as Error).message}\n`);
          return undefined;
        });
        if (e && e.pointsRefused > 0) {
          out(`Would have been refused over the last 7 days, had the key shared the pool: ${refusalsText(e)}.`);
          out(ESTIMATE_NOTE);
        }
      }
    }
  });
}
