// Runs load-worker.ts on a thread of its own, bounded in heap (resourceLimits) and time (a deadline, then the thread
// is stopped): reading a config's OpenAPI documents at start, on a reload and in `config check`, their validated
// operations' schemas compiled once there. A document past a bound is refused with an error naming it; the serving
// event loop only waits for the answer, so /healthz and requests are answered meanwhile.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { DocumentBlock, Expanded } from './documents.js';
import { DOCUMENT_DEADLINE_MS, DOCUMENT_HEAP_MB, DOCUMENT_YOUNG_MB } from './limits.js';
import type { LoadMessage, LoadTask } from './load-worker.js';

export interface ThreadBounds {
  deadlineMs?: number;
  heapMb?: number;
}

/**
 * The thread's code: beside this file once built. Run from the sources (the test runner compiles .ts files in its own
 * process; a worker thread loads plain JavaScript), the build's copy: the test command builds first.
 */
function workerFile(): string {
  const here = fileURLToPath(import.meta.url);
  return here.endsWith('.ts')
    ? fileURLToPath(new URL('../../dist/openapi/load-worker.js', import.meta.url))
    : fileURLToPath(new URL('./load-worker.js', import.meta.url));
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: string };

function runThread(job: LoadTask, what: string, bounds: ThreadBounds): Promise<Outcome> {
  const deadlineMs = bounds.deadlineMs ?? DOCUMENT_DEADLINE_MS;
  const heapMb = bounds.heapMb ?? DOCUMENT_HEAP_MB;
  const file = workerFile();
  if (!existsSync(file)) return Promise.resolve({ ok: false, error: `${what}: ${file} is missing (npm run build)` });
  return new Promise<Outcome>((resolve) => {
    let reading = what;
    let settled = false;
    const worker = new Worker(file, {
      workerData: job,
      resourceLimits: { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: DOCUMENT_YOUNG_MB },
      // Its own stdout and stderr stay the process's; no environment it does not need.
      env: {},
    });
    const settle = (outcome: Outcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
      void worker.terminate();
    };
    const timer = setTimeout(
      () => settle({ ok: false, error: `${reading}: not read within the limit of ${deadlineMs / 1000} s for reading OpenAPI documents (too large?)` }),
      deadlineMs,
    );
    // A process that is stopping does not wait for the thread: SIGTERM drains and exits whatever it is reading.
    worker.unref();
    timer.unref();
    worker.on('message', (m: LoadMessage) => {
      if ('reading' in m) reading = m.reading;
      else if ('done' in m) settle({ ok: true, value: m.done });
      else settle({ ok: false, error: `${reading}: ${m.failed}` });
    });
    worker.on('error', (err: Error) => {
      const outOfMemory = (err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
      settle({
        ok: false,
        error: outOfMemory
          ? `${reading}: needs more than the limit of ${heapMb} MB of memory for reading OpenAPI documents (too large?)`
          : `${reading}: ${String(err.message)}`,
      });
    });
    worker.on('exit', (code) => settle({ ok: false, error: `${reading}: the thread reading it stopped (exit code ${code})` }));
  });
}

/**
 * expandDocuments (documents.ts) on its own thread: the same answer (its warnings with the descriptions that cannot
 * be applied), or a refusal when it passes a bound.
 */
export async function expandDocumentsOffThread(
  blocks: readonly DocumentBlock[],
  rawRoutes: readonly unknown[],
  configDir: string,
  bounds: ThreadBounds = {},
): Promise<Expanded> {
  const files = blocks.filter((b) => b.openapi.file !== undefined);
  const what = files.length === 1 ? `${files[0]!.at.join('.')}: ${files[0]!.openapi.file}` : 'OpenAPI documents';
  const out = await runThread({ blocks: [...blocks], rawRoutes: [...rawRoutes], configDir }, what, bounds);
  if (!out.ok) return { ok: false, errors: [out.error], files: [] };
  return out.value as Expanded;
}
