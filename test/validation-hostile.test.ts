// A hostile `pattern` in a service's OpenAPI document, through the built CLI's `tollgate serve`: `^(a+)+$` with a
// 31-character value took V8's backtracking engine 15 seconds on the event loop, during which every other key's
// request to every other route waited. Here the same request is answered 400 in well under a second while another
// key's probe to another service is answered as quickly, and `config check` names a pattern the linear-time engine
// cannot run.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey, hashKey } from '../src/keys/format.js';
import { assertBuilt, runCli, startServe, tempDir, type CliProcess } from './helpers/cli.js';
import { TestUpstream } from './helpers/upstream.js';

const KEY_A = generateKey();
const KEY_B = generateKey();

const doc = {
  openapi: '3.1.0',
  info: { title: 'forms', version: '1' },
  security: [{ bearer: [] }],
  components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
  paths: {
    '/forms': {
      post: {
        operationId: 'submitForm',
        parameters: [{ name: 'code', in: 'query', schema: { type: 'string', pattern: '^(a+)+$' } }],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { type: 'object', properties: { name: { type: 'string', pattern: '^(a+)+$' } } } } },
        },
        responses: { '200': { description: 'ok' } },
      },
    },
  },
};

let up: TestUpstream;
let dir: ReturnType<typeof tempDir>;
let gw: { proc: CliProcess; url: string };

beforeAll(async () => {
  assertBuilt();
  up = await TestUpstream.start();
  dir = tempDir();
  dir.write('forms.yaml', doc);
  gw = await startServe(
    dir.write('gateway.yaml', {
      server: { port: 0 },
      keys: [
        { id: 'attacker', plan: 'free', sha256: hashKey(KEY_A) },
        { id: 'bystander', plan: 'free', sha256: hashKey(KEY_B) },
      ],
      services: {
        forms: { targets: [up.url], openapi: { file: 'forms.yaml', basePath: '/f', validate: 'enforce' } },
        other: { targets: [up.url] },
      },
      routes: [{ method: 'GET', path: '/probe/*', service: 'other' }],
    }),
    60_000,
  );
}, 90_000);

afterAll(async () => {
  // A gateway stuck in a backtracking match ignores SIGTERM: stop() kills it after its grace.
  await gw?.proc.stop(2_000);
  await up?.close();
  dir?.remove();
});

/** Sends a request and times it; an answer that does not come within `limitMs` is a failure, not a hang. */
async function timed(url: string, init: RequestInit, limitMs: number): Promise<{ status: number; body: string; ms: number }> {
  const started = performance.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(limitMs) });
  const body = await res.text();
  return { status: res.status, body, ms: performance.now() - started };
}

describe('a backtracking pattern in the document', () => {
  it("answers '^(a+)+$' against a 31+ character value in well under a second, and another key's probe to another route is unaffected", async () => {
    // Warm both paths first: the operation's schemas compile on its first request.
    expect((await timed(`${gw.url}/probe/x`, { headers: { authorization: `Bearer ${KEY_B}` } }, 5_000)).status).toBe(200);
    const warm = await timed(
      `${gw.url}/f/forms`,
      { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: '{"name":"aaa"}' },
      5_000,
    );
    expect(warm.status, warm.body).toBe(200);
    const quiet = await timed(`${gw.url}/probe/x`, { headers: { authorization: `Bearer ${KEY_B}` } }, 5_000);

    for (const length of [31, 40, 5_000]) {
      const hostile = 'a'.repeat(length) + '!';
      const attack = timed(
        `${gw.url}/f/forms?code=${hostile}`,
        { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: hostile }) },
        3_000,
      );
      // The bystander's probe leaves while the attack is being judged.
      await new Promise((r) => setTimeout(r, 5));
      const probe = timed(`${gw.url}/probe/x`, { headers: { authorization: `Bearer ${KEY_B}` } }, 3_000);
      const [a, p] = await Promise.all([attack, probe]);
      expect(a.status, a.body).toBe(400);
      const problems = (JSON.parse(a.body) as { problems: Array<{ path: string; message: string }> }).problems;
      expect(problems.map((x) => x.path).sort()).toEqual(['/body/name', '/query/code']);
      expect(a.ms, `the hostile request (${length} characters) took ${a.ms} ms`).toBeLessThan(1_000);
      expect(p.status).toBe(200);
      // Unaffected: as quick as a probe on a quiet gateway, within a margin a loaded machine needs.
      expect(p.ms, `the probe took ${p.ms} ms (${quiet.ms} ms on a quiet gateway)`).toBeLessThan(Math.max(1_000, quiet.ms * 20));
    }
  });

  it('refuses a value longer than the engine matches, naming why', async () => {
    const long = 'a'.repeat(10_001);
    const r = await timed(
      `${gw.url}/f/forms`,
      { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: long }) },
      5_000,
    );
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toMatchObject({ problems: [{ path: '/body/name', message: expect.stringContaining('10000') as unknown }] });
  });
});

describe('config check', () => {
  it('warns about a pattern the linear-time engine cannot run, naming the operation; its validation is off', async () => {
    const d = tempDir();
    try {
      const bad = structuredClone(doc);
      bad.paths['/forms'].post.parameters[0]!.schema.pattern = '^(?=a)a+$';
      d.write('forms.yaml', bad);
      const file = d.write('gateway.yaml', {
        services: { forms: { targets: ['http://127.0.0.1:9'], openapi: { file: 'forms.yaml', validate: 'enforce' } } },
      });
      const r = await runCli(['config', 'check', '--config', file]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(
        /warning: forms\.yaml#\/paths\/~1forms\/post: its description cannot be applied, so request validation is off for this operation: pattern "\^\(\?=a\)a\+\$" cannot be matched in linear time/,
      );
    } finally {
      d.remove();
    }
  });
});
