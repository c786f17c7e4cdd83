// An import of any size in bounded memory, in passes over a source that can be read again (a file, a request body):
// 1. the store's hashes no link finds (revoked keys', grace hashes) are read once, a batch at a time; 2. every record is
// parsed, checked (import-records.ts, then judgeRecord against its id's record and its hash's owner, looked up in
// batches) and only its outcome kept, one byte per line, with its id and hashes as 32-byte digests for the
// within-file duplicates (a sort at the end, not a Map of strings); 3. unless refused or a dry run, the records to
// create are read again and written in batches. Nothing a record holds outlives its batch.
import { hash } from 'node:crypto';
import { hashesOf, judgeRecord, type ImportRefusal } from './import-check.js';
import { normaliseRecord, type NormalisedRecord } from './import-records.js';
import type { KeyShapeRules } from './format.js';
import { NOT_BEARER_WARNING, overrideWarnings, type CostedRoute } from './cost-warnings.js';
import { KeyStoreError, type StoredKey, type KeyStore } from './types.js';
import type { Actor } from './key-changes.js';
import type { ReadLimit } from '../storage/read-limit.js';
import type { ConsumerFacts, KeyConsumers } from './admin-policy.js';
import { keyLimits, summed, type PlanLimits, type WindowLimits } from './limit-sums.js';
import type { EstimatedRefusals } from './pool-refusals.js';

/** One item a reader yields: a parsed record, or a line that could not be parsed, each with its line number. */
export type ImportItem = { line: number; record: unknown } | { line: number; error: string };

/** A source read once per pass (a file opened anew, a body read again). */
export type ImportSource = () => AsyncIterable<ImportItem>;

export interface ImportOptions {
  /** Check everything, write nothing. */
  dryRun?: boolean;
  /** Write the records that pass even when others are refused. */
  skipInvalid?: boolean;
  /** How many records between two onProgress calls (PROGRESS_EVERY when left out). */
  progressEvery?: number;
  /** Called every `progressEvery` records of each pass. */
  onProgress?: (pass: 'check' | 'write', lines: number) => void;
  /** On a dry run: called for every record, in line order, with what the import would do with it (a third pass). */
  onLine?: (entry: ImportLine) => void;
  /**
   * Creates each consumer the records name that does not exist (named by its id, on the plan of its first record),
   * instead of refusing its records.
   */
  createConsumers?: boolean;
}

/**
 * What an import does with one record: `import` it (a new key), leave it `unchanged` (already stored as given:
 * import-check.ts), or `refuse` it. An import never changes a key that is there (a record with an existing key's id
 * and other content is refused), so there is no "update".
 */
export type ImportLine = { line: number; action: 'import' | 'unchanged'; id?: string } | { line: number; action: 'refuse'; reason: string };

/** Something unusual about a record that is imported all the same, by line. */
export interface ImportWarning {
  line: number;
  warning: string;
}

export interface ImportOutcome {
  imported: number;
  unchanged: number;
  refusals: ImportRefusal[];
  /** Records imported (or, on a dry run, to be) that are unusual: a key no Bearer header can carry, an override below a route's cost. */
  warnings: ImportWarning[];
  dryRun: boolean;
  /** Whether anything was written (false on a dry run, or when refusals stopped it). */
  wrote: boolean;
  /** Consumers created for the import (createConsumers), or on a dry run to be created, by id. */
  consumersCreated: string[];
  /**
   * A dry run's attach preview, per consumer its records join (in id order): how many keys, the keys' own limits
   * summed (before) and the consumer's pool (after). Absent on other imports.
   */
  consumers?: ImportConsumerPreview[];
}

export interface ImportConsumerPreview {
  consumer: string;
  /** False: the import creates it (createConsumers). */
  exists: boolean;
  keys: number;
  /** Keys it has already (not revoked). */
  keysAlready: number;
  before: WindowLimits;
  after: WindowLimits;
  /**
   * What the usage ledger says the pool would have refused over the last 7 days with these keys in it (an estimate:
   * the keys' ids as the records give them, with the usage those ids were counted; a record without an id is a key
   * with none). Absent where no ledger is read.
   */
  estimatedRefusals?: EstimatedRefusals;
}

export interface ImportDeps {
  store: KeyStore;
  reads: ReadLimit;
  plans: ReadonlySet<string>;
  shape: KeyShapeRules;
  now: number;
  newId: () => string;
  /** Whether `bearer` is among auth.sources: a plaintext that is not token68 is then warned about. */
  bearer?: boolean;
  /** The configured routes' costs: an override below one is warned about. */
  routes?: readonly CostedRoute[];
  /** False once the import lock is lost (KeyStore.lockImports): no further batch is written. */
  lockHeld?: () => boolean;
  /** The consumers records may name (a record naming one is refused without them). */
  consumers?: Pick<KeyConsumers, 'describe' | 'create' | 'replay'>;
  /** Who imports: the actor of the consumers it creates. */
  actor?: Actor;
  /** The plans' limits: a dry run's preview sums the keys' own. */
  planLimits?: Readonly<Record<string, PlanLimits>>;
}

export const PROGRESS_EVERY = 100_000;
/** Records checked or written at once: their lookups or writes are in flight together. */
const BATCH = 256;

const CREATE = 0;
const UNCHANGED = 1;
const REFUSED = 2;
const SKIPPED = 3; // a blank line

/** Checks every record of the source, then (unless refused or a dry run) writes those to create. */
export async function runImport(source: ImportSource, deps: ImportDeps, opts: ImportOptions = {}): Promise<ImportOutcome> {
  const createdAt = new Date(deps.now).toISOString();
  const unlinked = await unlinkedHashes(deps);
  const outcome = new LineOutcomes();
  const refusals: ImportRefusal[] = [];
  const warnings: ImportWarning[] = [];
  const ids = new DigestLines();
  const hashes = new DigestLines();
  const refuse = (line: number, error: string) => {
    outcome.set(line, REFUSED);
    refusals.push({ line, error });
  };
  // The keys joining each consumer, by line in file order (one number per such record), and the plan of the first.
  const joining = new Map<string, { plan: string; lines: number[] }>();
  let batch: Array<{ line: number; r: NormalisedRecord }> = [];
  const judge = async () => {
    // A batch's lookups go out together (auto-pipelined on one connection): BATCH records at most, a few GETs each.
    const facts = await Promise.all(batch.map(({ r }) => factsOf(r, deps.store, unlinked)));
    batch.forEach(({ line, r }, i) => {
      const verdict = judgeRecord(r, facts[i]!, deps.plans);
      if (verdict === 'create') {
        outcome.set(line, CREATE);
        const c = r.key.consumer;
        if (c !== undefined) {
          const j = joining.get(c);
          if (j) j.lines.push(line);
          else joining.set(c, { plan: r.key.plan, lines: [line] });
        }
        if (deps.bearer && r.notBearer) warnings.push({ line, warning: NOT_BEARER_WARNING });
        for (const warning of overrideWarnings(r.key, deps.routes ?? [])) warnings.push({ line, warning });
      } else if (verdict === 'unchanged') outcome.set(line, UNCHANGED);
      else refuse(line, verdict);
    });
    batch = [];
  };
  let lines = 0;
  let seen = 0;
  for await (const item of source()) {
    lines = Math.max(lines, item.line);
    if (++seen % (opts.progressEvery ?? PROGRESS_EVERY) === 0) opts.onProgress?.('check', seen);
    if ('error' in item) {
      refuse(item.line, item.error);
      continue;
    }
    if (item.record === undefined) {
      outcome.set(item.line, SKIPPED);
      continue;
    }
    const r = normaliseRecord(item.record, deps.shape, createdAt, () => '');
    if ('error' in r) {
      refuse(item.line, r.error);
      continue;
    }
    if (r.key.prevHash !== undefined && r.key.prevHash === r.key.hash) {
      refuse(item.line, "prevHash is the key's own hash");
      continue;
    }
    if (r.idGiven) ids.add(digest(r.key.id), item.line);
    for (const h of [...hashesOf(r.key), ...r.retired]) hashes.add(Buffer.from(h, 'hex'), item.line);
    batch.push({ line: item.line, r });
    if (batch.length >= BATCH) await judge();
  }
  await judge();
  // Within the file: the first line to name an id or a hash keeps it; every later one is refused.
  const withinFile = new Map<number, string>();
  for (const [line, first] of ids.repeats()) withinFile.set(line, `its id is also on line ${first}`);
  for (const [line, first] of hashes.repeats()) if (!withinFile.has(line)) withinFile.set(line, `a hash of this record is also on line ${first}`);
  for (const [line, error] of withinFile) {
    if (outcome.get(line) === REFUSED) continue;
    refuse(line, error);
  }
  const { toCreate: consumersCreated, known } = await judgeConsumers(joining, deps, opts, outcome, refuse);
  refusals.sort((a, b) => a.line - b.line);
  // A line refused after its check (a duplicate within the file) is not imported: its warnings go.
  const kept = warnings.filter((w) => outcome.get(w.line) === CREATE).sort((a, b) => a.line - b.line);
  let toCreate = 0;
  let unchanged = 0;
  for (let l = 1; l <= lines; l++) {
    const o = outcome.get(l);
    if (o === CREATE) toCreate++;
    else if (o === UNCHANGED) unchanged++;
  }
  const dryRun = opts.dryRun === true;
  // A dry run answers what the same import would do: nothing imported when a refusal stops it.
  const stopped = refusals.length > 0 && !opts.skipInvalid;
  if (dryRun && opts.onLine) await listLines(source, deps, outcome, refusals, createdAt, opts.onLine);
  const consumers = dryRun && joining.size > 0 ? await previewConsumers(source, deps, outcome, createdAt, joining, known) : undefined;
  if (dryRun || stopped || toCreate === 0)
    return {
      imported: stopped ? 0 : toCreate,
      unchanged,
      refusals,
      warnings: kept,
      dryRun,
      wrote: false,
      consumersCreated: stopped ? [] : consumersCreated,
      ...(consumers ? { consumers } : {}),
    };
  // The consumers first: no key is written naming one that is not there.
  for (const id of consumersCreated) await deps.consumers!.create(id, joining.get(id)!.plan, deps.actor ?? { by: 'cli' });
  const imported = await writeRecords(source, deps, outcome, createdAt, opts);
  return { imported, unchanged, refusals, warnings: kept, dryRun, wrote: true, consumersCreated };
}

/** Consumers described at once: a few reads each, in bounded batches. */
const CONSUMER_BATCH = 100;

/**
 * The consumers the records to create name: each must exist (or, with createConsumers, is to be created) and have
 * room under its maxKeys for the keys joining it; records past the room, or naming a consumer that is not there, are
 * refused, in file order. Returns the consumers to create. The room is judged once, here: keys another administrator
 * attaches while the import writes are not counted against it.
 */
async function judgeConsumers(
  joining: ReadonlyMap<string, { plan: string; lines: number[] }>,
  deps: ImportDeps,
  opts: ImportOptions,
  outcome: LineOutcomes,
  refuse: (line: number, error: string) => void,
): Promise<{ toCreate: string[]; known: Map<string, ConsumerFacts> }> {
  const known = new Map<string, ConsumerFacts>();
  if (joining.size === 0) return { toCreate: [], known };
  const ids = [...joining.keys()];
  if (deps.consumers)
    for (let i = 0; i < ids.length; i += CONSUMER_BATCH)
      for (const [id, d] of await deps.consumers.describe(ids.slice(i, i + CONSUMER_BATCH))) known.set(id, d);
  const toCreate: string[] = [];
  for (const [id, { lines }] of joining) {
    // A line refused after its check (a duplicate within the file) takes no place.
    const live = lines.filter((l) => outcome.get(l) === CREATE);
    const d = known.get(id);
    if (!d) {
      if (opts.createConsumers && deps.consumers) {
        if (live.length > 0) toCreate.push(id);
        continue;
      }
      const why = deps.consumers
        ? 'create it first (consumers create), or import with --create-consumers (createConsumers=true)'
        : 'consumers are not available here';
      for (const l of live) refuse(l, `consumer: no consumer with id "${id}"; ${why}`);
      continue;
    }
    if (d.maxKeys === undefined) continue;
    const room = Math.max(0, d.maxKeys - d.inUse);
    for (const l of live.slice(room))
      refuse(l, `consumer ${id} has room for ${room} more key${room === 1 ? '' : 's'} (maxKeys ${d.maxKeys}); this one is past it`);
  }
  return { toCreate: toCreate.sort(), known };
}

/**
 * A dry run's attach preview: reads the source again and sums, per consumer, the own limits of the keys that would
 * join it (each key's overrides, else its plan's); beside it the consumer's pool (a consumer to be created: its plan's)
 * and what the usage ledger says that pool would have refused over the last 7 days.
 */
async function previewConsumers(
  source: ImportSource,
  deps: ImportDeps,
  outcome: LineOutcomes,
  createdAt: string,
  joining: ReadonlyMap<string, { plan: string }>,
  known: ReadonlyMap<string, ConsumerFacts>,
): Promise<ImportConsumerPreview[]> {
  const plans = deps.planLimits ?? {};
  const limits = new Map<string, { own: WindowLimits[]; ids: string[] }>();
  for await (const item of source()) {
    if (outcome.get(item.line) !== CREATE || 'error' in item) continue;
    const r = normaliseRecord(item.record, deps.shape, createdAt, () => '');
    if ('error' in r || r.key.consumer === undefined) continue;
    let list = limits.get(r.key.consumer);
    if (!list) limits.set(r.key.consumer, (list = { own: [], ids: [] }));
    list.own.push(keyLimits(r.key, plans));
    if (r.idGiven) list.ids.push(r.key.id);
  }
  const previews = [...limits]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([consumer, { own }]): ImportConsumerPreview => {
      const facts = known.get(consumer);
      return {
        consumer,
        exists: facts !== undefined,
        keys: own.length,
        keysAlready: facts?.inUse ?? 0,
        before: summed(own),
        after: facts?.pool ?? keyLimits({ plan: joining.get(consumer)!.plan }, plans),
      };
    });
  // What the ledger says each pool would have refused over the last 7 days with these keys in it.
  const replay = deps.consumers?.replay;
  if (replay && previews.length > 0) {
    const estimates = await replay(
      previews.map((p) => ({
        consumer: p.consumer,
        exists: p.exists,
        joining: limits.get(p.consumer)!.ids,
        members: known.get(p.consumer)?.keyIds ?? [],
        limits: p.after,
      })),
    );
    previews.forEach((p, i) => (p.estimatedRefusals = estimates[i]!));
  }
  return previews;
}

/** The second pass: reads the source again and creates each record the check marked, a batch at a time. */
async function writeRecords(source: ImportSource, deps: ImportDeps, outcome: LineOutcomes, createdAt: string, opts: ImportOptions): Promise<number> {
  let imported = 0;
  let batch: Array<{ line: number; key: StoredKey; retired: string[] }> = [];
  const write = async () => {
    if (batch.length === 0) return;
    if (deps.lockHeld && !deps.lockHeld())
      throw new ImportWriteError(`the import lock was lost (Redis unreachable for its whole TTL?); ${imported} records were imported`, imported);
    const results = await Promise.allSettled(batch.map(({ key, retired }) => createOne(key, retired, deps)));
    const failed = results.findIndex((r) => r.status === 'rejected');
    imported += results.filter((r) => r.status === 'fulfilled').length;
    if (failed >= 0) {
      const err = (results[failed] as PromiseRejectedResult).reason as unknown;
      const line = batch[failed]!.line;
      if (err instanceof KeyStoreError)
        throw new ImportWriteError(`line ${line}: ${err.message} (changed while importing); ${imported} records were imported`, imported);
      throw err;
    }
    batch = [];
  };
  let seen = 0;
  for await (const item of source()) {
    if (++seen % (opts.progressEvery ?? PROGRESS_EVERY) === 0) opts.onProgress?.('write', seen);
    if (outcome.get(item.line) !== CREATE || 'error' in item) continue;
    const r = normaliseRecord(item.record, deps.shape, createdAt, deps.newId);
    if ('error' in r) continue; // the check refused it; a source read again yields the same records
    batch.push({ line: item.line, key: r.key, retired: r.retired });
    if (batch.length >= BATCH) await write();
  }
  await write();
  return imported;
}

/**
 * A dry run's listing: reads the source again and tells each record's outcome with its id when the record gives one
 * (a record without an id gets one when it is written; an unchanged one is the key its hash opens).
 */
async function listLines(
  source: ImportSource,
  deps: ImportDeps,
  outcome: LineOutcomes,
  refusals: readonly ImportRefusal[],
  createdAt: string,
  onLine: (entry: ImportLine) => void,
): Promise<void> {
  const reasons = new Map<number, string>();
  for (const r of refusals) if (!reasons.has(r.line)) reasons.set(r.line, r.error);
  for await (const item of source()) {
    const o = outcome.get(item.line);
    if (o === SKIPPED) continue;
    if (o === REFUSED) {
      onLine({ line: item.line, action: 'refuse', reason: reasons.get(item.line) ?? 'refused' });
      continue;
    }
    const r = 'error' in item ? undefined : normaliseRecord(item.record, deps.shape, createdAt, () => '');
    const id = r && !('error' in r) && r.idGiven ? r.key.id : undefined;
    onLine({ line: item.line, action: o === CREATE ? 'import' : 'unchanged', ...(id !== undefined ? { id } : {}) });
  }
}

/** A write failed after others of the import were made: how many were. */
export class ImportWriteError extends Error {
  constructor(
    message: string,
    readonly imported: number,
  ) {
    super(message);
  }
}

async function createOne(key: StoredKey, retired: readonly string[], deps: ImportDeps): Promise<void> {
  // Before the key exists: a retired hash is never a moment without its owner.
  if (retired.length > 0) await deps.store.retire(key.id, retired);
  await deps.store.create(key);
  // A rotation's old key still in its grace period keeps working until it ends, on the new Redis too.
  if (key.prevHash !== undefined && key.prevHashUntil !== undefined && key.prevHashUntil > deps.now)
    await deps.store.update(key, { linkHash: key.prevHash, expireHash: { hash: key.prevHash, atMs: key.prevHashUntil } });
  await deps.store.publishChange(key.id);
}

/**
 * Hashes a stored key holds that no hash link finds (a revoked key's, a grace hash): read once from every record, a
 * batch at a time, keeping only those (most keys have none). Every other stored hash is found by its link.
 */
async function unlinkedHashes(deps: ImportDeps): Promise<{ owners: Map<string, StoredKey>; unreadable: Set<string> }> {
  const owners = new Map<string, StoredKey>();
  const unreadable = new Set<string>();
  for await (const ids of deps.store.idBatches()) {
    const records = await Promise.all(
      ids.map((id) =>
        deps.reads(() =>
          deps.store.get(id).catch((err: unknown) => {
            if (err instanceof KeyStoreError && err.code === 'invalid_record') unreadable.add(id);
            else throw err;
            return undefined;
          }),
        ),
      ),
    );
    for (const k of records) {
      if (!k) continue;
      if (k.status === 'revoked') owners.set(k.hash, k);
      if (k.prevHash !== undefined) owners.set(k.prevHash, k);
    }
  }
  return { owners, unreadable };
}

async function factsOf(r: NormalisedRecord, store: KeyStore, unlinked: { owners: Map<string, StoredKey>; unreadable: Set<string> }) {
  const { key } = r;
  const byId = async (): Promise<StoredKey | 'unreadable' | undefined> => {
    if (!r.idGiven) return undefined;
    if (unlinked.unreadable.has(key.id)) return 'unreadable';
    return store.get(key.id).catch((err: unknown) => {
      if (err instanceof KeyStoreError && err.code === 'invalid_record') return 'unreadable' as const;
      throw err;
    });
  };
  // The record, every hash's owner and whether a key retired it, asked at once: one round trip's wait per record.
  const all = [...hashesOf(key), ...r.retired];
  const [found, owners, retired] = await Promise.all([
    byId(),
    Promise.all(all.map(async (h) => unlinked.owners.get(h) ?? (await store.findByHash(h))?.key)),
    Promise.all(all.map((h) => store.retiredFrom(h))),
  ]);
  return { byId: found, owner: owners.find((k) => k !== undefined), retiredFrom: retired.find((id) => id !== undefined) };
}

function digest(text: string): Buffer {
  return hash('sha256', text, 'buffer');
}

/** One byte per line: what the check decided for it (lines never seen read as SKIPPED). */
class LineOutcomes {
  private bytes = new Uint8Array(1024).fill(SKIPPED);
  set(line: number, o: number): void {
    if (line >= this.bytes.length) {
      const grown = new Uint8Array(Math.max(line + 1, this.bytes.length * 2)).fill(SKIPPED);
      grown.set(this.bytes);
      this.bytes = grown;
    }
    this.bytes[line] = o;
  }
  get(line: number): number {
    return line < this.bytes.length ? this.bytes[line]! : SKIPPED;
  }
}

/**
 * 32-byte digests with the line each came from, packed in one growing buffer (36 bytes an entry: 36 MB for a million
 * against well over 100 MB as a Set of hex strings); repeats() sorts them once to find every digest seen twice.
 */
class DigestLines {
  private data = Buffer.alloc(32 * 1024);
  private lines = new Uint32Array(1024);
  private n = 0;
  add(d: Buffer, line: number): void {
    if (this.n === this.lines.length) {
      const data = Buffer.alloc(this.data.length * 2);
      this.data.copy(data);
      this.data = data;
      const lines = new Uint32Array(this.lines.length * 2);
      lines.set(this.lines);
      this.lines = lines;
    }
    d.copy(this.data, this.n * 32);
    this.lines[this.n++] = line;
  }
  /** [line, first line] for every entry whose digest an earlier line already had. */
  repeats(): Array<[number, number]> {
    const { data, lines } = this;
    const prefix = new Uint32Array(this.n);
    for (let i = 0; i < this.n; i++) prefix[i] = data.readUInt32BE(i * 32);
    const order = new Uint32Array(this.n);
    for (let i = 0; i < this.n; i++) order[i] = i;
    order.sort((a, b) => prefix[a]! - prefix[b]! || data.compare(data, a * 32, a * 32 + 32, b * 32, b * 32 + 32) || lines[a]! - lines[b]!);
    const out: Array<[number, number]> = [];
    for (let i = 1, first = 0; i < this.n; i++) {
      const a = order[first]!;
      const b = order[i]!;
      if (prefix[a] === prefix[b] && data.compare(data, a * 32, a * 32 + 32, b * 32, b * 32 + 32) === 0) {
        if (lines[b] !== lines[a]) out.push([lines[b]!, lines[a]!]);
      } else first = i;
    }
    return out;
  }
}
