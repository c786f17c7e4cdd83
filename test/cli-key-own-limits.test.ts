// A key's own monthly limit and the end of its own limits from the built CLI, on a real Redis: `keys create` and
// `keys update` take --per-month, --limits-expires-at and --limits-reason ("none"/"never" remove them), `keys show`
// prints them (an end that has passed says the plan's limits apply), and a bad value is a usage error (exit 2, one
// line) that stores nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { Keyspace } from '../src/storage/keyspace.js';
import { assertBuilt, cliOk, runCli, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';

const PREFIX = 'clikol:';
const ks = new Keyspace(PREFIX);
let redis: TestRedis;
let client: Redis;
let dir: ReturnType<typeof tempDir>;
let configFile: string;

beforeAll(async () => {
  assertBuilt();
  redis = await TestRedis.start();
  client = redis.client();
  dir = tempDir();
  configFile = dir.write('gateway.yaml', {
    upstream: { url: 'http://127.0.0.1:9' },
    redis: { url: redis.url, prefix: PREFIX },
    plans: { free: { perMinute: 60, perDay: 1000 } },
  });
});

afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
  dir?.remove();
});

const run = (...args: string[]): Promise<CliResult> => runCli([...args, '--config', configFile]);
const ok = (...args: string[]): Promise<CliResult> => cliOk([...args, '--config', configFile]);
const stored = async (id: string): Promise<Record<string, unknown>> => JSON.parse((await client.get(ks.keyRecord(id)))!) as Record<string, unknown>;

describe("a key's own monthly limit and the end of its own limits", () => {
  it('create, show, update and remove them', async () => {
    const created = JSON.parse(
      (
        await ok(
          'keys',
          'create',
          '--plan',
          'free',
          '--per-month',
          '9000',
          '--limits-expires-at',
          '2031-01-01T02:00:00+02:00',
          '--limits-reason',
          'launch week',
          '--json',
        )
      ).stdout,
    ) as { id: string };
    expect(await stored(created.id)).toMatchObject({ perMonth: 9000, limitsExpiresAt: '2031-01-01T00:00:00.000Z', limitsReason: 'launch week' });
    const shown = (await ok('keys', 'show', created.id)).stdout;
    expect(shown).toMatch(/per month:\s+9000 \(per-key override\)/);
    expect(shown).toMatch(/limits end:\s+2031-01-01T00:00:00.000Z\n/);
    expect(shown).toMatch(/limits reason:\s+launch week/);

    await ok('keys', 'update', created.id, '--limits-expires-at', '2020-01-01T00:00:00Z');
    expect((await ok('keys', 'show', created.id)).stdout).toMatch(/limits end:\s+2020-01-01T00:00:00.000Z \(ended: the plan's limits apply\)/);

    await ok('keys', 'update', created.id, '--per-month', 'none', '--limits-expires-at', 'never', '--limits-reason', 'none');
    const after = await stored(created.id);
    expect([after.perMonth, after.limitsExpiresAt, after.limitsReason]).toEqual([undefined, undefined, undefined]);
    expect((await ok('keys', 'show', created.id)).stdout).not.toMatch(/per month|limits end|limits reason/);
  });

  it.each([
    [['--per-month', '-3'], '--per-month: expected a whole number from 1 to 1000000000000'],
    [['--limits-expires-at', 'soon'], '--limits-expires-at: expected an ISO-8601 date-time with its offset, e.g. 2027-01-01T00:00:00Z'],
    [['--limits-reason', 'x'.repeat(201)], '--limits-reason: expected a reason of 1-200 characters'],
  ])('%j: exit 2, one line, nothing stored', async (option, message) => {
    const before = await client.scard(ks.keyIds());
    for (const argv of [
      ['keys', 'create', '--plan', 'free', ...option],
      ['keys', 'update', 'key_whatever', ...option],
    ]) {
      const r = await run(...argv);
      expect(r.code, r.stderr).toBe(2);
      const lines = withoutAudit(r.stderr).trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(message);
      expect(r.stdout).toBe('');
    }
    expect(await client.scard(ks.keyIds())).toBe(before);
  });
});
