// API keys for the bench, in the bench's own Redis, laid out exactly as RedisKeyStore.create writes them
// (src/keys/redis-store.ts, names from src/storage/keyspace.ts): key:{<id>} = JSON record, keyhash:<sha256> = id,
// and the id in the `keys` set. Key text, ids and hashes come from dist/keys/format.js, so they pass the
// gateway's shape and checksum test. A few keys are issued through the real CLI (`keys create`), and run.mjs
// checks a bulk key against the gateway before measuring, so a layout drift fails loudly.
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

export async function loadFormat(repoRoot) {
  const format = await import(pathToFileURL(join(repoRoot, 'dist/keys/format.js')).href);
  const { Keyspace } = await import(pathToFileURL(join(repoRoot, 'dist/storage/keyspace.js')).href);
  // A key's limits and ledger are named by its subject (limits/subject.js); a build from before subjects, by its id.
  const subjects = await import(pathToFileURL(join(repoRoot, 'dist/limits/subject.js')).href).catch(() => undefined);
  const subjectOf = subjects ? (id) => subjects.keySubject(id) : (id) => id;
  return { ...format, Keyspace, subjectOf };
}

/** `tollgate keys create --plan P --json` against the bench config: the real issuing path. */
export async function cliCreateKey({ repoRoot, configPath, plan, name, env }) {
  const stdout = await runCli({ repoRoot, env, args: ['keys', 'create', '--plan', plan, '--name', name, '--json', '--config', configPath] });
  try {
    return JSON.parse(stdout);
  } catch {
    throw new Error(`keys create printed no JSON: ${stdout}`);
  }
}

/** `node dist/cli.js ...args`: resolves with its stdout, rejects with its stderr. */
export function runCli({ repoRoot, env, args, timeoutMs = 120_000 }) {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [join(repoRoot, 'dist/cli.js'), ...args],
      { cwd: repoRoot, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => (err ? reject(new Error(`tollgate ${args.slice(0, 2).join(' ')} failed: ${stderr || err.message}`)) : resolve(stdout)),
    );
  });
}

/**
 * Writes `total` key records with pipelined SETs, `batch` keys per pipeline. The first `withPlaintext` of them get
 * real plaintext keys (returned, for traffic); the rest get the SHA-256 of random bytes: the same records and
 * index entries in Redis, whose plaintext nobody needs to know.
 */
export async function bulkCreateKeys({ redis, format, prefix, plan, total, withPlaintext, batch = 10_000, namePrefix, onProgress }) {
  const ks = new format.Keyspace(prefix);
  const createdAt = new Date().toISOString();
  const plaintexts = [];
  let written = 0;
  while (written < total) {
    const n = Math.min(batch, total - written);
    const pipe = redis.pipeline();
    const ids = [];
    for (let i = 0; i < n; i++) {
      const index = written + i;
      let hash;
      if (index < withPlaintext) {
        const key = format.generateKey();
        plaintexts.push(key);
        hash = format.hashKey(key);
      } else {
        hash = randomBytes(32).toString('hex');
      }
      const id = format.generateKeyId();
      ids.push(id);
      // Field order as KeyIssuer.create (src/keys/issue.ts) builds the record.
      const record = { id, name: `${namePrefix}-${index}`, plan, createdAt, status: 'active', hash };
      pipe.set(ks.keyRecord(id), JSON.stringify(record));
      pipe.set(ks.keyByHash(hash), id);
    }
    pipe.sadd(ks.keyIds(), ...ids);
    const replies = await pipe.exec();
    const failed = replies.find(([err]) => err);
    if (failed) throw failed[0];
    written += n;
    onProgress?.(written);
  }
  return plaintexts;
}
