// `tollgate config check` and `serve` with a bad file: every problem in one pass (wrong types, unknown fields, and the
// cross-field rules whose sections parsed), one line each with its path, a near field name suggested for a misspelt
// one; exit 1. Run as users run them: the built CLI as a child process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, runCli, tempDir } from './helpers/cli.js';
import { knownFieldsAt, nearestField } from '../src/config/field-names.js';
import { configSchema } from '../src/config/schema.js';

const dir = tempDir();
beforeAll(() => assertBuilt());
afterAll(() => dir.remove());

const SHA_A = '0'.repeat(64);
const SHA_B = '1'.repeat(64);

// Wrong types (server.port, plans.pro.perDay), misspelt and unknown fields at three depths, and two cross-field
// mistakes in sections that parsed (a duplicate key id; a route limit for a plan that does not exist).
const BAD = `
server: { port: "eighty", prot: 3 }
upstrem: { url: http://127.0.0.1:1 }
redis: { url: "redis://app:hunter2-secret@127.0.0.1:1/0", prefx: "a:" }
plans:
  free: { perMinute: 60, perDay: 1000, perDya: 5 }
routes:
  - { path: /v1/a, mehtod: GET }
  - { path: /v1/b, limits: { gold: { perMinute: 1 } } }
keys:
  - { id: a, plan: free, sha256: "${SHA_A}" }
  - { id: a, plan: free, sha256: "${SHA_B}" }
zzzzzz: 1
`;

const EXPECTED = [
  'server.port: expected number, got "eighty"',
  'server.prot: unknown field; did you mean port?',
  'upstrem: unknown field; did you mean upstream?',
  'redis.prefx: unknown field; did you mean prefix?',
  'plans.free.perDya: unknown field; did you mean perDay?',
  'routes[0].mehtod: unknown field; did you mean method?',
  'zzzzzz: unknown field',
  'keys[1].id: duplicate key id, got "a"',
];

function problemLines(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('  '))
    .map((l) => l.trim());
}

describe('config check: every problem in one pass', () => {
  it('lists wrong types, unknown fields with suggestions and cross-field rules together, then exits 1', async () => {
    const file = dir.write('bad.yaml', BAD);
    const r = await runCli(['config', 'check', '--config', file]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const lines = problemLines(r.stderr);
    for (const e of EXPECTED) expect(lines).toContain(e);
    // The route limit names a plan that is not configured: a cross-field rule, run although other sections failed.
    expect(lines.some((l) => l.startsWith('routes[1].limits.gold:'))).toBe(true);
    expect(r.stderr.split('\n')[0]).toBe(`${file}: invalid configuration (${lines.length} problems)`);
    // One line per problem, each starting with its path; no stack trace, no secret.
    for (const l of lines) expect(l).toMatch(/^[A-Za-z][\w-]*(\.[\w-]+|\[\d+\])*: \S/);
    expect(r.stderr).not.toContain('hunter2');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('a rule that reads a section that failed to parse waits for it (no guess from a broken section)', async () => {
    // plans is not a mapping: "unknown plan" for the key would be a guess, so only the plans error is given.
    const file = dir.write(
      'plans-broken.yaml',
      `plans: 5\nkeys:\n  - { id: a, plan: free, sha256: "${SHA_A}" }\n  - { id: a, plan: free, sha256: "${SHA_B}" }\n`,
    );
    const r = await runCli(['config', 'check', '--config', file]);
    expect(r.code).toBe(1);
    const lines = problemLines(r.stderr);
    expect(lines).toContain('plans: expected record, got 5');
    // The duplicate id reads only keys, which parsed: still reported in the same pass.
    expect(lines).toContain('keys[1].id: duplicate key id, got "a"');
    expect(lines.some((l) => l.includes('unknown plan'))).toBe(false);
  });

  it('serve with the same file prints the same full list, one line per problem, and exits 1', async () => {
    const file = dir.write('bad-serve.yaml', BAD);
    const check = await runCli(['config', 'check', '--config', file]);
    const serve = await runCli(['serve', '--config', file]);
    expect(serve.code).toBe(1);
    expect(problemLines(serve.stderr)).toEqual(problemLines(check.stderr));
    expect(serve.stderr).not.toContain('hunter2');
  });

  it('a good file still passes with exit 0', async () => {
    const r = await runCli(['config', 'check', '--config', 'config/gateway.yaml']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/: OK \(/);
  });
});

describe('did you mean', () => {
  it("takes the names from the schema at the field's own place", () => {
    expect(knownFieldsAt(configSchema, ['server'])).toContain('port');
    expect(knownFieldsAt(configSchema, ['routes', 0])).toContain('method');
    expect(knownFieldsAt(configSchema, ['plans', 'any-name'])).toContain('perDay');
    expect(knownFieldsAt(configSchema, [])).toContain('upstream');
    expect(knownFieldsAt(configSchema, ['nope', 'deeper'])).toEqual([]);
  });

  it('suggests near slips only, never an unrelated word', () => {
    const server = knownFieldsAt(configSchema, ['server']);
    expect(nearestField('prot', server)).toBe('port');
    expect(nearestField('PORT', server)).toBe('port');
    expect(nearestField('hots', server)).toBe('host');
    expect(nearestField('workrs', server)).toBe('workers');
    expect(nearestField('zzzz', server)).toBeUndefined();
    expect(nearestField('listen', server)).toBeUndefined();
    expect(nearestField('nope', knownFieldsAt(configSchema, []))).toBeUndefined();
    expect(nearestField('', server)).toBeUndefined();
  });
});

describe('plans.<plan>.shadow.enforceFrom: when the candidate limits are announced to be enforced', () => {
  const config = (enforceFrom: unknown): string =>
    dir.write(
      `enforce-from-${Math.random().toString(36).slice(2)}.yaml`,
      `upstream: { url: http://127.0.0.1:1 }\nplans:\n  gold: { perMinute: 10, perDay: 1000, shadow: { perMinute: 6, enforceFrom: ${JSON.stringify(enforceFrom)} } }\n`,
    );

  it('takes a date or a date-time with its offset; a coming one is said nowhere', async () => {
    for (const date of ['2999-01-15', '2999-01-15T09:30:00Z', '2999-01-15T09:30:00+02:00']) {
      const r = await runCli(['config', 'check', '--config', config(date)]);
      expect(r.code, date).toBe(0);
      expect(r.stderr, date).not.toContain('enforceFrom');
    }
  });

  it('refuses what is not an ISO-8601 date, naming the field', async () => {
    for (const bad of ['2999-13-01', 'next month', '15/01/2999', '2999-01-15T09:30:00', 20990115]) {
      const r = await runCli(['config', 'check', '--config', config(bad)]);
      expect(r.code, String(bad)).toBe(1);
      expect(problemLines(r.stderr).join('\n'), String(bad)).toMatch(
        /^plans\.gold\.shadow\.enforceFrom: expected an ISO-8601 date such as 2027-01-15, or a date-time such as 2027-01-15T00:00:00Z/m,
      );
    }
  });

  it("a date alone is no candidate limit; a route entry's candidates take no date", async () => {
    const alone = dir.write(
      'enforce-from-alone.yaml',
      'upstream: { url: http://127.0.0.1:1 }\nplans:\n  gold: { perMinute: 10, perDay: 1000, shadow: { enforceFrom: 2999-01-15 } }\n',
    );
    const r = await runCli(['config', 'check', '--config', alone]);
    expect(r.code).toBe(1);
    expect(problemLines(r.stderr)).toContain('plans.gold.shadow: expected perMinute and/or perDay, got a mapping');
    const route = dir.write(
      'enforce-from-route.yaml',
      'upstream: { url: http://127.0.0.1:1 }\nplans:\n  gold: { perMinute: 10, perDay: 1000 }\nroutes:\n  - { path: /v1/a, limits: { gold: { perMinute: 5, shadow: { perMinute: 3, enforceFrom: 2999-01-15 } } } }\n',
    );
    const rr = await runCli(['config', 'check', '--config', route]);
    expect(rr.code).toBe(1);
    expect(problemLines(rr.stderr).some((l) => l.startsWith('routes[0].limits.gold.shadow.enforceFrom: unknown field'))).toBe(true);
  });

  it('a past one is a warning, not a refusal: the candidates are still in shadow', async () => {
    const r = await runCli(['config', 'check', '--config', config('2020-01-15')]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/: OK \(1 plans/);
    expect(r.stderr).toContain(
      'warning: plans.gold.shadow.enforceFrom 2020-01-15 is past, and the candidate limits are still in shadow: enforce them in the plan, or move the date\n',
    );
  });
});
