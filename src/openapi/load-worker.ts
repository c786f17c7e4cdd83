// The thread that reads a config's OpenAPI documents (load-thread.ts starts it): each document is parsed, bundled,
// checked and turned into routes here, and every operation whose requests are validated has its schemas compiled once,
// to say which cannot be applied (a warning: validation is off for it) and to refuse one whose compile would hold the
// serving event loop too long on its first request (the gateway compiles an operation's schemas there, once). A large
// or hostile document costs this thread, never the event loop that serves requests. It returns plain data.
import { parentPort, workerData } from 'node:worker_threads';
import { descriptionWarnings } from '../validation/validator.js';
import { expandDocuments, type DocumentBlock, type Expanded } from './documents.js';
import { MAX_OPERATION_COMPILE_MS } from './limits.js';

export interface LoadTask {
  blocks: DocumentBlock[];
  rawRoutes: unknown[];
  configDir: string;
}

/** To the host: the document being read now (named if the thread runs out of time or memory), then the answer. */
export type LoadMessage = { reading: string } | { done: unknown } | { failed: string };

const port = parentPort!;
const job = workerData as LoadTask;

async function run(): Promise<Expanded> {
  const expanded = await expandDocuments(job.blocks, job.rawRoutes, job.configDir, (label) => port.postMessage({ reading: label } satisfies LoadMessage));
  if (!expanded.ok) return expanded;
  const errors: string[] = [];
  const described: string[] = [];
  for (const route of expanded.documents.routes) {
    const op = route?.operation;
    if (!op || op.validate === 'off') continue;
    const started = performance.now();
    described.push(...(await descriptionWarnings({ routes: [route] })));
    const ms = performance.now() - started;
    if (ms > MAX_OPERATION_COMPILE_MS)
      errors.push(
        `${op.file}#${op.pointer}: compiling its request schemas took ${(ms / 1000).toFixed(1)} s, over the limit of ${MAX_OPERATION_COMPILE_MS / 1000} s for one operation ` +
          `(the gateway compiles them on the operation's first request, while other requests wait): make its schemas smaller or set validate: off`,
      );
  }
  if (errors.length > 0) return { ok: false, errors, files: [...expanded.documents.files] };
  return { ...expanded, documents: { ...expanded.documents, warnings: [...expanded.documents.warnings, ...described] } };
}

run().then(
  (done) => port.postMessage({ done } satisfies LoadMessage),
  (err: unknown) => port.postMessage({ failed: String((err as Error)?.message ?? err) } satisfies LoadMessage),
);
