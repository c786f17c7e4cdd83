// `tollgate consumers suspend` and `consumers resume`: every key of a suspended consumer is refused (403
// consumer_suspended) on every instance within a second, before any quota is taken; resume lifts it. Both are safe
// to repeat.
import type { Command } from 'commander';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { consumerIdArgument } from './fields.js';

export function addSuspend(consumers: Command): void {
  common(consumers.command('suspend'))
    .description('refuse every key of the consumer (403 consumer_suspended) on every instance within a second: a billing system\'s "payment failed"')
    .argument('<id>', 'consumer id', consumerIdArgument)
    .option('--json', 'print one JSON object')
    .action((id: string, o: CommonOpts & { json?: boolean }) => setStatus(id, 'suspend', o));
}

export function addResume(consumers: Command): void {
  common(consumers.command('resume'))
    .description("lift a consumer's suspension: its keys work again on every instance within a second")
    .argument('<id>', 'consumer id', consumerIdArgument)
    .option('--json', 'print one JSON object')
    .action((id: string, o: CommonOpts & { json?: boolean }) => setStatus(id, 'resume', o));
}

async function setStatus(id: string, what: 'suspend' | 'resume', o: CommonOpts & { json?: boolean }): Promise<void> {
  await withSession(o, async (s) => {
    const c = what === 'suspend' ? await s.consumers.suspend(id) : await s.consumers.resume(id);
    if (o.json) return out(JSON.stringify(c));
    out(c.status === 'suspended' ? `Consumer ${c.id} is suspended (since ${c.suspendedAt ?? '?'}).` : `Consumer ${c.id} is active.`);
  });
}
