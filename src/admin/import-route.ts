// POST /keys/import: the admin API's way to bring keys in, the same import as `tollgate keys import` (KeyImporter.importKeys)
// on a body held in memory: a JSON array of records, JSON lines (application/x-ndjson) or CSV (text/csv). Bounded at
// IMPORT_MAX_BODY: a bigger import goes through the CLI, which streams its file. The answer never holds a plaintext key
// (refusals name the line and the reason only).
import express, { type RequestHandler } from 'express';
import { errorBody, sendError } from '../http/errors.js';
import type { KeyImporter } from '../keys/importer.js';
import type { Actor } from '../keys/key-changes.js';
import { bufferSource, ImportFileError } from '../keys/import-read.js';
import { ColumnMapError, parseColumnMap, renameFields, type ColumnMap } from '../keys/import-map.js';
import type { ImportItem, ImportLine, ImportSource } from '../keys/import-run.js';

/** The largest import body: about 40,000 customer records in CSV. */
export const IMPORT_MAX_BODY_BYTES = 10 * 1024 * 1024;

const FLAGS = new Set(['dryRun', 'skipInvalid', 'createConsumers']);

export function importRoute(importer: KeyImporter, actor: (req: express.Request) => Actor): RequestHandler[] {
  const raw = express.raw({ type: () => true, limit: IMPORT_MAX_BODY_BYTES });
  const readBody: RequestHandler = (req, res, next) =>
    raw(req, res, (err?: unknown) => {
      const type = (err as { type?: string } | undefined)?.type;
      if (type === 'entity.too.large')
        return sendError(res, 'payload_too_large', 'An import body is at most 10 MB; import a bigger file with `tollgate keys import --file`.');
      if (err) return next(err);
      next();
    });
  const run: RequestHandler = async (req, res) => {
    const query = flagsOf(req.url);
    if (typeof query === 'string') return sendError(res, 'invalid_request', query);
    const { map: pairs, ...flags } = query;
    let map: ColumnMap;
    try {
      map = parseColumnMap(pairs);
    } catch (err) {
      if (err instanceof ColumnMapError) return sendError(res, 'invalid_request', `query.${err.message}`);
      throw err;
    }
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const mediaType = String(req.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    let source: ImportSource;
    if (mediaType === 'text/csv') source = bufferSource(body, 'csv', map);
    else if (mediaType === 'application/x-ndjson') source = bufferSource(body, 'jsonl', map);
    else if (mediaType === 'application/json') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        return sendError(res, 'invalid_json');
      }
      if (!Array.isArray(parsed)) return sendError(res, 'invalid_request', 'The body must be a JSON array of key records.');
      const items: ImportItem[] = parsed.map((record: unknown, i) => ({ line: i + 1, record }));
      source = () =>
        renameFields(
          (async function* () {
            yield* items;
          })(),
          map,
        );
    } else return sendError(res, 'unsupported_media_type', 'An import body is application/json (an array), application/x-ndjson or text/csv.');
    try {
      // A dry run's answer lists every record's outcome: the body is bounded, so is the list.
      const lines: ImportLine[] = [];
      const r = await importer.importKeys(source, actor(req), { ...flags, ...(flags.dryRun ? { onLine: (l: ImportLine) => lines.push(l) } : {}) });
      const report = {
        ...(r.dryRun ? { lines } : {}),
        imported: r.imported,
        unchanged: r.unchanged,
        refused: r.refusals.map((x) => ({ line: x.line, reason: x.error })),
        warnings: r.warnings.map((w) => ({ line: w.line, warning: w.warning })),
        dryRun: r.dryRun,
        // Only when the import named consumers to create: an import without consumers answers as it always has.
        ...(r.consumersCreated.length > 0 ? { consumersCreated: r.consumersCreated } : {}),
        ...(r.consumers ? { consumers: r.consumers } : {}),
      };
      // Refused records without skipInvalid stop the whole import (on a dry run: would stop it), as the CLI exits 1:
      // an error answer, so a caller that only looks at the status cannot take it for done.
      if (r.refusals.length > 0 && !flags.skipInvalid) {
        const n = r.refusals.length;
        const body = errorBody(
          'import_refused',
          `${n} record${n === 1 ? ' was' : 's were'} refused (see refused); ${r.dryRun ? 'this import would write nothing' : 'nothing was imported'}: every record must pass, or give skipInvalid=true`,
        );
        return void res.status(body.status).json({ ...body, ...report });
      }
      res.json(report);
    } catch (err) {
      if (err instanceof ColumnMapError) return sendError(res, 'invalid_request', `query.${err.message}`);
      if (err instanceof ImportFileError) return sendError(res, 'invalid_request', err.message);
      throw err;
    }
  };
  return [readBody, run];
}

/**
 * dryRun, skipInvalid and createConsumers, each "true" or "false", and map (OLD=NEW, repeatable: import-map.ts); any
 * other parameter or value is refused (its message returned).
 */
function flagsOf(url: string): { dryRun?: boolean; skipInvalid?: boolean; createConsumers?: boolean; map: string[] } | string {
  const q = url.indexOf('?');
  const out: { dryRun?: boolean; skipInvalid?: boolean; createConsumers?: boolean; map: string[] } = { map: [] };
  for (const [k, v] of new URLSearchParams(q < 0 ? '' : url.slice(q + 1))) {
    if (k === 'map') {
      out.map.push(v);
      continue;
    }
    if (!FLAGS.has(k)) return 'query: an unknown parameter (an import takes dryRun, skipInvalid, createConsumers and map)';
    if (Object.hasOwn(out, k)) return `query.${k}: given more than once`;
    if (v !== 'true' && v !== 'false') return `query.${k}: expected true or false`;
    out[k as 'dryRun' | 'skipInvalid' | 'createConsumers'] = v === 'true';
  }
  return out;
}
