// Where the hours go: a URL (the mapping's requests, POSTed) or a file (JSON lines of CloudEvents, appended, each batch
// fsync'd before it counts as acknowledged). A destination answers each batch with what was acknowledged, refused or
// is to be sent again; a destination that cannot be reached or will not take anything (no connection, a timeout, a
// redirect, 401, 403, 404, 408, 429, 5xx) throws DestinationUnavailable, which ends the run with the checkpoint as it
// stands.
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, fsyncSync, openSync, readSync, writeSync } from 'node:fs';
import { resolve } from 'node:path';
import { bodyText, type Mapping, type Prepared, type RefusalVerdict } from './mappings.js';
import { REQUEST_TIMEOUT_MS, type Poster } from './http.js';

export class DestinationUnavailable extends Error {}

/** The statuses that refuse a request's events (split, or judged by the mapping); any other non-2xx stops the run. */
const REFUSALS = new Set([400, 409, 413, 422]);

/** What one request did: its verdict, or `split` when a refusal named no event (each half then goes alone). */
export type BatchOutcome = RefusalVerdict | { split: true };

export interface Destination {
  /** The destination's id: its checkpoint's name. */
  readonly id: string;
  /** Where it is, for reports: the URL without its query, or the file's absolute path. */
  readonly where: string;
  readonly maxBatch: number;
  send(batch: readonly Prepared[]): Promise<BatchOutcome>;
  close(): Promise<void>;
}

export const isUrl = (to: string): boolean => /^https?:\/\//i.test(to);

/** A destination's id from its format and where it is: `<format>-<first 12 hex of sha256>`, unless given. */
export function destinationId(format: string, to: string, given?: string): string {
  if (given) return given;
  const where = isUrl(to) ? to : resolve(to);
  return `${format}-${createHash('sha256').update(where).digest('hex').slice(0, 12)}`;
}

function withoutQuery(url: string): string {
  try {
    const u = new URL(url);
    u.search = '';
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

export class UrlDestination implements Destination {
  readonly where: string;
  readonly maxBatch: number;
  constructor(
    readonly id: string,
    private readonly url: string,
    private readonly mapping: Mapping,
    private readonly poster: Poster,
    batchSize?: number,
  ) {
    this.where = withoutQuery(url);
    this.maxBatch = Math.min(mapping.maxBatch, batchSize ?? mapping.maxBatch);
  }

  async send(batch: readonly Prepared[]): Promise<BatchOutcome> {
    let res;
    try {
      res = await this.poster.request(this.mapping.request(this.url, batch, REQUEST_TIMEOUT_MS));
    } catch (err) {
      throw new DestinationUnavailable(`${this.where}: ${(err as Error).message}`);
    }
    if (res.status >= 200 && res.status < 300) return { acked: [...batch], refused: [], resend: [] };
    // Only an answer about the events refuses them (400, 409, 413, 422); any other (401, 403, 404, 3xx, 408, 429, 5xx)
    // is about the destination or how it is reached, and would refuse every event alike: the run stops there.
    if (!REFUSALS.has(res.status)) throw new DestinationUnavailable(`${this.where} answered ${res.status}${res.body.length ? `: ${bodyText(res)}` : ''}`);
    const verdict = this.mapping.refusal(res, batch);
    if (verdict) return verdict;
    if (batch.length > 1) return { split: true };
    return { acked: [], refused: [{ p: batch[0]!, reason: `HTTP ${res.status} ${bodyText(res)}`.trim() }], resend: [] };
  }

  async close(): Promise<void> {}
}

/**
 * JSON lines of CloudEvents appended to a file, one write and one fsync per batch: a batch counts as acknowledged only
 * once it is on disk. A crash between the fsync and the checkpoint's write leaves its events in the file and sends them
 * again: readers de-duplicate by id (the CloudEvents identity is source and id).
 */
export class FileDestination implements Destination {
  readonly where: string;
  private fd: number | undefined;
  constructor(
    readonly id: string,
    path: string,
    readonly maxBatch = 500,
  ) {
    this.where = resolve(path);
  }

  async send(batch: readonly Prepared[]): Promise<BatchOutcome> {
    try {
      this.fd ??= this.open();
      writeSync(this.fd, batch.map((p) => `${JSON.stringify(p.wire)}\n`).join(''));
      fsyncSync(this.fd);
    } catch (err) {
      throw new DestinationUnavailable(`${this.where}: ${(err as Error).message}`);
    }
    return { acked: [...batch], refused: [], resend: [] };
  }

  /**
   * Opens for appending. A last line cut short (a crash in the middle of a write) is ended first, so the next event
   * starts a line of its own rather than making the cut one and itself one unreadable line.
   */
  private open(): number {
    const fd = openSync(this.where, 'a+', 0o640);
    const size = fstatSync(fd).size;
    if (size > 0) {
      const last = Buffer.alloc(1);
      readSync(fd, last, 0, 1, size - 1);
      if (last[0] !== 0x0a) writeSync(fd, '\n');
    }
    return fd;
  }

  async close(): Promise<void> {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}
