// ban: the ladder for keys that keep sending after a 429: threshold strikes within a window ban the key, each ban of a
// ladder longer than the last, the level forgotten after a quiet spell. It can be turned off, or run in shadow to learn
// whom it would ban before it bans anyone.
import { z } from 'zod';
import { positiveInt } from './fields.js';
import { limitMode } from './limits.js';

export const ban = z.strictObject({
  enabled: z.boolean().default(true).describe('false: no ban is computed, stored or enforced (no strikes, no ban records in Redis); 429s alone meter repeat offenders.'),
  mode: limitMode()
    .default('enforce')
    .describe('enforce: a ban refuses the key (429 api_key_banned). shadow: the ladder is computed, logged and counted (tollgate_ban_would_ban_total, the ledger\'s wouldBan) but refuses nothing; a ban started in enforce mode is not enforced while in shadow.'),
  scope: z
    .enum(['key', 'consumer'])
    .default('key')
    .describe('Whose ban a key of a consumer meets and builds: key, its own (each key its own ladder); consumer, its consumer\'s (every key of it banned together; a new or rotated key does not start a fresh ladder). A key without a consumer has its own either way.'),
  threshold: positiveInt().default(10).describe('This many 429s for one key within windowSeconds bans it.'),
  windowSeconds: positiveInt().default(60).describe('The strike window: threshold 429s within this many seconds ban the key (fixed, from the first strike).'),
  durationsSeconds: z.array(positiveInt()).min(1).default([60, 600, 3600]).describe('Ban lengths: 1st ban, 2nd, 3rd and later.'),
  resetAfterSeconds: positiveInt().default(86_400).describe('The escalation level is forgotten this long after the last ban ended.'),
});
