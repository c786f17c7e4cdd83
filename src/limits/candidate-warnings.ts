// Candidate limits announced for a date that has come (plans.<p>.shadow.enforceFrom): the date is descriptive, so
// nothing starts enforcing them, and the portal would keep telling consumers about a limit "coming" on a day gone by.
// A warning, not an error: the operator may be about to move the numbers into the plan.
import type { Config } from '../config/schema.js';

/**
 * One line per plan whose candidate limits' enforceFrom is at or before `now`, in config order. A date without a
 * time is midnight UTC that day.
 */
export function candidateWarnings(config: Pick<Config, 'plans'>, now = Date.now()): string[] {
  const out: string[] = [];
  for (const [plan, p] of Object.entries(config.plans)) {
    const from = p.shadow?.enforceFrom;
    if (from === undefined || Date.parse(from) > now) continue;
    out.push(`plans.${plan}.shadow.enforceFrom ${from} is past, and the candidate limits are still in shadow: enforce them in the plan, or move the date`);
  }
  return out;
}
