// `tollgate consumers create`: a consumer (the customer behind several keys) with its plan, limits and narrowing.
import type { Command } from 'commander';
import type { ConsumerInput } from '../../consumers/admin.js';
import { CliError } from '../cli-error.js';
import { keyField } from '../keys/fields.js';
import { warnAll } from '../keys/answers.js';
import { consumerInputFields } from '../../consumers/record-schema.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { consumerLimitsOf } from './answers.js';
import { consumerFieldOptions, consumerMetadataOption, limitsExpireOption, type ConsumerFieldOpts } from './fields.js';

interface CreateOpts extends CommonOpts, ConsumerFieldOpts {
  id?: string;
  json?: boolean;
}

export function addCreate(consumers: Command): void {
  const cmd = common(consumers.command('create'))
    .description('create a consumer: the customer its keys belong to, with one plan and one pooled quota')
    .option('--id <id>', 'its id: 1-64 characters of A-Z a-z 0-9 _ - (default: con_ and 24 hex digits)', keyField('--id', consumerInputFields.id));
  consumerFieldOptions(cmd, false).option('--json', 'print one JSON object').action(createConsumer);
}

async function createConsumer(o: CreateOpts): Promise<void> {
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
