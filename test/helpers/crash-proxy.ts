// A TCP proxy between a Redis client and redis-server that lets exactly N write commands through, then cuts the
// connection and refuses new ones: from Redis's side, the client died right after its Nth write. Used to crash the
// CLI between the writes of one key operation and check what the request path makes of what was left.
import { createServer, connect, type Server, type Socket } from 'node:net';

// eval: the record's compare-and-set (src/keys/redis-store.ts, REPLACE_IF_REVISION) is a script.
const WRITES = new Set(['set', 'eval', 'sadd', 'srem', 'del', 'pexpireat', 'hset', 'publish']);

/** Splits complete RESP arrays (client commands) off the front of `buf`: each command's bytes and its name. */
function takeCommands(buf: Buffer): { commands: Array<{ bytes: Buffer; name: string }>; rest: Buffer } {
  const commands: Array<{ bytes: Buffer; name: string }> = [];
  let pos = 0;
  outer: while (pos < buf.length) {
    if (buf[pos] !== 0x2a /* * */) throw new Error('crash-proxy: inline commands are not supported');
    let i = buf.indexOf('\r\n', pos);
    if (i < 0) break;
    const count = Number(buf.subarray(pos + 1, i).toString());
    let at = i + 2;
    let name = '';
    for (let k = 0; k < count; k++) {
      const lineEnd = buf.indexOf('\r\n', at);
      if (lineEnd < 0) break outer;
      const len = Number(buf.subarray(at + 1, lineEnd).toString());
      const end = lineEnd + 2 + len + 2;
      if (end > buf.length) break outer;
      if (k === 0)
        name = buf
          .subarray(lineEnd + 2, lineEnd + 2 + len)
          .toString()
          .toLowerCase();
      at = end;
    }
    commands.push({ bytes: buf.subarray(pos, at), name });
    pos = at;
    i = pos;
  }
  return { commands, rest: buf.subarray(pos) };
}

export class CrashProxy {
  private constructor(
    private readonly server: Server,
    readonly port: number,
    /** The write commands that reached Redis, in order. */
    readonly writes: string[],
  ) {}

  static async start(redisPort: number, allowWrites: number): Promise<CrashProxy> {
    const writes: string[] = [];
    const sockets = new Set<Socket>();
    let crashed = false;
    const server = createServer((client) => {
      if (crashed) return void client.destroy();
      const upstream = connect(redisPort, '127.0.0.1');
      sockets.add(client).add(upstream);
      client.on('error', () => {});
      upstream.on('error', () => {});
      let pending: Buffer = Buffer.alloc(0);
      let cutOnReply = false;
      const crash = () => {
        crashed = true;
        for (const s of sockets) s.destroy();
        server.close();
      };
      client.on('data', (chunk: Buffer) => {
        if (crashed || cutOnReply) return;
        const { commands, rest } = takeCommands(Buffer.concat([pending, chunk]));
        pending = rest;
        for (const c of commands) {
          if (WRITES.has(c.name)) {
            if (writes.length >= allowWrites) return crash();
            writes.push(c.name);
            upstream.write(c.bytes);
            // The last allowed write: the client dies once Redis has answered it (so it was applied).
            if (writes.length === allowWrites) {
              cutOnReply = true;
              return;
            }
          } else upstream.write(c.bytes);
        }
      });
      upstream.on('data', (d: Buffer) => {
        if (crashed) return;
        client.write(d);
        if (cutOnReply) crash();
      });
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    return new CrashProxy(server, port, writes);
  }

  async close(): Promise<void> {
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
