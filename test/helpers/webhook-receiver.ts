// Starts the webhook receiver fixture (test/fixtures/webhook-receiver.mjs) as a process of its own, which the events
// tests kill and start again: it appends each request it gets to `file`, and answers by `rules` (path=behaviour).
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CHILD_CEILING_MS } from './cli.js';
import { track } from './children.js';

const RECEIVER = fileURLToPath(new URL('../fixtures/webhook-receiver.mjs', import.meta.url));

/** The receiver on `port` (0: any free one); resolves with the port once it listens. */
export async function spawnReceiver(port: number, file: string, rules: readonly string[] = []): Promise<{ proc: ChildProcess; port: number }> {
  const proc = track(spawn(process.execPath, [RECEIVER, String(port), file, ...rules], { stdio: ['ignore', 'pipe', 'pipe'] }));
  let out = '';
  const listening = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`receiver did not listen within ${CHILD_CEILING_MS} ms: ${out}`)), CHILD_CEILING_MS);
    proc.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = /listening (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`receiver exited (${code}): ${out}`));
    });
  });
  return { proc, port: listening };
}
