// Fuzz: Authorization values against a real listening gateway (docs: "The request path", "Error codes"). Every byte 0x00-0xFF
// inside the token, random token68 and non-token68 strings, huge values, repeated headers, scheme spellings.
// Expected: 200 for the valid key only, 401 missing_api_key / invalid_api_key (JSON error body, WWW-Authenticate)
// for everything else the parser accepts, and Node's own 400 (illegal bytes) or 431 (header section over Node's
// 16 KB limit) for what it refuses. Never a 5xx, never a hang, never the key in an answer or upstream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  TOKEN68,
  assertStillServing,
  caseId,
  checkResponse,
  errorCode,
  exchange,
  fromNode,
  fuzzCases,
  fuzzSeed,
  MAX_HEADER_BYTES,
  oneAnswer,
  runCases,
  startFuzzGateway,
  statuses,
  type Exchange,
  type FuzzCase,
  type FuzzGateway,
  type Rng,
  type SeenRequest,
} from './helpers/fuzz.js';

const SEED = fuzzSeed();

let f: FuzzGateway;
beforeAll(async () => {
  f = await startFuzzGateway();
});
afterAll(async () => {
  await f?.close();
});

/** Bytes llhttp refuses in a header value: controls other than HTAB, and DEL. CR and LF end the line early. */
function illegalInValue(b: number): boolean {
  return (b < 0x20 && b !== 0x09) || b === 0x7f;
}

type Outcome = 'ok' | 'missing_api_key' | 'invalid_api_key';

/** RFC 6750 §2.1, written independently of the gateway's parser: what one Authorization value must get. */
function oracle(value: string, key: string): Outcome {
  const v = value.replace(/^[ \t]+|[ \t]+$/g, ''); // Node strips OWS around a field value
  if (!/^bearer(?: |$)/i.test(v)) return 'missing_api_key'; // no header, or another scheme: no bearer credentials
  const m = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(v);
  return m && m[1] === key ? 'ok' : 'invalid_api_key';
}

interface AuthCase {
  kind: string;
  /** Authorization values, in order (Node keeps the first of repeated Authorization headers). */
  values: string[];
}

/** The request for one case: one line per Authorization value, the case id for upstream attribution. */
function authCase(c: AuthCase, index: number, key: string): FuzzCase {
  const requestId = caseId('auth', index);
  const head = `GET /v1/fuzz/auth/${index} HTTP/1.1\r\nHost: fuzz.test\r\nX-Request-Id: ${requestId}\r\n`;
  const auth = c.values.map((v) => `Authorization: ${v}\r\n`).join('');
  const bytes = Buffer.from(`${head}${auth}\r\n`, 'latin1');
  const headerBytes = bytes.length - 2;
  const illegal = c.values.some((v) => [...v].some((ch) => illegalInValue(ch.charCodeAt(0))));
  const want: Outcome = oracle(c.values[0] ?? '', key);
  return {
    kind: c.kind,
    bytes,
    requestId,
    opts: { responses: 1, timeoutMs: 3000 },
    check(ex: Exchange, seen: SeenRequest[]): string[] {
      const r = ex.responses[0];
      // Over Node's header limit: Node's own 431 (or its 400 when an illegal byte came first). Near the limit the
      // exact count depends on how llhttp tallies line ends, so both answers are fine there.
      if (headerBytes > MAX_HEADER_BYTES + 64 || (illegal && fromNode(r))) {
        const problems = oneAnswer(ex, statuses(400, 431));
        if (r && !fromNode(r)) problems.push(`expected Node's own 400/431, got the gateway's ${r.status}`);
        if (seen.length) problems.push('the upstream was called');
        return problems;
      }
      const nearLimit = headerBytes > MAX_HEADER_BYTES - 64;
      if (nearLimit && fromNode(r)) return oneAnswer(ex, statuses(431));
      if (illegal) return [`a value with an illegal byte got the gateway's ${r?.status ?? 'nothing'}, not Node's 400`];
      if (want === 'ok') {
        const problems = oneAnswer(ex, statuses(200));
        if (seen.length !== 1) problems.push(`upstream saw ${seen.length} requests, expected 1`);
        for (const s of seen) {
          if (s.headers.authorization !== undefined) problems.push('Authorization reached the upstream (hideCredentials)');
          if (s.headers['x-consumer-id'] !== f.keyId) problems.push(`upstream X-Consumer-Id ${String(s.headers['x-consumer-id'])}`);
          if (s.headers.host !== f.upstreamHost) problems.push(`upstream Host ${String(s.headers.host)}`);
        }
        return problems;
      }
      const problems = oneAnswer(ex, statuses(401));
      if (seen.length) problems.push(`the upstream was called for a ${want}`);
      if (r && r.status === 401) {
        if (errorCode(r) !== want) problems.push(`code ${errorCode(r)}, expected ${want}`);
        const challenge = want === 'missing_api_key' ? 'Bearer realm="tollgate"' : 'Bearer realm="tollgate", error="invalid_token"';
        if (r.headers['www-authenticate'] !== challenge) problems.push(`WWW-Authenticate ${JSON.stringify(r.headers['www-authenticate'])}`);
        if (r.body.includes(f.key)) problems.push('the key is echoed in the body');
      }
      return problems;
    },
  };
}

/** A random spelling of the scheme: the case varies, the letters do not. */
function scheme(rng: Rng): string {
  return [...'Bearer'].map((ch) => (rng.bool() ? ch.toUpperCase() : ch.toLowerCase())).join('');
}

function mutateKey(rng: Rng, key: string): string {
  const at = rng.range(3, key.length - 1); // keep "tg_" most of the time so the checksum path is exercised
  const ch = rng.pick([...TOKEN68]);
  switch (rng.int(3)) {
    case 0:
      return key[at] === ch ? key.slice(0, at) + (ch === 'A' ? 'B' : 'A') + key.slice(at + 1) : key.slice(0, at) + ch + key.slice(at + 1);
    case 1:
      return key.slice(0, at) + ch + key.slice(at);
    default:
      return key.slice(0, at) + key.slice(at + 1);
  }
}

/** The generators of random cases, weighted by how many slots of the pick list they take. */
function randomCase(rng: Rng, key: string): AuthCase {
  const gen = rng.pick(['valid', 'valid', 'mutated', 'mutated', 'token68', 'printable', 'bytes', 'big', 'huge', 'repeated', 'odd'] as const);
  switch (gen) {
    case 'valid': {
      // Scheme case, 1-3 spaces, trailing OWS: all must authenticate.
      const pad = rng.pick(['', ' ', '  ', '\t', ' \t ']);
      const lead = rng.pick(['', ' ', '\t']);
      return { kind: 'valid-spelling', values: [`${lead}${scheme(rng)}${' '.repeat(rng.range(1, 3))}${key}${pad}`] };
    }
    case 'mutated':
      return { kind: 'mutated-key', values: [`${scheme(rng)} ${mutateKey(rng, key)}`] };
    case 'token68':
      return { kind: 'random-token68', values: [`${scheme(rng)} ${rng.string(TOKEN68, rng.range(1, 200))}${'='.repeat(rng.int(3))}`] };
    case 'printable': {
      let s = '';
      const n = rng.range(1, 120);
      for (let i = 0; i < n; i++) s += String.fromCharCode(rng.bool(0.85) ? rng.range(0x20, 0x7e) : rng.range(0x80, 0xff));
      return { kind: 'random-printable', values: [rng.bool() ? `${scheme(rng)} ${s}` : s] };
    }
    case 'bytes':
      return { kind: 'random-bytes', values: [`${scheme(rng)} ${rng.bytes(rng.range(1, 64)).toString('latin1').replace(/\r\n/g, '\r')}`] };
    case 'big':
      // 8 KB to just under Node's limit: must still be a clean 401 (the gateway handles big values).
      return { kind: 'big-8k+', values: [`${scheme(rng)} ${rng.string(TOKEN68, rng.range(8192, MAX_HEADER_BYTES - 300))}`] };
    case 'huge':
      // Past Node's header limit: Node's own 431, the gateway never sees it.
      return { kind: 'huge-over-limit', values: [`${scheme(rng)} ${rng.string(TOKEN68, rng.range(MAX_HEADER_BYTES + 100, 80_000))}`] };
    case 'repeated': {
      const pool = [`Bearer ${key}`, `Bearer ${mutateKey(rng, key)}`, 'Basic dXNlcjpwYXNz', 'Bearer', '', `bearer ${key}`, `Bearer ${key}, Bearer x`];
      return { kind: 'repeated-header', values: Array.from({ length: rng.range(2, 4) }, () => rng.pick(pool)) };
    }
    default: {
      const odd = [
        '',
        ' ',
        'Bearer',
        'Bearer ',
        'bearer',
        'BEARER',
        'Bearer  ',
        'Bearer\t',
        `Bearer\t${key}`,
        `Bearer=${key}`,
        `Bearer,${key}`,
        `Bearer ${key} extra`,
        `Bearer ${key},`,
        `Bearer "${key}"`,
        `Bearer ${key}=`,
        `Bearer ${key}==`,
        `Bearer =`,
        `${key}`,
        `Basic ${Buffer.from(`x:${key}`).toString('base64')}`,
        `Token ${key}`,
        `Bearerx ${key}`,
        `Bear ${key}`,
        `Bearer ${key.toLowerCase()}`,
        `Bearer ${key.slice(0, -1)}`,
        `Bearer tg_`,
        `Bearer tg_${'0'.repeat(49)}`,
        `Bearer ${key}${key}`,
        `Bearer ${'/'.repeat(50)}`,
        'Bearer ============',
        `Digest username="${key}"`,
        `Bearer ${key}\t`,
        `\tBearer ${key}`,
      ];
      return { kind: 'odd-shape', values: [rng.pick(odd)] };
    }
  }
}

describe(`fuzz: Authorization values (FUZZ_SEED=${SEED})`, () => {
  it("every byte 0x00-0xFF inside the token (prefix, middle, end) gets 401 or Node's 400, never the upstream", async () => {
    const placements = ['prefix', 'middle', 'end'] as const;
    const summary = await runCases(f, SEED, 'auth', 256 * placements.length, (rng, i) => {
      const b = i % 256;
      const where = placements[Math.floor(i / 256)]!;
      const ch = String.fromCharCode(b);
      const at = where === 'prefix' ? 0 : where === 'end' ? f.key.length : rng.range(1, f.key.length - 1);
      // CR LF would end the header and start the body: the framing cases cover that; here a lone byte goes in.
      return authCase({ kind: `byte-${where}`, values: [`Bearer ${f.key.slice(0, at)}${ch}${f.key.slice(at)}`] }, i, f.key);
    });
    expect(summary.cases).toBe(768);
    // The bytes Node accepts were judged by the gateway: mostly 401s. The only 200s are a space after "Bearer " and
    // SP/HTAB at the very end (OWS that Node strips): the oracle expects exactly those.
    expect(summary.byStatus['401']).toBeGreaterThan(500);
    expect(summary.byStatus['200'] ?? 0).toBeLessThanOrEqual(3);
    await assertStillServing(f, SEED, 'the byte sweep');
  }, 60_000);

  it(`random Authorization values (${fuzzCases(1500)} cases): 200 only for the key, 401 with the right code otherwise`, async () => {
    const count = fuzzCases(1500);
    const summary = await runCases(f, SEED, 'auth', count, (rng, i) => authCase(randomCase(rng, f.key), 10_000 + i, f.key), {
      stream: 1,
      budgetMs: 20_000 + count * 40,
    });
    expect(summary.cases).toBe(count);
    // Every generator ran and both outcomes happened: the fuzz is not silently testing only one path.
    for (const kind of ['valid-spelling', 'mutated-key', 'random-token68', 'big-8k+', 'huge-over-limit', 'repeated-header', 'odd-shape']) {
      expect(summary.byKind[kind], kind).toBeGreaterThan(0);
    }
    expect(summary.byStatus['200']).toBeGreaterThan(0);
    expect(summary.byStatus['431']).toBeGreaterThan(0);
    await assertStillServing(f, SEED, 'random Authorization values');
  }, 120_000);

  it('the fixed odd shapes each get the documented answer', async () => {
    const k = f.key;
    const table: Array<[string[], number, string | undefined]> = [
      [[], 401, 'missing_api_key'],
      [[''], 401, 'missing_api_key'],
      [['Bearer'], 401, 'invalid_api_key'],
      [['bearer   '], 401, 'invalid_api_key'],
      [[`BEARER ${k}`], 200, undefined],
      [[`bearer ${k}`], 200, undefined],
      [[`Bearer\t${k}`], 401, 'missing_api_key'], // RFC 6750: 1*SP only; a tab is no bearer credential
      [[`Basic ${k}`], 401, 'missing_api_key'],
      [[`Bearer ${k}`, 'Bearer nope'], 200, undefined], // Node keeps the first Authorization line
      [['Bearer nope', `Bearer ${k}`], 401, 'invalid_api_key'],
      [[`Bearer ${'A'.repeat(9000)}`], 401, 'invalid_api_key'],
      [[`Bearer ${'A'.repeat(20_000)}`], 431, undefined],
    ];
    for (const [values, status, code] of table) {
      const c = authCase({ kind: 'table', values }, 90_000 + table.findIndex((t) => t[0] === values), k);
      const ex = await exchange(f.port, c.bytes, c.opts);
      const r = ex.responses[0];
      expect(r?.status, JSON.stringify(values).slice(0, 80)).toBe(status);
      expect(checkResponse(r!, statuses(status)), JSON.stringify(values).slice(0, 80)).toEqual([]);
      if (code) expect(errorCode(r)).toBe(code);
    }
    await assertStillServing(f, SEED, 'the fixed shapes');
  }, 120_000);
});
