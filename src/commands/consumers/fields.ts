// A consumer's fields as options of `consumers create` and `consumers update`, each checked by the rule the admin API
// applies to the same value (src/consumers/record-schema.ts): refused as a usage error (exit 2), with its message,
// before Redis is asked anything. "none" removes an optional field on update.
import { type Command, Option } from 'commander';
import type { z } from 'zod';
import { consumerInputFields } from '../../consumers/record-schema.js';
import { CliError } from '../cli-error.js';
import { keyField, metadataOption } from '../keys/fields.js';

const f = consumerInputFields;

/** What the options give, parsed; 'none' where an update removes the field. */
export interface ConsumerFieldOpts {
  name?: string;
  plan?: string;
  maxKeys?: number | 'none';
  billingDay?: number | 'none';
  perMinute?: number | 'none';
  perDay?: number | 'none';
  perMonth?: number | 'none';
  limitsExpire?: string;
  limitsReason?: string | 'none';
  metadata?: string;
  scopes?: string[] | 'none';
  allowedCidrs?: string[] | 'none';
}

/** A field's rule as an option parser; with `removable`, "none" is taken as the removal. */
function field<T>(flag: string, schema: z.ZodType<T>, opts: { numeric?: boolean; removable?: boolean } = {}) {
  const parse = keyField(flag, schema, opts.numeric ?? false);
  return (v: string): T | 'none' => (opts.removable && v === 'none' ? 'none' : parse(v));
}

/** A list option: comma-separated (`a,b`) or a JSON array (`["a","b"]`), then checked as a whole by its rule. */
function list(flag: string, schema: z.ZodType<string[]>, removable: boolean) {
  return (v: string): string[] | 'none' => {
    if (removable && v === 'none') return 'none';
    let items: unknown;
    if (v.trimStart().startsWith('[')) {
      try {
        items = JSON.parse(v);
      } catch {
        throw new CliError(`${flag} must be a comma-separated list or a JSON array of strings, got "${v.slice(0, 80)}"`, 2);
      }
    } else items = v === '' ? [] : v.split(',').map((s) => s.trim());
    const r = schema.safeParse(items);
    if (!r.success) throw new CliError(`${flag}: ${r.error.issues.map((i) => [...i.path.map(String), i.message].join(': ')).join('; ')}`, 2);
    return r.data;
  };
}

/** The options every consumer field takes, on `create` (`update`: removable ones take "none"). */
export function consumerFieldOptions(cmd: Command, update: boolean): Command {
  const none = update ? ' ("none": removes it)' : '';
  const n = { numeric: true, removable: update };
  return cmd
    .addOption(new Option('--name <name>', update ? 'a new name' : 'the customer, e.g. "Acme Corp"').argParser(field('--name', f.name)))
    .addOption(new Option('--plan <plan>', 'a plan name from the config: the plan in force for every key of the consumer'))
    .addOption(new Option('--max-keys <n>', `refuse a key past this many (not revoked)${none}`).argParser(field('--max-keys', f.maxKeys, n)))
    .addOption(
      new Option('--billing-day <day>', `monthly windows run from this day of the month, 1-31 (31: the last day of shorter months)${none}`).argParser(
        field('--billing-day', f.billingDay, n),
      ),
    )
    .addOption(new Option('--per-minute <n>', `own limit over the plan's, for the pool${none}`).argParser(field('--per-minute', f.perMinute, n)))
    .addOption(new Option('--per-day <n>', `own limit over the plan's, for the pool${none}`).argParser(field('--per-day', f.perDay, n)))
    .addOption(new Option('--per-month <n>', `own limit over the plan's, for the pool${none}`).argParser(field('--per-month', f.perMonth, n)))
    .option('--limits-expire <iso>', `when the own limits end, ISO-8601 (then the plan's apply again)${update ? ' ("never": they do not)' : ''}`)
    .addOption(
      new Option('--limits-reason <text>', `why the own limits were given${none}`).argParser(field('--limits-reason', f.limitsReason, { removable: update })),
    )
    .option('--metadata <json>', `a JSON object of strings for your own ids, e.g. '{"crm":"c_42"}'${none}`)
    .addOption(
      new Option('--scopes <list>', `route names, service:<name>, operation:<operationId>; comma-separated or a JSON array${none}`).argParser(
        list('--scopes', f.scopes, update),
      ),
    )
    .addOption(
      new Option('--allowed-cidrs <list>', `IPv4/IPv6 addresses and CIDR ranges; comma-separated or a JSON array${none}`).argParser(
        list('--allowed-cidrs', f.allowedCidrs, update),
      ),
    );
}

/** --limits-expire: a date-time by the rule, stored in UTC; "never" (update) removes it. */
export function limitsExpireOption(v: string, update: boolean): string | 'none' {
  if (update && v === 'never') return 'none';
  return new Date(Date.parse(keyField('--limits-expire', f.limitsExpiresAt)(v))).toISOString();
}

/** --metadata, or "none" on update. */
export function consumerMetadataOption(v: string, update: boolean): Record<string, string> | 'none' {
  return update && v === 'none' ? 'none' : metadataOption(v);
}

/** A consumer id given as an argument: by its rule, a usage error otherwise (it could name no consumer). */
export function consumerIdArgument(id: string): string {
  return keyField('consumer id', f.id)(id);
}
