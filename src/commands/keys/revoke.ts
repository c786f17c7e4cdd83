// `tollgate keys revoke`: the key stops opening anything, on every instance, for good (a new key replaces it).
import type { Command } from 'commander';
import { CliError } from '../cli-error.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { warnUnconfirmed } from './answers.js';

interface RevokeOpts extends CommonOpts {
  json?: boolean;
}

export function addRevoke(keys: Command): void {
  common(keys.command('revoke'))
    .description('the key stops working on every instance within 1 second')
    .argument('<id>', 'key id')
    .option('--json', 'print one JSON object')
    .action(revokeKey);
}

async function revokeKey(id: string, o: RevokeOpts): Promise<void> {
  await withSession(o, async (s) => {
    const revoked = await s.keys.lifecycle.revoke(id);
    if (!revoked) throw new CliError(`no key with id "${id}"`);
    warnUnconfirmed('revocation', revoked.replication);
    if (o.json) return out(JSON.stringify({ id, status: 'revoked', replication: revoked.replication }));
    out(`Revoked key ${id}.`);
  });
}
