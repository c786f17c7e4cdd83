// `tollgate keys create`: issues a key and prints its plaintext, the only time anything shows it.
import { type Command, Option } from 'commander';
import { keyInputFields } from '../../config/key-fields.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { limitsOf, warnAll, warnUnconfirmed } from './answers.js';
import { CliError } from '../cli-error.js';
import { expiresOption, keyField, limitsExpiresAtOption, listOption, metadataOption } from './fields.js';

interface CreateOpts extends CommonOpts {
  plan: string;
  name?: string;
  perMinute?: number;
  perDay?: number;
  perMonth?: number;
  limitsExpiresAt?: string;
  limitsReason?: string;
  expires?: string;
  metadata?: string;
  scopes?: string[];
  allowedCidrs?: string[];
  consumer?: string;
  json?: boolean;
}

export function addCreate(keys: Command): void {
  common(keys.command('create'))
    .description('issue a key; prints the plaintext key once')
    .requiredOption('--plan <plan>', 'plan name from the config')
    .addOption(new Option('--name <name>', 'a label, e.g. the customer').argParser(keyField('--name', keyInputFields.name)))
    .addOption(new Option('--per-minute <n>', 'override the plan: requests per minute').argParser(keyField('--per-minute', keyInputFields.perMinute, true)))
    .addOption(new Option('--per-day <n>', 'override the plan: requests per day').argParser(keyField('--per-day', keyInputFields.perDay, true)))
    .addOption(new Option('--per-month <n>', 'override the plan: requests per month').argParser(keyField('--per-month', keyInputFields.perMonth, true)))
    .option('--limits-expires-at <iso>', "when the key's own limits end, ISO-8601 (then the plan's apply again)")
    .addOption(new Option('--limits-reason <text>', 'why the own limits were given').argParser(keyField('--limits-reason', keyInputFields.limitsReason)))
    .option('--expires <iso>', 'expiry, ISO-8601 (e.g. 2027-01-01T00:00:00Z)')
    .option('--metadata <json>', 'a JSON object of strings for your own ids, e.g. \'{"customer":"c_42"}\'')
    .addOption(
      new Option('--scopes <list>', 'the routes it may call, comma-separated: route names, service:<name>, operation:<operationId>').argParser(
        listOption('--scopes', keyInputFields.scopes),
      ),
    )
    .addOption(
      new Option('--allowed-cidrs <list>', 'the client addresses it may be used from, comma-separated (e.g. 203.0.113.0/24,2001:db8::/32)').argParser(
        listOption('--allowed-cidrs', keyInputFields.allowedCidrs),
      ),
    )
    .addOption(
      new Option('--consumer <id>', 'the consumer the key belongs to (its plan and pooled quota apply; refused past its maxKeys)').argParser(
        keyField('--consumer', keyInputFields.id),
      ),
    )
    .option('--json', 'print one JSON object')
    .action(createKey);
}

async function createKey(o: CreateOpts): Promise<void> {
  // Every field is checked before Redis is asked anything: a bad one is a usage error (exit 2).
  const expiresAt = o.expires === undefined ? undefined : expiresOption(o.expires);
  const metadata = o.metadata === undefined ? undefined : metadataOption(o.metadata);
  const limitsExpiresAt = o.limitsExpiresAt === undefined ? undefined : limitsExpiresAtOption(o.limitsExpiresAt);
  if (limitsExpiresAt === 'never') throw new CliError('--limits-expires-at: expected an ISO-8601 date-time with its offset, e.g. 2027-01-01T00:00:00Z', 2);
  await withSession(o, async (s) => {
    const created = await s.keys.issuer.create({
      plan: o.plan,
      ...(o.name !== undefined ? { name: o.name } : {}),
      ...(o.perMinute !== undefined ? { perMinute: o.perMinute } : {}),
      ...(o.perDay !== undefined ? { perDay: o.perDay } : {}),
      ...(o.perMonth !== undefined ? { perMonth: o.perMonth } : {}),
      ...(limitsExpiresAt !== undefined ? { limitsExpiresAt } : {}),
      ...(o.limitsReason !== undefined ? { limitsReason: o.limitsReason } : {}),
      ...(expiresAt !== undefined ? { expiresAt } : {}),
      ...(metadata !== undefined ? { metadata } : {}),
      ...(o.scopes !== undefined ? { scopes: o.scopes } : {}),
      ...(o.allowedCidrs !== undefined ? { allowedCidrs: o.allowedCidrs } : {}),
      ...(o.consumer !== undefined ? { consumer: o.consumer } : {}),
    });
    warnUnconfirmed('new key', created.replication);
    warnAll(created.warnings);
    if (o.json) return out(JSON.stringify({ ...created.record, key: created.key, replication: created.replication }));
    const where = created.record.consumer === undefined ? '' : `, consumer ${created.record.consumer}: its plan and pool apply`;
    out(`Created key ${created.record.id} (plan ${created.record.plan}, ${limitsOf(created.record, s.config)}${where}).`);
    out('');
    out(`  ${created.key}`);
    out('');
    out('This is the only time the key is shown. Store it now; Tollgate keeps only its SHA-256 hash.');
  });
}
