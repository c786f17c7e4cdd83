#!/usr/bin/env node
// The tollgate command: serve, petstore, dev, keys and config check (docs/cli.md), as a process.
// Exit codes: 0 success, 1 a clear error on stderr, 2 usage. The command line itself is program.ts.
import { LONG_RUNNING, runProgram } from './program.js';

const argv = process.argv.slice(2);
const code = await runProgram(argv);
// A long-running command that failed to start exits too: whatever it had opened (a Redis client retrying, a
// listener) must not keep a process alive that serves nothing. Others exit as soon as they have answered, without
// waiting for client timers (ioredis reconnect and disconnect timers) to run down.
if (code !== 0 || !LONG_RUNNING.has(argv[0] ?? '')) {
  process.stdout.write('', () => process.exit(code));
}
