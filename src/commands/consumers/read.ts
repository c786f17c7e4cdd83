// `tollgate consumers list` and `consumers show`: consumers as administrators read them, and a consumer's keys (never a
// key nor its hash). They change nothing.
import type { Command } from 'commander';
import type { ConsumerRecord } from '../../consumers/types.js';
import { keyStatus } from '../../keys/rules.js';
import { CliError } from '../cli-error.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { aligned, out } from '../terminal.js';
import { consumerLimitsOf } from './answers.js';
import { consumerIdArgument } from './fields.js';

export function addList(consumers: Command): void {
  common(consumers.command('list'))
    .description('every consumer: id, name, plan, limits in force, status')
    .option('--json', 'print a JSON array')
    .action(listConsumers);
}

export function addShow(consumers: Command): void {
  common(consumers.command('show'))
    .description('one consumer and its keys')
    .argument('<id>', 'consumer id', consumerIdArgument)
    .option('--json', 'print one JSON object (the consumer, with its keys)')
    .action(showConsumer);
}

async function listConsumers(o: CommonOpts & { json?: boolean }): Promise<void> {
  await withSession(o, async (s) => {
    const all: ConsumerRecord[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await s.consumers.page({ limit: 1000, ...(after !== undefined ? { after } : {}) });
      all.push(...page.consumers);
      if (page.next === undefined) break;
      after = page.next;
    }
    if (o.json) return out(JSON.stringify(all));
    if (all.length === 0) return out('No consumers. Create one with: tollgate consumers create --name <name> --plan <plan>');
    const now = Date.now();
    out(
      aligned([
        ['ID', 'NAME', 'PLAN', 'LIMITS', 'STATUS', 'MAX KEYS', 'CREATED'],
        ...all.map((c) => [c.id, c.name, c.plan, consumerLimitsOf(c, s.config, now), c.status, c.maxKeys === undefined ? '' : String(c.maxKeys), c.createdAt]),
      ]),
    );
  });
}

async function showConsumer(id: string, o: CommonOpts & { json?: boolean }): Promise<void> {
  await withSession(o, async (s) => {
    const c = await s.consumers.get(id);
    if (!c) throw new CliError(`no consumer with id "${id}"`);
    const keys = await s.consumers.keysOf(id);
    const now = Date.now();
    if (o.json) return out(JSON.stringify({ ...c, keys: keys.map((k) => ({ ...k, status: keyStatus(k, now) })) }));
    const rows: Array<[string, string]> = [
      ['id', c.id],
      ['name', c.name],
      ['plan', c.plan],
      ['limits', consumerLimitsOf(c, s.config, now)],
      ['limits reason', c.limitsReason ?? ''],
      ['status', c.status + (c.suspendedAt ? ` since ${c.suspendedAt}` : '')],
      ['max keys', c.maxKeys === undefined ? '' : String(c.maxKeys)],
      ['billing day', c.billingDay === undefined ? '' : String(c.billingDay)],
      ['scopes', c.scopes?.join(', ') ?? ''],
      ['allowed cidrs', c.allowedCidrs?.join(', ') ?? ''],
      ['metadata', c.metadata ? JSON.stringify(c.metadata) : ''],
      ['created', c.createdAt],
      ['updated', c.updatedAt ?? ''],
    ];
    out(aligned(rows.filter(([, v]) => v !== '').map(([a, b]) => [`${a}:`, b])));
    out('');
    if (keys.length === 0) return out('No keys. Give one with: tollgate keys create --plan <plan> --consumer ' + c.id);
    out(aligned([['KEY', 'NAME', 'OWN PLAN', 'STATUS', 'CREATED'], ...keys.map((k) => [k.id, k.name ?? '', k.plan, keyStatus(k, now), k.createdAt])]));
  });
}
