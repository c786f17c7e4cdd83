// `tollgate keys generate`: a key and its SHA-256 for the config's static `keys:` list. It stores nothing and talks
// to no Redis: the config file, if named, only gives the issued prefix.
import type { Command } from 'commander';
import { loadConfigFile } from '../../config/load.js';
import { generateKey, hashKey } from '../../keys/format.js';
import { CliError } from '../cli-error.js';
import { out } from '../terminal.js';

export function addGenerate(keys: Command): void {
  keys
    .command('generate')
    .description("print a new key and its SHA-256 for the config's static `keys:` list (stores nothing)")
    .option('--json', 'print one JSON object')
    .option('--config <file>', 'config file whose auth.issuedPrefix the key gets (else TOLLGATE_CONFIG; neither: the default tg_)')
    .action(generateStaticKey);
}

async function generateStaticKey(o: { json?: boolean; config?: string }): Promise<void> {
  const key = generateKey(await issuedPrefixOf(o.config ?? (process.env.TOLLGATE_CONFIG || undefined)));
  const sha256 = hashKey(key);
  if (o.json) return out(JSON.stringify({ key, sha256 }));
  out(`key:    ${key}`);
  out(`sha256: ${sha256}`);
  out('');
  out(`Add to the config:  keys: [{ id: <id>, plan: <plan>, sha256: "${sha256}" }]`);
}

/** auth.issuedPrefix of the config file named, or the default prefix when none is named. */
async function issuedPrefixOf(path: string | undefined): Promise<string | undefined> {
  if (path === undefined) return undefined;
  const loaded = await loadConfigFile(path, process.env);
  if (!loaded.ok) throw new CliError(`${loaded.path}: invalid configuration: ${loaded.errors.join('; ')}`);
  return loaded.config.auth.issuedPrefix;
}
