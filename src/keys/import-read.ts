// Import files read as a stream of numbered records, each pass anew: JSON lines (one record a line) or CSV (a header
// row of the record's field names, `metadata.<name>` columns for metadata; csv-parse, RFC 4180: quotes, commas and
// newlines in quoted cells, CRLF, a UTF-8 BOM). No line or row may exceed MAX_RECORD_BYTES, so a file without a line
// break cannot fill memory: such a JSON line is refused by its number, such a CSV row ends the read with an error.
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { parse } from 'csv-parse';
import type { ImportItem, ImportSource } from './import-run.js';
import { METADATA_NAME } from '../config/key-fields.js';
import { ColumnMapError, IMPORT_FIELDS, renameFields, renameHeader, type ColumnMap } from './import-map.js';

export type ImportFormat = 'jsonl' | 'csv';

/** The longest line or row read: a key record is a few hundred bytes; 64 KiB leaves room for 16 long metadata values. */
export const MAX_RECORD_BYTES = 64 * 1024;

/** A file that cannot be read as a whole (a bad CSV header, a row too long): one message, nothing imported. */
export class ImportFileError extends Error {}

/** The CSV columns a record's fields go in; metadata goes in `metadata.<name>` columns. */
const CSV_FIELDS = new Set(IMPORT_FIELDS);
const NUMBER_FIELDS = new Set(['perMinute', 'perDay']);

/** The format a file name implies: .csv is CSV, anything else JSON lines. */
export function formatOf(fileName: string): ImportFormat {
  return /\.csv$/i.test(fileName) ? 'csv' : 'jsonl';
}

/**
 * A source of records from bytes opened anew per pass (a file, or a body held in memory), with the column map
 * (import-map.ts) applied to the CSV header or to each JSON record's fields.
 */
export function importSource(open: () => Readable, format: ImportFormat, map: ColumnMap = new Map()): ImportSource {
  return format === 'csv' ? () => csvRecords(open(), map) : () => renameFields(jsonLines(open()), map);
}

export const fileSource = (path: string, format: ImportFormat, map?: ColumnMap): ImportSource => importSource(() => createReadStream(path), format, map);
export const bufferSource = (bytes: Buffer, format: ImportFormat, map?: ColumnMap): ImportSource => importSource(() => Readable.from([bytes]), format, map);

/** One record per line; blank lines yield `record: undefined`; a line that is not JSON, or too long, an error. */
async function* jsonLines(input: Readable): AsyncGenerator<ImportItem> {
  let line = 0;
  let parts: Buffer[] = [];
  let size = 0;
  let tooLong = false;
  const finish = (): ImportItem => {
    line++;
    const bytes = Buffer.concat(parts);
    parts = [];
    size = 0;
    if (tooLong) {
      tooLong = false;
      return { line, error: `longer than ${MAX_RECORD_BYTES} bytes` };
    }
    let text = bytes.toString('utf8');
    if (line === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    if (text.trim() === '') return { line, record: undefined };
    try {
      return { line, record: JSON.parse(text) as unknown };
    } catch {
      return { line, error: 'not JSON' };
    }
  };
  for await (const chunk of input as AsyncIterable<Buffer>) {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl >= 0; nl = chunk.indexOf(10, from)) {
      take(chunk.subarray(from, nl));
      yield finish();
      from = nl + 1;
    }
    take(chunk.subarray(from));
  }
  if (size > 0 || tooLong) yield finish();

  function take(piece: Buffer): void {
    if (tooLong || piece.length === 0) return;
    if (size + piece.length > MAX_RECORD_BYTES) {
      tooLong = true;
      parts = [];
      return;
    }
    parts.push(Buffer.from(piece));
    size += piece.length;
  }
}

/** CSV rows as records, numbered by the line each row ends on (a quoted cell may span lines). */
async function* csvRecords(input: Readable, map: ColumnMap): AsyncGenerator<ImportItem> {
  const parser = input.pipe(parse({ bom: true, info: true, relax_column_count: false, skip_empty_lines: true, max_record_size: MAX_RECORD_BYTES }));
  let header: string[] | undefined;
  try {
    for await (const row of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      if (!header) {
        header = checkHeader(renameHeader(row.record, map));
        continue;
      }
      const record: Record<string, unknown> = {};
      const metadata: Record<string, string> = {};
      header.forEach((column, i) => {
        const cell = row.record[i] ?? '';
        if (cell === '') return;
        if (column.startsWith('metadata.')) metadata[column.slice('metadata.'.length)] = cell;
        else record[column] = NUMBER_FIELDS.has(column) && /^\d+$/.test(cell) ? Number(cell) : cell;
      });
      if (Object.keys(metadata).length > 0) record.metadata = metadata;
      yield { line: row.info.lines, record };
    }
  } catch (err) {
    if (err instanceof ImportFileError || err instanceof ColumnMapError) throw err;
    // csv-parse's own messages may quote a cell (a key, even): only its code and line are told.
    const e = err as { code?: string; lines?: number };
    throw new ImportFileError(
      `not a CSV file this import reads: ${CSV_PROBLEMS[e.code ?? ''] ?? e.code ?? 'unreadable'}${e.lines ? ` (line ${e.lines})` : ''}`,
    );
  }
}

/** csv-parse's error codes in words (its messages are not used: some quote the cell). */
const CSV_PROBLEMS: Record<string, string> = {
  CSV_QUOTE_NOT_CLOSED: 'a quoted cell is not closed',
  CSV_INVALID_OPENING_QUOTE: 'a quote inside an unquoted cell',
  CSV_INVALID_CLOSING_QUOTE: 'text after a closing quote',
  CSV_RECORD_INCONSISTENT_FIELDS_LENGTH: 'a row with another number of cells than the header',
  CSV_MAX_RECORD_SIZE: `a row longer than ${MAX_RECORD_BYTES} bytes`,
  CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE: 'text after a closing quote',
};

function checkHeader(cells: string[]): string[] {
  const seen = new Set<string>();
  for (const c of cells) {
    if (seen.has(c)) throw new ImportFileError(`CSV header: column "${c}" appears twice`);
    seen.add(c);
    if (!CSV_FIELDS.has(c) && !(c.startsWith('metadata.') && METADATA_NAME.test(c.slice('metadata.'.length))))
      throw new ImportFileError(
        `CSV header: unknown column "${c.slice(0, 64)}"; columns: ${[...CSV_FIELDS].join(', ')}, and metadata.<name> for each metadata entry`,
      );
  }
  if (!seen.has('plan')) throw new ImportFileError('CSV header: a plan column is required');
  return cells;
}
