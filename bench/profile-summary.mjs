#!/usr/bin/env node
// Summarizes a V8 .cpuprofile (node --cpu-prof): top functions by self time, self time by package or source file,
// and top functions by inclusive time (each sample counted once per function, so recursion is not double counted).
//
//   node bench/profile-summary.mjs FILE.cpuprofile [--top N]
//   node bench/profile-summary.mjs --compare A.cpuprofile A_REQUESTS B.cpuprofile B_REQUESTS [--top N]
//     (B against A, per request: what B adds, by package, by function and by request-path stage (STAGES))
//
// Also imported by bench/run.mjs (--profile).
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

/** Where a function lives: a package, a node: module, a project file, or a V8 pseudo-frame. */
function locate(url, root) {
  if (!url) return { where: '', group: '(native/V8)' };
  let u = url;
  if (u.startsWith('file://')) {
    try {
      u = fileURLToPath(u);
    } catch {}
  }
  if (u.startsWith('node:')) return { where: u, group: u };
  const nm = u.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = u.slice(nm + '/node_modules/'.length).split('/');
    const pkg = rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
    return { where: `${pkg}/${rest.slice(rest[0].startsWith('@') ? 2 : 1).join('/')}`, group: pkg };
  }
  let rel = root && u.startsWith(`${root}/`) ? u.slice(root.length + 1) : u;
  // Another checkout's build (bench/run.mjs --gateway): its dist/ files are named as this one's, so two builds'
  // profiles compare function by function.
  const d = rel.startsWith('/') ? rel.lastIndexOf('/dist/') : -1;
  if (d >= 0) rel = rel.slice(d + 1);
  return { where: rel, group: rel.startsWith('dist/') ? `tollgate ${rel.slice(5)}` : rel };
}

/**
 * The request path's stages, by where a function lives: a Tollgate source file (dist/<folder>/<file>.js) or a package.
 * First match wins. Node's own modules and native frames (JSON, string encoding, a socket write) belong to no stage:
 * their time is charged to the nearest caller on the stack that does, so a log line's JSON and its write count as
 * logging and the proxy's socket writes as proxy.
 */
export const STAGES = [
  ['route matching (routing/)', [/^dist\/routing\//]],
  ['key filter (keys/known-hashes)', [/^dist\/keys\/known-hashes\./]],
  ['key source reading (http/credentials)', [/^dist\/http\/credentials\./]],
  ['key lookup (keys/)', [/^dist\/keys\//]],
  ['window list (limits/windows)', [/^dist\/limits\/windows\./]],
  ['limit check (limits/)', [/^dist\/limits\//]],
  ['header writing (http/headers)', [/^dist\/http\/headers\./]],
  ['security headers (helmet)', [/^helmet$/]],
  [
    'logging (observability/logger, pino)',
    [
      /^dist\/observability\/logger\./,
      /^(pino|pino-http|pino-std-serializers|sonic-boom|fast-redact|quick-format-unescaped|safe-stable-stringify|thread-stream|on-exit-leak-free|atomic-sleep|fast-safe-stringify)$/,
    ],
  ],
  ['metrics (observability/metrics, prom-client)', [/^dist\/observability\/metrics\./, /^(prom-client|tdigest|bintrees)$/]],
  ['tracing (observability/tracing)', [/^dist\/observability\/tracing\./, /^@opentelemetry\//]],
  ['usage ledger (usage/)', [/^dist\/usage\//]],
  [
    'Redis client (storage/, ioredis)',
    [/^dist\/storage\//, /^(ioredis|redis-parser|redis-errors|denque|cluster-key-slot|standard-as-callback|lodash\.[a-z]+)$/],
  ],
  [
    'proxy (pipeline/proxy, http-proxy-middleware)',
    [
      /^dist\/pipeline\/(proxy|upstream-try|proxy-rules|exchange|request-body)\./,
      /^(http-proxy-middleware|httpxy|http-proxy|eventemitter3|follow-redirects|requires-port)$/,
    ],
  ],
  ['pipeline stages (pipeline/stages, context)', [/^dist\/pipeline\//, /^dist\/http\//]],
  [
    'Express',
    [
      /^(express|router|finalhandler|path-to-regexp|on-finished|parseurl|qs|body-parser|debug|depd|send|serve-static|content-type|type-is|accepts|vary|encodeurl|escape-html|fresh|range-parser|proxy-addr|forwarded|ipaddr\.js|statuses|mime-types|mime-db|cookie|etag|merge-descriptors|setprototypeof|http-errors|utils-merge|methods|ee-first|unpipe|media-typer|negotiator|is-promise|content-disposition|cookie-signature|safe-buffer|iconv-lite|raw-body|bytes|toidentifier|inherits|call-bind.*|get-intrinsic|side-channel.*|object-inspect|es-errors|gopd|has-symbols|function-bind|hasown|math-intrinsics|dunder-proto|es-define-property|es-object-atoms|get-proto|call-bound|once|wrappy|router)$/,
    ],
  ],
  ['server (server/, compose)', [/^dist\/server\//, /^dist\/[a-z-]+\.js$/]],
  ['Tollgate, other', [/^dist\//]],
];

function stageOfWhere(where, group) {
  for (const [name, tests] of STAGES) if (tests.some((t) => t.test(where) || t.test(group))) return name;
  return undefined;
}

/**
 * Busy time by stage (STAGES): each sample's self time charged to the innermost frame on its stack that belongs to a
 * stage; `Node (no caller in a stage)` when none does (the HTTP parser, the event loop, timers), `(garbage collector)`
 * and `(program)` as V8 reports them. `window`: { fromUs, toUs } on the profile's own clock (profile.startTime's), the
 * samples taken in it only (bench/run.mjs's per-stage line leaves out start-up and warm-up that way).
 */
export function stagesOfProfile(profile, { root, window } = {}) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const memo = new Map();
  const stageOf = (id) => {
    if (memo.has(id)) return memo.get(id);
    const n = nodes.get(id);
    const name = n.callFrame.functionName;
    let st;
    if (name === '(garbage collector)' || name === '(program)' || name === '(idle)') st = name;
    else if (name === '(root)') st = 'Node (no caller in a stage)';
    else {
      const { where, group } = n.callFrame.url ? locate(n.callFrame.url, root) : { where: '', group: '' };
      const pkgWhere = where.startsWith('dist/') ? where : group;
      st = n.callFrame.url && !where.startsWith('node:') ? stageOfWhere(pkgWhere, group) : undefined;
      if (st === undefined) st = parent.has(id) ? stageOf(parent.get(id)) : 'Node (no caller in a stage)';
    }
    memo.set(id, st);
    return st;
  };
  const { samples = [], timeDeltas = [] } = profile;
  const meanDelta = samples.length > 1 ? (profile.endTime - profile.startTime) / samples.length : 0;
  const us = new Map();
  let at = profile.startTime;
  for (let i = 0; i < samples.length; i++) {
    at += timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    const w = i + 1 < timeDeltas.length ? Math.max(0, timeDeltas[i + 1]) : meanDelta;
    const st = stageOf(samples[i]);
    if (st === '(idle)') continue;
    us.set(st, (us.get(st) ?? 0) + w);
  }
  return us;
}

/** Two profiles' busy time by stage, per request served: a's, b's and b minus a, in µs (largest b first). */
export function compareStages(a, aRequests, b, bRequests, { root, aWindow, bWindow } = {}) {
  const sa = stagesOfProfile(a, { root, window: aWindow });
  const sb = stagesOfProfile(b, { root, window: bWindow });
  const names = new Set([...sa.keys(), ...sb.keys()]);
  const rows = [...names].map((name) => {
    const ua = (sa.get(name) ?? 0) / aRequests;
    const ub = (sb.get(name) ?? 0) / bRequests;
    return { stage: name, a: ua, b: ub, diff: ub - ua };
  });
  rows.sort((x, y) => y.b - x.b);
  const total = (m, n) => [...m.values()].reduce((s, x) => s + x, 0) / n;
  return { rows, busy: { a: total(sa, aRequests), b: total(sb, bRequests) } };
}

export function formatStages(c, { a = 'a', b = 'b' } = {}) {
  const us = (x) => x.toFixed(1).padStart(7);
  const lines = [`  busy CPU per request by stage under the profiler (µs: ${a}, ${b}, difference; share of ${b}):`];
  for (const r of c.rows) lines.push(`    ${us(r.a)} ${us(r.b)} ${us(r.diff)} ${((100 * r.b) / c.busy.b).toFixed(1).padStart(5)}%  ${r.stage}`);
  lines.push(`    ${us(c.busy.a)} ${us(c.busy.b)} ${us(c.busy.b - c.busy.a)}        all (${b}/${a} ${(c.busy.b / c.busy.a).toFixed(3)})`);
  return lines.join('\n');
}

export function summarizeProfile(profile, { top = 25, root } = {}) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  // Weight of each sample: the time until the next sample (the last one gets the mean interval).
  const { samples = [], timeDeltas = [] } = profile;
  const selfUs = new Map();
  const meanDelta = samples.length > 1 ? (profile.endTime - profile.startTime) / samples.length : 0;
  for (let i = 0; i < samples.length; i++) {
    const w = i + 1 < timeDeltas.length ? Math.max(0, timeDeltas[i + 1]) : meanDelta;
    selfUs.set(samples[i], (selfUs.get(samples[i]) ?? 0) + w);
  }

  // Native frames (no script: writev, string encoding, JSON...) are charged to the package of their nearest
  // JavaScript caller, so "self time by package" says who asked for the work.
  const groupOfNode = new Map();
  const groupOf = (id) => {
    if (groupOfNode.has(id)) return groupOfNode.get(id);
    const n = nodes.get(id);
    const name = n.callFrame.functionName;
    let g;
    if (SPECIAL.has(name)) g = name;
    else if (n.callFrame.url) g = locate(n.callFrame.url, root).group;
    else g = parent.has(id) ? groupOf(parent.get(id)) : '(native/V8)';
    if (g === '(root)') g = '(native/V8)';
    groupOfNode.set(id, g);
    return g;
  };
  const keyOf = new Map();
  const info = new Map();
  for (const n of profile.nodes) {
    const cf = n.callFrame;
    const name = cf.functionName || '(anonymous)';
    const special = SPECIAL.has(name);
    const { where } = special ? { where: '' } : locate(cf.url, root);
    const native = !special && !cf.url;
    const group = groupOf(n.id);
    const key = special ? name : native ? `${name} (native) ${group}` : `${name} ${where}:${cf.lineNumber + 1}`;
    keyOf.set(n.id, key);
    if (!info.has(key))
      info.set(key, {
        name,
        where: native ? `native, from ${group}` : where ? `${where}:${cf.lineNumber + 1}` : '',
        group,
        project: !special && !!where && where.startsWith('dist/'),
      });
  }

  let totalUs = 0;
  let idleUs = 0;
  const selfByKey = new Map();
  const selfByGroup = new Map();
  const inclByKey = new Map();
  const inclByGroup = new Map();
  for (const [id, us] of selfUs) {
    totalUs += us;
    const key = keyOf.get(id);
    if (key === '(idle)') {
      idleUs += us;
      continue;
    }
    selfByKey.set(key, (selfByKey.get(key) ?? 0) + us);
    const g = info.get(key).group;
    selfByGroup.set(g, (selfByGroup.get(g) ?? 0) + us);
    const seen = new Set();
    const seenGroups = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const k = keyOf.get(cur);
      if (SPECIAL.has(k)) continue;
      if (!seen.has(k)) {
        seen.add(k);
        inclByKey.set(k, (inclByKey.get(k) ?? 0) + us);
      }
      const cg = groupOf(cur);
      if (!seenGroups.has(cg)) {
        seenGroups.add(cg);
        inclByGroup.set(cg, (inclByGroup.get(cg) ?? 0) + us);
      }
    }
  }
  const busyUs = totalUs - idleUs;
  const rank = (m, filter = () => true) =>
    [...m.entries()]
      .filter(([k]) => filter(info.get(k)))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => ({ ...(info.get(k) ?? { name: k, where: '', group: k }), ms: us / 1000, pct: busyUs ? (100 * us) / busyUs : 0 }));
  return {
    sampledMs: totalUs / 1000,
    idleMs: idleUs / 1000,
    busyMs: busyUs / 1000,
    samples: samples.length,
    selfByFunction: rank(selfByKey),
    selfByGroup: [...selfByGroup.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([group, us]) => ({ group, ms: us / 1000, pct: busyUs ? (100 * us) / busyUs : 0 })),
    inclusiveByFunction: rank(inclByKey),
    // Time with a package anywhere on the stack (each sample once per package): what a package costs with all
    // it calls, e.g. pino-http's logging including JSON and the write.
    inclusiveByGroup: [...inclByGroup.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([group, us]) => ({ group, ms: us / 1000, pct: busyUs ? (100 * us) / busyUs : 0 })),
    // Tollgate's own functions (dist/), callees included: the request stages.
    inclusiveProject: rank(inclByKey, (i) => i?.project),
  };
}

/**
 * Two profiles of processes that served the same kind of requests (the baseline and Tollgate), compared per request:
 * busy CPU, and self time by package and by function, each as a's, b's and b minus a, in µs per request. Under the
 * profiler everything is slower than in the bench's table; the differences are what to read.
 */
export function compareProfiles(a, aRequests, b, bRequests, { root, top = 1e9 } = {}) {
  const sa = summarizeProfile(a, { top, root });
  const sb = summarizeProfile(b, { top, root });
  const perReq = (ms, n) => (n > 0 ? (ms * 1000) / n : NaN);
  const diff = (la, lb, key) => {
    const m = new Map();
    for (const x of la) m.set(`${x[key]}\0${x.where ?? ''}`, { name: x[key], where: x.where, a: perReq(x.ms, aRequests), b: 0 });
    for (const x of lb) {
      const k = `${x[key]}\0${x.where ?? ''}`;
      const e = m.get(k) ?? { name: x[key], where: x.where, a: 0, b: 0 };
      e.b = perReq(x.ms, bRequests);
      m.set(k, e);
    }
    return [...m.values()].map((e) => ({ ...e, diff: e.b - e.a })).sort((x, y) => y.diff - x.diff);
  };
  return {
    requests: { a: aRequests, b: bRequests },
    busyUsPerRequest: { a: perReq(sa.busyMs, aRequests), b: perReq(sb.busyMs, bRequests) },
    byGroup: diff(sa.selfByGroup, sb.selfByGroup, 'group'),
    byFunction: diff(sa.selfByFunction, sb.selfByFunction, 'name'),
  };
}

export function formatComparison(c, { top = 25, a = 'a', b = 'b' } = {}) {
  const us = (x) => (Number.isFinite(x) ? x.toFixed(1) : '-').padStart(7);
  const lines = [];
  lines.push(`CPU per request under the profiler, ${b} against ${a} (${c.requests.b} and ${c.requests.a} requests served in the profiled lifetimes):`);
  lines.push(
    `  busy: ${a} ${c.busyUsPerRequest.a.toFixed(0)} µs, ${b} ${c.busyUsPerRequest.b.toFixed(0)} µs, ${b}/${a} ${(c.busyUsPerRequest.b / c.busyUsPerRequest.a).toFixed(2)}`,
  );
  lines.push(`  self time by package, largest additions first (µs/request: ${a}, ${b}, difference):`);
  for (const g of c.byGroup.slice(0, top)) lines.push(`    ${us(g.a)} ${us(g.b)} ${us(g.diff)}  ${g.name}`);
  lines.push('  self time by function, largest additions first:');
  for (const f of c.byFunction.slice(0, top)) lines.push(`    ${us(f.a)} ${us(f.b)} ${us(f.diff)}  ${f.name}  ${f.where ?? ''}`);
  return lines.join('\n');
}

export function formatSummary(s, { top = 25 } = {}) {
  const pct = (x) => `${x.toFixed(1).padStart(5)}%`;
  const ms = (x) => `${x.toFixed(0).padStart(7)} ms`;
  const lines = [];
  lines.push(
    `  ${s.samples} samples over ${(s.sampledMs / 1000).toFixed(1)} s: busy ${(s.busyMs / 1000).toFixed(1)} s, idle ${(s.idleMs / 1000).toFixed(1)} s (percentages are of busy time)`,
  );
  lines.push('  self time by function:');
  for (const f of s.selfByFunction.slice(0, top)) lines.push(`    ${pct(f.pct)} ${ms(f.ms)}  ${f.name}  ${f.where}`);
  lines.push('  self time by package / file:');
  for (const g of s.selfByGroup.slice(0, top)) lines.push(`    ${pct(g.pct)} ${ms(g.ms)}  ${g.group}`);
  lines.push('  inclusive time by package / file (callees included, each sample once per package; nested like the list below):');
  for (const g of s.inclusiveByGroup.slice(0, top)) lines.push(`    ${pct(g.pct)} ${ms(g.ms)}  ${g.group}`);
  lines.push("  inclusive time of Tollgate's own functions (dist/, callees included; a middleware that calls next() synchronously");
  lines.push('  also holds the stages after it up to the first await, so read these as nested, not additive):');
  for (const f of s.inclusiveProject.slice(0, top)) lines.push(`    ${pct(f.pct)} ${ms(f.ms)}  ${f.name}  ${f.where}`);
  return lines.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
  if (args[0] === '--compare') {
    // node bench/profile-summary.mjs --compare A.cpuprofile A_REQUESTS B.cpuprofile B_REQUESTS [--top N]
    const [, fa, na, fb, nb] = args;
    const topAt = args.indexOf('--top');
    if (!fa || !fb || !(Number(na) > 0) || !(Number(nb) > 0)) {
      process.stderr.write('usage: node bench/profile-summary.mjs --compare A.cpuprofile A_REQUESTS B.cpuprofile B_REQUESTS [--top N]\n');
      process.exit(2);
    }
    const read = (f) => JSON.parse(readFileSync(f, 'utf8'));
    const pa = read(fa);
    const pb = read(fb);
    const c = compareProfiles(pa, Number(na), pb, Number(nb), { root });
    const st = compareStages(pa, Number(na), pb, Number(nb), { root });
    process.stdout.write(
      `A: ${fa}\nB: ${fb}\n${formatComparison(c, { top: topAt >= 0 ? Number(args[topAt + 1]) || 25 : 25, a: 'A', b: 'B' })}\n${formatStages(st, { a: 'A', b: 'B' })}\n`,
    );
    process.exit(0);
  }
  const topIdx = args.indexOf('--top');
  const file = args.find((a, i) => !a.startsWith('--') && i !== topIdx + 1);
  const top = topIdx >= 0 ? Number(args[topIdx + 1]) || 25 : 25;
  if (!file) {
    process.stderr.write('usage: node bench/profile-summary.mjs FILE.cpuprofile [--top N]\n');
    process.exit(2);
  }
  const summary = summarizeProfile(JSON.parse(readFileSync(file, 'utf8')), { top, root });
  process.stdout.write(`${file}\n${formatSummary(summary, { top })}\n`);
}
