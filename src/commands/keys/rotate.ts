// `tollgate keys rotate`: a new plaintext for the same id, plan and overrides, printed once; the old key keeps
// working for the grace period, so clients can move over without a failed request.
import { type Command, Option } from 'commander';
import { graceSecondsSchema } from '../../config/key-fields.js';
import { CliError } from '../cli-error.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';
import { warnUnconfirmed } from './answers.js';
import { keyField } from './fields.js';

interface RotateOpts extends CommonOpts {
  grace: number;
  keepPrefix?: boolean;
  json?: boolean;
}

export function addRotate(keys: Command): void {
  common(keys.command('rotate'))
    .description('issue a new key for the same id, plan and overrides; the old key works for the grace period')
    .argument('<id>', 'key id')
    .addOption(new Option('--grace <seconds>', 'how long the old key keeps working').default(0).argParser(keyField('--grace', graceSecondsSchema, true)))
    .option(
      '--keep-prefix',
      "the new key starts with the old key's recorded prefix (an imported key's, e.g. sk_live_) instead of the issued prefix; needs auth.foreignKeys: true",
    )
    .option('--json', 'print one JSON object')
    .action(rotateKey);
}

async function rotateKey(id: string, o: RotateOpts): Promise<void> {
  await withSession(o, async (s) => {
    const rotated = await s.keys.lifecycle.rotate(id, o.grace, undefined, o.keepPrefix ? { keepPrefix: true } : {});
    if (!rotated) throw new CliError(`no key with id "${id}"`);
    warnUnconfirmed('rotation', rotated.replication);
    if (o.json) return out(JSON.stringify({ ...rotated.record, key: rotated.key, graceSeconds: o.grace, replication: rotated.replication }));
    out(`Rotated key ${id}. The old key ${o.grace > 0 ? `keeps working for ${o.grace} s` : 'has stopped working'}.`);
    out('');
    out(`  ${rotated.key}`);
    out('');
    out('This is the only time the new key is shown.');
  });
}
