// What the CLI prints: one answer per line on stdout, and tables for a person at a terminal, every cell made visible
// (src/util/visible.ts), so that a key's name or metadata can neither colour, move or clear the screen nor break a
// row with a tab or a newline.
import { terminalSafe, visible } from '../util/visible.js';

/** One answer on stdout; any control character left in it (a DEL or C1 in JSON) is escaped, never sent raw. */
export function out(line: string): void {
  process.stdout.write(`${terminalSafe(line)}\n`);
}

/** Rows as columns padded to their widest cell, two spaces apart. */
export function aligned(cells: string[][]): string {
  const rows = cells.map((r) => r.map(visible));
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Rows as tab-separated lines, each cell on its own line's own column whatever it holds. */
export function tabbed(rows: ReadonlyArray<ReadonlyArray<string | number | null | undefined>>): string {
  return rows.map((row) => row.map((c) => visible(String(c ?? ''))).join('\t')).join('\n');
}
