// `tollgate consumers ...` and the keys' --consumer, as users run them (node dist/cli.js, a private Redis): create,
// list, show, update, suspend, resume and delete a consumer; keys created into it, moved between consumers (both
// mirrors follow) and detached (the key's own plan kept); maxKeys refused in one line; delete refused while keys are
// not revoked unless --revoke-keys; every change audited. Then hostile values on every flag: refused in one line with
// a usage exit before Redis is asked anything, and nothing stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { runProgram } from '../src/program.js';
import { Keyspace } from '../src/storage/keyspace.js';
import { RedisEndpointStore } from '../src/events/endpoints.js';
import type { RedisCommands } from '../src/storage/redis.js';
import { assertBuilt, auditOf, cliOk, runCli, tempDir, withoutAudit, type CliResult } from './helpers/cli.js';
import { TestRedis } from './helpers/redis-server.js';

const PREFIX = 'clicons:';
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
    log: { level: 'info' },
    plans: { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 600, perDay: 100_000 } },
  });
});

afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
  dir?.remove();
});

function run(...args: string[]): Promise<CliResult> {
  return runCli([...args, '--config', configFile]);
}
async function ok(...args: string[]): Promise<CliResult> {
  return cliOk([...args, '--config', configFile]);
}
async function json<T = Record<string, unknown>>(...args: string[]): Promise<T> {
  const r = await ok(...args, '--json');
  return JSON.parse(r.stdout) as T;
}

/** A refusal: exit 1, one line on stderr (besides the line naming the config and Redis), nothing on stdout. */
function expectRefused(r: CliResult, message: RegExp): void {
  expect(r.code, r.stderr).toBe(1);
  const lines = withoutAudit(r.stderr).split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(message);
  expect(r.stdout).toBe('');
}

async function mirrorIds(consumer: string): Promise<string[]> {
  return (await client.hkeys(ks.consumerKeys(consumer))).sort();
}

describe('consumers and their keys, through the CLI', () => {
  it('create with every field, then list and show; suspend and resume, each once audited', async () => {
    const created = await ok(
      'consumers',
      'create',
      '--id',
      'acme',
      '--name',
      'Acme Corp',
      '--plan',
      'pro',
      '--max-keys',
      '2',
      '--billing-day',
      '31',
      '--per-minute',
      '100',
      '--per-month',
      '50000',
      '--limits-expire',
      '2099-01-01T00:00:00+01:00',
      '--limits-reason',
      'launch week',
      '--metadata',
      '{"crm":"c-1"}',
      '--scopes',
      'orders,service:billing',
      '--allowed-cidrs',
      '["203.0.113.0/24","2001:db8::/32"]',
      '--json',
    );
    const acme = JSON.parse(created.stdout) as Record<string, unknown>;
    expect(acme).toMatchObject({
      id: 'acme',
      name: 'Acme Corp',
      plan: 'pro',
      status: 'active',
      maxKeys: 2,
      billingDay: 31,
      perMinute: 100,
      perMonth: 50000,
      limitsExpiresAt: '2098-12-31T23:00:00.000Z',
      limitsReason: 'launch week',
      metadata: { crm: 'c-1' },
      scopes: ['orders', 'service:billing'],
      allowedCidrs: ['203.0.113.0/24', '2001:db8::/32'],
    });
    expect(auditOf(created.stderr)).toEqual([expect.objectContaining({ audit: true, action: 'consumer.create', consumerId: 'acme', by: 'cli' })]);
    expect(JSON.parse((await client.get(ks.consumerRecord('acme')))!)).toEqual(acme);

    const plain = await ok('consumers', 'create', '--name', 'Globex', '--plan', 'free');
    expect(plain.stdout).toMatch(/^Created consumer con_[0-9a-f]{24} \(Globex, plan free, 60\/min 1000\/day\)\.\n$/);

    const list = await json<Array<{ id: string }>>('consumers', 'list');
    expect(list.map((c) => c.id)).toEqual(['acme', expect.stringMatching(/^con_/)]);
    const table = await ok('consumers', 'list');
    expect(table.stdout).toMatch(/^ID +NAME +PLAN +LIMITS +STATUS/);
    expect(table.stdout).toContain('100/min 100000/day 50000/month (own until 2098-12-31T23:00:00.000Z)');

    const suspended = await ok('consumers', 'suspend', 'acme');
    expect(suspended.stdout).toMatch(/^Consumer acme is suspended \(since /);
    expect(auditOf(suspended.stderr).map((a) => a.action)).toEqual(['consumer.suspend']);
    // Again: nothing changes, nothing audited.
    expect(auditOf((await ok('consumers', 'suspend', 'acme')).stderr)).toEqual([]);
    expect(await json('consumers', 'show', 'acme')).toMatchObject({ status: 'suspended', keys: [] });
    const resumed = await ok('consumers', 'resume', 'acme');
    expect(resumed.stdout).toBe('Consumer acme is active.\n');
    expect(auditOf(resumed.stderr).map((a) => a.action)).toEqual(['consumer.resume']);
    expect(JSON.parse((await client.get(ks.consumerRecord('acme')))!)).not.toHaveProperty('suspendedAt');
  });

  it('update changes what is given and removes what is "none"; an unknown id or plan is one line, exit 1', async () => {
    const updated = await json(
      'consumers',
      'update',
      'acme',
      '--per-minute',
      'none',
      '--per-day',
      '5000',
      '--scopes',
      'none',
      '--limits-expire',
      'never',
      '--plan',
      'free',
    );
    expect(updated).toMatchObject({ plan: 'free', perDay: 5000, perMonth: 50000, updatedAt: expect.any(String) });
    expect(updated).not.toHaveProperty('perMinute');
    expect(updated).not.toHaveProperty('scopes');
    expect(updated).not.toHaveProperty('limitsExpiresAt');
    expectRefused(await run('consumers', 'update', 'nobody', '--name', 'x'), /^error: no consumer with id "nobody"$/);
    expectRefused(await run('consumers', 'update', 'acme', '--plan', 'gold'), /^error: unknown plan "gold"; plans: free, pro$/);
    expectRefused(await run('consumers', 'create', '--id', 'acme', '--name', 'Again', '--plan', 'free'), /^error: a consumer with id "acme" exists already$/);
    expectRefused(await run('consumers', 'show', 'nobody'), /^error: no consumer with id "nobody"$/);
  });

  it('keys join a consumer up to its maxKeys; a move updates both mirrors; --no-consumer detaches, the own plan kept', async () => {
    await ok('consumers', 'create', '--id', 'initech', '--name', 'Initech', '--plan', 'pro');
    const first = await json<{ id: string; consumer: string; plan: string }>('keys', 'create', '--plan', 'free', '--consumer', 'acme');
    const second = await json<{ id: string }>('keys', 'create', '--plan', 'free', '--consumer', 'acme', '--name', 'staging');
    expect(first).toMatchObject({ consumer: 'acme', plan: 'free' });
    expect(await mirrorIds('acme')).toEqual([first.id, second.id].sort());
    const keysBefore = await client.scard(ks.keyIds());
    // maxKeys 2: a third key is refused, and nothing is stored.
    expectRefused(
      await run('keys', 'create', '--plan', 'free', '--consumer', 'acme'),
      /^error: consumer acme has 2 keys \(not revoked\), its maxKeys: no room for another$/,
    );
    expect(await client.scard(ks.keyIds())).toBe(keysBefore);
    expectRefused(await run('keys', 'create', '--plan', 'free', '--consumer', 'nobody'), /^error: no consumer with id "nobody"$/);
    expect(await client.scard(ks.keyIds())).toBe(keysBefore);

    // A key from outside cannot join the full consumer; one already in it can be updated.
    const loose = await json<{ id: string }>('keys', 'create', '--plan', 'pro');
    expectRefused(await run('keys', 'update', loose.id, '--consumer', 'acme'), /no room for another/);
    expect(JSON.parse((await client.get(ks.keyRecord(loose.id)))!)).not.toHaveProperty('consumer');
    await ok('keys', 'update', first.id, '--consumer', 'acme', '--name', 'prod');

    // Move: out of acme's mirror, into initech's, the key's own plan kept.
    const moved = await ok('keys', 'update', first.id, '--consumer', 'initech');
    expect(moved.stdout).toContain('consumer initech: its plan and pool apply');
    expect(moved.stdout).toContain("Limits before: 60/min 1000/day (the key on its own); after: 600/min 100000/day (consumer initech's pool, shared).");
    expect(await mirrorIds('acme')).toEqual([second.id]);
    expect(await mirrorIds('initech')).toEqual([first.id]);
    const record = await client.getBuffer(ks.keyRecord(first.id));
    expect((await client.hgetBuffer(ks.consumerKeys('initech'), first.id))!.equals(record!)).toBe(true);
    expect(JSON.parse(record!.toString())).toMatchObject({ plan: 'free', consumer: 'initech', name: 'prod' });
    expect((await json<{ keys: Array<{ id: string }> }>('consumers', 'show', 'initech')).keys.map((k) => k.id)).toEqual([first.id]);

    // Now acme has room again.
    await ok('keys', 'update', loose.id, '--consumer', 'acme');
    expect(await mirrorIds('acme')).toEqual([loose.id, second.id].sort());

    const detached = await json<Record<string, unknown>>('keys', 'update', first.id, '--no-consumer');
    expect(detached).not.toHaveProperty('consumer');
    expect(detached.plan).toBe('free');
    expect(await mirrorIds('initech')).toEqual([]);
    const shown = await ok('consumers', 'show', 'acme');
    expect(shown.stdout).toContain(second.id);
  });

  it('delete is refused while keys are not revoked (nothing changed); --revoke-keys revokes them, then deletes', async () => {
    const before = await client.get(ks.consumerRecord('acme'));
    const refused = await run('consumers', 'delete', 'acme');
    expectRefused(
      refused,
      /^error: consumer acme has 2 keys that are not revoked \(.+\); revoke them first, or ask for it \(--revoke-keys, revokeKeys=true\)$/,
    );
    expect(auditOf(refused.stderr)).toEqual([]);
    expect(await client.get(ks.consumerRecord('acme'))).toBe(before);
    const keys = await mirrorIds('acme');

    const deleted = await ok('consumers', 'delete', 'acme', '--revoke-keys', '--json');
    expect(JSON.parse(deleted.stdout)).toEqual({ id: 'acme', deleted: true, revokedKeys: keys });
    expect(auditOf(deleted.stderr).map((a) => [a.action, a.keyId ?? a.consumerId])).toEqual([...keys.map((k) => ['revoke', k]), ['consumer.delete', 'acme']]);
    expect(await client.exists(ks.consumerRecord('acme'), ks.consumerKeys('acme'))).toBe(0);
    expect(await client.sismember(ks.consumerIds(), 'acme')).toBe(0);
    for (const id of keys) expect(JSON.parse((await client.get(ks.keyRecord(id)))!)).toMatchObject({ status: 'revoked', consumer: 'acme' });
    // A consumer whose keys are all revoked (or that has none) goes without asking, and its webhook endpoints with it.
    const endpoints = new RedisEndpointStore(client as unknown as RedisCommands, ks);
    const ep = {
      id: 'ep_0123456789abcdef01234567',
      consumer: 'initech',
      url: 'https://hooks.example.com/x',
      types: [],
      secret: 'whsec_x',
      createdAt: '',
      createdBy: 'cli',
    };
    expect(await endpoints.add(ep, 10)).toBe('added');
    const gone = await ok('consumers', 'delete', 'initech');
    expect(gone.stdout).toBe('Deleted consumer initech.\n');
    expect(await endpoints.ofConsumer('initech')).toEqual([]);
    expect(await client.hget(ks.eventEndpoints(), ep.id)).toBeNull();
    expect(auditOf(gone.stderr).map((a) => [a.action, a.endpointId ?? a.consumerId])).toEqual([
      ['webhook.delete', ep.id],
      ['consumer.delete', 'initech'],
    ]);
    expect(gone.stderr).not.toContain('whsec_x');
    expectRefused(await run('consumers', 'delete', 'initech'), /^error: no consumer with id "initech"$/);
  });
});

describe('keys import with a consumer column', () => {
  it('refuses records naming a consumer that is not there or past its maxKeys; --create-consumers creates the missing ones', async () => {
    await ok('consumers', 'create', '--id', 'umbrella', '--name', 'Umbrella', '--plan', 'pro', '--max-keys', '1');
    const sha = (n: number) => n.toString(16).padStart(64, 'a');
    const csv = [
      'id,plan,sha256,consumer',
      `key_imp1,free,${sha(1)},umbrella`,
      `key_imp2,free,${sha(2)},umbrella`,
      `key_imp3,pro,${sha(3)},hooli`,
      `key_imp4,free,${sha(4)},`,
    ].join('\n');
    const file = dir.write('keys.csv', `${csv}\n`);
    const refused = await run('keys', 'import', file);
    expect(refused.code).toBe(1);
    expect(withoutAudit(refused.stderr).split('\n')).toEqual([
      'line 3: consumer umbrella has room for 1 more key (maxKeys 1); this one is past it',
      'line 4: consumer: no consumer with id "hooli"; create it first (consumers create), or import with --create-consumers (createConsumers=true)',
      'error: nothing was imported: every record must pass before any is written (see above)',
    ]);
    expect(await client.exists(ks.keyRecord('key_imp1'))).toBe(0);

    // The dry run says which consumers it would create, and creates none.
    const dry = await run('keys', 'import', file, '--dry-run', '--create-consumers', '--skip-invalid');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('Would create consumer: hooli.');
    // The attach preview: the keys' own limits summed, and the pool they would share.
    expect(dry.stdout).toContain('Consumer hooli (new): 1 key joining; before 600/min 100000/day (their own, summed), after 600/min 100000/day (the pool).');
    expect(dry.stdout).toContain('Consumer umbrella: 1 key joining; before 60/min 1000/day (their own, summed), after 600/min 100000/day (the pool).');
    expect(await client.exists(ks.consumerRecord('hooli'))).toBe(0);

    const done = await ok('keys', 'import', file, '--create-consumers', '--skip-invalid', '--json');
    const report = JSON.parse(done.stdout) as { imported: number; consumersCreated: string[]; refused: Array<{ line: number }> };
    expect(report).toMatchObject({ imported: 3, consumersCreated: ['hooli'], refused: [{ line: 3 }] });
    expect(auditOf(done.stderr).map((a) => a.action)).toEqual(['consumer.create', 'import']);
    expect(JSON.parse((await client.get(ks.consumerRecord('hooli')))!)).toMatchObject({ id: 'hooli', name: 'hooli', plan: 'pro', status: 'active' });
    expect(await mirrorIds('umbrella')).toEqual(['key_imp1']);
    expect(await mirrorIds('hooli')).toEqual(['key_imp3']);
    expect(JSON.parse((await client.get(ks.keyRecord('key_imp4')))!)).not.toHaveProperty('consumer');
    // Importing the same file again changes nothing: a record already there as given, its consumer included.
    const again = await run('keys', 'import', file, '--create-consumers', '--skip-invalid', '--json');
    expect(JSON.parse(again.stdout)).toEqual(expect.objectContaining({ imported: 0, unchanged: 3 }));
    expect(JSON.parse(again.stdout)).not.toHaveProperty('consumersCreated');
  });
});

describe('consumers create --from-metadata: the preview, then --apply does what it said', () => {
  it('groups keys by a metadata field, with limits before (summed) and after (the pool); nothing changes until --apply', async () => {
    const key = async (...args: string[]) => (await json<{ id: string }>('keys', 'create', ...args)).id;
    const a1 = await key('--plan', 'free', '--metadata', '{"customer":"cust_a"}');
    const a2 = await key('--plan', 'free', '--metadata', '{"customer":"cust_a"}');
    const a3 = await key('--plan', 'free', '--per-minute', '10', '--metadata', '{"customer":"cust_a"}');
    const b1 = await key('--plan', 'free', '--metadata', '{"customer":"cust_b"}');
    const revoked = await key('--plan', 'free', '--metadata', '{"customer":"cust_a"}');
    await ok('keys', 'revoke', revoked);
    const bad = await key('--plan', 'free', '--metadata', '{"customer":"Not An Id"}');
    // cust_b exists already, with room for none: its group is refused, nothing of it changes.
    await ok('consumers', 'create', '--id', 'cust_b', '--name', 'B', '--plan', 'pro', '--max-keys', '1');
    await ok('keys', 'create', '--plan', 'free', '--consumer', 'cust_b');
    const before = {
      consumers: (await client.smembers(ks.consumerIds())).sort(),
      records: await Promise.all([a1, a2, a3, b1].map((id) => client.get(ks.keyRecord(id)))),
    };

    const preview = await json<{
      dryRun: boolean;
      groups: Array<{ consumer: string; exists: boolean; keys: string[]; before: object; after: object; refused?: string; estimatedRefusals?: object }>;
      skipped: Array<{ key: string; reason: string }>;
    }>('consumers', 'create', '--from-metadata', 'customer', '--plan', 'free', '--max-keys', '5');
    expect(preview.dryRun).toBe(true);
    expect(preview.groups).toEqual([
      {
        consumer: 'Not An Id',
        exists: false,
        name: 'Not An Id',
        plan: 'free',
        maxKeys: 5,
        keys: [bad],
        keysAlready: 0,
        before: { perMinute: 60, perDay: 1000, perMonth: null },
        after: { perMinute: 60, perDay: 1000, perMonth: null },
        refused: 'not an id a consumer can have (1-64 characters of A-Z a-z 0-9 _ -)',
      },
      {
        consumer: 'cust_a',
        exists: false,
        name: 'cust_a',
        plan: 'free',
        maxKeys: 5,
        keys: [a1, a2, a3].sort(),
        keysAlready: 0,
        before: { perMinute: 130, perDay: 3000, perMonth: null },
        after: { perMinute: 60, perDay: 1000, perMonth: null },
        // What the ledger says the pool would have refused over the last 7 days: these keys sent nothing.
        estimatedRefusals: {
          from: expect.any(String),
          to: expect.any(String),
          requests: 0,
          pointsRefused: 0,
          minute: { limit: 60, pointsRefused: 0 },
          day: { limit: 1000, pointsRefused: 0 },
          hoursAffected: 0,
          hours: [],
          keysAffected: 0,
          keys: [],
        },
      },
      {
        consumer: 'cust_b',
        exists: true,
        name: 'B',
        plan: 'pro',
        maxKeys: 1,
        keys: [b1],
        keysAlready: 1,
        before: { perMinute: 60, perDay: 1000, perMonth: null },
        after: { perMinute: 600, perDay: 100_000, perMonth: null },
        refused: 'it would have 2 keys, more than its maxKeys (1)',
      },
    ]);
    expect(preview.skipped).toEqual([{ key: revoked, reason: 'revoked' }]);
    const table = await ok('consumers', 'create', '--from-metadata', 'customer', '--plan', 'free');
    expect(table.stdout).toContain('Consumers from metadata field "customer" (nothing changed: --apply makes it so):');
    expect(table.stdout).toMatch(/cust_a +yes +free +3 +130\/min 3000\/day +60\/min 1000\/day/);
    // The estimate for each group that would be attached (not the refused ones), and how it is made.
    expect(table.stdout).toContain(
      'Would have been refused over the last 7 days, had the keys shared the pool:\n  cust_a: no requests recorded for its keys\n',
    );
    expect(table.stdout).toContain("Estimated from the usage ledger's hourly counts and peak minutes");
    expect(auditOf(table.stderr)).toEqual([]);
    expect({
      consumers: (await client.smembers(ks.consumerIds())).sort(),
      records: await Promise.all([a1, a2, a3, b1].map((id) => client.get(ks.keyRecord(id)))),
    }).toEqual(before);

    // --apply: what the preview said, and only that.
    const applied = await ok('consumers', 'create', '--from-metadata', 'customer', '--plan', 'free', '--max-keys', '5', '--apply', '--json');
    const answer = JSON.parse(applied.stdout) as typeof preview & {
      applied: Array<{ consumer: string; created: boolean; attached: string[]; failed: unknown[] }>;
    };
    // The same preview (its estimate's period aside: whole hours of when it was asked).
    const unperiod = (groups: typeof preview.groups) =>
      groups.map((g) => ({ ...g, estimatedRefusals: g.estimatedRefusals && { ...g.estimatedRefusals, from: '', to: '' } }));
    expect(unperiod(answer.groups)).toEqual(unperiod(preview.groups));
    expect(answer.applied).toEqual([{ consumer: 'cust_a', created: true, attached: [a1, a2, a3].sort(), failed: [] }]);
    expect(auditOf(applied.stderr).map((a) => a.action)).toEqual(['consumer.create', 'update', 'update', 'update']);
    const made = await json<{ plan: string; maxKeys: number; keys: Array<{ id: string }> }>('consumers', 'show', 'cust_a');
    expect(made).toMatchObject({ plan: 'free', maxKeys: 5 });
    expect(made.keys.map((k) => k.id)).toEqual(preview.groups[1]!.keys);
    expect(await mirrorIds('cust_b')).toHaveLength(1);
    expect(JSON.parse((await client.get(ks.keyRecord(b1)))!)).not.toHaveProperty('consumer');
    // Run again: the keys are in a consumer now, so nothing is left to group but the refused ones.
    const again = await json<typeof preview>('consumers', 'create', '--from-metadata', 'customer', '--plan', 'free');
    expect(again.groups.map((g) => g.consumer)).toEqual(['Not An Id', 'cust_b']);
    expect(again.skipped.filter((k) => k.reason === 'already in consumer cust_a').map((k) => k.key)).toEqual([a1, a2, a3].sort());
  });
});

describe('hostile values on every flag: a usage error (exit 2) in one line, before Redis is asked anything', () => {
  const create = ['consumers', 'create', '--name', 'Hostile', '--plan', 'free'];
  const CASES: Array<[string, string[]]> = [
    ['an id with braces', [...create, '--id', 'a{b}']],
    ['an id with a space', [...create, '--id', 'a b']],
    ['an id of 65 characters', [...create, '--id', 'x'.repeat(65)]],
    ['a name of 201 characters', ['consumers', 'create', '--plan', 'free', '--name', 'n'.repeat(201)]],
    ['an empty name', ['consumers', 'create', '--plan', 'free', '--name', '']],
    ['billingDay 0', [...create, '--billing-day', '0']],
    ['billingDay 32', [...create, '--billing-day', '32']],
    ['billingDay 1.5', [...create, '--billing-day', '1.5']],
    ['a negative limit', [...create, '--per-minute', '-5']],
    ['a limit that is not a number', [...create, '--per-day', 'lots']],
    ['a limit past 10^12', [...create, '--per-month', '10000000000001']],
    ['maxKeys 0', [...create, '--max-keys', '0']],
    ['17 metadata entries', [...create, '--metadata', JSON.stringify(Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`m${i}`, 'v'])))]],
    ['metadata that is an array', [...create, '--metadata', '["a"]']],
    ['metadata nested deep', [...create, '--metadata', `${'{"a":'.repeat(500)}1${'}'.repeat(500)}`]],
    ['101 scopes', [...create, '--scopes', Array.from({ length: 101 }, (_, i) => `r${i}`).join(',')]],
    ['a scope with a space', [...create, '--scopes', '["service:a b"]']],
    ['scopes as a JSON object', [...create, '--scopes', '[{"a":1}]']],
    ['a CIDR with a bad prefix', [...create, '--allowed-cidrs', '10.0.0.0/33']],
    ['a host name as a CIDR', [...create, '--allowed-cidrs', 'example.com']],
    ['a limits end without an offset', [...create, '--limits-expire', '2027-01-01']],
    ['a reason of 201 characters', [...create, '--limits-reason', 'r'.repeat(201)]],
    ['no plan', ['consumers', 'create', '--name', 'x']],
    ['an unknown flag', [...create, '--colour', 'blue']],
    ['show of an id with braces', ['consumers', 'show', '{acme}']],
    ['delete of an id with a space', ['consumers', 'delete', 'a b']],
    ['suspend of an empty id', ['consumers', 'suspend', '']],
    ['update with nothing to change', ['consumers', 'update', 'acme']],
    ['update of billingDay 32', ['consumers', 'update', 'acme', '--billing-day', '32']],
    ['--from-metadata with a bad field name', ['consumers', 'create', '--from-metadata', 'a b', '--plan', 'free']],
    ['--from-metadata without a plan', ['consumers', 'create', '--from-metadata', 'customer']],
    ['--from-metadata with --name', ['consumers', 'create', '--from-metadata', 'customer', '--plan', 'free', '--name', 'x']],
    ['--apply without --from-metadata', [...create, '--apply']],
    ['a key with a consumer id with braces', ['keys', 'create', '--plan', 'free', '--consumer', 'c}x']],
    ['a key update with a consumer id with a space', ['keys', 'update', 'key_x', '--consumer', 'a b']],
  ];

  it.each(CASES)('%s', async (_what, argv) => {
    let err = '';
    let out = '';
    // In process, with a Redis nobody listens on: a usage error never gets as far as connecting.
    const code = await runProgram([...argv, '--redis', 'redis://127.0.0.1:1/0', '--config', configFile], {
      out: (s) => void (out += s),
      err: (s) => void (err += s),
    });
    expect(code, err).toBe(2);
    expect(err.trimEnd().split('\n'), err).toHaveLength(1);
    expect(out).toBe('');
  });

  it('stored nothing', async () => {
    expect((await client.smembers(ks.consumerIds())).sort()).toEqual([expect.stringMatching(/^con_/), 'cust_a', 'cust_b', 'hooli', 'umbrella']);
    expect(await client.keys(`${PREFIX}consumer:{c:a*`)).toEqual([]);
  });
});
