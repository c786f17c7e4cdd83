// Preloaded by the bench into the processes it measures (node --import bench/probe.mjs ...): Tollgate and the
// baseline proxy. It counts, with one integer increment each and nothing else on the request path:
//   - HTTP requests the process received (diagnostics channel http.server.request.start), so per-request figures
//     divide by what the server really handled, in-flight requests at the end of a run included;
//   - Redis commands the process sent, by name (ioredis's sendCommand), when ioredis is resolvable.
//
// Why a client-side Redis count: on Redis 7.0 both `total_commands_processed` and `INFO commandstats` also count
// the commands a Lua script runs inside EVALSHA, so the server cannot tell "one EVALSHA round trip" from "nine
// commands". Counting sendCommand gives the round trips a request waits on.
//
// On SIGUSR2 the counts are written to $BENCH_PROBE_DIR/probe-<pid>.json (cluster workers load this module too,
// through execArgv, and each writes its own file). Without BENCH_PROBE_DIR the module does nothing.
import { createRequire } from 'node:module';
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.BENCH_PROBE_DIR;
if (dir) {
  let requests = 0;
  const redis = Object.create(null);
  let dumps = 0;
  subscribe('http.server.request.start', () => {
    requests++;
  });

  // Resolve ioredis the way dist/ does (from the working directory: the repo root), so the patched class is the
  // one the gateway uses (an ESM import of a CommonJS package shares its require cache entry).
  let Redis;
  try {
    ({ Redis } = createRequire(join(process.cwd(), 'noop.js'))('ioredis'));
  } catch {}
  if (Redis) {
    const original = Redis.prototype.sendCommand;
    const COUNTED = Symbol('benchCounted');
    Redis.prototype.sendCommand = function benchCountedSendCommand(command, stream) {
      // A command can pass through sendCommand more than once (offline queue, resend after reconnect): count it once.
      if (command && !command[COUNTED]) {
        command[COUNTED] = true;
        redis[command.name] = (redis[command.name] ?? 0) + 1;
      }
      return original.call(this, command, stream);
    };
  }

  process.on('SIGUSR2', () => {
    dumps++;
    const file = join(dir, `probe-${process.pid}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify({ pid: process.pid, dumps, requests, redis }));
    renameSync(`${file}.tmp`, file);
  });
}
