// `tollgate consumers update`: changes a consumer in place; every instance applies it within a second. "none" removes
// an optional field ("never" an end of the own limits).
import type { Command } from 'commander';
import type { ConsumerUpdate } from '../../consumers/admin.js';
import { CliError } from '../cli-error.js';
import { warnAll } from '../keys/answers.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { consumerLimitsOf } from './answers.js';
import { consumerFieldOptions, consumerIdArgument, consumerMetadataOption, limitsExpireOption, type ConsumerFieldOpts } from './fields.js';

interface UpdateOpts extends CommonOpts, ConsumerFieldOpts {
  json?: boolean;
}

export function addUpdate(consumers: Command): void {
  const cmd = common(consumers.command('update'))
    .description("change a consumer's name, plan, limits, narrowing or metadata (every instance applies it within a second)")
    .argument('<id>', 'consumer id', consumerIdArgument);
  consumerFieldOptions(cmd, true).option('--json', 'print one JSON object').action(updateConsumer);
}

async function updateConsumer(id: string, o: UpdateOpts): Promise<void> {
  const patch: Record<string, unknown> = {};
  if (o.name !== undefined) patch.name = o.name;
  if (o.plan !== undefined) patch.plan = o.plan;
  for (const field of ['maxKeys', 'billingDay', 'perMinute', 'perDay', 'perMonth', 'limitsReason', 'scopes', 'allowedCidrs'] as const) {
    const v = o[field];
    if (v !== undefined) patch[field] = v === 'none' ? null : v;
  }
  if (o.limitsExpire !== undefined) {
    const v = limitsExpireOption(o.limitsExpire, true);
    patch.limitsExpiresAt = v === 'none' ? null : v;
  }
  if (o.metadata !== undefined) {
    const v = consumerMetadataOption(o.metadata, true);
    patch.metadata = v === 'none' ? null : v;
  }
  if (Object.keys(patch).length === 0)
    throw new CliError(
      'nothing to change: give at least one of --name, --plan, --max-keys, --billing-day, --per-minute, --per-day, --per-month, --limits-expire, --limits-reason, --metadata, --scopes, --allowed-cidrs',
      2,
    );
  await withSession(o, async (s) => {
    const { consumer, warnings } = await s.consumers.update(id, patch as ConsumerUpdate);
    warnAll(warnings);
    if (o.json) return out(JSON.stringify(consumer));
    out(`Updated consumer ${consumer.id} (plan ${consumer.plan}, ${consumerLimitsOf(consumer, s.config, Date.now())}).`);
  });
}
