// The regular-expression engine of request validation (Ajv's `code.regExp`): a document's `pattern` and
// `patternProperties` are matched by RE2JS, an RE2 port in plain JavaScript that runs in time linear in the value,
// never by V8's backtracking engine, with which `^(a+)+$` and a 31-character value held the event loop for 15 seconds
// and every other request with it. A value longer than MAX_PATTERN_INPUT is not matched at all (it fails the pattern:
// validator.ts says why), so even linear work stays small per value. A pattern RE2 cannot run (lookaround,
// backreferences, a repeat count over 1000) fails the operation's compile, which `config check` names.
import type { RegExpEngine } from 'ajv/dist/types/index.js';
import { RE2JS } from 're2js';

/** The longest string (in UTF-16 units) matched against a pattern; a longer one fails it unmatched. */
export const MAX_PATTERN_INPUT = 10_000;

/** A pattern as it is quoted back in a message: the first characters. */
function quoted(pattern: string): string {
  return JSON.stringify(pattern.length > 80 ? `${pattern.slice(0, 80)}...` : pattern);
}

function compileLinear(pattern: string): { test(s: string): boolean } {
  let re: RE2JS;
  try {
    re = RE2JS.compile(RE2JS.translateRegExp(pattern));
  } catch (err) {
    const why = err instanceof Error ? err.message.replace(/^error parsing regexp: /, '') : String(err);
    throw new Error(`pattern ${quoted(pattern)} cannot be matched in linear time (RE2 has no lookaround, backreferences or repeat counts over 1000): ${why}`);
  }
  return { test: (s: string) => s.length <= MAX_PATTERN_INPUT && re.test(s) };
}

/** Ajv's `code.regExp`: the engine, and how generated standalone code would name it (never used: no standalone code). */
export const linearRegExp: RegExpEngine = Object.assign((pattern: string) => compileLinear(pattern), { code: 'linearRegExp' });
