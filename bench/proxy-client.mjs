// The proxy hop's upstream client alone, under valgrind's callgrind: instructions per request of a bare node:http
// server that forwards each request to bench/upstream.mjs with node:http.request on a keep-alive Agent (what
// src/pipeline/upstream-try.ts and the relay in proxy.ts do), against the same with undici's Pool (the project's
// undici: 7 or 8, the same calls on both). Decides whether the gateway's upstream call should move to undici.
//
//   npm run bench:proxy-client                                   # every client, 6 windows of 2,000 requests each
//   npm run bench:proxy-client -- --clients http,undici --windows 8 --requests 3000
//
// Clients (--clients, in this order unless told):
//   local          answers the request itself with the upstream's body: the server's own share, taken off the others
//                  to give the hop alone
//   http           http.request on an Agent with the targets' pool settings (routing/target.ts), the facts a try
//                  keeps (its socket, connect or reused), the response's headers copied and its body written with
//                  backpressure, a client that leaves destroying the upstream request
//   undici         Pool.dispatch with a handler of the newer handler API (onRequestStart, onResponseStart,
//                  onResponseData, onResponseEnd, onResponseError: undici 7 and 8 alike): the same copy and
//                  backpressure (controller.pause/resume), abort through the controller
//   undici-dc      undici with what a try's facts would need: subscribed to undici:client:connected and
//                  undici:client:sendHeaders on diagnostics_channel (a new connection, and the socket each request
//                  goes out on: reused or not)
//   undici-request Pool.request (a promise and a Readable body), the body's chunks written with backpressure
//
// Each client is its own process (this file with --serve CLIENT) under
// `valgrind --tool=callgrind --smc-check=all-non-file --instr-atstart=no`, driven as bench/instructions.mjs drives its
// targets: lib/keepalive-client.mjs (--connections keep-alive sockets) sends --warmup requests uninstrumented, one
// instrumented window thrown away (V8 tiering up), then --windows windows of --requests between
// `callgrind_control --zero/--instr=on` and `--instr=off/--dump`: the dump's total Ir (every thread) over the
// window's requests. Reports each window, the medians, the hop (a client's median minus local's) and each undici
// client's hop against http's; writes results/proxy-client-<time>.json.
import { execFileSync } from 'node:child_process';
import diagnosticsChannel from 'node:diagnostics_channel';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Procs, freePort, sleep, waitFor } from './lib/procs.mjs';
import { median } from './lib/stats.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLIENTS = ['local', 'http', 'undici', 'undici-dc', 'undici-request'];

const { values } = parseArgs({
  options: {
    serve: { type: 'string' },
    upstream: { type: 'string' },
    port: { type: 'string' },
    clients: { type: 'string', default: CLIENTS.join(',') },
    windows: { type: 'string', default: '6' },
    requests: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '3000' },
    'warmup-window': { type: 'string', default: '1000' },
    connections: { type: 'string', default: '50' },
    out: { type: 'string' },
    behaviours: { type: 'boolean', default: false },
  },
});

// ---------------------------------------------------------------------------------------------------------------
// The proxy process (--serve CLIENT): one client, nothing else.

/** Hop-by-hop fields, neither forwarded nor relayed (http/headers.ts isHopByHop). */
const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
]);

function forwardedHeaders(req, host) {
  const out = { host };
  for (const name in req.headers) if (!HOP.has(name) && name !== 'host') out[name] = req.headers[name];
  return out;
}

function relayHeaders(headers, res) {
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || HOP.has(name)) continue;
    res.setHeader(name, value);
  }
}

function hasBody(req) {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function badGateway(res) {
  if (res.headersSent) return void res.destroy();
  res.statusCode = 502;
  res.end();
}

async function serve(client, upstreamUrl, port) {
  const u = new URL(upstreamUrl);
  const host = u.host;
  const BODY = Buffer.from(JSON.stringify({ id: 1, name: 'bench', description: 'a small JSON answer from the bench upstream' }));
  let handler;
  if (client === 'local') {
    handler = (req, res) => {
      req.resume();
      res.setHeader('content-type', 'application/json');
      res.setHeader('content-length', BODY.length);
      res.end(BODY);
    };
  } else if (client === 'http') {
    // routing/target.ts's pool settings.
    const agent = new Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: 4_000, scheduling: 'lifo' });
    handler = (req, res) => {
      let reached = false;
      let reused = false;
      const up = request({ agent, hostname: u.hostname, port: u.port, method: req.method, path: req.url, headers: forwardedHeaders(req, host) });
      up.once('socket', (socket) => {
        if (!socket.connecting) return void ((reached = true), (reused = up.reusedSocket));
        socket.once('connect', () => (reached = true));
      });
      up.once('response', (upRes) => {
        res.statusCode = upRes.statusCode;
        relayHeaders(upRes.headers, res);
        upRes.on('data', (chunk) => {
          if (res.write(chunk)) return;
          upRes.pause();
          res.once('drain', () => upRes.resume());
        });
        upRes.once('end', () => res.end());
      });
      // The facts a try reports (reached, reused) are kept as upstream-try.ts keeps them.
      up.on('error', () => badGateway(res, reached && reused));
      up.once('close', () => {});
      res.once('close', () => {
        if (!res.writableFinished) up.destroy();
      });
      if (hasBody(req)) req.pipe(up);
      else up.end();
    };
  } else if (client === 'undici' || client === 'undici-dc') {
    const { Pool } = await import('undici');
    const pool = new Pool(u.origin, { connections: 256, keepAliveTimeout: 4_000, pipelining: 1 });
    if (client === 'undici-dc') {
      const seen = new WeakSet();
      let connects = 0;
      diagnosticsChannel.subscribe('undici:client:connected', () => connects++);
      diagnosticsChannel.subscribe('undici:client:sendHeaders', ({ request: r, socket }) => {
        r.reusedSocket = seen.has(socket);
        seen.add(socket);
      });
    }
    handler = (req, res) => {
      let controller;
      pool.dispatch(
        { path: req.url, method: req.method, headers: forwardedHeaders(req, host), body: hasBody(req) ? req : null },
        {
          onRequestStart(c) {
            controller = c;
          },
          onResponseStart(c, statusCode, headers) {
            res.statusCode = statusCode;
            relayHeaders(headers, res);
          },
          onResponseData(c, chunk) {
            if (res.write(chunk)) return;
            c.pause();
            res.once('drain', () => c.resume());
          },
          onResponseEnd() {
            res.end();
          },
          onResponseError(c, err) {
            void err;
            badGateway(res);
          },
        },
      );
      res.once('close', () => {
        if (!res.writableFinished) controller?.abort(new Error('client gone'));
      });
    };
  } else if (client === 'undici-request') {
    const { Pool } = await import('undici');
    const pool = new Pool(u.origin, { connections: 256, keepAliveTimeout: 4_000, pipelining: 1 });
    handler = (req, res) => {
      const ac = new AbortController();
      res.once('close', () => {
        if (!res.writableFinished) ac.abort();
      });
      pool.request({ path: req.url, method: req.method, headers: forwardedHeaders(req, host), body: hasBody(req) ? req : null, signal: ac.signal }).then(
        ({ statusCode, headers, body }) => {
          res.statusCode = statusCode;
          relayHeaders(headers, res);
          body.on('data', (chunk) => {
            if (res.write(chunk)) return;
            body.pause();
            res.once('drain', () => body.resume());
          });
          body.once('end', () => res.end());
          body.once('error', () => badGateway(res));
        },
        () => badGateway(res),
      );
    };
  } else throw new Error(`--serve: one of ${CLIENTS.join(', ')}`);
  // The gateway's server timeouts (server.headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs).
  const server = createServer({ headersTimeout: 10_000, requestTimeout: 30_000, keepAliveTimeout: 5_000 }, handler);
  server.listen(port, '127.0.0.1', () => process.send?.({ ready: true, port: server.address().port }));
  const stop = () => process.exit(0);
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
}

if (values.serve) {
  await serve(values.serve, values.upstream, Number(values.port ?? 0));
} else if (values.behaviours) {
  await behaviours();
} else {
  await main();
}

// ---------------------------------------------------------------------------------------------------------------
// --behaviours: what each client does with answers the gateway relays today (no callgrind, a few seconds). A raw
// backend on a loopback port answers by path: an unasked-for 100 Continue before its 200 (RFC 9110 §15.2: a client
// must parse a 1xx it did not expect), 102 and 103 before the 200, a 101 to a request that asked for no upgrade; and
// a chunked request body with a trailer field, as the gateway passes a client's on (request-body.ts endSink).

async function behaviours() {
  const { createServer: createTcpServer } = await import('node:net');
  const { Pool } = await import('undici');
  const ANSWERS = {
    '/unasked-100': 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
    '/102-103': 'HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
    '/unasked-101': 'HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: foo\r\n\r\n',
  };
  let lastBody = '';
  const backend = createTcpServer((socket) => {
    let buf = '';
    socket.on('data', (d) => {
      buf += d;
      const head = buf.indexOf('\r\n\r\n');
      if (head === -1) return;
      const path = /^\w+ (\S+)/.exec(buf)?.[1];
      if (ANSWERS[path]) return void ((buf = ''), socket.write(ANSWERS[path]));
      if (!buf.endsWith('\r\n\r\n', buf.length) || buf.indexOf('\r\n0\r\n', head) === -1) return;
      lastBody = buf.slice(head + 4);
      buf = '';
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
    });
  });
  await new Promise((r) => backend.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${backend.address().port}`;
  const viaHttp = (path) =>
    new Promise((resolve) => {
      const seen = [];
      const r = request(`${origin}${path}`, { agent: new Agent() }, (res) => {
        seen.push(res.statusCode);
        res.resume();
        res.once('end', () => resolve(seen));
      });
      r.on('information', (i) => seen.push(`${i.statusCode} (information event)`));
      r.once('upgrade', (res, socket) => (socket.destroy(), resolve([...seen, '101 (upgrade event)'])));
      r.once('error', (err) => resolve([...seen, `error: ${err.message}`]));
      r.end();
    });
  const viaUndici = (path) =>
    new Promise((resolve) => {
      const seen = [];
      const pool = new Pool(origin);
      pool.dispatch(
        { path, method: 'GET', headers: { host: 'backend' } },
        {
          onRequestStart() {},
          onResponseStart: (c, status) => void seen.push(status),
          onResponseData() {},
          onResponseEnd: () => resolve(seen),
          onResponseError: (c, err) => resolve([...seen, `error: ${err.message}`]),
        },
      );
    });
  const lines = ['| backend sends | node:http.request | undici Pool.dispatch |', '|---|---|---|'];
  for (const path of Object.keys(ANSWERS)) lines.push(`| ${path.slice(1)} | ${(await viaHttp(path)).join(', ')} | ${(await viaUndici(path)).join(', ')} |`);
  // A request body's trailers: node:http writes them after the last chunk (addTrailers); undici's dispatch options take
  // a body and headers only, so there is nothing to give them to.
  const trailed = await new Promise((resolve) => {
    const r = request(
      `${origin}/trailers`,
      { agent: new Agent(), method: 'POST', headers: { 'transfer-encoding': 'chunked', trailer: 'X-Checksum' } },
      (res) => {
        res.resume();
        res.once('end', () => resolve(JSON.stringify(lastBody)));
      },
    );
    r.write('hello');
    r.addTrailers({ 'X-Checksum': 'sha256=abc' });
    r.end();
  });
  lines.push(`| (a chunked request body with a trailer) | sent: ${trailed} | no option to send one |`);
  console.log(lines.join('\n'));
  backend.close();
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------------------------
// The orchestrator.

function int(name, min, max) {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`--${name}: a whole number from ${min} to ${max}`);
    process.exit(2);
  }
  return n;
}

async function main() {
  const WINDOWS = int('windows', 1, 20);
  const REQUESTS = int('requests', 100, 100_000);
  const WARMUP = int('warmup', 0, 100_000);
  const WARMUP_WINDOW = int('warmup-window', 0, 100_000);
  const CONNS = int('connections', 1, 500);
  const clients = values.clients.split(',').filter(Boolean);
  for (const c of clients) {
    if (!CLIENTS.includes(c)) {
      console.error(`--clients: some of ${CLIENTS.join(', ')}`);
      process.exit(2);
    }
  }
  for (const tool of ['valgrind', 'callgrind_control']) {
    try {
      execFileSync(tool, ['--version'], { stdio: 'ignore' });
    } catch {
      console.error(`${tool} is not on the PATH (Debian: apt-get install valgrind)`);
      process.exit(2);
    }
  }
  const undiciVersion = JSON.parse(readFileSync(join(HERE, '../node_modules/undici/package.json'), 'utf8')).version;
  const log = (msg) => process.stderr.write(`[proxy-client ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  const startedAt = new Date();
  const loadBefore = loadavg();
  const tmp = mkdtempSync(join(tmpdir(), 'tollgate-proxy-client-'));
  const procs = new Procs();
  procs.scratch(tmp);
  process.on('exit', () => procs.killAllSync());
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => procs.stopAll(5000).finally(() => process.exit(130)));

  const drive = (url, requests) => {
    const args = [
      join(HERE, 'lib/keepalive-client.mjs'),
      '--url',
      url,
      '--requests',
      String(requests),
      '--connections',
      String(CONNS),
      '--timeout-ms',
      '900000',
    ];
    return JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8', timeout: 960_000 }).trim().split('\n').pop());
  };
  const control = (pid, ...args) => execFileSync('callgrind_control', [...args, String(pid)], { stdio: 'ignore', timeout: 120_000 });

  const results = {};
  try {
    const upstream = await procs.forkHelper('upstream', join(HERE, 'upstream.mjs'), []);
    const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
    log(`upstream ${upstreamUrl}; node ${process.version}, undici ${undiciVersion}; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);
    for (const client of clients) {
      const dir = join(tmp, client);
      mkdirSync(dir, { recursive: true });
      const port = await freePort();
      const child = procs.spawn(
        client,
        'valgrind',
        [
          '--tool=callgrind',
          '--smc-check=all-non-file',
          '--instr-atstart=no',
          `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
          `--log-file=${join(dir, 'valgrind.log')}`,
          process.execPath,
          fileURLToPath(import.meta.url),
          '--serve',
          client,
          '--upstream',
          upstreamUrl,
          '--port',
          String(port),
        ],
        { cwd: HERE, stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
      );
      // The proxy's own errors, shown if a window fails (valgrind's log is its own file).
      let stderr = '';
      child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
      await new Promise((res, rej) => {
        const timer = setTimeout(() => rej(new Error(`${client} under callgrind did not start in 180 s`)), 180_000);
        child.once('message', () => (clearTimeout(timer), res()));
        child.once('exit', (code) => (clearTimeout(timer), rej(new Error(`${client} exited with code ${code}`))));
      });
      const url = `http://127.0.0.1:${port}/v1/bench`;
      const pid = child.pid;
      let dumps = 0;
      const window = async (requests) => {
        control(pid, '--zero');
        control(pid, '--instr=on');
        const t0 = performance.now();
        const r = drive(url, requests);
        const seconds = (performance.now() - t0) / 1000;
        control(pid, '--instr=off');
        control(pid, '--dump');
        dumps++;
        const file = join(dir, `callgrind.out.${pid}.${dumps}`);
        await waitFor(() => existsSync(file), 60_000, `${client}'s dump ${dumps}`);
        await sleep(200);
        const m = /^totals:\s+(\d+)/m.exec(readFileSync(file, 'utf8')) ?? /^summary:\s+(\d+)/m.exec(readFileSync(file, 'utf8'));
        rmSync(file);
        const non200 = Object.entries(r.statuses).filter(([s]) => s !== '200');
        if (non200.length) throw new Error(`${client} answered ${JSON.stringify(r.statuses)}`);
        return { irPerReq: Number(m[1]) / r.done, seconds };
      };
      try {
        if (WARMUP) drive(url, WARMUP);
        if (WARMUP_WINDOW) await window(WARMUP_WINDOW);
        const windows = [];
        for (let w = 0; w < WINDOWS; w++) {
          const r = await window(REQUESTS);
          windows.push(r.irPerReq);
          log(`${client}: window ${w + 1}: ${Math.round(r.irPerReq).toLocaleString('en')} instructions/request (${r.seconds.toFixed(1)} s)`);
        }
        results[client] = { windows, median: median(windows) };
      } catch (err) {
        log(
          `${client} failed (exit ${child.exitCode ?? 'none'}); its stderr:\n${stderr}${existsSync(join(dir, 'valgrind.log')) ? readFileSync(join(dir, 'valgrind.log'), 'utf8').slice(-2000) : ''}`,
        );
        throw err;
      } finally {
        await procs.stop(child, 20_000);
      }
    }
  } finally {
    await procs.stopAll(15_000).catch(() => procs.killAllSync());
    rmSync(tmp, { recursive: true, force: true });
  }

  const k = (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en') : '-');
  const local = results.local?.median;
  const hop = (c) => (local === undefined ? undefined : results[c].median - local);
  const lines = [
    `Instructions per request of the proxy process under callgrind (${startedAt.toISOString().slice(0, 16)}Z; node ${process.version}, undici ${undiciVersion}; ${WINDOWS} windows of ${REQUESTS} requests, ${CONNS} keep-alive connections, after ${WARMUP} + ${WARMUP_WINDOW} warm-up requests; load average ${loadBefore[0].toFixed(2)})`,
    '',
    '| client | per window | median | hop (minus local) | hop / http hop | process / http |',
    '|---|---|---|---|---|---|',
  ];
  for (const c of clients) {
    const r = results[c];
    const h = c === 'local' ? undefined : hop(c);
    const ratioHop = h !== undefined && results.http && c !== 'http' ? (h / hop('http')).toFixed(3) : '-';
    const ratioProc = results.http && c !== 'http' && c !== 'local' ? (r.median / results.http.median).toFixed(3) : '-';
    lines.push(`| ${c} | ${r.windows.map(k).join(' ')} | ${k(r.median)} | ${h === undefined ? '-' : k(h)} | ${ratioHop} | ${ratioProc} |`);
  }
  console.log(lines.join('\n'));
  const out = values.out ?? join(HERE, 'results', `proxy-client-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(
    out,
    `${JSON.stringify({ startedAt, node: process.version, undici: undiciVersion, windows: WINDOWS, requests: REQUESTS, connections: CONNS, loadBefore, results }, null, 2)}\n`,
  );
  log(`written ${out}`);
}
