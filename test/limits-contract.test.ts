// The limit scripts' contract (src/limits/script-contract.ts) against both of its sides: the KEYS, ARGV and reply
// each `.lua` header documents, and the arguments the Redis store sends and the replies it reads (a stub client).
import { readFileSync } from 'node:fs';
import calculateSlot from 'cluster-key-slot';
import { describe, expect, it } from 'vitest';
import { CHECK_ARGV, CHECK_CONTRACT, REFUND_CONTRACT, SNAPSHOT_CONTRACT, type ScriptContract } from '../src/limits/script-contract.js';
import { RedisLimiterStore } from '../src/limits/redis-store.js';
import type { BanPolicy } from '../src/limits/types.js';
import { candidatesFor, capWindows, limitRequest, planWindows, routeWindows } from '../src/limits/windows.js';
import type { RedisCommands } from '../src/storage/redis.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { keySubject } from '../src/limits/subject.js';

const BAN: BanPolicy = { threshold: 3, windowSeconds: 60, durationsSeconds: [60, 600], resetAfterSeconds: 3600 };

/** A header's sections as the contract writes them: numbered names, then the repeated groups' names. */
function header(file: string): ScriptContract {
  const lines = readFileSync(new URL(`../src/limits/lua/${file}`, import.meta.url), 'utf8').split('\n');
  const sections: Record<string, { fixed: string[]; perWindow: string[]; perCandidate: string[] }> = {};
  let current: { fixed: string[]; perWindow: string[]; perCandidate: string[] } | undefined;
  for (const line of lines) {
    if (!line.startsWith('--')) break;
    const title = /^-- (KEYS|ARGV|Reply)$/.exec(line);
    if (title) {
      current = sections[title[1]!] = { fixed: [], perWindow: [], perCandidate: [] };
      continue;
    }
    const field = /^--\s+(\d+|then)(\.\.\.)?\s+(.*)$/.exec(line);
    if (!current || !field) continue;
    const [, at, repeated, text] = field;
    if (at === 'then' || repeated) {
      const group = /^per (window|candidate)[^:]*: (\w+(?:, \w+)*):/.exec(text!);
      if (!group) throw new Error(`${file}: a repeated group without "per window|candidate: names:": ${line}`);
      const names = group[2]!.split(', ');
      if (group[1] === 'window') current.perWindow.push(...names);
      else current.perCandidate.push(...names);
    } else {
      expect(Number(at), `${file}: ${line}`).toBe(current.fixed.length + 1);
      current.fixed.push(/^(\w+):/.exec(text!)?.[1] ?? `(no name: ${text})`);
    }
  }
  return {
    keys: { fixed: sections.KEYS!.fixed, perWindow: sections.KEYS!.perWindow },
    argv: sections.ARGV!,
    reply: { fixed: sections.Reply!.fixed, perWindow: sections.Reply!.perWindow },
  };
}

describe('the .lua headers document the contract', () => {
  it.each([
    ['check.lua', CHECK_CONTRACT],
    ['refund.lua', REFUND_CONTRACT],
    ['snapshot.lua', SNAPSHOT_CONTRACT],
  ] as const)('%s: KEYS, ARGV and reply names in the contract order', (file, contract) => {
    const c = contract as ScriptContract;
    expect(header(file)).toEqual({
      keys: { fixed: [...c.keys.fixed], perWindow: [...c.keys.perWindow] },
      argv: { fixed: [...c.argv.fixed], perWindow: [...c.argv.perWindow], perCandidate: [...c.argv.perCandidate] },
      reply: { fixed: [...c.reply.fixed], perWindow: [...c.reply.perWindow] },
    });
  });
});

/** A client that records each script call's arguments and answers with `reply`. */
function stub(reply: unknown[]): { client: RedisCommands; calls: Array<{ command: string; args: unknown[] }> } {
  const calls: Array<{ command: string; args: unknown[] }> = [];
  const client: Record<string, unknown> = {
    options: {},
    defineCommand(name: string) {
      client[name] = async (...args: unknown[]) => {
        calls.push({ command: name, args });
        return reply;
      };
    },
  };
  return { client: client as unknown as RedisCommands, calls };
}

/** A list of values put in the order of `names`, from an object of them. */
const inOrder = (names: readonly string[], values: Record<string, unknown>): unknown[] => names.map((n) => values[n]);

describe('the Redis store sends and reads by the contract', () => {
  const ks = new Keyspace('c:');
  const windows = [...planWindows({ perMinute: 5, perDay: 50 }), ...routeWindows('r', { perMinute: 3 }, 'shadow')];
  const request = limitRequest(windows, 2, candidatesFor(windows, 0, 2, { perMinute: 4 }));

  it('the check: keys, then argv by name (shadow: the windows in shadow mode as a mask), then per window limit and lengthMs, then per candidate its window and limit; the reply read by name', async () => {
    const values = { outcome: 'limited', retryMs: 1234, banLevel: 2, recordSame: 0, ledgerHour: -1, short: 9 };
    const perWindow = [
      [5, 40_000],
      [5, 80_000_000],
      [1, 50_000],
    ];
    const { client, calls } = stub([...inOrder(CHECK_CONTRACT.reply.fixed, values), ...perWindow.flat()]);
    const store = new RedisLimiterStore(client, ks);
    const d = await store.check(keySubject('k1'), request, BAN, 'hash1', 'rev1');
    expect(d).toEqual({
      outcome: 'limited',
      retryMs: 1234,
      banLevel: 2,
      keyRecord: 'changed',
      short: 9,
      windows: perWindow.map(([used, resetMs]) => ({ used, resetMs })),
    });
    const args = calls[0]!.args;
    const nKeys = CHECK_CONTRACT.keys.fixed.length + windows.length;
    expect(args[0]).toBe(nKeys);
    const keys = args.slice(1, 1 + nKeys);
    expect(keys.slice(0, 4)).toEqual(
      inOrder(CHECK_CONTRACT.keys.fixed, {
        record: ks.keyRecord('k1'),
        ban: ks.ban(keySubject('k1')),
        strikes: ks.strikes(keySubject('k1')),
        usageDay: keys[3],
      }),
    );
    expect(keys.slice(4)).toEqual(windows.map((w) => ks.limitWindow(keySubject('k1'), w.suffix)));
    const argv = args.slice(1 + nKeys);
    expect(argv[CHECK_ARGV.cost]).toBe(2);
    expect(argv[CHECK_ARGV.keyHash]).toBe('hash1');
    expect(argv[CHECK_ARGV.keyRevision]).toBe('rev1');
    expect(argv[CHECK_ARGV.credit]).toBe('');
    expect(argv[CHECK_ARGV.banLadder]).toBe('3 60000 3600000 60000 600000');
    expect(argv[CHECK_ARGV.ledgerDay]).toBe('');
    expect(argv[CHECK_ARGV.ledgerMs]).toBe('');
    // Window 3 (the route's minute) is in shadow mode: bit 2; its limit is its own, not a negative one.
    expect(argv[CHECK_ARGV.shadow]).toBe(4);
    expect(argv[CHECK_ARGV.banMode]).toBe('enforce');
    expect(argv[CHECK_ARGV.recordField]).toBe('');
    expect(argv.slice(CHECK_CONTRACT.argv.fixed.length)).toEqual([5, 60_000, 50, 86_400_000, 3, 60_000, 1, 4]);
  });

  it("the check's credit names the plan's windows by their positions (request.plan), wherever they stand", async () => {
    const reply = [...inOrder(CHECK_CONTRACT.reply.fixed, { outcome: 'admitted', retryMs: 0, banLevel: 0, recordSame: -1, ledgerHour: -1, short: 0 })];
    const { client, calls } = stub([...reply, 1, 1, 1, 1, 1, 1]);
    const store = new RedisLimiterStore(client, ks);
    const credit = { minute: 3, minuteMs: 1000, day: 4, dayMs: 2000, requests: 5 };
    await store.check(keySubject('k4'), request, BAN, '', '', credit);
    // The route's window first: the plan's minute and day are windows 2 and 3 (from 1).
    const routeFirst = limitRequest([...routeWindows('r', { perMinute: 3 }, 'enforce'), ...planWindows({ perMinute: 5, perDay: 50 })]);
    expect(routeFirst.plan).toEqual({ minute: 1, day: 2 });
    await store.check(keySubject('k4'), routeFirst, BAN, '', '', credit);
    const creditArg = (n: number) => calls[n]!.args[1 + (calls[n]!.args[0] as number) + CHECK_ARGV.credit];
    expect([creditArg(0), creditArg(1)]).toEqual(['1 3 1000 2 4 2000 5', '2 3 1000 3 4 2000 5']);
  });

  it("the check's ban mode: shadow names the would-be ban's own hash and strikes; off sends off; the reply's wouldBan read by name", async () => {
    const reply = inOrder(CHECK_CONTRACT.reply.fixed, {
      outcome: 'limited',
      retryMs: 10,
      banLevel: 1,
      recordSame: -1,
      ledgerHour: -1,
      short: 1,
      wouldBan: 60_000,
    });
    const { client, calls } = stub([...reply, 1, 1, 1, 1, 1, 1]);
    const store = new RedisLimiterStore(client, ks);
    const d = await store.check(keySubject('k5'), request, { ...BAN, mode: 'shadow' });
    expect(d.wouldBan).toBe(60_000);
    await store.check(keySubject('k5'), request, { ...BAN, enabled: false, mode: 'shadow' });
    const keysOf = (n: number) => calls[n]!.args.slice(1, 1 + (calls[n]!.args[0] as number));
    const argvOf = (n: number) => calls[n]!.args.slice(1 + (calls[n]!.args[0] as number));
    expect(keysOf(0).slice(1, 3)).toEqual([ks.shadowBan(keySubject('k5')), ks.shadowStrikes(keySubject('k5'))]);
    expect(argvOf(0)[CHECK_ARGV.banMode]).toBe('shadow');
    expect(argvOf(1)[CHECK_ARGV.banMode]).toBe('off');
  });

  it("a key of a consumer: its record's field in the consumer's hash of keys, the pool's windows and its caps, its ban by ban.scope, all in the consumer's slot", async () => {
    const { client, calls } = stub([
      ...inOrder(CHECK_CONTRACT.reply.fixed, { outcome: 'admitted', retryMs: 0, banLevel: 0, recordSame: 1, ledgerHour: -1, short: 0, wouldBan: 0 }),
    ]);
    const store = new RedisLimiterStore(client, ks, () => 86_400_000);
    const pooled = limitRequest([...planWindows({ perMinute: 5, perDay: 50 }), ...capWindows({ perMinute: 2 }, 'enforce')]);
    const subject = keySubject('k6', 'acme');
    await store.check(subject, pooled, BAN, 'hash6', 'rev6');
    await store.check(subject, pooled, { ...BAN, scope: 'consumer' }, 'hash6', 'rev6');
    const keysOf = (n: number) => calls[n]!.args.slice(1, 1 + (calls[n]!.args[0] as number));
    const argvOf = (n: number) => calls[n]!.args.slice(1 + (calls[n]!.args[0] as number));
    expect(keysOf(0)).toEqual([
      'c:consumer:{c:acme}:keys',
      'c:ban:{c:acme}:key:k6',
      'c:strikes:{c:acme}:key:k6',
      expect.stringMatching(/^c:usage:\{c:acme\}:k6:\d+$/),
      'c:rl:{c:acme}:minute',
      'c:rl:{c:acme}:day',
      'c:rl:{c:acme}:key:k6:minute',
    ]);
    expect(keysOf(0)[0]).toBe(ks.consumerKeys('acme'));
    expect(argvOf(0)[CHECK_ARGV.recordField]).toBe('k6');
    expect(keysOf(1).slice(1, 3)).toEqual(['c:ban:{c:acme}', 'c:strikes:{c:acme}']);
    expect(new Set(keysOf(0).map((k) => calculateSlot(k as string)))).toEqual(new Set([calculateSlot('{c:acme}')]));
  });

  it('the snapshot: the reply read by name', async () => {
    const values = { keyState: 'ok', now: 1_000_000, banMs: 500, banLevel: 1 };
    const { client, calls } = stub([...inOrder(SNAPSHOT_CONTRACT.reply.fixed, values), 2, 30_000, 0, -1, 1, 20_000]);
    const s = await new RedisLimiterStore(client, ks).snapshot(keySubject('k2'), windows, BAN, 'h');
    expect(s).toEqual({
      key: 'ok',
      now: 1_000_000,
      banMs: 500,
      banLevel: 1,
      windows: [
        { used: 2, resetMs: 30_000 },
        { used: 0, resetMs: 86_400_000 },
        { used: 1, resetMs: 20_000 },
      ],
    });
    expect(calls[0]!.args).toEqual([
      SNAPSHOT_CONTRACT.keys.fixed.length + 3,
      ks.keyRecord('k2'),
      ks.ban(keySubject('k2')),
      ...windows.map((w) => ks.limitWindow(keySubject('k2'), w.suffix)),
      ...inOrder(SNAPSHOT_CONTRACT.argv.fixed, { resetAfterMs: 3_600_000, keyHash: 'h', recordField: '' }),
    ]);
  });

  it('the refund: keys, argv by name, then per window remainingMs and lengthMs', async () => {
    const { client, calls } = stub([1] as unknown[]);
    const refund = { windows: [{ suffix: 'minute', remainingMs: 1000.4, lengthMs: 60_000 }], cost: 3, ledgerHour: 24 * 20_000 + 5 };
    await new RedisLimiterStore(client, ks).refund(keySubject('k3'), refund);
    expect(calls[0]!.args).toEqual([
      REFUND_CONTRACT.keys.fixed.length + 1,
      ks.usageDay(keySubject('k3'), 20_000),
      ks.limitWindow(keySubject('k3'), 'minute'),
      ...inOrder(REFUND_CONTRACT.argv.fixed, { cost: 3, ledgerField: 'a5' }),
      1000,
      60_000,
    ]);
  });
});
