// `tollgate consumers create --from-metadata FIELD`: groups the keys by a metadata field (each value a consumer's id)
// and prints, per consumer, the limits before (the keys' own, summed: what they may take together today) and after
// (the consumer's pool), and what the usage ledger says the pool would have refused over the last 7 days, by key.
// Changes nothing without --apply; with it, creates the consumers that are not there and
// attaches each key, as `keys update --consumer` would.
import { windowText, type AttachPreview } from '../../consumers/attach-preview.js';
import { CliError } from '../cli-error.js';
import { ESTIMATE_NOTE, refusalsText } from '../estimated-refusals.js';
import { withSession, type CommonOpts } from '../session.js';
import { aligned, out } from '../terminal.js';

export interface FromMetadataOpts extends CommonOpts {
  plan?: string;
  maxKeys?: number | 'none';
  apply?: boolean;
  json?: boolean;
}

export async function createFromMetadata(field: string, o: FromMetadataOpts): Promise<void> {
  if (o.plan === undefined) throw new CliError('--from-metadata needs --plan: the plan of the consumers it creates', 2);
  const create = { plan: o.plan, ...(typeof o.maxKeys === 'number' ? { maxKeys: o.maxKeys } : {}) };
  await withSession(o, async (s) => {
    const preview = await s.consumers.previewFromMetadata(field, create);
    const applied = o.apply ? await s.consumers.applyAttach(preview) : undefined;
    if (o.json) return out(JSON.stringify({ dryRun: !o.apply, ...preview, ...(applied ? { applied } : {}) }));
    printPreview(field, preview, !o.apply);
    if (!applied) return;
    let failures = 0;
    for (const a of applied) {
      out(`${a.created ? 'Created' : 'Kept'} consumer ${a.consumer}; attached ${a.attached.length} key${a.attached.length === 1 ? '' : 's'}.`);
      for (const f of a.failed) {
        failures++;
        process.stderr.write(`${f.key}: not attached to ${a.consumer}: ${f.reason}\n`);
      }
    }
    if (failures > 0) throw new CliError(`${failures} key${failures === 1 ? ' was' : 's were'} not attached (see above); the rest were`);
  });
}

function printPreview(field: string, p: AttachPreview, dryRun: boolean): void {
  if (p.groups.length === 0) out(`No key without a consumer has metadata field "${field}".`);
  else {
    out(`Consumers from metadata field "${field}"${dryRun ? ' (nothing changed: --apply makes it so)' : ''}:`);
    out(
      aligned([
        ['CONSUMER', 'NEW', 'PLAN', 'KEYS', "BEFORE (the keys' own, summed)", 'AFTER (the pool)', 'REFUSED'],
        ...p.groups.map((g) => [
          g.consumer,
          g.exists ? 'no' : 'yes',
          g.plan,
          g.keysAlready > 0 ? `${g.keys.length} (+${g.keysAlready} there)` : String(g.keys.length),
          windowText(g.before),
          windowText(g.after),
          g.refused ?? '',
        ]),
      ]),
    );
  }
  if (p.skipped.length > 0) out(`Left out: ${p.skipped.map((k) => `${k.key} (${k.reason})`).join(', ')}.`);
  const estimated = p.groups.filter((g) => g.estimatedRefusals !== undefined);
  if (estimated.length === 0) return;
  out('Would have been refused over the last 7 days, had the keys shared the pool:');
  for (const g of estimated) out(`  ${g.consumer}: ${refusalsText(g.estimatedRefusals!)}`);
  out(ESTIMATE_NOTE);
}
