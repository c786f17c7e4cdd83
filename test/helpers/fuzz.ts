// Seeded fuzzing against a real listening gateway: a tiny PRNG (mulberry32), a gateway started the way
// `tollgate serve` starts it (composeGateway + startGateway on the memory stores, a static key in `keys:`), a
// TestUpstream behind it, a "canary" server that must never be contacted, and a raw-bytes client over net.Socket
// so malformed requests really reach Node's parser.
//
// FUZZ_SEED=<int> replays a run (every failure message names the seed and the case); FUZZ_SEED=random picks one.
// FUZZ_CASES=<n> sets the case count of every random loop (default: each loop's own, 600-1500; about 5,000 cases
// in all, ~20 s). The byte sweeps and fixed tables always run whole.
// FUZZ_VERBOSE=1 prints each loop's case kinds and answers.
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { ERRORS } from '../../src/http/errors.js';
import { startGateway, type RunningGateway } from '../../src/server/gateway-server.js';
import { generateKey, hashKey } from '../../src/keys/format.js';
import { createLogger } from '../../src/observability/logger.js';
import { logRedaction } from '../../src/http/credentials.js';
import { composeGateway } from '../../src/compose.js';
import { leaksIn, parseResponse, testConfig, type RawResponse } from './gateway.js';
import { TestUpstream, type SeenRequest } from './upstream.js';

export type { SeenRequest };

// ---------------------------------------------------------------------------------------------------------------
// Seeds and the PRNG

const DEFAULT_SEED = 0x70_11_6a_7e;

/** The run's seed: FUZZ_SEED (an integer, or "random"), else a fixed default so CI runs are reproducible. */
export function fuzzSeed(): number {
  const given = process.env.FUZZ_SEED?.trim();
  if (!given) return DEFAULT_SEED;
  if (given === 'random') return (Math.random() * 2 ** 32) >>> 0;
  const n = Number(given);
  if (!Number.isInteger(n)) throw new Error(`FUZZ_SEED must be an integer or "random", got ${JSON.stringify(given)}`);
  return n >>> 0;
}

/** How many random cases a loop runs: FUZZ_CASES when set, else the loop's default. */
export function fuzzCases(defaultCount: number): number {
  const given = Number(process.env.FUZZ_CASES);
  return Number.isInteger(given) && given > 0 ? given : defaultCount;
}

/** mulberry32: 32-bit state, good enough spread for test inputs, trivially reproducible. */
export class Rng {
  private state: number;
  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }
  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  /** An integer in [lo, hi]. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }
  bool(p = 0.5): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  /** `length` characters drawn from `alphabet`. */
  string(alphabet: string, length: number): string {
    let out = '';
    for (let i = 0; i < length; i++) out += alphabet[this.int(alphabet.length)];
    return out;
  }
  bytes(length: number): Buffer {
    const b = Buffer.alloc(length);
    for (let i = 0; i < length; i++) b[i] = this.int(256);
    return b;
  }
  /** A child generator for one case, so a case can be replayed from (seed, index) alone. */
  fork(index: number): Rng {
    return new Rng((this.seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
  }
}

export const TOKEN68 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/';
/** RFC 9110 tchar: what a method or a header name may be made of. */
export const TCHAR = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** Characters llhttp accepts unescaped in a request target. */
export const PATH_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/%?#[]";

// ---------------------------------------------------------------------------------------------------------------
// The gateway under test

export interface FuzzGateway {
  gw: RunningGateway;
  port: number;
  upstream: TestUpstream;
  /** A second server whose address the fuzz cases name as a target; nothing may ever reach it. */
  canary: TestUpstream;
  /** The static key's plaintext and id. */
  key: string;
  keyId: string;
  /** `host:port` the gateway must send upstream as Host. */
  upstreamHost: string;
  /** Log lines at error level, as parsed JSON. */
  errorLogs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export interface FuzzGatewayOptions {
  server?: Record<string, unknown>;
  upstream?: Record<string, unknown>;
}

export async function startFuzzGateway(opts: FuzzGatewayOptions = {}): Promise<FuzzGateway> {
  const upstream = await TestUpstream.start();
  const canary = await TestUpstream.start();
  const key = generateKey();
  const keyId = 'fuzz-key';
  const config = testConfig({
    server: {
      host: '127.0.0.1',
      port: 0,
      maxBodyBytes: 65_536,
      headersTimeoutMs: 1000,
      requestTimeoutMs: 2000,
      keepAliveTimeoutMs: 1000,
      drainTimeoutMs: 500,
      ...opts.server,
    },
    upstream: { url: upstream.url, timeoutMs: 3000, ...opts.upstream },
    log: { level: 'error' },
    // Limits far out of reach: the fuzz checks parsing and routing, not metering.
    plans: { fuzz: { perMinute: 1_000_000_000, perDay: 1_000_000_000 } },
    anonymous: { perMinute: 1_000_000_000 },
    keys: [{ id: keyId, plan: 'fuzz', sha256: hashKey(key) }],
    routes: [{ method: 'GET', path: '/v1/retired/:id', deprecation: '2020-01-01T00:00:00Z', sunset: '2021-01-01T00:00:00Z', afterSunset: 'gone' }],
  });
  const errorLogs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        try {
          errorLogs.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          errorLogs.push({ msg: line });
        }
      }
      cb();
    },
  });
  const logger = createLogger('error', sink, logRedaction());
  const gw = await startGateway({ gateway: await composeGateway({ config, logger }), logger });
  return {
    gw,
    port: gw.port,
    upstream,
    canary,
    key,
    keyId,
    upstreamHost: `127.0.0.1:${upstream.port}`,
    errorLogs,
    async close() {
      await gw.shutdown();
      await upstream.close();
      await canary.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Raw exchanges

export interface Exchange {
  /** Every byte the gateway sent back. */
  data: Buffer;
  /** The gateway closed the connection (as opposed to our deadline ending the exchange). */
  closedByPeer: boolean;
  /** The exchange hit its deadline with the connection still open. */
  timedOut: boolean;
  elapsedMs: number;
  responses: RawResponse[];
  /** Bytes after the last complete response that do not form one. */
  trailing: string;
  /** The request was a HEAD: answers carry no body. */
  head: boolean;
}

export interface ExchangeOptions {
  /** Hard bound on the whole exchange. */
  timeoutMs?: number;
  /** Half-close after writing (default false). Node aborts requests still in flight when the client half-closes. */
  end?: boolean;
  /** Stop as soon as this many complete responses arrived. */
  responses?: number;
  /** Responses to HEAD carry no body. */
  head?: boolean;
}

/** Opens a connection, writes `bytes` (parts are written in order, as separate writes), collects the answer. */
export function exchange(port: number, bytes: Buffer | string | Array<Buffer | string>, opts: ExchangeOptions = {}): Promise<Exchange> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let done = false;
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true); // a request written in parts must not wait on Nagle and delayed ACKs
    const finish = (closedByPeer: boolean, timedOut: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const data = Buffer.concat(chunks);
      const { responses, trailing } = parseAll(data, closedByPeer, opts.head);
      resolve({ data, closedByPeer, timedOut, elapsedMs: Date.now() - started, responses, trailing, head: opts.head ?? false });
    };
    const timer = setTimeout(() => finish(false, true), timeoutMs);
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
      if (opts.responses !== undefined && parseAll(Buffer.concat(chunks), false, opts.head).responses.length >= opts.responses) finish(false, false);
    });
    socket.on('error', () => finish(true, false));
    socket.on('close', () => finish(true, false));
    socket.on('connect', () => {
      for (const part of Array.isArray(bytes) ? bytes : [bytes]) socket.write(part);
      if (opts.end) socket.end();
    });
  });
}

/** Every complete response in `data`; a close-delimited last one counts when the peer closed. */
export function parseAll(data: Buffer, closed: boolean, head = false): { responses: RawResponse[]; trailing: string } {
  const responses: RawResponse[] = [];
  let rest = data;
  for (let guard = 0; guard < 1000 && rest.length > 0; guard++) {
    const parsed = parseResponse(rest, head);
    if (parsed) {
      responses.push(parsed.response);
      rest = rest.subarray(parsed.length);
      continue;
    }
    const end = rest.indexOf('\r\n\r\n');
    if (closed && end >= 0) {
      const p = parseResponse(Buffer.concat([rest.subarray(0, end), Buffer.from('\r\ncontent-length: 0\r\n\r\n')]));
      if (p) {
        responses.push({ ...p.response, body: rest.subarray(end + 4).toString('utf8') });
        rest = Buffer.alloc(0);
      }
    }
    break;
  }
  return { responses, trailing: rest.toString('latin1') };
}

// ---------------------------------------------------------------------------------------------------------------
// What every answer must look like

/** Statuses Node's own HTTP parser/server answers with (no body, no gateway headers): bad request, timeout, too-large headers. */
export const NODE_STATUSES = new Set([400, 408, 413, 431]);

/**
 * Returns the problems with one response (empty when fine): a status the gateway may not answer with, an error
 * without the contract's JSON body, a leak. `allowed` lists the statuses acceptable for this case.
 */
export function checkResponse(r: RawResponse, allowed: ReadonlySet<number>, opts: { head?: boolean } = {}): string[] {
  const problems: string[] = [];
  if (!allowed.has(r.status)) problems.push(`status ${r.status} not in [${[...allowed].join(', ')}]`);
  // 501: a transfer coding the gateway does not implement, refused on purpose (checked against `allowed` like any other).
  if (r.status >= 500 && r.status !== 501 && r.status !== 502 && r.status !== 503 && r.status !== 504) problems.push(`server error ${r.status}`);
  // The upstream's own answers pass through unchanged (its echo names its address); the gateway's must not leak.
  if (r.status >= 400) for (const leak of leaksIn(r.body)) problems.push(`body leaks ${leak}`);
  if (/x-powered-by/i.test(r.head)) problems.push('X-Powered-By present');
  const fromGateway = r.headers['x-request-id'] !== undefined;
  if (!fromGateway) {
    // Node's own answer to a request its parser refused: only these statuses, and nothing in the body.
    if (!NODE_STATUSES.has(r.status)) problems.push(`status ${r.status} without the gateway's headers`);
    if (r.body.length > 0) problems.push(`Node's own ${r.status} carried a body: ${JSON.stringify(r.body.slice(0, 200))}`);
    return problems;
  }
  if (r.headers['x-content-type-options'] !== 'nosniff') problems.push('no X-Content-Type-Options: nosniff');
  if (r.status >= 400) {
    if (opts.head) {
      // No body on a HEAD answer; the headers must still announce the JSON error.
      if (!/^application\/json/.test(r.headers['content-type'] ?? ''))
        problems.push(`HEAD error ${r.status} is ${r.headers['content-type'] ?? 'untyped'}, not JSON`);
      return problems;
    }
    if (!/^application\/json/.test(r.headers['content-type'] ?? '')) problems.push(`error ${r.status} is ${r.headers['content-type'] ?? 'untyped'}, not JSON`);
    try {
      const body = JSON.parse(r.body) as { code?: string; message?: string; status?: number };
      const entry = body.code !== undefined ? (ERRORS as Record<string, { status: number }>)[body.code] : undefined;
      if (!entry) problems.push(`error body code ${JSON.stringify(body.code)} is not a contract code`);
      else if (entry.status !== r.status) problems.push(`code ${body.code} is not a ${r.status}`);
      if (body.status !== r.status) problems.push(`body status ${body.status} != HTTP ${r.status}`);
      if (typeof body.message !== 'string' || body.message.length === 0) problems.push('error body without a message');
      if (Object.keys(body).sort().join(',') !== 'code,message,status') problems.push(`error body fields ${Object.keys(body).join(',')}`);
    } catch {
      problems.push(`error body is not JSON: ${JSON.stringify(r.body.slice(0, 200))}`);
    }
  }
  return problems;
}

/**
 * The bytes Node counts against --max-http-header-size (16 KB by default): the request target and every header
 * name and value, without separators or line ends. Past it, Node answers 431 itself.
 */
export function nodeHeaderBytes(request: Buffer | string): number {
  const text = Buffer.isBuffer(request) ? request.toString('latin1') : request;
  const end = text.indexOf('\r\n\r\n');
  const [line = '', ...fields] = (end < 0 ? text : text.slice(0, end)).split('\r\n');
  const target = line.split(' ')[1] ?? '';
  let n = target.length;
  for (const field of fields) {
    const i = field.indexOf(':');
    n += i < 0 ? field.length : i + field.slice(i + 1).trim().length;
  }
  return n;
}

/** A short printable preview of a case's bytes for failure messages. */
export function preview(bytes: Buffer | string, max = 300): string {
  const s = Buffer.isBuffer(bytes) ? bytes.toString('latin1') : bytes;
  const cut = s.length > max ? `${s.slice(0, max)}…(+${s.length - max})` : s;
  return JSON.stringify(cut);
}

/** One line for what an exchange produced: each answer's status and the start of its body, and how it ended. */
export function describe(ex: Exchange): string {
  const answers = ex.responses.map((r) => `${r.status}${fromNode(r) ? ' (node)' : ''} ${JSON.stringify(r.body.slice(0, 160))}`);
  const end = ex.timedOut ? 'still open at the deadline' : ex.closedByPeer ? 'closed by the gateway' : 'ended by the client';
  return `[${answers.join(' | ')}] ${end}${ex.trailing ? `, trailing ${preview(ex.trailing, 120)}` : ''}`;
}

/** Collects failures instead of throwing at the first, so one run reports a pattern rather than a single case. */
export class Failures {
  readonly list: string[] = [];
  constructor(
    private readonly seed: number,
    private readonly label: string,
  ) {}
  add(index: number | string, what: string, input: Buffer | string | Array<Buffer | string>): void {
    if (this.list.length >= 25) return;
    const bytes = Array.isArray(input) ? input.map((p) => (Buffer.isBuffer(p) ? p.toString('latin1') : p)).join('') : input;
    this.list.push(`[${this.label} case ${index}] ${what}\n    input: ${preview(bytes)}`);
  }
  /** Throws with every failure and the seed to replay them. */
  assertNone(): void {
    if (this.list.length === 0) return;
    throw new Error(
      `${this.list.length}${this.list.length >= 25 ? '+' : ''} fuzz failure(s) in ${this.label}; replay with FUZZ_SEED=${this.seed}\n${this.list.join('\n')}`,
    );
  }
}

/** The two answers every batch must leave working: /healthz 200 and a keyed proxied request 200. */
export async function assertStillServing(f: FuzzGateway, seed: number, label: string): Promise<void> {
  const health = await exchange(f.port, 'GET /healthz HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n', { responses: 1 });
  const keyed = await exchange(f.port, `GET /v1/alive HTTP/1.1\r\nHost: fuzz\r\nAuthorization: Bearer ${f.key}\r\nConnection: close\r\n\r\n`, { responses: 1 });
  const problems: string[] = [];
  if (health.responses[0]?.status !== 200) problems.push(`GET /healthz answered ${health.responses[0]?.status ?? 'nothing'}`);
  if (keyed.responses[0]?.status !== 200)
    problems.push(`keyed GET /v1/alive answered ${keyed.responses[0]?.status ?? 'nothing'}: ${keyed.responses[0]?.body ?? ''}`);
  const unhandled = f.errorLogs.filter((l) => l.msg === 'unhandled error');
  if (unhandled.length) problems.push(`${unhandled.length} unhandled error(s) logged: ${JSON.stringify(unhandled[0])}`);
  if (f.canary.seen.length) problems.push(`the canary host was contacted: ${JSON.stringify(f.canary.seen.map((s) => s.url))}`);
  const wrongHost = f.upstream.seen.filter((s) => s.headers.host !== f.upstreamHost);
  if (wrongHost.length) problems.push(`upstream saw Host ${JSON.stringify(wrongHost[0]?.headers.host)}`);
  if (problems.length) throw new Error(`after ${label} (FUZZ_SEED=${seed}) the gateway is not well:\n  ${problems.join('\n  ')}`);
}

/** An inclusive set of statuses, for `checkResponse`. */
export function statuses(...codes: number[]): ReadonlySet<number> {
  return new Set(codes);
}

// ---------------------------------------------------------------------------------------------------------------
// Running cases

export interface FuzzCase {
  /** What kind of case this is, for failure messages and the per-kind counts. */
  kind: string;
  bytes: Buffer | string | Array<Buffer | string>;
  opts?: ExchangeOptions;
  /** The case's X-Request-Id(s) when it sent any: the upstream requests carrying them belong to this case. */
  requestId?: string | string[];
  /** Problems with the exchange (statuses, bodies, headers); `seen` is what the upstream received for this case. */
  check(ex: Exchange, seen: SeenRequest[]): string[];
}

export interface RunSummary {
  cases: number;
  byKind: Record<string, number>;
  byStatus: Record<string, number>;
}

/** A request id unique to one case, sane by the gateway's rules so it is kept and sent upstream. */
export function caseId(label: string, index: number): string {
  return `fz-${label}-${index}`;
}

/**
 * Runs `count` cases made by `make(rng, index)` (each from its own forked generator, so a case replays alone),
 * `concurrency` at a time, each exchange bounded by its timeout. Every upstream request must belong to a case that
 * accepted it: one the gateway forwarded without the case's id (a smuggled request) is a failure.
 */
export async function runCases(
  f: FuzzGateway,
  seed: number,
  label: string,
  count: number,
  make: (rng: Rng, index: number) => FuzzCase,
  opts: { stream?: number; concurrency?: number; budgetMs?: number } = {},
): Promise<RunSummary> {
  // Each loop of a file draws from its own stream of the one seed, so FUZZ_SEED alone replays any of them.
  const root = new Rng((seed + Math.imul(opts.stream ?? 0, 0x85ebca6b)) >>> 0);
  const failures = new Failures(seed, label);
  const summary: RunSummary = { cases: 0, byKind: {}, byStatus: {} };
  const upstreamStart = f.upstream.seen.length;
  const claimed = new Set<SeenRequest>();
  const judged = new Map<string, { c: FuzzCase; ex: Exchange; index: number; ids: string[] }>();
  const deadline = Date.now() + (opts.budgetMs ?? 60_000);
  let next = 0;
  const worker = async () => {
    while (next < count && Date.now() < deadline) {
      const index = next++;
      const c = make(root.fork(index), index);
      const ex = await exchange(f.port, c.bytes, { timeoutMs: 3000, ...c.opts });
      const ids = c.requestId === undefined ? [] : Array.isArray(c.requestId) ? c.requestId : [c.requestId];
      const seen = ids.length ? f.upstream.seen.filter((s) => ids.includes(String(s.headers['x-request-id']))) : [];
      for (const s of seen) claimed.add(s);
      for (const id of ids) judged.set(id, { c, ex, index, ids });
      summary.cases++;
      summary.byKind[c.kind] = (summary.byKind[c.kind] ?? 0) + 1;
      const statusKey = ex.responses.length ? ex.responses.map((r) => r.status).join('+') : ex.timedOut ? 'timeout' : 'closed';
      summary.byStatus[statusKey] = (summary.byStatus[statusKey] ?? 0) + 1;
      let problems: string[];
      try {
        problems = c.check(ex, seen);
      } catch (err) {
        problems = [`check threw: ${(err as Error).message}`];
      }
      if (problems.length) failures.add(`${index} (${c.kind}, ${ex.elapsedMs} ms)`, `${problems.join('; ')}\n    got: ${describe(ex)}`, c.bytes);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency ?? 8 }, worker));
  if (summary.cases < count) failures.add('-', `only ${summary.cases} of ${count} cases ran within the ${opts.budgetMs ?? 60_000} ms budget`, '');
  // Late arrivals included: anything the upstream got that no case accounted for was smuggled or misrouted.
  await new Promise((r) => setTimeout(r, 100));
  const late = new Map<string, SeenRequest[]>();
  for (const s of f.upstream.seen.slice(upstreamStart)) {
    if (claimed.has(s)) continue;
    const id = String(s.headers['x-request-id'] ?? '');
    const owner = judged.get(id);
    if (owner) late.set(id, [...(late.get(id) ?? []), s]);
    else
      failures.add(
        'upstream',
        `the upstream received a request no case sent: ${s.method} ${s.url} (x-request-id ${id}, x-consumer-id ${String(s.headers['x-consumer-id'])})`,
        '',
      );
  }
  // A case's own upstream request that arrived after its check: judge the case again with everything it caused.
  for (const [id, arrivals] of late) {
    const { c, ex, index, ids } = judged.get(id)!;
    const all = f.upstream.seen.filter((s) => ids.includes(String(s.headers['x-request-id'])));
    const problems = c.check(ex, all);
    if (problems.length) failures.add(`${index} (${c.kind}, late upstream arrival of ${arrivals.length})`, problems.join('; '), c.bytes);
  }
  failures.assertNone();
  if (process.env.FUZZ_VERBOSE)
    console.info(`[fuzz ${label}] seed ${seed}: ${summary.cases} cases; kinds ${JSON.stringify(summary.byKind)}; answers ${JSON.stringify(summary.byStatus)}`);
  return summary;
}

/** Standard checks for a case expecting exactly one answer with a status in `allowed`. */
export function oneAnswer(ex: Exchange, allowed: ReadonlySet<number>): string[] {
  if (ex.timedOut && ex.responses.length === 0) return [`no answer within ${ex.elapsedMs} ms (hang)`];
  if (ex.responses.length === 0) return [`connection closed without an answer`];
  const problems = checkResponse(ex.responses[0]!, allowed, { head: ex.head });
  if (ex.responses.length > 1) problems.push(`${ex.responses.length} answers to one request`);
  return problems;
}

/** True when the response is Node's own (its parser refused the request), not the gateway's. */
export function fromNode(r: RawResponse | undefined): boolean {
  return r !== undefined && r.headers['x-request-id'] === undefined;
}

/** The JSON error code of a gateway error response, if any. */
export function errorCode(r: RawResponse | undefined): string | undefined {
  if (!r || r.status < 400) return undefined;
  if (r.body === '') return '(no body)';
  try {
    return (JSON.parse(r.body) as { code?: string }).code;
  } catch {
    return undefined;
  }
}

/** Node's default --max-http-header-size: the request line and every header line together. */
export const MAX_HEADER_BYTES = 16_384;
