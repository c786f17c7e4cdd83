// POST /plans/simulate's pages: the first answers the totals and the keys most refused; when more keys are listed than
// the page holds, the whole what-if is kept for a bounded time (kept-reports.ts: in Redis, so any instance answers the
// next page) and its cursor names it. An answer's size is then bounded by the page, not by the plan's keys x hours.
import { randomBytes } from 'node:crypto';
import { ReportError, type KeptReports } from './kept-reports.js';
import { KEPT_ID, REPORT_KEEP_MS } from './report-pages.js';
import type { PoolTotals, SimulateInput, SimulatedConsumer, SimulatedKey, Simulation, SimulationTotals } from './whatif.js';
import { decodeOpaque, encodeOpaque } from '../util/opaque.js';

/** Where the next page of a what-if starts: at `offset` in the kept what-if named `report`. */
export interface WhatIfCursor {
  report: string;
  offset: number;
}

/** What a page answers besides its keys: the question and the totals over every key. */
export interface WhatIfHead {
  input: SimulateInput;
  totals: SimulationTotals | PoolTotals;
}

export interface WhatIfPage extends WhatIfHead {
  /** Grouped by key (input.groupBy not 'consumer'): the page's keys. */
  keys: SimulatedKey[];
  /** Grouped by consumer: the page's pools (keys then empty). */
  consumers?: SimulatedConsumer[];
  next: string | null;
}

/** A page's rows where the what-if lists them: keys, or consumers when grouped by consumer. */
function pageOf(input: SimulateInput, rows: ReadonlyArray<SimulatedKey | SimulatedConsumer>): Pick<WhatIfPage, 'keys' | 'consumers'> {
  return input.groupBy === 'consumer' ? { keys: [], consumers: rows as SimulatedConsumer[] } : { keys: rows as SimulatedKey[] };
}

/**
 * Keys a what-if may keep for its pages: a listed key with its 10 hours is about 1.2 KB, so some 60 MB of Redis at
 * most (a usage report's rows are a sixth of that, and keep up to 200,000).
 */
export const WHATIF_KEYS_KEPT = 50_000;

export function encodeWhatIfCursor(c: WhatIfCursor): string {
  return encodeOpaque({ w: c.report, n: c.offset });
}

/** A cursor a previous page gave out, or undefined for anything else. */
export function decodeWhatIfCursor(text: string): WhatIfCursor | undefined {
  const v = decodeOpaque(text);
  if (!v) return undefined;
  const { w, n } = v;
  if (typeof w !== 'string' || !KEPT_ID.test(w) || !Number.isSafeInteger(n) || (n as number) < 1) return undefined;
  const c = { report: w, offset: n as number };
  return encodeWhatIfCursor(c) === text ? c : undefined;
}

export class WhatIfPages {
  constructor(
    private readonly simulate: (input: SimulateInput) => Promise<Simulation>,
    private readonly kept: KeptReports,
    private readonly keepMs: number = REPORT_KEEP_MS,
    private readonly rowsKept: number = WHATIF_KEYS_KEPT,
  ) {}

  async page(first: SimulateInput | WhatIfCursor, limit: number): Promise<WhatIfPage> {
    if ('report' in first) {
      const got = await this.kept.read<WhatIfHead & { kind: 'whatif' }, SimulatedKey | SimulatedConsumer>(first.report, first.offset, limit, this.keepMs);
      if (!got || got.head.kind !== 'whatif')
        throw new ReportError(
          'report_expired',
          `the what-if this cursor names is no longer kept (kept ${REPORT_KEEP_MS / 60_000} minutes after its last page was asked): ask again without a cursor`,
        );
      const end = first.offset + got.rows.length;
      return {
        input: got.head.input,
        totals: got.head.totals,
        ...pageOf(got.head.input, got.rows),
        next: end < got.total ? encodeWhatIfCursor({ report: first.report, offset: end }) : null,
      };
    }
    const sim = await this.simulate(first);
    const head: WhatIfHead = { input: first, totals: sim.totals };
    const rows: ReadonlyArray<SimulatedKey | SimulatedConsumer> = first.groupBy === 'consumer' ? (sim.consumers ?? []) : sim.keys;
    const what = first.groupBy === 'consumer' ? 'consumers' : 'keys';
    if (rows.length <= limit) return { ...head, ...pageOf(first, rows), next: null };
    if (rows.length > this.rowsKept)
      throw new ReportError(
        'report_too_large',
        `the what-if lists ${rows.length} ${what}, more than the ${this.rowsKept} kept for its pages: ask for a shorter period, or a new limit closer to the plan's`,
      );
    const id = randomBytes(16).toString('base64url');
    await this.kept.save(id, { kind: 'whatif', ...head }, rows, this.keepMs);
    return { ...head, ...pageOf(first, rows.slice(0, limit)), next: encodeWhatIfCursor({ report: id, offset: limit }) };
  }
}
