// What the keys commands print around their answer: warnings on stderr (stdout stays the answer, so a script that
// reads only stdout still gets it), and a key's limits as a person reads them.
import type { Config } from '../../config/schema.js';
import { KEY_REPLICATION_WAIT_MS, unconfirmed, type Replication } from '../../keys/key-changes.js';
import { effectiveLimits } from '../../keys/rules.js';
import type { KeyRecord } from '../../keys/types.js';

/**
 * One line on stderr when replicas are expected and none confirmed the change in time. The change is made; what is
 * at risk is a failover.
 */
export function warnUnconfirmed(what: string, r: Replication): void {
  if (!unconfirmed(r)) return;
  process.stderr.write(
    `Warning: no replica confirmed this ${what} within ${KEY_REPLICATION_WAIT_MS / 1000} s (${r.expected} expected): if the primary fails over before it replicates, the ${what} is undone. Check the replicas (INFO replication), then run the command again.\n`,
  );
}

/** Warnings about what was done (it was done): one line each on stderr. */
export function warnAll(warnings: readonly string[]): void {
  for (const w of warnings) process.stderr.write(`Warning: ${w}\n`);
}

/** "60/min 1000/day": the key's limits in force (its overrides, else its plan's). */
export function limitsOf(k: KeyRecord, config: Config): string {
  const limits = effectiveLimits(k, config.plans[k.plan]);
  return limits ? `${limits.perMinute}/min ${limits.perDay}/day` : `${k.perMinute ?? '?'}/min ${k.perDay ?? '?'}/day`;
}
