// The thread that reads a config's OpenAPI documents (load-thread.ts starts it): a document is parsed, bundled,
// checked and turned into routes here, or its operations' schemas compiled to see which cannot be applied, so that a
// large or hostile one costs this thread, never the event loop that serves requests. It returns plain data.
import { parentPort, workerData } from 'node:worker_threads';
import { descriptionWarnings } from '../validation/validator.js';
import { expandDocuments, type DocumentBlock } from './documents.js';
import type { LoadedDocuments } from './operations.js';

export type LoadTask =
  | { task: 'expand'; blocks: DocumentBlock[]; rawRoutes: unknown[]; configDir: string }
  | { task: 'describe'; routes: LoadedDocuments['routes'] };

/** To the host: the document being read now (named if the thread runs out of time or memory), then the answer. */
export type LoadMessage = { reading: string } | { done: unknown } | { failed: string };

const port = parentPort!;
const job = workerData as LoadTask;

async function run(): Promise<unknown> {
  if (job.task === 'expand')
    return expandDocuments(job.blocks, job.rawRoutes, job.configDir, (label) => port.postMessage({ reading: label } satisfies LoadMessage));
  return descriptionWarnings({ routes: job.routes });
}

run().then(
  (done) => port.postMessage({ done } satisfies LoadMessage),
  (err: unknown) => port.postMessage({ failed: String((err as Error)?.message ?? err) } satisfies LoadMessage),
);
