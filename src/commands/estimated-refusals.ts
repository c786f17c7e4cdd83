// How the CLI tells the attach preview's estimate of what a pool would have refused (keys/pool-refusals.ts):
// `consumers create --from-metadata`, `keys update --consumer` and `keys import --dry-run` print it alike, each
// followed once by the note of how it is made.
import type { EstimatedRefusals } from '../keys/pool-refusals.js';

/** Keys named per pool on a terminal (--json lists up to REFUSED_KEYS). */
const KEYS_SHOWN = 10;

/** What every estimate printed rests on: said once after them, in lines a terminal keeps whole. */
export const ESTIMATE_NOTE = [
  "Estimated from the usage ledger's hourly counts and peak minutes over the last 7 days: a pool's busiest minute in an",
  "hour is taken as the sum of its keys' own busiest minutes (as if they fell in one minute: exact for keys busy together,",
  'more than happened for keys busy at different minutes), and requests beyond 61 minute windows of the limit in an hour',
  "are refused whatever their minutes; the day window is bounded as `plans simulate` bounds it; a key's share is its share",
  "of the hour's requests. The hour still running has only what gateways have flushed so far (usage.flushIntervalMs; its",
  'peak minutes at most once a minute): it lags.',
].join('\n');

/** One pool's estimate in a line: how much, where, and the keys most refused. */
export function refusalsText(e: EstimatedRefusals): string {
  if (e.requests === 0) return 'no requests recorded for its keys';
  if (e.pointsRefused === 0) return `none of ${e.requests} requests`;
  const parts: string[] = [];
  if (e.minute && e.minute.pointsRefused > 0) {
    const top = e.hours[0]!;
    parts.push(
      `by the minute window (${e.minute.limit}/min) in ${e.hoursAffected} hour${e.hoursAffected === 1 ? '' : 's'}, busiest minute about ${top.busiestMinute} (the hour from ${top.start})`,
    );
  }
  if (e.day && e.day.pointsRefused > 0) parts.push(`by the day window (${e.day.limit}/day) at least ${e.day.pointsRefused}`);
  const keys = e.keys.slice(0, KEYS_SHOWN).map((k) => `${k.id} ${k.pointsRefused}`);
  if (e.keysAffected > keys.length) keys.push(`${e.keysAffected - keys.length} more`);
  return `about ${e.pointsRefused} points of ${e.requests} requests, ${parts.join('; ')}; keys: ${keys.join(', ')}`;
}
