// `tollgate consumers ...`: create, list, show, update, suspend, resume and delete consumers (the customer behind
// several keys), in the shared Redis. Every change writes its audit line ("admin change", by "cli") to stderr as one
// JSON log line: stdout stays the command's answer. A key joins a consumer with `keys create --consumer` or
// `keys update --consumer`.
import type { Command } from 'commander';
import { addCreate } from './create.js';
import { addDelete } from './delete.js';
import { addList, addShow } from './read.js';
import { addResume, addSuspend } from './status.js';
import { addUpdate } from './update.js';

export function registerConsumersCommands(program: Command): void {
  const consumers = program.command('consumers').description('manage consumers: the customers behind the keys, each with one plan and one pooled quota');
  addCreate(consumers);
  addList(consumers);
  addShow(consumers);
  addUpdate(consumers);
  addSuspend(consumers);
  addResume(consumers);
  addDelete(consumers);
}
