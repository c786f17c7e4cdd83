// `tollgate keys unban` and `keys reset`: what the limit check keeps about a key (its ban, its windows), changed
// through KeyLimitAdmin (src/limits/key-admin.ts); the key's record itself stays as it is.
import type { Command } from 'commander';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { warnUnconfirmed } from './answers.js';

export function addUnban(keys: Command): void {
  common(keys.command('unban'))
    .description('lift a ban and reset the escalation level')
    .argument('<id>', 'key id')
    .option('--json', 'print one JSON object')
    .action(unbanKey);
}

export function addReset(keys: Command): void {
  common(keys.command('reset'))
    .description("empty the key's windows (plan and route windows) and its strikes (a ban stays: unban lifts it)")
    .argument('<id>', 'key id')
    .action(resetKey);
}

async function unbanKey(id: string, o: CommonOpts & { json?: boolean }): Promise<void> {
  await withSession(o, async (s) => {
    const { replication } = await s.keyLimits.unban(id);
    warnUnconfirmed('unban', replication);
    if (o.json) return out(JSON.stringify({ id, ...(await s.keyLimits.banState(id)), replication }));
    out(`Unbanned key ${id}; its escalation level is back to 0.`);
  });
}

async function resetKey(id: string, o: CommonOpts): Promise<void> {
  await withSession(o, async (s) => {
    await s.keyLimits.resetWindows(id);
    out(`Reset the windows of key ${id}; its next request starts them afresh.`);
  });
}
