// Key records the gateway found unreadable (not a JSON object: hand-edited, truncated, written by something else).
// Such a record is its key's problem: the key is refused, and the operator is told which key, by id only (never its
// hash or plaintext), once per key for a while rather than on every request, with a counter for alerting.
import { LRUCache } from 'lru-cache';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

/** A key whose record stays unreadable is logged again after this long, as a reminder. */
const LOG_AGAIN_AFTER_MS = 10 * 60_000;

/** Where the record was found unreadable. */
export type InvalidRecordSeenBy = 'lookup' | 'limit_check';

export class InvalidKeyRecords {
  /** Key ids logged lately: bounded, so a store full of bad records cannot grow it. */
  private readonly logged = new LRUCache<string, true>({ max: 1000, ttl: LOG_AGAIN_AFTER_MS });

  constructor(
    private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {}

  report(id: string, seenBy: InvalidRecordSeenBy): void {
    this.metrics.keyRecordsInvalid.inc({ seen_by: seenBy });
    if (this.logged.has(id)) return;
    this.logged.set(id, true);
    this.logger.error({ consumer: id, seenBy }, 'key record is not valid JSON: the key is refused until the record is repaired or deleted in Redis');
  }
}
