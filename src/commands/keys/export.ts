// `tollgate keys export`: every key record as JSON lines, hashes included (Tollgate has no plaintext to print): a
// backup, or the way to another Redis through `keys import`.
import { writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import { exportKeys } from '../../keys/transfer.js';
import { common, withSession, type CommonOpts } from '../session.js';

interface ExportOpts extends CommonOpts {
  out?: string;
}

export function addExport(keys: Command): void {
  common(keys.command('export'))
    .description('every key record as JSON lines, hashes included (never a plaintext): a backup, or the way to another Redis')
    .option('--out <file>', 'write to this file (mode 600) instead of stdout')
    .action(exportAll);
}

async function exportAll(o: ExportOpts): Promise<void> {
  await withSession(o, async (s) => {
    const lines: string[] = [];
    for await (const line of exportKeys(s.store)) lines.push(line);
    const text = lines.length ? `${lines.join('\n')}\n` : '';
    if (o.out) {
      // Hashes are not secrets in the way keys are, but they are what opens an API: kept from other users.
      writeFileSync(o.out, text, { mode: 0o600 });
      process.stderr.write(`Exported ${lines.length} key records to ${o.out}.\n`);
    } else process.stdout.write(text);
  });
}
