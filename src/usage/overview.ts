// The dashboard overview's figures (every key's usage added up), computed once and shared: reading every key's ledger
// costs in proportion to keys x days, so viewers opening the overview at the same time share one computation, and a
// rolling period ("the last 24 hours") asked again within the refresh interval gets the figures already made, saying
// how old they are. Nothing is added to the request path: the figures come from the ledger the limit script keeps.
import { LRUCache } from 'lru-cache';
import type { Granularity, UsageBucket, UsageCounts } from './reports.js';
import type { ReportRunner } from './report-runner.js';

/** How long the overview's figures are served before they are computed again. */
export const OVERVIEW_REFRESH_MS = 60_000;

export interface Overview {
  buckets: UsageBucket[];
  totals: UsageCounts;
  /** The period the figures cover (the one first asked for, when they were computed). */
  fromMs: number;
  toMs: number;
  /** When they were computed (epoch ms). */
  asOfMs: number;
}

interface Entry {
  made: Promise<Overview>;
  toMs: number;
  /** Once computed. */
  done?: Overview;
}

export class OverviewCache {
  // A few shapes of period are asked (the page's two); bounded all the same, against a client asking many.
  private readonly entries = new LRUCache<string, Entry>({ max: 32 });

  constructor(
    private readonly reports: Pick<ReportRunner, 'summary'>,
    private readonly now: () => number,
    private readonly refreshMs: number = OVERVIEW_REFRESH_MS,
  ) {}

  /**
   * The summary of [fromMs, toMs): the figures of a period as long, ending less than refreshMs apart, when they are
   * being computed or were computed less than refreshMs ago; otherwise computed now, once for every caller asking
   * meanwhile. A failure is not kept: the next caller computes again.
   */
  get(fromMs: number, toMs: number, granularity: Granularity): Promise<Overview> {
    const key = `${granularity}:${toMs - fromMs}`;
    const hit = this.entries.get(key);
    if (hit && Math.abs(hit.toMs - toMs) < this.refreshMs && (!hit.done || this.now() - hit.done.asOfMs < this.refreshMs)) return hit.made;
    const entry: Entry = {
      toMs,
      made: this.reports.summary(fromMs, toMs, granularity).then((s) => {
        entry.done = { ...s, fromMs, toMs, asOfMs: this.now() };
        return entry.done;
      }),
    };
    entry.made.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    this.entries.set(key, entry);
    return entry.made;
  }
}
