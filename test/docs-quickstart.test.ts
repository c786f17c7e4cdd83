// What a new user reads first, checked against what it runs: README's quick start says how to give `npm start` a port,
// and the command `npm start` runs, with those arguments, listens on that port; docs/admin-api.md says the admin
// listener takes `admin.tls` (test/tls.test.ts serves it over TLS) and never that it is plain HTTP but for when it has
// no `admin.tls`.
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { assertBuilt, CliProcess } from './helpers/cli.js';
import { freePort } from './helpers/redis-server.js';

const read = (path: string): string => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');

afterAll(() => CliProcess.killAll());

describe('README: npm start on another port', () => {
  it('shows `npm start -- --port N`, and the command npm start runs, given those arguments, answers on that port', async () => {
    assertBuilt();
    const shown = /^npm start -- (--port \d+)/m.exec(read('README.md'));
    expect(shown, 'README.md shows no `npm start -- --port N` line').not.toBeNull();
    // npm appends what follows `--` to the script's last command: that must be the CLI's dev command.
    const start = (JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start;
    const last = start.split('&&').pop()!.trim().split(/\s+/);
    expect(last.slice(0, 2)).toEqual(['node', 'dist/cli.js']);
    const [flag] = shown![1]!.split(' ');
    const port = await freePort();
    const dev = CliProcess.start([...last.slice(2), flag!, String(port)]);
    try {
      await dev.waitForStdout(new RegExp(`gateway http://127\\.0\\.0\\.1:${port}\\b`));
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    } finally {
      await dev.stop();
    }
  });
});

describe('docs/admin-api.md: the admin listener and TLS', () => {
  const text = read('docs/admin-api.md').replace(/\s+/g, ' ');

  it('the security model says the listener speaks HTTPS with admin.tls', () => {
    const listener = /\*\*Its own listener\*\*[^*]*/.exec(text)?.[0] ?? '';
    expect(listener).toContain('`admin.tls`');
    expect(listener).toMatch(/HTTPS/);
  });

  it('every sentence calling the listener plain HTTP names admin.tls, the way to make it HTTPS', () => {
    const sentences = text.split(/(?<=[.:;])\s/).filter((s) => /listener is plain HTTP/i.test(s));
    expect(sentences.length).toBeGreaterThan(0);
    for (const s of sentences) expect(s).toContain('admin.tls');
  });
});
