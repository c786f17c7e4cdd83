// `serve --watch-config` (server.watchConfig): reloads when the config file changes, as SIGHUP does, once the file
// has stopped changing, and never a file that drops whole sections of the config in force (that one waits for SIGHUP).
// Watches directories rather than the file: a Kubernetes ConfigMap volume is updated by swapping a `..data` symlink
// (the file itself is a symlink through it), so the file's own inode never changes and a watch on it would never fire;
// a release layout swaps a directory symlink (`current -> release-2`), which only its parent directory sees. Editors
// that write a new file and rename it over the old one are covered the same way.
import { createHash } from 'node:crypto';
import { watch, lstatSync, readFileSync, realpathSync, statSync, type FSWatcher } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { droppedSections, sectionsOfText } from '../config/load.js';
import type { Logger } from '../observability/logger.js';

export interface ConfigWatcher {
  /**
   * The operator's SIGHUP applied whatever the file holds now: it becomes the reference that later changes are
   * compared with (the sections in force, and the content already seen).
   */
  rebase(): void;
  close(): void;
}

export interface WatchOptions {
  /** Changes within this window become one check (a ConfigMap swap is several directory events). */
  debounceMs?: number;
  /**
   * A changed file is applied only once it reads the same (size, mtime, SHA-256) twice this far apart: `cmd > file`
   * truncates first and writes as `cmd` produces, so a file caught between two writes is never applied.
   */
  settleMs?: number;
  /**
   * A check this often even without an event. inotify drops events under load (its queue overflows) and a watch is
   * briefly gone while the watched directories are re-resolved after a swap: a change made in that gap would wait
   * for the next event, which may never come. The check reads one small file: negligible.
   */
  pollMs?: number;
  /** The environment the file is validated with (its overrides), as the reload does. */
  env?: NodeJS.ProcessEnv;
  /**
   * Other files the config in force was read from (its OpenAPI documents and the files their $refs name): a change
   * of one reloads as a change of the config file does. Asked again at every check, so a reload's new set applies.
   */
  files?: () => readonly string[];
}

export const WATCH_DEBOUNCE_MS = 200;
export const WATCH_SETTLE_MS = 1000;
export const WATCH_POLL_MS = 5000;
/** A file still changing after this many settle intervals is left alone until its next change (logged). */
const MAX_SETTLE_ROUNDS = 120;

/**
 * What the file holds now, read through any symlinks. `content`: its SHA-256, or `missing` when it cannot be read
 * (mid-swap, removed): what decides whether it changed (a touch changes nothing). `key`: size, mtime and content,
 * what must read the same twice for the file to count as stable.
 */
type Snapshot = { key: string; content: string; text?: string };

function snapshot(path: string, others: readonly string[] = []): Snapshot {
  const own = snapshotOne(path);
  if (others.length === 0) return own;
  const parts = others.map((f) => snapshotOne(f));
  const content = createHash('sha256')
    .update([own, ...parts].map((p) => p.content).join('\n'))
    .digest('hex');
  return { key: [own, ...parts].map((p) => p.key).join('|'), content, ...(own.text !== undefined ? { text: own.text } : {}) };
}

function snapshotOne(path: string): Snapshot {
  try {
    const st = statSync(path);
    const text = readFileSync(path, 'utf8');
    const content = createHash('sha256').update(text).digest('hex');
    return { key: `${st.size}:${st.mtimeMs}:${content}`, content, text };
  } catch {
    return { key: 'missing', content: 'missing' };
  }
}

/**
 * The directories whose events can mean the file changed, as real paths: the file's directory (fs.watch follows a
 * symlinked directory to its target), the parent of every symlinked directory on the way (where a swap of that link
 * happens), and the directory of the file's own target when the file is a symlink (an edit made there in place).
 * Computed again at each check: after a swap the targets are new.
 */
export function directoriesToWatch(path: string): string[] {
  const abs = resolve(path);
  const dirs = new Set<string>();
  const add = (dir: string): void => {
    try {
      dirs.add(realpathSync(dir));
    } catch {
      // Gone between two events: the next check computes the set again.
    }
  };
  add(dirname(abs));
  for (let p = dirname(abs); p !== dirname(p); p = dirname(p)) {
    try {
      if (lstatSync(p).isSymbolicLink()) add(dirname(p));
    } catch {
      break;
    }
  }
  try {
    add(dirname(realpathSync(abs)));
  } catch {
    // A dangling file symlink (a ConfigMap key removed): its directory is watched through the others.
  }
  return [...dirs].sort();
}

/**
 * Calls `reload` once per change of the file's content (read through symlinks), debounced and only once the file is
 * stable. Events that leave the content as it was (another file in the directory, a touch, the kubelet's intermediate
 * steps) reload nothing. A file that does not validate (or cannot be read) is left to the reload itself: it rejects
 * and logs it, and the old config stays. A valid file that lacks a section the config in force has is not applied:
 * a warning names the sections and says that SIGHUP applies it.
 */
export function watchConfigFile(path: string, reload: () => void, logger: Logger, opts: WatchOptions = {}): ConfigWatcher {
  const debounceMs = opts.debounceMs ?? WATCH_DEBOUNCE_MS;
  const settleMs = opts.settleMs ?? WATCH_SETTLE_MS;
  const pollMs = opts.pollMs ?? WATCH_POLL_MS;
  const env = opts.env ?? process.env;
  const others = (): readonly string[] => opts.files?.().filter((f) => resolve(f) !== resolve(path)) ?? [];
  const sectionsOf = (s: Snapshot): string[] | undefined => (s.text === undefined ? undefined : sectionsOfText(s.text, env));
  const take = (): Snapshot => snapshot(path, others());
  let seen = take();
  // The sections of the config in force: those of the file the gateway started with (it validated, or there would be
  // no gateway), then of each file applied.
  let inForce = sectionsOf(seen) ?? [];
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const watchers = new Map<string, FSWatcher>();

  const schedule = (fn: () => void, ms: number): void => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
  const onEvent = (): void => schedule(check, debounceMs);

  /** Watches exactly the directories that matter now, and says so when none can be watched. */
  const resync = (): void => {
    const want = [...new Set([path, ...others()].flatMap((f) => directoriesToWatch(f)))];
    for (const [dir, w] of watchers) {
      if (want.includes(dir)) continue;
      w.close();
      watchers.delete(dir);
    }
    for (const dir of want) {
      if (watchers.has(dir)) continue;
      try {
        const w = watch(dir, { persistent: false }, onEvent);
        // A watched directory that goes away (an old ConfigMap generation, a release removed) ends its watch; the
        // next check watches what the path resolves to now.
        w.on('error', () => {
          w.close();
          watchers.delete(dir);
          if (!closed) onEvent();
        });
        watchers.set(dir, w);
      } catch (err) {
        logger.error({ path, dir, err: { message: (err as Error).message } }, 'cannot watch the config file; reload with SIGHUP');
      }
    }
  };

  const check = (): void => {
    timer = undefined;
    if (closed) return;
    resync();
    const first = take();
    if (first.content === seen.content) return;
    schedule(() => settle(first, 1), settleMs);
  };

  const settle = (before: Snapshot, round: number): void => {
    timer = undefined;
    if (closed) return;
    const now = take();
    if (now.key !== before.key) {
      if (round < MAX_SETTLE_ROUNDS) return schedule(() => settle(now, round + 1), settleMs);
      seen = now;
      logger.warn({ path, settleMs, rounds: round }, 'config file still changing: not reloaded; it is checked again at its next change, or send SIGHUP');
      return;
    }
    if (now.content === seen.content) return;
    seen = now;
    apply(now);
  };

  const apply = (s: Snapshot): void => {
    const sections = sectionsOf(s);
    if (sections) {
      const dropped = droppedSections(inForce, sections);
      if (dropped.length > 0) {
        logger.warn(
          { path, dropped },
          `config change not applied: it drops the section${dropped.length === 1 ? '' : 's'} ${dropped.join(', ')} of the config in force; ` +
            `if that is meant, apply it with SIGHUP (kill -HUP ${process.pid})`,
        );
        return;
      }
      inForce = sections;
    }
    logger.info({ path }, 'config file changed: reloading');
    reload();
  };

  resync();
  if (watchers.size === 0) return { rebase() {}, close() {} };
  // Only while nothing is pending: a check or settle under way already reads the file.
  const poll = setInterval(() => {
    if (timer === undefined && !closed) check();
  }, pollMs);
  poll.unref();
  logger.info({ path, debounceMs, settleMs, pollMs, watching: [...watchers.keys()] }, 'watching the config file: a change reloads it, as SIGHUP does');
  return {
    rebase() {
      seen = take();
      inForce = sectionsOf(seen) ?? inForce;
    },
    close() {
      closed = true;
      clearInterval(poll);
      clearTimeout(timer);
      for (const w of watchers.values()) w.close();
      watchers.clear();
    },
  };
}
