// Instructions per request, Tollgate against the bare baseline proxy: a CPU measure that does not move with the
// machine. The wall-clock bench's CPU per request drifts by ~15% between half hours on the shared 2-core VM, and one
// round's Tollgate/baseline ranged 0.71-2.15 there, more than any change to the request path; valgrind's callgrind
// counts the instructions a process executes, which is the same count for the same work whatever else runs.
//
//   npm run bench:instructions                                  # 2 runs, each target 3 windows of 3,000 requests
//   npm run bench:instructions -- --runs 3 --gateway /work/wt/e82   # another checkout's build as Tollgate
//   npm run bench:instructions -- --variant routes50 --variant doc500   # configs side by side (VARIANTS below)
//   npm run bench:instructions -- --node-flag=--max-semi-space-size=8   # a Node/V8 option for Tollgate's process (after
//                                                                          the image's NODE_OPTIONS; --v8-defaults: none)
//
// Per run, each target in turn (the order alternates between runs) runs under
// `valgrind --tool=callgrind --smc-check=all-non-file --instr-atstart=no` (V8 writes code at run time: valgrind must
// check it for changes; instrumentation is off until the measured windows, so start-up and warm-up run at nulgrind
// speed): Tollgate is `node dist/cli.js serve` with scenario a's config (lib/gateway-config.mjs: the bench plan,
// its own redis-server, logging at info to a file, metrics, the admin listener, the usage ledger), the baseline is
// bench/baseline-proxy.mjs. A keep-alive client in another process (lib/keepalive-client.mjs, --connections, one hot
// key) sends --warmup requests uninstrumented, then one instrumented window that is thrown away (the first window
// after instrumentation comes on reads 2-3x the steady figure: V8 finishes tiering up the code), then --windows
// windows of --requests each, between `callgrind_control --zero/--instr=on` and `--instr=off/--dump`: the dump's
// total Ir over the window's requests. Every thread of the process counts (V8's GC and compiler threads too), on
// both sides alike. Also counted, for Tollgate: Redis's commands per request over the measured windows (INFO
// commandstats, which counts the commands inside a script), and the instructions of an idle window (no requests,
// --idle-seconds): timers run by wall time, and under valgrind a request takes ~50x longer, so a timer's work weighs
// more per request than at full speed; `idle-corrected` takes that idle rate times the window's length off.
//
// --variant (repeatable) picks the config and request each Tollgate runs (VARIANTS: scenario a's by default; s's 50
// routes; a 500-operation OpenAPI document; the pet store's document with validation off or enforce, POST
// createCategory or GET listCategories); every build runs every variant. Pairs of variants measured together are
// compared (PAIRS): the ratio for routing, the difference in instructions for validation, and that difference in µs
// when --baseline-user-us gives the baseline's user-space CPU µs per request from a wall-clock run (npm run bench's
// JSON: cpuUsPerReq - sysUsPerReq of the baseline's rows): callgrind counts user-space instructions, so the
// baseline's instructions per request over its user µs per request is this machine's instructions per µs of user CPU
// on such a request.
//
// Reports each window, the medians, Tollgate/baseline per run and overall, and the spread; writes results/instructions-<time>.json.
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gatewayConfig } from './lib/gateway-config.mjs';
import { CATEGORY_BODY, doc500Routing, petstoreRouting, servicesRouting, writeDoc500 } from './lib/openapi-configs.mjs';
import { cliCreateKey } from './lib/keys.mjs';
import { Procs, freePort, sleep, waitFor } from './lib/procs.mjs';
import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';
import { median } from './lib/stats.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
/**
 * The full path's line: Tollgate's user-space instructions per request against the bare proxy's. With the kernel's
 * share about equal on both sides (sysUsPerReq in npm run bench), 0.60 is what one and a half times the baseline's
 * throughput takes.
 */
const INSTRUCTIONS_LINE = 0.6;
const REPO = resolve(HERE, '..');
const PATH = '/v1/bench';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '2' },
    windows: { type: 'string', default: '3' },
    requests: { type: 'string', default: '3000' },
    warmup: { type: 'string', default: '4000' },
    'warmup-window': { type: 'string', default: '2000' },
    connections: { type: 'string', default: '50' },
    'idle-seconds': { type: 'string', default: '10' },
    gateway: { type: 'string', multiple: true },
    variant: { type: 'string', multiple: true },
    'baseline-user-us': { type: 'string' },
    'baseline-only': { type: 'boolean', default: false },
    'tollgate-only': { type: 'boolean', default: false },
    'node-flag': { type: 'string', multiple: true },
    'v8-defaults': { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});
const int = (name, min, max) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`--${name}: a whole number from ${min} to ${max}`);
    process.exit(2);
  }
  return n;
};
const RUNS = int('runs', 1, 20);
const WINDOWS = int('windows', 1, 20);
const REQUESTS = int('requests', 100, 100_000);
const WARMUP = int('warmup', 0, 100_000);
const WARMUP_WINDOW = int('warmup-window', 0, 100_000);
const CONNS = int('connections', 1, 500);
const IDLE_S = int('idle-seconds', 0, 120);
/** The builds measured as Tollgate: this checkout's, or each --gateway DIR (another checkout, built), side by side. */
const GATEWAYS = (values.gateway ?? [REPO]).map((d) => resolve(d));
/**
 * Node/V8 options for Tollgate's process (not the baseline's): the Docker image's (its `ENV NODE_OPTIONS="..."`, unless
 * --v8-defaults), then each --node-flag, e.g. --node-flag=--max-semi-space-size=8.
 */
const IMAGE_FLAGS = values['v8-defaults']
  ? []
  : (readFileSync(join(REPO, 'Dockerfile'), 'utf8')
      .match(/^ENV NODE_OPTIONS="([^"]*)"/m)?.[1]
      .split(/\s+/)
      .filter(Boolean) ?? []);
const NODE_FLAGS = [...IMAGE_FLAGS, ...(values['node-flag'] ?? [])];
for (const f of NODE_FLAGS) {
  if (!/^--[a-z0-9-]+(=[^\s]+)?$/.test(f)) {
    console.error(`--node-flag: expected one option like --max-semi-space-size=8, got "${f}"`);
    process.exit(2);
  }
}
for (const gw of GATEWAYS) {
  if (!existsSync(join(gw, 'dist/cli.js'))) {
    console.error(`${join(gw, 'dist/cli.js')} is missing: build that checkout first`);
    process.exit(2);
  }
}
/**
 * What each Tollgate runs: its routing (null: scenario a's upstream shorthand) and the request the client sends.
 * `ports`: the six extra ports of the upstream process (s's services); `tmp`: where a generated document goes.
 */
const VARIANTS = {
  a: { about: "scenario a's config, GET /v1/bench", routing: () => undefined, path: PATH },
  routes50: { about: "scenario s's 3 services and 50 routes, GET /v1/bench (the 50th)", routing: ({ ports }) => servicesRouting(ports), path: PATH },
  doc500: {
    about: "s's 3 services, svc0's routes from a 500-operation document (validate off), GET of its 499th operation",
    routing: ({ ports, doc }) => doc500Routing(ports, doc.file),
    path: ({ doc }) => doc.path,
  },
  'pet-post-off': {
    about: 'the pet store document, validate off, POST /v1/categories',
    routing: ({ upstreamUrl }) => petstoreRouting(upstreamUrl, 'off'),
    path: '/v1/categories',
    method: 'POST',
    body: CATEGORY_BODY,
  },
  'pet-post-enforce': {
    about: 'the pet store document, validate enforce, POST /v1/categories (a valid body)',
    routing: ({ upstreamUrl }) => petstoreRouting(upstreamUrl, 'enforce'),
    path: '/v1/categories',
    method: 'POST',
    body: CATEGORY_BODY,
  },
  'pet-get-off': {
    about: 'the pet store document, validate off, GET /v1/categories',
    routing: ({ upstreamUrl }) => petstoreRouting(upstreamUrl, 'off'),
    path: '/v1/categories',
  },
  'pet-get-enforce': {
    about: 'the pet store document, validate enforce, GET /v1/categories (nothing to validate)',
    routing: ({ upstreamUrl }) => petstoreRouting(upstreamUrl, 'enforce'),
    path: '/v1/categories',
  },
};
/** Variants compared when both ran: `ratio` (b over a, with its budget line) or `diff` (b minus a, in instructions). */
const PAIRS = [
  { a: 'routes50', b: 'doc500', kind: 'ratio', line: 1.1, what: 'routing through a 500-operation document against 50 hand-written routes' },
  { a: 'pet-post-off', b: 'pet-post-enforce', kind: 'diff', lineUs: 10, what: "validating createCategory's body (enforce against off)" },
  { a: 'pet-get-off', b: 'pet-get-enforce', kind: 'diff', what: 'validate enforce on an operation with nothing to validate (listCategories)' },
];
const VARIANT_NAMES = values.variant ?? ['a'];
for (const v of VARIANT_NAMES) {
  if (!VARIANTS[v]) {
    console.error(`--variant: one of ${Object.keys(VARIANTS).join(', ')}`);
    process.exit(2);
  }
}
const BASELINE_CPU_US = values['baseline-user-us'] === undefined ? undefined : Number(values['baseline-user-us']);
if (BASELINE_CPU_US !== undefined && !(BASELINE_CPU_US > 0)) {
  console.error("--baseline-user-us: a positive number (the baseline's user CPU us per request in a wall-clock run)");
  process.exit(2);
}
const gatewayName = (gw, variant = 'a') =>
  (GATEWAYS.length === 1 ? 'tollgate' : `tollgate(${gw.split('/').pop()})`) + (VARIANT_NAMES.length === 1 && variant === 'a' ? '' : `[${variant}]`);
const TOLLGATES = GATEWAYS.flatMap((gw) => VARIANT_NAMES.map((variant) => ({ gw, variant, name: gatewayName(gw, variant) })));
for (const tool of ['valgrind', 'callgrind_control']) {
  try {
    execFileSync(tool, ['--version'], { stdio: 'ignore' });
  } catch {
    console.error(`${tool} is not on the PATH (Debian: apt-get install valgrind)`);
    process.exit(2);
  }
}

const log = (msg) => process.stderr.write(`[instructions ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const VALGRIND = ['valgrind', '--tool=callgrind', '--smc-check=all-non-file', '--instr-atstart=no'];

/** A command line under callgrind: its out files in `dir`, valgrind's own log there too. */
function underCallgrind(dir, cmd) {
  return [...VALGRIND, `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`, `--log-file=${join(dir, 'valgrind.log')}`, ...cmd];
}

function control(pid, ...args) {
  execFileSync('callgrind_control', [...args, String(pid)], { stdio: 'ignore', timeout: 120_000 });
}

/**
 * What a function's instructions are, by its symbol: V8's garbage collector, V8's compilers (the JIT's own work), code
 * the JIT wrote (no symbol: JavaScript once compiled), and the rest (V8's interpreter and builtins, Node, libuv, libc).
 * The first two move with V8's heuristics (when a collection or a compile falls, how large the young generation has
 * grown) more than with the request path: a window's total is read with them in view.
 */
const KINDS = [
  [
    'gc',
    /v8::internal::(Heap|Scavenger|Scavenge|MarkCompact|MinorMarkCompact|MarkingVisitor|ConcurrentMarking|Sweeper|Evacuat|IncrementalMarking|MarkingBarrier|MemoryAllocator|PagedSpace|SemiSpace|NewSpace|WorklistBase|GCTracer|ArrayBufferSweeper|RememberedSet|SlotSet|MainMarkingVisitor|ConcurrentMarkingVisitor|MarkingWorklist|HeapObjectVisitor|YoungGenerationMarkingVisitor|PointersUpdatingVisitor|RecordMigratedSlotVisitor|FullEvacuator|Evacuator)/,
  ],
  [
    'compiler',
    /v8::internal::(compiler|maglev|baseline|Parser|Bytecode|interpreter::BytecodeGenerator|Compiler|OptimizingCompileDispatcher|turboshaft|wasm|CodeGenerator|Assembler|MacroAssembler|RegExpCompiler|RegExpBytecodeGenerator|AstNodeFactory|Scanner|Zone)/,
  ],
  ['jit code', /^\?\?\?:0x|^0x/],
];

/** The total Ir of the newest dump of `pid` in `dir` (each --dump writes callgrind.out.<pid>.<n>), and its Ir by KINDS. */
function lastDumpIr(dir, pid, n) {
  const file = join(dir, `callgrind.out.${pid}.${n}`);
  const text = readFileSync(file, 'utf8');
  const m = /^totals:\s+(\d+)/m.exec(text) ?? /^summary:\s+(\d+)/m.exec(text);
  if (!m) throw new Error(`no totals in ${file}`);
  const kinds = { gc: 0, compiler: 0, 'jit code': 0 };
  try {
    const out = execFileSync('callgrind_annotate', ['--threshold=100', '--inclusive=no', file], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
    for (const line of out.split('\n')) {
      const f = /^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$/.exec(line);
      if (!f) continue;
      const ir = Number(f[1].replaceAll(',', ''));
      const where = f[2];
      const kind = KINDS.find(([, re]) => re.test(where.replace(/^[^:]*:/, '')) || re.test(where));
      if (kind) kinds[kind[0]] += ir;
    }
  } catch {}
  rmSync(file);
  return { ir: Number(m[1]), kinds };
}

function drive(url, requests, key, { method, body } = {}) {
  const args = [join(HERE, 'lib/keepalive-client.mjs'), '--url', url, '--requests', String(requests), '--connections', String(CONNS), '--timeout-ms', '900000'];
  if (key) args.push('--key', key);
  if (method) args.push('--method', method);
  if (body !== undefined) args.push('--body', body);
  const out = execFileSync(process.execPath, args, { encoding: 'utf8', timeout: 960_000 });
  return JSON.parse(out.trim().split('\n').pop());
}

/** Warm-up, the thrown-away window, the idle window, the measured windows: figures for one target in one run. */
async function measureTarget({ name, pid, url, key, dir, redisClient, request }) {
  let dumps = 0;
  const window = async (requests) => {
    control(pid, '--zero');
    control(pid, '--instr=on');
    const t0 = performance.now();
    const r = requests > 0 ? drive(url, requests, key, request) : (await sleep(IDLE_S * 1000), { done: 0, statuses: {} });
    const seconds = (performance.now() - t0) / 1000;
    control(pid, '--instr=off');
    control(pid, '--dump');
    dumps++;
    await waitFor(() => existsSync(join(dir, `callgrind.out.${pid}.${dumps}`)), 60_000, `${name}'s dump ${dumps}`);
    await sleep(200);
    return { ...lastDumpIr(dir, pid, dumps), seconds, done: r.done, statuses: r.statuses };
  };
  if (WARMUP) drive(url, WARMUP, key, request);
  if (WARMUP_WINDOW) await window(WARMUP_WINDOW);
  const idle = IDLE_S ? await window(0) : undefined;
  const idleIrPerS = idle ? idle.ir / idle.seconds : 0;
  const before = redisClient ? await redisSnapshot(redisClient) : undefined;
  const windows = [];
  for (let w = 0; w < WINDOWS; w++) {
    const r = await window(REQUESTS);
    const non200 = Object.entries(r.statuses).filter(([s]) => s !== '200');
    if (non200.length) throw new Error(`${name} answered ${JSON.stringify(r.statuses)} in a measured window`);
    const perReq = (x) => Math.round(x / r.done);
    windows.push({
      ...r,
      irPerReq: r.ir / r.done,
      idleCorrected: (r.ir - idleIrPerS * r.seconds) / r.done,
      kindsPerReq: Object.fromEntries(Object.entries(r.kinds).map(([kk, v]) => [kk, perReq(v)])),
      // Without V8's collector and compilers: the request path's own work (its allocations' cost is in gc).
      withoutGcAndCompilerPerReq: (r.ir - r.kinds.gc - r.kinds.compiler) / r.done,
    });
    log(
      `${name}: window ${w + 1}: ${Math.round(r.ir / r.done).toLocaleString('en')} instructions/request (idle-corrected ${Math.round(windows.at(-1).idleCorrected).toLocaleString('en')}; ${Object.entries(
        windows.at(-1).kindsPerReq,
      )
        .map(([kk, v]) => `${kk} ${v.toLocaleString('en')}`)
        .join(', ')}), ${r.done} requests in ${r.seconds.toFixed(1)} s`,
    );
  }
  const redis = redisClient && before ? redisDelta(before, await redisSnapshot(redisClient)) : undefined;
  const requests = windows.reduce((n, w) => n + w.done, 0);
  return {
    name,
    windows,
    irPerReq: median(windows.map((w) => w.irPerReq)),
    idleCorrected: median(windows.map((w) => w.idleCorrected)),
    withoutGcAndCompiler: median(windows.map((w) => w.withoutGcAndCompilerPerReq)),
    gcPerReq: median(windows.map((w) => w.kindsPerReq.gc)),
    compilerPerReq: median(windows.map((w) => w.kindsPerReq.compiler)),
    idleIrPerS,
    redisCmdsPerReq: redis ? redis.commands / requests : undefined,
    // The gateway's own round trips: its one limit check per request is an EVALSHA (commandstats counts the commands
    // inside it too; those are in redisCmdsPerReq).
    evalshaPerReq: redis ? (redis.calls.evalsha ?? 0) / requests : undefined,
    redisCalls: redis?.calls,
  };
}

async function main() {
  const startedAt = new Date();
  const tmp = mkdtempSync(join(tmpdir(), 'tollgate-instructions-'));
  const procs = new Procs();
  procs.scratch(tmp);
  process.on('exit', () => procs.killAllSync());
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => procs.stopAll(5000).finally(() => process.exit(130)));
  const loadBefore = loadavg();
  const results = [];
  try {
    // s's services (routes50, doc500) are six more ports of the same upstream process.
    const upstream = await procs.forkHelper('upstream', join(HERE, 'upstream.mjs'), ['--extra-ports', '6']);
    const ports = upstream.ready.ports.slice(1);
    const doc = VARIANT_NAMES.includes('doc500') ? writeDoc500(tmp) : undefined;
    const ctx = { ports, doc, upstreamUrl: `http://127.0.0.1:${upstream.port}` };
    const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
    log(`upstream ${upstreamUrl}; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);

    // Each build gets its own redis-server and a key issued by its own CLI (its key layout).
    const startTollgate = ({ gw, variant, name }, n) => {
      let setup;
      const v = VARIANTS[variant];
      const routing = v.routing(ctx);
      const config = (port, redis) => gatewayConfig({ port, upstreamUrl, redis: { url: redis.url }, routing });
      return async (dir) => {
        setup ??= await (async () => {
          const redis = await startRedis(procs, join(tmp, `redis-${n}`));
          const configPath = join(tmp, `tollgate-${n}.yaml`);
          writeFileSync(configPath, `${JSON.stringify(config(1, redis), null, 2)}\n`);
          const { key } = await cliCreateKey({ repoRoot: gw, configPath, plan: 'bench', name: 'instructions-hot', env: process.env });
          log(`${name}: ${gw}, ${v.about}, redis-server ${redis.port}`);
          return { redis, configPath, key };
        })();
        const { redis, configPath, key } = setup;
        const port = await freePort();
        writeFileSync(configPath, `${JSON.stringify(config(port, redis), null, 2)}\n`);
        const logFile = join(dir, 'tollgate.log');
        const fd = openSync(logFile, 'a');
        const [cmd, ...args] = underCallgrind(dir, [process.execPath, ...NODE_FLAGS, join(gw, 'dist/cli.js'), 'serve', '--config', configPath]);
        const child = procs.spawn('tollgate', cmd, args, { cwd: gw, stdio: ['ignore', fd, 'inherit'] });
        closeSync(fd);
        await waitFor(
          () => {
            if (child.exitCode !== null) throw new Error(`tollgate exited with code ${child.exitCode}`);
            return existsSync(logFile) && readFileSync(logFile, 'utf8').includes('"msg":"tollgate gateway listening"');
          },
          180_000,
          'Tollgate under callgrind to listen',
          500,
        );
        const path = typeof v.path === 'function' ? v.path(ctx) : v.path;
        return { child, url: `http://127.0.0.1:${port}${path}`, key, redisClient: redis.client, request: { method: v.method, body: v.body } };
      };
    };
    const startBaseline = async (dir) => {
      const port = await freePort();
      const [cmd, ...args] = underCallgrind(dir, [process.execPath, join(HERE, 'baseline-proxy.mjs'), upstreamUrl, String(port)]);
      const child = procs.spawn('baseline', cmd, args, { cwd: REPO, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
      await new Promise((res, rej) => {
        const timer = setTimeout(() => rej(new Error('the baseline under callgrind did not start in 180 s')), 180_000);
        child.once('message', () => (clearTimeout(timer), res()));
        child.once('exit', (code) => (clearTimeout(timer), rej(new Error(`the baseline exited with code ${code}`))));
      });
      return { child, url: `http://127.0.0.1:${port}${PATH}` };
    };

    const targets = [
      ...(values['tollgate-only'] ? [] : [{ name: 'baseline', start: startBaseline }]),
      ...(values['baseline-only'] ? [] : TOLLGATES.map((t, n) => ({ name: t.name, start: startTollgate(t, n) }))),
    ];
    for (let run = 1; run <= RUNS; run++) {
      const order = run % 2 ? targets : [...targets].reverse();
      const byName = {};
      for (const t of order) {
        const dir = join(tmp, `run${run}-${t.name}`);
        mkdirSync(dir, { recursive: true });
        log(`run ${run}: ${t.name} under callgrind`);
        const s = await t.start(dir);
        // Valgrind's pid is the process's own (valgrind execs the tool; no wrapper process stays).
        const pid = s.child.pid;
        try {
          byName[t.name] = await measureTarget({ name: t.name, pid, url: s.url, key: s.key, dir, redisClient: s.redisClient, request: s.request });
        } finally {
          await procs.stop(s.child, 20_000);
        }
        for (const f of readdirSync(dir)) if (f.startsWith('callgrind.out')) rmSync(join(dir, f));
      }
      const r = { run, order: order.map((t) => t.name), ...byName };
      if (byName.baseline) {
        r.ratios = {};
        for (const { name } of TOLLGATES) {
          const t = byName[name];
          if (!t) continue;
          r.ratios[name] = { raw: t.irPerReq / byName.baseline.irPerReq, idleCorrected: t.idleCorrected / byName.baseline.idleCorrected };
          log(`run ${run}: ${name}/baseline ${r.ratios[name].raw.toFixed(3)} (idle-corrected ${r.ratios[name].idleCorrected.toFixed(3)})`);
        }
      }
      results.push(r);
    }
  } finally {
    await procs.stopAll(15_000).catch(() => procs.killAllSync());
    rmSync(tmp, { recursive: true, force: true });
  }
  report({ startedAt, loadBefore, results });
}

function report({ startedAt, loadBefore, results }) {
  const k = (x) => (x === undefined ? '-' : Math.round(x).toLocaleString('en'));
  const names = ['baseline', ...TOLLGATES.map((t) => t.name)];
  const lines = [];
  lines.push(
    `Instructions per request under callgrind (${startedAt.toISOString().slice(0, 16)}Z; ${GATEWAYS.map((g) => `${g.split('/').pop()} = ${g}`).join(', ')}; Node.js ${process.version}${NODE_FLAGS.length ? `, Tollgate with ${NODE_FLAGS.join(' ')}` : ''}; load average ${loadBefore[0].toFixed(2)} before, ${loadavg()[0].toFixed(2)} after)`,
  );
  for (const v of VARIANT_NAMES) lines.push(`variant ${v}: ${VARIANTS[v].about}`);
  lines.push(
    `${WINDOWS} window(s) of ${REQUESTS} requests per target per run, ${CONNS} keep-alive connections, after ${WARMUP} + ${WARMUP_WINDOW} warm-up requests`,
  );
  lines.push('');
  lines.push('| run | target | per window | median | idle-corrected | GC / compiler | without GC and compiler | idle Ir/s | Redis cmds/req | EVALSHA/req |');
  lines.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    for (const name of names) {
      const t = r[name];
      if (!t) continue;
      const cmds = t.redisCmdsPerReq === undefined ? '' : t.redisCmdsPerReq.toFixed(3);
      const evalsha = t.evalshaPerReq === undefined ? '' : t.evalshaPerReq.toFixed(3);
      lines.push(
        `| ${r.run} | ${name} | ${t.windows.map((w) => k(w.irPerReq)).join(', ')} | ${k(t.irPerReq)} | ${k(t.idleCorrected)} | ${k(t.gcPerReq)} / ${k(t.compilerPerReq)} | ${k(t.withoutGcAndCompiler)} | ${k(t.idleIrPerS)} | ${cmds} | ${evalsha} |`,
      );
    }
  }
  const all = (name) => results.flatMap((r) => r[name]?.windows.map((w) => w.irPerReq) ?? []);
  const b = median(all('baseline'));
  lines.push('');
  const core = (nm) => median(results.flatMap((r) => r[nm]?.windows.map((w) => w.withoutGcAndCompilerPerReq) ?? []));
  const idleC = (nm) => median(results.flatMap((r) => r[nm]?.windows.map((w) => w.idleCorrected) ?? []));
  for (const { name, variant } of TOLLGATES) {
    const per = results.map((r) => r.ratios?.[name]).filter(Boolean);
    if (!per.length) continue;
    const t = median(all(name));
    const raw = per.map((p) => p.raw);
    lines.push(
      `${name}/baseline per run: ${raw.map((x) => x.toFixed(3)).join(', ')} (idle-corrected ${per.map((p) => p.idleCorrected.toFixed(3)).join(', ')}); all windows: ${k(t)} against ${k(b)} instructions/request, ${(t / b).toFixed(3)}; without GC and compiler ${(core(name) / core('baseline')).toFixed(3)}`,
    );
    if (variant === 'a') {
      lines.push(
        `  ${t / b <= INSTRUCTIONS_LINE ? 'PASS' : 'FAIL'}  (a) instructions per request <= ${INSTRUCTIONS_LINE.toFixed(2)} x baseline: ${(t / b).toFixed(3)} (per-run spread ${Math.min(...raw).toFixed(3)}-${Math.max(...raw).toFixed(3)})`,
      );
      // One limit check per request: one EVALSHA, and the nine commands Redis counts for it (the script's own calls
      // included). The windows may read a little more: the usage flush's commands come by time, not by request.
      const runsOf = results.map((r) => r[name]).filter(Boolean);
      const evalsha = Math.max(...runsOf.map((x) => x.evalshaPerReq ?? NaN));
      const cmds = median(runsOf.map((x) => x.redisCmdsPerReq ?? NaN));
      lines.push(
        `  ${evalsha <= 1.01 && cmds <= 9 * 1.02 ? 'PASS' : 'FAIL'}  (a) one Redis round trip and 9 Redis commands per request: EVALSHA/req ${evalsha.toFixed(3)} (most of any run), Redis commands/req ${cmds.toFixed(2)} (median of runs)`,
      );
    }
  }
  // Instructions per µs of CPU: the baseline's instructions per request over its CPU µs per request on the clock.
  const perUs = BASELINE_CPU_US && b ? b / BASELINE_CPU_US : undefined;
  if (perUs)
    lines.push(
      `instructions per µs: ${k(b)} / ${BASELINE_CPU_US} µs (the baseline's user CPU per request on the clock, --baseline-user-us) = ${perUs.toFixed(0)}`,
    );
  const comparisons = [];
  for (const gw of GATEWAYS) {
    for (const pair of PAIRS) {
      const [na, nb] = [gatewayName(gw, pair.a), gatewayName(gw, pair.b)];
      if (!VARIANT_NAMES.includes(pair.a) || !VARIANT_NAMES.includes(pair.b)) continue;
      const runsBoth = results.filter((r) => r[na] && r[nb]);
      if (!runsBoth.length) continue;
      const [ta, tb] = [median(all(na)), median(all(nb))];
      const cmds = `Redis commands/req ${runsBoth.map((r) => `${r[nb].redisCmdsPerReq?.toFixed(2)} vs ${r[na].redisCmdsPerReq?.toFixed(2)}`).join(', ')}; EVALSHA/req ${runsBoth.map((r) => `${r[nb].evalshaPerReq?.toFixed(3)} vs ${r[na].evalshaPerReq?.toFixed(3)}`).join(', ')}`;
      // Judged on the gateway's round trips (EVALSHA, one limit check per request). The commands beyond the script's
      // nine per request are the usage flush's and the memory check's (INCRBY, HINCRBY, CONFIG GET), sent by time, not
      // by request: under callgrind a window lasts 20-100 s, so they weigh with its length (the JSON has them by name).
      // A window may read a little under one EVALSHA per request on either side: requests answered from the degraded
      // path when valgrind's slowness trips the 100 ms command timeout. The line: never more than one, nor than a's.
      const sameRedis = runsBoth.every((r) => r[nb].evalshaPerReq <= Math.max(r[na].evalshaPerReq, 1) + 0.01);
      const c = { pair: `${nb} against ${na}`, what: pair.what, kind: pair.kind, medians: [tb, ta], sameRedis };
      if (pair.kind === 'ratio') {
        const per = runsBoth.map((r) => r[nb].irPerReq / r[na].irPerReq);
        c.ratio = tb / ta;
        c.perRun = per;
        c.idleCorrected = idleC(nb) / idleC(na);
        c.withoutGcAndCompiler = core(nb) / core(na);
        lines.push(
          `${nb} / ${na} (${pair.what}): all windows ${k(tb)} / ${k(ta)} = ${c.ratio.toFixed(3)}; per run ${per.map((x) => x.toFixed(3)).join(', ')}; idle-corrected ${c.idleCorrected.toFixed(3)}; without GC and compiler ${c.withoutGcAndCompiler.toFixed(3)}`,
        );
        lines.push(`  ${c.ratio <= pair.line ? 'PASS' : 'FAIL'}  instructions per request <= ${pair.line.toFixed(2)} x`);
      } else {
        const per = runsBoth.map((r) => r[nb].irPerReq - r[na].irPerReq);
        c.diff = tb - ta;
        c.perRun = per;
        c.idleCorrectedDiff = idleC(nb) - idleC(na);
        c.withoutGcAndCompilerDiff = core(nb) - core(na);
        if (perUs) c.diffUs = c.diff / perUs;
        const sign = (x) => `${x >= 0 ? '+' : ''}${k(x)}`;
        lines.push(
          `${nb} - ${na} (${pair.what}): all windows ${k(tb)} - ${k(ta)} = ${sign(c.diff)} instructions/request (${((c.diff / ta) * 100).toFixed(1)}%)${perUs ? `, ${(c.diff / perUs).toFixed(1)} µs` : ''}; per run ${per.map(sign).join(', ')}; idle-corrected ${sign(c.idleCorrectedDiff)}; without GC and compiler ${sign(c.withoutGcAndCompilerDiff)}`,
        );
        if (pair.lineUs)
          lines.push(
            perUs
              ? `  ${c.diffUs < pair.lineUs ? 'PASS' : 'FAIL'}  < ${pair.lineUs} µs of CPU per request: ${c.diffUs.toFixed(1)} µs`
              : `  SKIP  < ${pair.lineUs} µs of CPU per request: needs --baseline-user-us`,
          );
      }
      lines.push(`  ${sameRedis ? 'PASS' : 'FAIL'}  the gateway's Redis round trips per request unchanged: ${cmds}`);
      comparisons.push(c);
    }
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  const outDir = resolve(values.out ?? join(HERE, 'results'));
  mkdirSync(outDir, { recursive: true });
  const file = join(
    outDir,
    `instructions-${startedAt
      .toISOString()
      .replace(/\.\d+Z$/, 'Z')
      .replace(/:/g, '-')}.json`,
  );
  writeFileSync(
    file,
    `${JSON.stringify({ startedAt, gateways: GATEWAYS, variants: VARIANT_NAMES, options: values, loadBefore, loadAfter: loadavg(), instructionsPerUs: perUs, comparisons, results }, null, 2)}\n`,
  );
  process.stderr.write(`written ${file}\n`);
}

// The redis-server clients (ioredis) keep the event loop alive after their servers stop: the run is over once reported.
await main();
process.exit(0);
