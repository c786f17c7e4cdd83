// The limit scripts' contract as data: the names of each script's KEYS, ARGV and reply fields, in order. The Redis
// store builds arguments and reads replies by these positions; test/limits-contract.test.ts checks the `.lua` headers
// and the store's arguments against them.

/** One script's contract: fields in order, then a group repeated per window (and per candidate limit). */
export interface ScriptContract {
  readonly keys: { readonly fixed: readonly string[]; readonly perWindow: readonly string[] };
  readonly argv: { readonly fixed: readonly string[]; readonly perWindow: readonly string[]; readonly perCandidate: readonly string[] };
  readonly reply: { readonly fixed: readonly string[]; readonly perWindow: readonly string[] };
}

export const CHECK_CONTRACT = {
  keys: { fixed: ['record', 'ban', 'strikes', 'usageDay'], perWindow: ['window'] },
  argv: {
    fixed: ['ledgerDay', 'banLadder', 'keyHash', 'keyRevision', 'credit', 'ledgerMs', 'cost', 'shadow', 'banMode', 'recordField'],
    perWindow: ['limit', 'lengthMs'],
    perCandidate: ['window', 'limit'],
  },
  reply: { fixed: ['outcome', 'retryMs', 'banLevel', 'recordSame', 'ledgerHour', 'short', 'wouldBan'], perWindow: ['used', 'resetMs'] },
} as const satisfies ScriptContract;

export const REFUND_CONTRACT = {
  keys: { fixed: ['usageDay'], perWindow: ['window'] },
  argv: { fixed: ['cost', 'ledgerField'], perWindow: ['remainingMs', 'lengthMs'], perCandidate: [] },
  reply: { fixed: ['done'], perWindow: [] },
} as const satisfies ScriptContract;

export const SNAPSHOT_CONTRACT = {
  keys: { fixed: ['record', 'ban'], perWindow: ['window'] },
  argv: { fixed: ['resetAfterMs', 'keyHash', 'recordField'], perWindow: [], perCandidate: [] },
  reply: { fixed: ['keyState', 'now', 'banMs', 'banLevel'], perWindow: ['used', 'resetMs'] },
} as const satisfies ScriptContract;

/** Each name's 0-based position in a list of names: computed once at load, read as constants on the request path. */
function positions<const N extends readonly string[]>(names: N): { readonly [K in N[number]]: number } {
  return Object.freeze(Object.fromEntries(names.map((n, i) => [n, i]))) as { readonly [K in N[number]]: number };
}

/** The check's reply: a field's position (reply[CHECK_REPLY.short]); window i's used at CHECK_REPLY_WINDOWS + 2i. */
export const CHECK_REPLY = positions(CHECK_CONTRACT.reply.fixed);
export const CHECK_REPLY_WINDOWS = CHECK_CONTRACT.reply.fixed.length;
/** The check's ARGV: a field's position among the arguments after the keys. */
export const CHECK_ARGV = positions(CHECK_CONTRACT.argv.fixed);
/** The check's fixed KEYS, before the windows'. */
export const CHECK_FIXED_KEYS = CHECK_CONTRACT.keys.fixed.length;

export const SNAPSHOT_REPLY = positions(SNAPSHOT_CONTRACT.reply.fixed);
export const SNAPSHOT_REPLY_WINDOWS = SNAPSHOT_CONTRACT.reply.fixed.length;
export const SNAPSHOT_FIXED_KEYS = SNAPSHOT_CONTRACT.keys.fixed.length;
export const REFUND_FIXED_KEYS = REFUND_CONTRACT.keys.fixed.length;
