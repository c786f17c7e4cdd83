// The config watch's fallback poll: with directory events lost (inotify's queue overflowing under load, or a change
// made while the watches are re-resolved after a swap), a changed file is still found and applied. fs.watch is
// replaced here by a watcher that never fires, so only the poll can see the change.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventEmitter } from 'node:events';
import { afterAll, describe, expect, it, vi } from 'vitest';

/** The paths the watcher stat()ed, in order: each look it takes at the file (a check, a settle) is one. */
const looked = vi.hoisted(() => [] as string[]);

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  return {
    ...fs,
    // A watch that is set up but never reports an event.
    watch: () => Object.assign(new EventEmitter(), { close: () => undefined }),
    statSync: ((...args: Parameters<typeof fs.statSync>) => {
      looked.push(String(args[0]));
      return fs.statSync(...args);
    }) as typeof fs.statSync,
  };
});

const { watchConfigFile } = await import('../src/server/config-watch.js');

const dir = mkdtempSync(join(tmpdir(), 'tollgate-poll-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const silent = { info: () => undefined, warn: () => undefined, error: () => undefined } as never;

describe('watchConfigFile without any directory event', () => {
  it('the poll finds a changed file and reloads it once, after it settled', async () => {
    const path = join(dir, 'gateway.yaml');
    writeFileSync(path, 'plans: { free: { perMinute: 10, perDay: 100 } }\n');
    const reload = vi.fn();
    const watcher = watchConfigFile(path, reload, silent, { debounceMs: 10, settleMs: 50, pollMs: 100 });
    try {
      writeFileSync(path, 'plans: { free: { perMinute: 20, perDay: 100 } }\n');
      await vi.waitFor(() => expect(reload).toHaveBeenCalledTimes(1), { timeout: 5000, interval: 20 });
      // Nothing changed since: the next three polls look at the file and reload nothing.
      const after = looked.filter((p) => p === path).length;
      // A bound: a wait for three more polls; a fourth may come before it is seen.
      await vi.waitFor(() => expect(looked.filter((p) => p === path).length).toBeGreaterThanOrEqual(after + 3), { timeout: 5000, interval: 20 });
      expect(reload).toHaveBeenCalledTimes(1);
    } finally {
      watcher.close();
    }
  });

  it('with the poll off in effect (an hour), the same change is never seen: the poll is what found it', async () => {
    const path = join(dir, 'other.yaml');
    writeFileSync(path, 'plans: { free: { perMinute: 10, perDay: 100 } }\n');
    const reload = vi.fn();
    const watcher = watchConfigFile(path, reload, silent, { debounceMs: 10, settleMs: 50, pollMs: 3_600_000 });
    // The same file under a watcher that polls every 100 ms: once it has found the change, a poll could have.
    const control = vi.fn();
    const polled = watchConfigFile(path, control, silent, { debounceMs: 10, settleMs: 50, pollMs: 100 });
    try {
      writeFileSync(path, 'plans: { free: { perMinute: 20, perDay: 100 } }\n');
      await vi.waitFor(() => expect(control).toHaveBeenCalledTimes(1), { timeout: 5000, interval: 20 });
      expect(reload).not.toHaveBeenCalled();
    } finally {
      polled.close();
      watcher.close();
    }
  });
});
