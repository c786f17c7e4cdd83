// A backend's malformed answer costs that one request, never the process: against the built CLI (`tollgate serve`, a
// child process whose exit would end every request in flight), a raw TCP upstream sends status lines Node's client
// parser lets through but its server side cannot write (a status below 100, a control character or DEL in the reason
// phrase), and responses cut off after their headers before a byte of body. Each gets its answer (502, or the status
// with its standard reason phrase), and a normal request after each proves the same process still serves.
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, startServe, tempDir, type CliProcess } from './helpers/cli.js';

/** What the upstream writes for each path under /h/ (`end`: close the connection after writing it). */
const ANSWERS: Record<string, { raw: string; end: boolean }> = {
  normal: { raw: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok', end: false },
  'status-099': { raw: 'HTTP/1.1 099 Weird\r\nContent-Length: 2\r\n\r\nhi', end: true },
  'status-000': { raw: 'HTTP/1.1 000 Zero\r\nContent-Length: 2\r\n\r\nhi', end: true },
  'status-1000': { raw: 'HTTP/1.1 1000 Big\r\nContent-Length: 2\r\n\r\nhi', end: true },
  'header-ctl': { raw: 'HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nhi', end: true },
  'reason-ctl': { raw: 'HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nhi', end: true },
  'reason-del': { raw: 'HTTP/1.1 200 O\x7fK\r\nContent-Length: 2\r\n\r\nhi', end: true },
  'reason-esc-404': { raw: 'HTTP/1.1 404 Not\x1bFound\r\nContent-Length: 2\r\n\r\nno', end: true },
  'reason-ctl-204': { raw: 'HTTP/1.1 204 \x01\r\n\r\n', end: true },
  'cut-before-body': { raw: 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-From-Upstream: 1\r\nContent-Length: 10\r\n\r\n', end: true },
  'cut-before-chunk': { raw: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', end: true },
  'cut-mid-body': { raw: 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf', end: true },
};

let upstream: Server;
const sockets = new Set<Socket>();
let dir: ReturnType<typeof tempDir>;
let gw: { proc: CliProcess; url: string };

beforeAll(async () => {
  assertBuilt();
  upstream = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    let got = '';
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      // One request at a time on a connection: answer each as its head is complete.
      for (let i = got.indexOf('\r\n\r\n'); i >= 0; i = got.indexOf('\r\n\r\n')) {
        const path = /^[A-Z]+ \/h\/([^ ?]+)/.exec(got)?.[1] ?? '';
        got = got.slice(i + 4);
        const answer = ANSWERS[path] ?? { raw: 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n', end: true };
        if (answer.end) s.end(answer.raw, 'latin1');
        else s.write(answer.raw, 'latin1');
      }
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  dir = tempDir();
  gw = await startServe(
    dir.write('gateway.yaml', {
      server: { port: 0 },
      log: { level: 'info' },
      services: { web: { targets: [`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`], retries: 0, timeoutMs: 5000 } },
      routes: [{ path: '/h/*', service: 'web', auth: 'none' }],
    }),
    30_000,
  );
}, 60_000);

afterAll(async () => {
  await gw?.proc.stop();
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => (upstream ? upstream.close(() => r()) : r()));
  dir?.remove();
});

async function get(path: string): Promise<{ status: number; statusText: string; headers: Headers; body: string }> {
  const res = await fetch(`${gw.url}/h/${path}`, { signal: AbortSignal.timeout(10_000) });
  return { status: res.status, statusText: res.statusText, headers: res.headers, body: await res.text() };
}

/** The process is still up and serves a normal request. */
async function stillServes(): Promise<void> {
  expect(gw.proc.running).toBe(true);
  expect(await get('normal')).toMatchObject({ status: 200, body: 'ok' });
}

describe('hostile status lines from a backend', () => {
  it.each([['status-099'], ['status-000']])('%s: a status the gateway cannot write is a 502, and the process still serves', async (path) => {
    const mark = gw.proc.logs.length;
    const r = await get(path);
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'bad_gateway', status: 502 });
    await stillServes();
    const line = await gw.proc.waitForLog('upstream request failed', { after: mark });
    expect(line.kind).toBe('bad_status');
  });

  it.each([
    ['reason-ctl', 200, 'OK', 'hi'],
    ['reason-del', 200, 'OK', 'hi'],
    ['reason-esc-404', 404, 'Not Found', 'no'],
    ['reason-ctl-204', 204, 'No Content', ''],
  ])(
    '%s: a reason phrase with a control character or DEL is replaced by the standard one; the status and body pass',
    async (path, status, statusText, body) => {
      const r = await get(path);
      expect({ status: r.status, statusText: r.statusText, body: r.body }).toEqual({ status, statusText, body });
      await stillServes();
    },
  );
});

describe("what Node's client parser refuses itself", () => {
  it.each([['status-1000'], ['header-ctl']])('%s: a 502 (a broken answer, as a reset), and the process still serves', async (path) => {
    const r = await get(path);
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'bad_gateway' });
    await stillServes();
  });
});

describe('a backend response cut off after its headers', () => {
  it.each([['cut-before-body'], ['cut-before-chunk']])('%s: nothing of it had reached the client: 502, none of its headers', async (path) => {
    const r = await get(path);
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'bad_gateway' });
    expect(r.headers.get('x-from-upstream')).toBeNull();
    await stillServes();
  });

  it('cut after some of its body went to the client: the client connection is cut (a truncated body is never passed as whole)', async () => {
    await expect(get('cut-mid-body')).rejects.toThrow();
    await stillServes();
  });
});

describe('after every hostile answer', () => {
  it('the process never logged an uncaught exception and is still running', async () => {
    expect(gw.proc.running).toBe(true);
    expect(gw.proc.logs.filter((l) => l.level === 60 || String(l.msg).startsWith('uncaught'))).toEqual([]);
    await stillServes();
  });
});
