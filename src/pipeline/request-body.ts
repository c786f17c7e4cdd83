// A proxied request's body, read from the client once whatever the number of tries: streamed into the current try's
// upstream request with backpressure, kept for a replay until a try has a connection (a try that could not connect
// sent nothing, so the next one sends it whole), counted against maxBodyBytes when chunked, and timed: a client
// that stops sending for the idle time is reported (an idle body holds a target's connection). A body the request path
// already read whole (request validation: readWholeBody) is given as its bytes and sent as they are.
import type { ClientRequest, IncomingMessage } from 'node:http';

export interface RequestBodyOptions {
  maxBytes: number;
  /** No bytes from the client for this long while the body is incomplete (and the target is not holding it back). */
  idleMs: number;
  onTooLarge: () => void;
  onIdle: () => void;
  /** The client's trailers to send on once its chunked body has ended (they are read then); none: undefined. */
  trailers?: () => ReadonlyArray<[string, string]> | undefined;
}

export class RequestBody {
  private chunks: Buffer[] = [];
  private recording = true;
  private sink: ClientRequest | undefined;
  private seen = 0;
  private ended = false;
  private stopped = false;
  /** Reading is paused because the target is not taking what was sent: the body is late by the target's doing. */
  private heldByTarget = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly chunked: boolean;

  constructor(
    private readonly req: IncomingMessage,
    private readonly o: RequestBodyOptions,
    /** The whole body, already read (and checked against maxBytes): nothing more is read from the client. */
    whole?: Buffer,
  ) {
    this.chunked = req.headers['content-length'] === undefined;
    if (whole) {
      this.chunks = [whole];
      this.seen = whole.length;
      this.ended = true;
      return;
    }
    req.on('data', this.onData);
    req.once('end', this.onEnd);
    this.armIdle();
  }

  /** The client has sent the whole body. */
  get complete(): boolean {
    return this.ended;
  }

  /** More of the body is awaited from the client, and not because a target is holding it back. */
  get awaitingClient(): boolean {
    return !this.ended && !this.stopped && !this.heldByTarget;
  }

  /** The next try's upstream request: what was kept is written first, then the rest as the client sends it. */
  sendTo(sink: ClientRequest): void {
    if (this.stopped) return;
    this.sink = sink;
    for (const chunk of this.chunks) sink.write(chunk);
    this.heldByTarget = false;
    if (this.ended) this.endSink(sink);
    else if (this.req.isPaused()) this.req.resume();
  }

  /** The current try has a connection: what it was sent reached the target, nothing more needs keeping. */
  reachedTarget(): void {
    this.recording = false;
    this.chunks = [];
  }

  /** The current try is over: its upstream request gets no more. */
  detach(): void {
    this.sink = undefined;
  }

  /** No try will follow: stop reading for the proxy, stop the timer. */
  stop(): void {
    this.stopped = true;
    this.sink = undefined;
    this.chunks = [];
    clearTimeout(this.idleTimer);
    this.req.off('data', this.onData);
    this.req.off('end', this.onEnd);
  }

  private readonly onData = (chunk: Buffer): void => {
    this.seen += chunk.length;
    if (this.chunked && this.seen > this.o.maxBytes) {
      this.stop();
      this.o.onTooLarge();
      return;
    }
    if (this.recording) this.chunks.push(chunk);
    const sink = this.sink;
    if (sink && !sink.write(chunk)) {
      // The target is not reading: not the client's idleness. The timer waits until the target drains.
      this.req.pause();
      this.heldByTarget = true;
      clearTimeout(this.idleTimer);
      sink.once('drain', () => {
        if (this.sink !== sink || this.stopped) return;
        this.heldByTarget = false;
        this.armIdle();
        this.req.resume();
      });
      return;
    }
    this.armIdle();
  };

  private readonly onEnd = (): void => {
    this.ended = true;
    clearTimeout(this.idleTimer);
    if (this.sink) this.endSink(this.sink);
  };

  /** Ends an upstream request's body, with the client's trailers when it came chunked (a Content-Length body has none). */
  private endSink(sink: ClientRequest): void {
    const trailers = this.chunked ? this.o.trailers?.() : undefined;
    if (trailers) sink.addTrailers(trailers);
    sink.end();
  }

  private armIdle(): void {
    clearTimeout(this.idleTimer);
    if (this.ended || this.stopped) return;
    this.idleTimer = setTimeout(() => {
      if (!this.stopped && !this.ended) this.o.onIdle();
    }, this.o.idleMs);
  }
}

/** Why a body could not be read whole: over maxBytes, no bytes for idleMs, or the client went away. */
export type WholeBodyFailure = 'too_large' | 'body_idle' | 'client_gone';

/**
 * Reads a request's whole body into memory, for a stage that must see it before the upstream does (request
 * validation): at most `maxBytes` (counted as it arrives, whatever Content-Length said), and no gap of `idleMs`
 * without a byte. On failure the request is no longer read from; the caller answers (413, 408) or drops it.
 */
export function readWholeBody(req: IncomingMessage, o: { maxBytes: number; idleMs: number }): Promise<Buffer | WholeBodyFailure> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let seen = 0;
    let timer: NodeJS.Timeout | undefined;
    const done = (result: Buffer | WholeBodyFailure): void => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      resolve(result);
    };
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => done('body_idle'), o.idleMs);
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > o.maxBytes) return done('too_large');
      chunks.push(chunk);
      arm();
    };
    const onEnd = (): void => done(Buffer.concat(chunks, seen));
    // 'close' before 'end': the client went away with its body unfinished.
    const onClose = (): void => {
      if (!req.complete) done('client_gone');
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onClose);
    arm();
  });
}
