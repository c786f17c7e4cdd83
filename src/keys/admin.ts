// Key administration assembled on one store, clock, config policy and change listener: the pieces the composition
// roots (src/compose.ts, the CLI's session in src/commands/keys/session.ts) build once and hand out, each caller
// taking the ones it needs (the admin API's routes, the `keys` commands, limits/key-admin.ts for a key's windows and
// ban). Each piece is a job of its own: reading (listing.ts), issuing (issue.ts), changing (lifecycle.ts), importing
// (importer.ts), the reports' reads (records.ts), and what every change shares (key-changes.ts).
import type { Clock } from '../util/clock.js';
import type { KeyAdminPolicy } from './admin-policy.js';
import { KeyChanges, type KeyChangeListener } from './key-changes.js';
import { KeyImporter } from './importer.js';
import { KeyIssuer } from './issue.js';
import { KeyLifecycle } from './lifecycle.js';
import { KeyListing } from './listing.js';
import { KeyRecords } from './records.js';
import type { KeyStore } from './types.js';
import { readLimit, type ReadLimit } from '../storage/read-limit.js';

export class KeyAdmin {
  /** Announcing, auditing and confirming the replication of changes (a key's windows and ban too). */
  readonly changes: KeyChanges;
  readonly listing: KeyListing;
  readonly issuer: KeyIssuer;
  readonly lifecycle: KeyLifecycle;
  readonly importer: KeyImporter;
  /** Reads over every key, for reports. */
  readonly records: KeyRecords;

  /**
   * `reads` bounds the record reads of pages, imports and passes over every key (shared with the usage reports on
   * the same connection, so that concurrent reports together stay within it).
   */
  constructor(
    store: KeyStore,
    clock: Clock,
    policy: KeyAdminPolicy,
    onChange: KeyChangeListener = () => {},
    readonly reads: ReadLimit = readLimit(),
  ) {
    this.changes = new KeyChanges(store, onChange);
    this.listing = new KeyListing(store, clock, reads);
    this.issuer = new KeyIssuer(store, clock, policy, this.changes);
    this.lifecycle = new KeyLifecycle(clock, policy, this.changes);
    this.importer = new KeyImporter(store, clock, policy, this.changes, reads);
    this.records = new KeyRecords(store, reads);
  }
}
