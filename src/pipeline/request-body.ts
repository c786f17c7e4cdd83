// A proxied request's body, read from the client once whatever the number of tries: streamed into the current try's
// upstream request with backpressure, kept for a replay until a try has a connection (a try that could not connect
// sent nothing, so the next one sends it whole), counted against maxBodyBytes when chunked, and timed: a client
// that stops sending for the idle time is reported (an idle body holds a target's connection).
import type { ClientRequest, IncomingMessage } from 'node:http';

export interface RequestBodyOptions {
  maxBytes: number;
  /** No bytes from the client for this long while the body is incomplete (and the target is not holding it back). */
  idleMs: number;
  onTooLarge: () => void;
  onIdle: () => void;
}

export class RequestBody {
  private chunks: Buffer[] = [];
  private recording = true;
  private sink: ClientRequest | undefined;
  private seen = 0;
  private ended = false;
  private stopped = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly chunked: boolean;

  constructor(
    private readonly req: IncomingMessage,
    private readonly o: RequestBodyOptions,
  ) {
    this.chunked = req.headers['content-length'] === undefined;
    req.on('data', this.onData);
    req.once('end', this.onEnd);
    this.armIdle();
  }

  /** The client has sent the whole body. */
  get complete(): boolean {
    return this.ended;
  }

  /** The next try's upstream request: what was kept is written first, then the rest as the client sends it. */
  sendTo(sink: ClientRequest): void {
    if (this.stopped) return;
    this.sink = sink;
    for (const chunk of this.chunks) sink.write(chunk);
    if (this.ended) sink.end();
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
      clearTimeout(this.idleTimer);
      sink.once('drain', () => {
        if (this.sink !== sink || this.stopped) return;
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
    this.sink?.end();
  };

  private armIdle(): void {
    clearTimeout(this.idleTimer);
    if (this.ended || this.stopped) return;
    this.idleTimer = setTimeout(() => {
      if (!this.stopped && !this.ended) this.o.onIdle();
    }, this.o.idleMs);
  }
}
