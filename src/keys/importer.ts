// Importing keys as an administration, around the import itself (import-run.ts): the config it is checked against,
// one import at a time across every gateway instance (the store's import lock), the error code a half-written import
// is, and the one audit line every import that was not a dry run gets. Apart from issuing keys one at a time
// (issue.ts): an import brings records that already have an id, a hash and a history.
import type { Clock } from '../util/clock.js';
import { KeyAdminError } from './admin-errors.js';
import type { KeyAdminPolicy } from './admin-policy.js';
import { DEFAULT_KEY_SHAPE, generateKeyId } from './format.js';
import { ImportWriteError, runImport, type ImportOptions, type ImportOutcome, type ImportSource } from './import-run.js';
import { CLI_ACTOR, type Actor, type KeyChanges } from './key-changes.js';
import type { PlanLimits } from './limit-sums.js';
import type { KeyStore } from './types.js';
import { readLimit, type ReadLimit } from '../storage/read-limit.js';

export class KeyImporter {
  /** `reads` bounds the import's record reads (shared with the reports on the same connection). */
  constructor(
    private readonly store: KeyStore,
    private readonly clock: Clock,
    private readonly policy: KeyAdminPolicy,
    private readonly changes: KeyChanges,
    private readonly reads: ReadLimit = readLimit(),
  ) {}

  /**
   * Imports key records from a source read once per pass (import-run.ts): Tollgate's export records or a customer's
   * (import-records.ts). Every record is checked first (its shape, the plans, ids and hashes against the store and each
   * other); if any is refused nothing is written, unless `skipInvalid`. Records already stored as given are left
   * alone, so importing the same file again changes nothing. A dry run checks and writes nothing, not even its audit
   * line; any other import is audited once with its counts, whether it wrote or was refused.
   */
  async importKeys(source: ImportSource, actor: Actor = CLI_ACTOR, opts: ImportOptions = {}): Promise<ImportOutcome> {
    const deps = {
      store: this.store,
      reads: this.reads,
      plans: new Set(Object.keys(this.policy.plans())),
      shape: this.policy.keyShape?.() ?? DEFAULT_KEY_SHAPE,
      now: this.clock.now(),
      newId: generateKeyId,
      bearer: (this.policy.keySources?.() ?? ['bearer']).includes('bearer'),
      routes: this.policy.routes?.() ?? [],
      ...(this.policy.consumers ? { consumers: this.policy.consumers } : {}),
      planLimits: this.policy.plans() as Readonly<Record<string, PlanLimits>>,
      actor,
    };
    let result: ImportOutcome | undefined;
    let imported = 0;
    // One import at a time across every instance: two imports checked side by side would each find a hash free that
    // the other then writes, and the second would stop half-written. A dry run writes nothing and takes no lock.
    const lock = opts.dryRun ? undefined : await this.store.lockImports();
    if (!opts.dryRun && !lock)
      throw new KeyAdminError(
        'import_in_progress',
        'another import is running (on this or another gateway instance); nothing was imported: run this one again once it has finished',
      );
    try {
      result = await runImport(source, { ...deps, ...(lock ? { lockHeld: () => lock.held() } : {}) }, opts);
      imported = result.imported;
      return result;
    } catch (err) {
      if (err instanceof ImportWriteError) {
        imported = err.imported;
        throw new KeyAdminError('contended', err.message);
      }
      throw err;
    } finally {
      await lock?.release().catch(() => undefined);
      if (!opts.dryRun && (result !== undefined || imported > 0))
        this.changes.told({
          action: 'import',
          counts: { imported: result?.wrote === false ? 0 : imported, unchanged: result?.unchanged ?? 0, refused: result?.refusals.length ?? 0 },
          actor,
        });
    }
  }
}
