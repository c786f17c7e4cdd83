// `serve --watch-config` (server.watchConfig): reloads when the config file changes, as SIGHUP does.
// Watches the file's directory rather than the file: a Kubernetes ConfigMap volume is updated by swapping a `..data`
// symlink (the file itself is a symlink through it), so the file's own inode never changes and a watch on it would
// never fire. Editors that write a new file and rename it over the old one are covered the same way.
import { createHash } from 'node:crypto';
import { watch, readFileSync, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from '../observability/logger.js';

export interface ConfigWatcher {
  close(): void;
}

export interface WatchOptions {
  /** Changes within this window become one reload (a ConfigMap swap is several directory events). */
  debounceMs?: number;
}

/** What the file holds now (through any symlinks), or undefined when it cannot be read (mid-swap, removed). */
function fingerprint(path: string): string | undefined {
  try {
    return createHash('sha256').update(readFileSync(path)).digest('hex');
  } catch {
    return undefined;
  }
}

/**
 * Calls `reload` once per change of the file's content (read through symlinks), debounced. Events that leave the
 * content as it was (another file in the directory, a touch, the kubelet's intermediate steps) reload nothing. A file
 * that cannot be read is left to the reload itself: it rejects and logs it, and the old config stays.
 */
export function watchConfigFile(path: string, reload: () => void, logger: Logger, opts: WatchOptions = {}): ConfigWatcher {
  const debounceMs = opts.debounceMs ?? 200;
  let seen = fingerprint(path);
  let timer: NodeJS.Timeout | undefined;
  const check = (): void => {
    timer = undefined;
    const now = fingerprint(path);
    if (now === seen) return;
    seen = now;
    logger.info({ path }, 'config file changed: reloading');
    reload();
  };
  let watcher: FSWatcher;
  try {
    watcher = watch(dirname(path), { persistent: false }, () => {
      clearTimeout(timer);
      timer = setTimeout(check, debounceMs);
    });
  } catch (err) {
    // Out of inotify watches, say: the gateway serves on (SIGHUP still reloads), and the log says why nothing will.
    logger.error({ path, dir: dirname(path), err: { message: (err as Error).message } }, 'cannot watch the config file; reload with SIGHUP');
    return { close() {} };
  }
  watcher.on('error', (err) => logger.error({ path, err: { message: err.message } }, 'config watch failed; reload with SIGHUP'));
  logger.info({ path, debounceMs }, 'watching the config file: a change reloads it, as SIGHUP does');
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
