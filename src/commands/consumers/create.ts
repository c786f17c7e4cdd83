// `tollgate consumers create`: a consumer (the customer behind several keys) with its plan, limits and narrowing.
import { type Command, Option } from 'commander';
import { METADATA_NAME } from '../../config/key-fields.js';
import type { ConsumerInput } from '../../consumers/admin.js';
import { CliError } from '../cli-error.js';
import { keyField } from '../keys/fields.js';
import { warnAll } from '../keys/answers.js';
import { consumerInputFields } from '../../consumers/record-schema.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { consumerLimitsOf } from './answers.js';
import { createFromMetadata } from './from-metadata.js';
import { consumerFieldOptions, consumerMetadataOption, limitsExpireOption, type ConsumerFieldOpts } from './fields.js';

interface CreateOpts extends CommonOpts, ConsumerFieldOpts {
  id?: string;
  fromMetadata?: string;
  apply?: boolean;
  json?: boolean;
}

export function addCreate(consumers: Command): void {
  const cmd = common(consumers.command('create'))
    .description('create a consumer: the customer its keys belong to, with one plan and one pooled quota')
    .option('--id <id>', 'its id: 1-64 characters of A-Z a-z 0-9 _ - (default: con_ and 24 hex digits)', keyField('--id', consumerInputFields.id));
  consumerFieldOptions(cmd, false)
    .addOption(
      new Option(
        '--from-metadata <field>',
        "one consumer per value of this metadata field of the keys (the value is its id and name; with --plan and --max-keys for those created): prints each one's limits before and after; changes nothing without --apply",
      ).argParser(fieldName),
    )
    .option('--apply', 'with --from-metadata: create the consumers that are not there and attach the keys')
    .option('--json', 'print one JSON object')
    .action(createConsumer);
}

/** A metadata field's name, by the rule of metadata names. */
function fieldName(v: string): string {
  if (!METADATA_NAME.test(v)) throw new CliError('--from-metadata: metadata names are 1-64 characters of A-Z a-z 0-9 _ . -', 2);
  return v;
}

async function createConsumer(o: CreateOpts): Promise<void> {
  if (o.fromMetadata !== undefined) {
    const others = (
      ['id', 'name', 'billingDay', 'perMinute', 'perDay', 'perMonth', 'limitsExpire', 'limitsReason', 'metadata', 'scopes', 'allowedCidrs'] as const
    ).filter((f) => o[f] !== undefined);
    if (others.length > 0) throw new CliError('--from-metadata takes --plan and --max-keys only (change each consumer afterwards with consumers update)', 2);
    return createFromMetadata(o.fromMetadata, o);
  }
  if (o.apply) throw new CliError('--apply goes with --from-metadata', 2);
  if (o.name === undefined) throw new CliError('--name is required (the customer, e.g. "Acme Corp")', 2);
  if (o.plan === undefined) throw new CliError('--plan is required (a plan name from the config)', 2);
  const limitsExpiresAt = o.limitsExpire === undefined ? undefined : limitsExpireOption(o.limitsExpire, false);
  const metadata = o.metadata === undefined ? undefined : consumerMetadataOption(o.metadata, false);
  const input: ConsumerInput = { name: o.name, plan: o.plan, ...(o.id !== undefined ? { id: o.id } : {}) };
  for (const field of ['maxKeys', 'billingDay', 'perMinute', 'perDay', 'perMonth', 'limitsReason', 'scopes', 'allowedCidrs'] as const) {
    const v = o[field];
    if (v !== undefined && v !== 'none') (input as unknown as Record<string, unknown>)[field] = v;
  }
  if (limitsExpiresAt !== undefined && limitsExpiresAt !== 'none') input.limitsExpiresAt = limitsExpiresAt;
  if (metadata !== undefined && metadata !== 'none') input.metadata = metadata;
  await withSession(o, async (s) => {
    const { consumer, warnings } = await s.consumers.create(input);
    warnAll(warnings);
    if (o.json) return out(JSON.stringify(consumer));
    out(`Created consumer ${consumer.id} (${consumer.name}, plan ${consumer.plan}, ${consumerLimitsOf(consumer, s.config, Date.now())}).`);
  });
}
