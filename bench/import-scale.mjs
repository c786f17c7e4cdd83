// `tollgate keys import` at scale: generates --records customer records (JSON lines: half with an id, half without,
// sha256 in hex, a name and a metadata entry each), imports them with the built CLI under /usr/bin/time -v into the
// bench's own redis-server, and prints the peak RSS, the wall time, the Redis commands per record (INFO commandstats)
// and the progress lines. Then imports the same file again (every record unchanged, nothing written).
// Usage: npm run bench:import [-- --records 1000000]
import { mkdtempSync, rmSync, writeFileSync, createWriteStream } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Procs } from './lib/procs.mjs';
import { redisDelta, redisSnapshot, startRedis } from './lib/redis.mjs';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({ options: { records: { type: 'string', default: '1000000' } } });
const RECORDS = Number(values.records);
if (!Number.isInteger(RECORDS) || RECORDS < 1) throw new Error('--records must be a positive whole number');

async function writeFile(path) {
  const out = createWriteStream(path);
  for (let i = 1; i <= RECORDS; i++) {
    const rec = {
      ...(i % 2 === 0 ? { id: `cust_${i}` } : {}),
      name: `customer ${i}`,
      plan: 'free',
      sha256: randomBytes(32).toString('hex'),
      metadata: { account: `a_${i}` },
    };
    if (!out.write(`${JSON.stringify(rec)}\n`)) await new Promise((r) => out.once('drain', r));
  }
  await new Promise((r) => out.end(r));
}

function timedImport(config, file) {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/time', ['-v', process.execPath, join(repoRoot, 'dist/cli.js'), 'keys', 'import', '--file', file, '--config', config], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('exit', (code) => {
      const maxrssKb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(stderr)?.[1]);
      const wall = /Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)/.exec(stderr)?.[1] ?? '?';
      const progress = stderr.split('\n').filter((l) => /^(checked|written): /.test(l));
      resolve({ code, stdout: stdout.trim(), maxrssMb: maxrssKb / 1024, wall, progress, stderr });
    });
  });
}

const procs = new Procs();
process.on('exit', () => procs.killAllSync());
const dir = mkdtempSync(join(tmpdir(), 'tollgate-import-scale-'));
procs.scratch(dir);
try {
  const file = join(dir, 'keys.jsonl');
  let t0 = performance.now();
  await writeFile(file);
  console.log(`${RECORDS} records generated in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const server = await startRedis(procs, join(dir, 'redis'));
  const config = join(dir, 'gateway.yaml');
  writeFileSync(config, JSON.stringify({ redis: { url: server.url, prefix: 'tollgate:' }, plans: { free: { perMinute: 60, perDay: 1000 } } }));
  for (const round of ['first import', 'same file again']) {
    const before = await redisSnapshot(server.client);
    t0 = performance.now();
    const r = await timedImport(config, file);
    const after = await redisSnapshot(server.client);
    if (r.code !== 0) throw new Error(`import exited ${r.code}: ${r.stderr.slice(-2000)}`);
    const delta = redisDelta(before, after);
    const commands = Object.entries(delta.calls)
      .filter(([, n]) => n > 0)
      .map(([c, n]) => `${c} ${(n / RECORDS).toFixed(2)}`)
      .join(', ');
    console.log(`\n${round}: ${r.stdout}`);
    console.log(`  wall ${r.wall} (${((performance.now() - t0) / 1000).toFixed(1)} s), peak RSS ${r.maxrssMb.toFixed(0)} MB`);
    console.log(`  Redis commands per record: ${commands}`);
    console.log(`  progress lines: ${r.progress.length} (first: ${r.progress[0] ?? 'none'}, last: ${r.progress.at(-1) ?? 'none'})`);
  }
  console.log(`\nkeys stored: ${await server.client.scard('tollgate:keys')}`);
  server.client.disconnect();
} finally {
  procs.killAllSync();
  rmSync(dir, { recursive: true, force: true });
}
