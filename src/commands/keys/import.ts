// `tollgate keys import`: key records from a file or standard input (`keys export`'s, or a customer's own as JSON
// lines or CSV), all or nothing unless --skip-invalid, through the same import as POST /keys/import
// (src/keys/importer.ts). Refusals and warnings go to stderr, one line each; stdout gets the counts.
import { statSync } from 'node:fs';
import { type Command, Option } from 'commander';
import { bufferSource, fileSource, formatOf, ImportFileError, type ImportFormat } from '../../keys/import-read.js';
import { ColumnMapError, parseColumnMap, type ColumnMap } from '../../keys/import-map.js';
import { PROGRESS_EVERY, type ImportLine, type ImportOutcome, type ImportSource } from '../../keys/import-run.js';
import { windowText } from '../../keys/limit-sums.js';
import { CliError } from '../cli-error.js';
import { ESTIMATE_NOTE, refusalsText } from '../estimated-refusals.js';
import { positiveInt } from '../options.js';
import { common, withSession, type CommonOpts } from '../session.js';
import { out } from '../terminal.js';

interface ImportOpts extends CommonOpts {
  file?: string;
  format?: ImportFormat;
  dryRun?: boolean;
  skipInvalid?: boolean;
  createConsumers?: boolean;
  progressEvery: number;
  map: string[];
  json?: boolean;
}

export function addImport(keys: Command): void {
  common(keys.command('import'))
    .description(
      'import keys: `keys export` records or your own ({id?, name?, plan, key | sha256, prefix?, metadata?, perMinute?, perDay?, expiresAt?, consumer?}) as JSON lines or CSV; all or nothing unless --skip-invalid; records already there as given are left alone',
    )
    .argument('[file]', 'the file (same as --file), or - for standard input')
    .option('--file <file>', 'the file to import')
    .addOption(new Option('--format <format>', 'jsonl or csv (default: csv for a .csv file name, else jsonl)').choices(['jsonl', 'csv']))
    .option(
      '--map <old=new>',
      "rename the file's column (CSV) or field (JSON) OLD to Tollgate's field NEW before reading, e.g. --map api_key=key; repeatable",
      (pair: string, all: string[]) => [...all, pair],
      [] as string[],
    )
    .option('--dry-run', 'check every record and list, line by line, what the import would do with it (import, unchanged, refuse); write nothing')
    .option('--json', "print the outcome (and a dry run's lines) as one JSON object")
    .option('--skip-invalid', 'import the records that pass and list the refused ones on stderr (exit 0)')
    .option('--create-consumers', 'create each consumer the records name that does not exist (named by its id, on the plan of its first key)')
    .addOption(
      new Option('--progress-every <n>', 'a progress line on stderr every n records of each pass')
        .default(PROGRESS_EVERY)
        .argParser(positiveInt('--progress-every')),
    )
    .action(importFile);
}

async function importFile(positional: string | undefined, o: ImportOpts): Promise<void> {
  if (positional !== undefined && o.file !== undefined && positional !== o.file) throw new CliError('give the file once: as an argument or as --file', 2);
  const file = o.file ?? positional;
  if (file === undefined) throw new CliError('no file to import: give --file FILE (or - for standard input)', 2);
  let map: ColumnMap;
  try {
    map = parseColumnMap(o.map);
  } catch (err) {
    if (err instanceof ColumnMapError) throw new CliError(`--${err.message}`, 2);
    throw err;
  }
  const source = await sourceOf(file, o.format ?? formatOf(file), map);
  await withSession(o, async (s) => {
    let r: ImportOutcome;
    const lines: ImportLine[] = [];
    try {
      r = await s.keys.importer.importKeys(source, undefined, {
        ...(o.dryRun ? { dryRun: true } : {}),
        ...(o.skipInvalid ? { skipInvalid: true } : {}),
        ...(o.createConsumers ? { createConsumers: true } : {}),
        progressEvery: o.progressEvery,
        onProgress: (pass, lines) => process.stderr.write(`${pass === 'check' ? 'checked' : 'written'}: ${lines} records\n`),
        // The listing streams to stdout as read; only --json, one object, holds it.
        ...(o.dryRun ? { onLine: (l: ImportLine) => (o.json ? lines.push(l) : out(lineText(l))) } : {}),
      });
    } catch (err) {
      if (err instanceof ColumnMapError) throw new CliError(`--${err.message}`, 2);
      if (err instanceof ImportFileError) throw new CliError(`${file}: ${err.message}`);
      throw err;
    }
    for (const bad of r.refusals) process.stderr.write(`line ${bad.line}: ${bad.error}\n`);
    for (const w of r.warnings) process.stderr.write(`line ${w.line}: warning: ${w.warning}\n`);
    const counts = `${r.imported}, unchanged ${r.unchanged}${r.refusals.length > 0 ? `, refused ${r.refusals.length}` : ''}`;
    if (o.json)
      out(
        JSON.stringify({
          dryRun: r.dryRun,
          ...(r.dryRun ? { lines } : {}),
          imported: r.imported,
          unchanged: r.unchanged,
          refused: r.refusals.map((x) => ({ line: x.line, reason: x.error })),
          warnings: r.warnings,
          ...(r.consumersCreated.length > 0 ? { consumersCreated: r.consumersCreated } : {}),
          ...(r.consumers ? { consumers: r.consumers } : {}),
        }),
      );
    else {
      out(r.dryRun ? `Dry run (nothing written): would import ${counts}.` : `Imported ${counts}.`);
      if (r.consumersCreated.length > 0)
        out(`${r.dryRun ? 'Would create' : 'Created'} consumer${r.consumersCreated.length === 1 ? '' : 's'}: ${r.consumersCreated.join(', ')}.`);
      // The attach preview: what the keys joining each consumer may take on their own, and the pool they would share.
      let estimated = false;
      for (const c of r.consumers ?? []) {
        out(
          `Consumer ${c.consumer}${c.exists ? '' : ' (new)'}: ${c.keys} key${c.keys === 1 ? '' : 's'} joining${c.keysAlready > 0 ? ` ${c.keysAlready} there` : ''}; before ${windowText(c.before)} (their own, summed), after ${windowText(c.after)} (the pool).`,
        );
        // What the ledger says the pool would have refused with them: keys given by id that have usage, and its own keys'.
        if (c.estimatedRefusals) {
          estimated = true;
          out(`  Would have been refused over the last 7 days, had they shared the pool: ${refusalsText(c.estimatedRefusals)}.`);
        }
      }
      if (estimated) out(ESTIMATE_NOTE);
    }
    if (r.refusals.length > 0 && !o.skipInvalid)
      throw new CliError(
        r.dryRun
          ? 'this import would be refused: every record must pass before any is written (see above), or give --skip-invalid'
          : 'nothing was imported: every record must pass before any is written (see above)',
      );
  });
}

/** One line of a dry run's listing. */
function lineText(l: ImportLine): string {
  if (l.action === 'refuse') return `line ${l.line}: refuse: ${l.reason}`;
  return `line ${l.line}: ${l.action}${l.id !== undefined ? ` ${l.id}` : ''}`;
}

/** The records to import: a file (read once per pass), or standard input ("-"), held in memory as it cannot be read twice. */
async function sourceOf(file: string, format: ImportFormat, map: ColumnMap): Promise<ImportSource> {
  if (file === '-') {
    // A big import gives --file.
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return bufferSource(Buffer.concat(chunks), format, map);
  }
  try {
    if (!statSync(file).isFile()) throw Object.assign(new Error(), { code: 'not a file' });
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  return fileSource(file, format, map);
}
