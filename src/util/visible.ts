// Text an administrator stored (key names, metadata) shown where control characters act instead of showing: a
// terminal runs ESC sequences (colours, cursor moves, a rewritten title, a cleared screen) and breaks rows on tabs and
// newlines; bidirectional overrides reorder what a person reads. Such characters are shown as visible escapes instead.
/* eslint-disable no-control-regex -- matching control characters is what this file is for */

/**
 * Every C0 control, DEL, every C1 control (U+0080-U+009F, where 0x9B is a one-byte CSI), the line and paragraph
 * separators and the bidirectional marks, overrides and isolates.
 */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;
const CONTROLS_BUT_LINE_BREAKS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

const NAMED: Readonly<Record<string, string>> = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function escape(c: string): string {
  const code = c.charCodeAt(0);
  return NAMED[c] ?? (code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`);
}

/** For a terminal: every control character as a visible escape (`\x1b`, `\t`, `\n`, `\u202e`), on one line. */
export function visible(text: string): string {
  return text.replace(CONTROLS, escape);
}

/** The same, but tab, CR and LF kept: for a CSV field, which quotes them (RFC 4180) so that they stay in their cell. */
export function visibleKeepingLineBreaks(text: string): string {
  return text.replace(CONTROLS_BUT_LINE_BREAKS, escape);
}

const CONTROLS_BUT_TAB_AND_LF = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

/**
 * The last guard before a CLI writes to stdout: every control character but tab and LF (the separators of its own
 * tables and lines) written as a `\u` escape. On JSON (JSON.stringify already escapes C0) this only rewrites DEL, C1,
 * separators and bidirectional characters, so the line parses to the same value; plain text got visible() per cell.
 */
export function terminalSafe(text: string): string {
  return text.replace(CONTROLS_BUT_TAB_AND_LF, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
