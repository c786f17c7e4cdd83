// Tables the CLI prints for a person at a terminal: every cell made visible (src/util/visible.ts), so that a key's
// name or metadata can neither colour, move or clear the screen nor break a row with a tab or a newline.
import { visible } from '../util/visible.js';

/** Rows as tab-separated lines, each cell on its own line's own column whatever it holds. */
export function tabbed(rows: ReadonlyArray<ReadonlyArray<string | number | null | undefined>>): string {
  return rows.map((row) => row.map((c) => visible(String(c ?? ''))).join('\t')).join('\n');
}
