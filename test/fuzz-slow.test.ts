// Fuzz: slow clients against a real listening gateway with small server timeouts (headersTimeoutMs 1000,
// requestTimeoutMs 2000, keepAliveTimeoutMs 1000). Slowloris headers (a byte every ~200 ms), slow bodies, a stalled
// request line, idle connections, at seeded random paces, all at once, while normal traffic must go on unhindered.
// Expected: each slow connection gets Node's 408 or is closed within its timeout plus a bounded check delay, and the
// upstream never completes a request whose body never arrived.
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertStillServing, exchange, fromNode, fuzzSeed, parseAll, Rng, startFuzzGateway, type FuzzGateway } from './helpers/fuzz.js';

const SEED = fuzzSeed();
const HEADERS_TIMEOUT = 1000;
const REQUEST_TIMEOUT = 2000;
const KEEP_ALIVE_TIMEOUT = 1000;
/** How late past its timeout a slow connection may still be open: Node checks timeouts periodically. */
const SLACK = 1500;

let f: FuzzGateway;
beforeAll(async () => {
  f = await startFuzzGateway({ server: { headersTimeoutMs: HEADERS_TIMEOUT, requestTimeoutMs: REQUEST_TIMEOUT, keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT } });
});
afterAll(async () => {
  await f?.close();
});

interface SlowResult {
  name: string;
  /** ms from connect until the gateway closed the connection (undefined: still open when we gave up). */
  closedAfterMs: number | undefined;
  statuses: number[];
  fromNode: boolean[];
  bytesSent: number;
}

/**
 * Connects and feeds `bytes` a slice at a time (sizes and gaps from `pace`), stopping when the gateway closes the
 * connection or `giveUpMs` passes. `head` bytes, if any, are sent at once first.
 */
function slowClient(name: string, opts: { head?: string; drip: string; pace: () => { bytes: number; gapMs: number }; giveUpMs: number }): Promise<SlowResult> {
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks: Buffer[] = [];
    let sent = 0;
    let closed: number | undefined;
    let timer: NodeJS.Timeout | undefined;
    const socket: Socket = connect(f.port, '127.0.0.1');
    const finish = () => {
      clearTimeout(timer);
      clearTimeout(giveUp);
      socket.destroy();
      const { responses } = parseAll(Buffer.concat(chunks), true);
      resolve({ name, closedAfterMs: closed, statuses: responses.map((r) => r.status), fromNode: responses.map((r) => fromNode(r)), bytesSent: sent });
    };
    const giveUp = setTimeout(finish, opts.giveUpMs);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => {});
    socket.on('close', () => {
      closed ??= Date.now() - started;
      finish();
    });
    let pos = 0;
    const drip = () => {
      if (socket.destroyed || closed !== undefined) return;
      const { bytes, gapMs } = opts.pace();
      let piece = '';
      for (let k = 0; k < bytes && opts.drip.length > 0; k++) {
        piece += opts.drip[pos];
        pos = (pos + 1) % opts.drip.length;
      }
      sent += piece.length;
      socket.write(piece);
      timer = setTimeout(drip, gapMs);
    };
    socket.on('connect', () => {
      if (opts.head) {
        socket.write(opts.head);
        sent += opts.head.length;
      }
      timer = setTimeout(drip, opts.pace().gapMs);
    });
  });
}

/** `early`: statuses the gateway may answer before the body is in (it does not need the body to refuse). */
function check(r: SlowResult, limitMs: number, early: readonly number[] = []): string[] {
  const problems: string[] = [];
  if (r.closedAfterMs === undefined) problems.push(`${r.name}: still open after ${limitMs + SLACK} ms (${r.bytesSent} bytes sent)`);
  else if (r.closedAfterMs > limitMs + SLACK) problems.push(`${r.name}: closed only after ${r.closedAfterMs} ms (limit ${limitMs} + ${SLACK})`);
  r.statuses.forEach((s, i) => {
    if (!r.fromNode[i] && early.includes(s)) return;
    if (s !== 408) problems.push(`${r.name}: answered ${s}`);
    if (!r.fromNode[i]) problems.push(`${r.name}: the ${s} came from the gateway, not Node's timeout`);
  });
  return problems;
}

describe(`fuzz: slow clients (FUZZ_SEED=${SEED})`, () => {
  it('slowloris headers, slow bodies, stalled and idle connections are all cut off in time while others are served', async () => {
    const rng = new Rng(SEED);
    const keyed = `Authorization: Bearer ${f.key}\r\n`;
    const giveUp = REQUEST_TIMEOUT + SLACK + 1000;
    const pace =
      (lo: number, hi: number, maxBytes = 1) =>
      () => ({ bytes: rng.range(1, maxBytes), gapMs: rng.range(lo, hi) });
    const headerDrip = `X-Slow: ${'a'.repeat(64)}\r\n`;
    // The normal request's time alone, measured before the slow clients start.
    const normalOnce = async (): Promise<number> => {
      const t = Date.now();
      const ex = await exchange(f.port, `GET /v1/normal HTTP/1.1\r\nHost: fuzz.test\r\n${keyed}\r\n`, { responses: 1, timeoutMs: 30_000 });
      expect(ex.responses[0]?.status).toBe(200);
      return Date.now() - t;
    };
    let baselineMs = 0;
    for (let i = 0; i < 5; i++) baselineMs = Math.max(baselineMs, await normalOnce());
    const clients: Array<[Promise<SlowResult>, number, number[]?]> = [
      // Slowloris: the header section never ends, one byte every ~200 ms (and at random paces).
      [
        slowClient('slowloris 200ms', {
          head: `GET /v1/slow HTTP/1.1\r\nHost: fuzz.test\r\n${keyed}`,
          drip: headerDrip,
          pace: () => ({ bytes: 1, gapMs: 200 }),
          giveUpMs: giveUp,
        }),
        HEADERS_TIMEOUT,
      ],
      ...Array.from({ length: 4 }, (_, i): [Promise<SlowResult>, number] => [
        slowClient(`slowloris random #${i}`, { head: `GET /v1/slow/${i} HTTP/1.1\r\n`, drip: headerDrip, pace: pace(50, 400, 3), giveUpMs: giveUp }),
        HEADERS_TIMEOUT,
      ]),
      // The request line itself, a byte at a time.
      [
        slowClient('slow request line', { drip: `GET /v1/${'x'.repeat(500)} HTTP/1.1\r\n`, pace: () => ({ bytes: 1, gapMs: 200 }), giveUpMs: giveUp }),
        HEADERS_TIMEOUT,
      ],
      // Headers done, the body trickles: requestTimeout. Proxied bodies (keyed) and unauthenticated ones.
      [
        slowClient('slow body (keyed, proxied)', {
          head: `POST /v1/slow-body HTTP/1.1\r\nHost: fuzz.test\r\n${keyed}Content-Length: 1000\r\n\r\n`,
          drip: 'b',
          pace: () => ({ bytes: 1, gapMs: 200 }),
          giveUpMs: giveUp,
        }),
        REQUEST_TIMEOUT,
      ],
      [
        slowClient('slow chunked body (keyed)', {
          head: `POST /v1/slow-chunked HTTP/1.1\r\nHost: fuzz.test\r\n${keyed}Transfer-Encoding: chunked\r\n\r\n`,
          drip: '1\r\nc\r\n',
          pace: pace(100, 300, 4),
          giveUpMs: giveUp,
        }),
        REQUEST_TIMEOUT,
      ],
      [
        // The gateway refuses it (401) at once without reading the body; the trickle is then cut off all the same.
        slowClient('slow body (no key)', {
          head: `POST /v1/slow-body HTTP/1.1\r\nHost: fuzz.test\r\nContent-Length: 1000\r\n\r\n`,
          drip: 'b',
          pace: () => ({ bytes: 1, gapMs: 200 }),
          giveUpMs: giveUp,
        }),
        REQUEST_TIMEOUT,
        [401],
      ],
      // Connected, then nothing at all; and a request line that stops half-way.
      [slowClient('idle, no bytes', { drip: '', pace: () => ({ bytes: 0, gapMs: 10_000 }), giveUpMs: giveUp }), HEADERS_TIMEOUT],
      [
        slowClient('stalled mid-header', {
          head: 'GET /v1/stall HTTP/1.1\r\nHost: fuz',
          drip: '',
          pace: () => ({ bytes: 0, gapMs: 10_000 }),
          giveUpMs: giveUp,
        }),
        HEADERS_TIMEOUT,
      ],
    ];

    // Normal traffic meanwhile: every answer prompt, judged against the same requests' time measured just before in
    // this run (on a busy machine both are slow; a normal request queued behind the slow clients is slower still).
    const normal: number[] = [];
    const normalRun = (async () => {
      const end = Date.now() + HEADERS_TIMEOUT + 500;
      while (Date.now() < end) {
        const t = Date.now();
        const ex = await exchange(f.port, `GET /v1/normal HTTP/1.1\r\nHost: fuzz.test\r\n${keyed}\r\n`, { responses: 1, timeoutMs: 30_000 });
        expect(ex.responses[0]?.status).toBe(200);
        normal.push(Date.now() - t);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const results = await Promise.all(clients.map(([p]) => p));
    await normalRun;
    const problems = results.flatMap((r, i) => check(r, clients[i]![1], clients[i]![2]));
    if (process.env.FUZZ_VERBOSE) console.info(results.map((r) => `${r.name}: ${r.statuses.join(',') || '-'} closed after ${r.closedAfterMs} ms`).join('\n'));
    expect(problems, `FUZZ_SEED=${SEED}\n${JSON.stringify(results, null, 1)}`).toEqual([]);
    expect(Math.max(...normal), `a normal request waited behind the slow ones (alone: at most ${baselineMs} ms)`).toBeLessThan(Math.max(500, 5 * baselineMs));
    // No slow body was completed upstream: the bodies never arrived in full.
    expect(f.upstream.seen.filter((s) => s.url.startsWith('/v1/slow'))).toEqual([]);
    await assertStillServing(f, SEED, 'slow clients');
  }, 120_000);

  it('an idle keep-alive connection is closed after keepAliveTimeoutMs', async () => {
    // Node keeps an idle keep-alive socket up to a second longer than keepAliveTimeout (its own buffer against the
    // client racing a new request into a closing socket).
    const bound = KEEP_ALIVE_TIMEOUT + 1000 + SLACK;
    const t = Date.now();
    const ex = await exchange(f.port, `GET /healthz HTTP/1.1\r\nHost: fuzz.test\r\n\r\n`, { timeoutMs: bound + 1000 });
    expect(ex.responses.map((r) => r.status)).toEqual([200]);
    expect(ex.closedByPeer).toBe(true);
    expect(Date.now() - t).toBeLessThan(bound);
  }, 120_000);
});
