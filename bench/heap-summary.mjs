#!/usr/bin/env node
// A V8 heap snapshot by constructor: self size and count of each, largest first; with two snapshots, B against A,
// largest changes first. For what a gateway's RSS holds (npm run bench -- --heap-snapshot writes one of the main
// Tollgate after the last scenario).
//
//   node bench/heap-summary.mjs A.heapsnapshot [B.heapsnapshot] [--top N]
import { readFileSync } from 'node:fs';

/** Self size and count by constructor (objects, closures, native objects) or by V8 type (strings, code, arrays...). */
function summarize(file) {
  const s = JSON.parse(readFileSync(file, 'utf8'));
  const fields = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const w = fields.length;
  const [ti, ni, si] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const by = new Map();
  let total = 0;
  for (let i = 0; i < s.nodes.length; i += w) {
    const t = types[s.nodes[i + ti]];
    const name = t === 'object' || t === 'closure' || t === 'native' ? s.strings[s.nodes[i + ni]] : /string/.test(t) ? '(string)' : `(${t})`;
    const e = by.get(name) ?? { size: 0, count: 0 };
    e.size += s.nodes[i + si];
    e.count++;
    by.set(name, e);
    total += s.nodes[i + si];
  }
  return { by, total };
}

const args = process.argv.slice(2);
const topAt = args.indexOf('--top');
const top = topAt >= 0 ? Number(args[topAt + 1]) || 30 : 30;
const files = args.filter((a, i) => !a.startsWith('--') && i !== topAt + 1);
if (files.length < 1 || files.length > 2) {
  process.stderr.write('usage: node bench/heap-summary.mjs A.heapsnapshot [B.heapsnapshot] [--top N]\n');
  process.exit(2);
}
const [a, b] = files.map(summarize);
const kb = (x) => `${(x / 1024).toFixed(0).padStart(8)} KB`;
process.stdout.write(
  `heap (self sizes): A ${(a.total / 1048576).toFixed(1)} MB${b ? `, B ${(b.total / 1048576).toFixed(1)} MB, B - A ${((b.total - a.total) / 1048576).toFixed(1)} MB` : ''}\n`,
);
const none = { size: 0, count: 0 };
const rows = [...new Set([...a.by.keys(), ...(b ? b.by.keys() : [])])].map((k) => ({ k, a: a.by.get(k) ?? none, b: b?.by.get(k) ?? none }));
rows.sort((x, y) => (b ? Math.abs(y.b.size - y.a.size) - Math.abs(x.b.size - x.a.size) : y.a.size - x.a.size));
process.stdout.write(b ? '       A size   A count        B size   B count     B - A  constructor\n' : '         size     count  constructor\n');
for (const r of rows.slice(0, top)) {
  const cols = b
    ? `${kb(r.a.size)} ${String(r.a.count).padStart(9)} ${kb(r.b.size)} ${String(r.b.count).padStart(9)} ${kb(r.b.size - r.a.size)}`
    : `${kb(r.a.size)} ${String(r.a.count).padStart(9)}`;
  process.stdout.write(`${cols}  ${r.k.slice(0, 70)}\n`);
}
