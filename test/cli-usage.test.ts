// Usage errors and help, in process (runProgram with captured output): exit 2 and a message for anything commander
// or an option parser refuses, exit 0 for --help. No child process and no Redis: they are refused before either.
import { describe, expect, it } from 'vitest';
import { runProgram } from '../src/program.js';

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runProgram(argv, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}

describe('tollgate usage', () => {
  it.each([
    [['frobnicate']],
    [['serve', '--bogus']],
    [['config', 'check', 'extra', 'args']],
    [['config', 'frobnicate']],
    [['petstore', '--port', 'eighty']],
    [['petstore', '--port', '70000']],
    [['dev', '--port', '-1']],
    [['keys', 'create']],
    [['keys', 'create', '--plan', 'free', '--per-minute', 'lots']],
    [['keys', 'create', '--plan', 'free', '--expires', 'tomorrow']],
    [['keys', 'rotate', 'key_x', '--grace', 'soon']],
    [['keys', 'show']],
    [['keys', 'frobnicate']],
    [['keys', 'list', '--frobnicate']],
  ])('%j: exit 2 with a message on stderr, nothing on stdout', async (argv) => {
    const r = await run(...argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/error/i);
    expect(r.out).toBe('');
  });

  it('--help: exit 0 and the commands on stdout', async () => {
    const r = await run('--help');
    expect(r.code).toBe(0);
    for (const command of ['serve', 'petstore', 'dev', 'keys', 'config']) expect(r.out).toContain(command);
  });
});
