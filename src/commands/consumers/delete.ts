// `tollgate consumers delete`: removes a consumer, refused (exit 1, nothing changed) while it has keys that are not
// revoked, unless --revoke-keys revokes them first. Its revoked keys keep naming it, as their history.
import type { Command } from 'commander';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { consumerIdArgument } from './fields.js';

interface DeleteOpts extends CommonOpts {
  revokeKeys?: boolean;
  json?: boolean;
}

export function addDelete(consumers: Command): void {
  common(consumers.command('delete'))
    .description('delete a consumer; refused while it has keys that are not revoked, unless --revoke-keys')
    .argument('<id>', 'consumer id', consumerIdArgument)
    .option('--revoke-keys', 'revoke its keys first (on every instance within a second), then delete it')
    .option('--json', 'print one JSON object')
    .action(deleteConsumer);
}

async function deleteConsumer(id: string, o: DeleteOpts): Promise<void> {
  await withSession(o, async (s) => {
    const { revokedKeys } = await s.consumers.delete(id, { revokeKeys: o.revokeKeys === true });
    if (o.json) return out(JSON.stringify({ id, deleted: true, revokedKeys }));
    out(
      `Deleted consumer ${id}${revokedKeys.length > 0 ? `; revoked its ${revokedKeys.length} key${revokedKeys.length === 1 ? '' : 's'}: ${revokedKeys.join(', ')}` : ''}.`,
    );
  });
}
