// Quota subjects (src/limits/subject.ts) and the Redis names they give (src/storage/keyspace.ts): a key's names are
// byte for byte the ones a key id gave before subjects, so windows, bans and ledgers already in Redis keep counting;
// every name of one subject shares one Cluster slot.
import calculateSlot from 'cluster-key-slot';
import { describe, expect, it } from 'vitest';
import { addressSubject, consumerSubject, keySubject } from '../src/limits/subject.js';
import { RedisLimiterStore } from '../src/limits/redis-store.js';
import type { BanPolicy } from '../src/limits/types.js';
import { limitRequest, planWindows, routeWindows } from '../src/limits/windows.js';
import type { RedisCommands } from '../src/storage/redis.js';
import { Keyspace } from '../src/storage/keyspace.js';

const ks = new Keyspace('tg:');
const BAN: BanPolicy = { threshold: 3, windowSeconds: 60, durationsSeconds: [60], resetAfterSeconds: 3600 };

/** Every name of a subject's limit state, as the check, the snapshot, the refund and the ledger use them. */
function names(s: ReturnType<typeof keySubject>): string[] {
  return [
    ks.limitRecord(s),
    ks.limitWindow(s, 'minute'),
    ks.minuteWindow(s),
    ks.dayWindow(s),
    ks.limitWindow(s, 'route:store:day'),
    ks.ban(s),
    ks.strikes(s),
    ks.shadowBan(s),
    ks.shadowStrikes(s),
    ks.usageDay(s, 20_000),
  ];
}

describe("a key subject's Redis names", () => {
  it('are the names a key id gave, byte for byte', () => {
    expect(names(keySubject('key_1'))).toEqual([
      'tg:key:{key_1}',
      'tg:rl:{key_1}:minute',
      'tg:rl:{key_1}:minute',
      'tg:rl:{key_1}:day',
      'tg:rl:{key_1}:route:store:day',
      'tg:ban:{key_1}',
      'tg:strikes:{key_1}',
      'tg:wouldban:{key_1}',
      'tg:wouldstrikes:{key_1}',
      'tg:key:{key_1}:usage:20000',
    ]);
    // The record the limit check validates against is the key store's own.
    expect(ks.limitRecord(keySubject('key_1'))).toBe(ks.keyRecord('key_1'));
  });

  it("an address's are the names its `addr:` id gave; a consumer's carry `c:<id>`; each subject's names share one slot", () => {
    expect(names(addressSubject('192.0.2.1')).slice(0, 2)).toEqual(['tg:key:{addr:192.0.2.1}', 'tg:rl:{addr:192.0.2.1}:minute']);
    expect(names(consumerSubject('acme')).slice(1, 2)).toEqual(['tg:rl:{c:acme}:minute']);
    for (const s of [keySubject('key_1'), addressSubject('2001:db8::/64'), consumerSubject('acme')]) {
      expect(new Set(names(s).map((n) => calculateSlot(n)))).toEqual(new Set([calculateSlot(`{${s.tag}}`)]));
    }
  });

  it('the check the Redis store sends for a key names exactly those keys', async () => {
    const calls: unknown[][] = [];
    const client: Record<string, unknown> = {
      options: {},
      defineCommand(name: string) {
        client[name] = async (...args: unknown[]) => {
          calls.push(args);
          return ['admitted', 0, 0, -1, -1, 0, 0, 1, 60_000, 1, 86_400_000, 1, 86_400_000];
        };
      },
    };
    const request = limitRequest([...planWindows({ perMinute: 5, perDay: 50 }), ...routeWindows('store', { perDay: 3 }, 'enforce')]);
    await new RedisLimiterStore(client as unknown as RedisCommands, ks, () => 86_400_000).check(keySubject('key_1'), request, BAN, 'h', 'r');
    const nKeys = calls[0]![0] as number;
    expect(calls[0]!.slice(1, 1 + nKeys)).toEqual([
      'tg:key:{key_1}',
      'tg:ban:{key_1}',
      'tg:strikes:{key_1}',
      expect.stringMatching(/^tg:key:\{key_1\}:usage:\d+$/),
      'tg:rl:{key_1}:minute',
      'tg:rl:{key_1}:day',
      'tg:rl:{key_1}:route:store:day',
    ]);
  });
});
