// Reading every key, for reports: complete or failing. What a report over every key needs of the key store, apart
// from changing keys, so that a report can run where key administration does not (the report thread,
// src/workers/report-worker.ts, builds one on its own connection).
import { incomplete, readOne } from './admin-errors.js';
import { toRecord } from './rules.js';
import type { KeyRecord, KeyStore, StoredKey } from './types.js';
import { readLimit, type ReadLimit } from '../storage/read-limit.js';

export class KeyRecords {
  constructor(
    private readonly store: Pick<KeyStore, 'get' | 'idBatches'>,
    readonly reads: ReadLimit = readLimit(),
  ) {}

  /** The key's record, never its hash; undefined for an unknown id; KeyAdminError 'invalid_record' if unreadable. */
  async get(id: string): Promise<KeyRecord | undefined> {
    const k = await readOne(() => this.reads(() => this.store.get(id)));
    return k ? toRecord(k) : undefined;
  }

  /**
   * Every key's id, a batch at a time, in one pass over the id set (never read again from its start), reading no
   * record: what a report that needs no names goes through (the overview's sums). Complete or failing.
   */
  async *ids(what: string): AsyncGenerator<string[]> {
    const batches = this.store.idBatches();
    try {
      for (;;) {
        let next: IteratorResult<string[]>;
        try {
          next = await batches.next();
        } catch (err) {
          throw incomplete(what, err);
        }
        if (next.done) return;
        yield next.value;
      }
    } finally {
      // A caller that stops early (a failed read of its own) ends the id set's scan too.
      await batches.return(undefined).catch(() => undefined);
    }
  }

  /**
   * Every key's record, a batch at a time, in one pass over the id set (never read again from its start): what
   * reports over every key go through. Complete or failing: a record that cannot be read (Redis failed, or the
   * record is not a JSON key record) throws, so a report never leaves a key out silently. Keys added or removed
   * during the pass may or may not be included; every key present for the whole pass is, once.
   */
  async *all(what: string): AsyncGenerator<KeyRecord[]> {
    const batches = this.store.idBatches();
    for (;;) {
      let next: IteratorResult<string[]>;
      let records: Array<StoredKey | undefined>;
      try {
        next = await batches.next();
        if (next.done) return;
        records = await Promise.all(next.value.map((id) => this.reads(() => this.store.get(id))));
      } catch (err) {
        await batches.return(undefined).catch(() => undefined);
        throw incomplete(what, err);
      }
      // A key deleted between the id set's read and its record's: not a key any more.
      yield records.filter((k): k is StoredKey => k !== undefined).map(toRecord);
    }
  }
}
