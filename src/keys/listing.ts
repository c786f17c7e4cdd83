// Reading keys for administrators: one key, every key, a filtered page, and the status they see. Only reads: what an
// admin screen or `keys list`/`keys show` needs, apart from anything that changes a key (issue.ts, lifecycle.ts).
import type { Clock } from '../util/clock.js';
import { incomplete, notFound, readOne } from './admin-errors.js';
import { keyStatus, toRecord, type KeyStatus } from './rules.js';
import { KeyStoreError, type KeyRecord, type KeyStore } from './types.js';
import { readLimit, type ReadLimit } from '../storage/read-limit.js';
import { keyMatcher } from './key-search.js';

/** A page of `GET /keys`: keys by id after `after`, those matching every filter given. */
export interface KeyPageQuery {
  limit: number;
  after?: string;
  plan?: string;
  status?: KeyStatus;
  namePrefix?: string;
  /** An id prefix, or a piece of the name or of a metadata value (key-search.ts). */
  q?: string;
}

/** How many records a page reads at once (one GET each: on a cluster they live in different slots). */
const PAGE_READ_BATCH = 100;

/**
 * The most records one page reads: a filter that matches few keys answers a short (even empty) page with a cursor
 * after this many, instead of one request reading every record.
 */
export const PAGE_SCAN_MAX = 10_000;

export class KeyListing {
  /** `reads` bounds the record reads of pages (shared with the reports on the same connection). */
  constructor(
    private readonly store: Pick<KeyStore, 'getVersioned' | 'get' | 'ids' | 'list'>,
    private readonly clock: Clock,
    private readonly reads: ReadLimit = readLimit(),
  ) {}

  /** The key's record, never its hash; undefined for an unknown id; KeyAdminError 'invalid_record' if unreadable. */
  async get(id: string): Promise<KeyRecord | undefined> {
    const k = (await readOne(() => this.store.getVersioned(id)))?.key;
    return k ? toRecord(k) : undefined;
  }

  /** The key's record; KeyAdminError not_found when there is none (for operations on a key's windows and ban). */
  async require(id: string): Promise<KeyRecord> {
    const k = await this.get(id);
    if (!k) throw notFound(id);
    return k;
  }

  /** Every key's record, by id (records that cannot be read are left out, and reported by the store). */
  async list(): Promise<KeyRecord[]> {
    return (await this.store.list()).map(toRecord);
  }

  /**
   * One page of keys in id order, after the id `after`, matching the filters. Reads the id set, then only as many
   * records as the page needs (plus those the filters skip), at most PAGE_SCAN_MAX of them; `next` is the id to pass
   * as `after` for the next page, absent once the last id has been read. Unreadable records (not a JSON key record) are skipped (the store
   * reports them); any other failed read fails the whole page (KeyAdminError 'incomplete'), never a page with keys
   * silently missing.
   */
  async page(q: KeyPageQuery): Promise<{ keys: KeyRecord[]; next?: string }> {
    try {
      const ids = await this.store.ids();
      let i = q.after === undefined ? 0 : firstAfter(ids, q.after);
      const keys: KeyRecord[] = [];
      const now = this.clock.now();
      const matches = q.q === undefined ? undefined : keyMatcher(q.q);
      const end = Math.min(ids.length, i + PAGE_SCAN_MAX);
      while (i < end && keys.length < q.limit) {
        const batch = ids.slice(i, Math.min(end, i + PAGE_READ_BATCH));
        const records = await Promise.all(batch.map((id) => this.reads(() => this.store.get(id)).catch(skipUnreadable)));
        let j = 0;
        for (; j < batch.length && keys.length < q.limit; j++) {
          const k = records[j];
          if (!k) continue;
          if (q.plan !== undefined && k.plan !== q.plan) continue;
          if (q.status !== undefined && keyStatus(k, now) !== q.status) continue;
          if (q.namePrefix !== undefined && !(k.name ?? '').startsWith(q.namePrefix)) continue;
          if (matches && !matches(k)) continue;
          keys.push(toRecord(k));
        }
        i += j;
      }
      // The last id read (a full page stops right after its last key): the next page starts after it.
      return { keys, ...(i > 0 && i < ids.length ? { next: ids[i - 1]! } : {}) };
    } catch (err) {
      throw incomplete('the key list', err);
    }
  }

  /** The status an administrator sees, on this process's clock. */
  statusOf(k: KeyRecord): KeyStatus {
    return keyStatus(k, this.clock.now());
  }
}

/** A page skips a record that is not a JSON key record (the key is unusable; the store reports it); other errors stand. */
function skipUnreadable(err: unknown): undefined {
  if (err instanceof KeyStoreError && err.code === 'invalid_record') return undefined;
  throw err;
}

/** The index of the first id greater than `after` in sorted `ids` (where a cursor page of ids starts). */
export function firstAfter(ids: readonly string[], after: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid]! <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
