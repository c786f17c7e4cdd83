// `tollgate keys ...`: issue, list, show, update, revoke, rotate and unban API keys and reset their windows, in the
// shared Redis key store, and export or import every record. Plaintext keys are printed once, at create and rotate;
// list and show never print a key or a hash; export prints hashes (Tollgate has no plaintext to print). Every change
// writes its audit line ("admin change", by "cli") to stderr as one JSON log line: stdout stays the command's answer.
// Each subcommand is a file of its own (its options and its action); this is where they are put together, in the
// order `tollgate keys --help` lists them.
import type { Command } from 'commander';
import { addCreate } from './create.js';
import { addExport } from './export.js';
import { addGenerate } from './generate.js';
import { addImport } from './import.js';
import { addReset, addUnban } from './limits.js';
import { addList, addShow } from './read.js';
import { addRevoke } from './revoke.js';
import { addRotate } from './rotate.js';
import { addUpdate } from './update.js';

export function registerKeysCommands(program: Command): void {
  const keys = program.command('keys').description('issue and manage API keys (in the Redis key store)');
  addCreate(keys);
  addList(keys);
  addShow(keys);
  addUpdate(keys);
  addRevoke(keys);
  addRotate(keys);
  addUnban(keys);
  addReset(keys);
  addExport(keys);
  addImport(keys);
  addGenerate(keys);
}
