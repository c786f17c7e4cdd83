// A Lua script sent as one ioredis Command built by the caller, for the request path's limit check. ioredis's own way
// (defineCommand, then auto-pipelining) costs per call a pipeline object per batch, a copy of the arguments at each of
// three layers, two more promises and a nextTick per reply, and a converted copy of the reply; this sends the same
// EVALSHA (EVAL on a connection that has not run the script, and once more after NOSCRIPT, as ioredis does) with none
// of them. Commands sent in one turn of the event loop still share one write, at the turn's end (setImmediate, where
// ioredis's auto-pipeline would have written them).
import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { Command } from 'ioredis';

/** What a script command needs of an ioredis client (a Redis connection, or a Cluster client, which has no stream). */
export interface CommandConnection {
  sendCommand(command: Command, stream?: TurnBatch): unknown;
  readonly stream?: Socket | undefined;
  readonly status?: string;
}

/**
 * Arguments encoded once in Redis's protocol (RESP), to follow a command's own: values that are the same for every
 * request of a config (a plan's limits and window lengths), encoded when the config is, not per request.
 */
export interface EncodedArgs {
  readonly count: number;
  readonly resp: string;
}

export const NO_ARGS: EncodedArgs = Object.freeze({ count: 0, resp: '' });

export function encodeArgs(values: ReadonlyArray<string | number>): EncodedArgs {
  let resp = '';
  for (const v of values) {
    const s = String(v);
    resp += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  }
  return Object.freeze({ count: values.length, resp });
}

const NO_OPTIONS = Object.freeze({});

export class LuaScript {
  readonly sha: string;
  /** The sockets that have run this script: EVAL on a socket's first call (and after NOSCRIPT), EVALSHA after. */
  readonly loaded = new WeakSet<object>();

  constructor(readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }

  /**
   * Runs the script with `args` (numkeys, the keys, the arguments) followed by `tail`, and answers its reply as Redis
   * sent it (a bulk string as a Buffer), but for a reply array's first element, a string. `batched`: the write waits
   * for the end of this turn of the event loop, with the other script commands batched on the connection in it;
   * otherwise it is written now.
   */
  async run(connection: CommandConnection, args: ReadonlyArray<string | number>, tail: EncodedArgs, batched: boolean): Promise<unknown> {
    const command = new ScriptCommand(this, args, tail);
    if (batched && connection.stream !== undefined && connection.status === 'ready') batchOf(connection).add(command);
    else connection.sendCommand(command);
    try {
      return await command.promise;
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('NOSCRIPT')) throw err;
      // Redis restarted, or its scripts were flushed: this socket's next call sends the source (EVAL), once.
      if (command.socket !== undefined) this.loaded.delete(command.socket);
      const again = new ScriptCommand(this, args, tail);
      connection.sendCommand(again);
      return await again.promise;
    }
  }
}

class ScriptCommand extends Command {
  /** The socket it was last written to. */
  socket: object | undefined;

  constructor(
    private readonly script: LuaScript,
    args: ReadonlyArray<string | number>,
    private readonly tail: EncodedArgs,
  ) {
    // Command flattens its arguments one level: the SHA, then args (one copy, its own).
    super('evalsha', [script.sha, args as Array<string | number>], NO_OPTIONS);
  }

  override toWritable(socket: object): string {
    this.socket = socket;
    const script = this.script;
    // Written again on another socket (a cluster's redirection, a reconnect): EVAL or EVALSHA as that socket needs.
    if (!script.loaded.has(socket)) {
      script.loaded.add(socket);
      this.name = 'eval';
      this.args[0] = script.lua;
    } else if (this.name === 'eval') {
      this.name = 'evalsha';
      this.args[0] = script.sha;
    }
    // Command has turned every argument into a string.
    const args = this.args as string[];
    let out = `*${args.length + 1 + this.tail.count}\r\n$${this.name.length}\r\n${this.name}\r\n`;
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      out += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
    }
    return out + this.tail.resp;
  }

  /** The reply as is (no converted copy): a script's status word, first, as a string; its numbers are numbers. */
  override transformReply(result: Buffer | Buffer[]): Buffer | Buffer[] {
    // ioredis types a reply's elements as Buffers; a script's integers arrive as numbers.
    const first: unknown = Array.isArray(result) ? result[0] : undefined;
    if (Buffer.isBuffer(first)) (result as unknown[])[0] = first.toString();
    return result;
  }
}

/**
 * A connection's commands of one turn of the event loop, sent together at its end: each through the connection's
 * sendCommand (its reply queue, its deadline), all in one synchronous loop, so no other command's write can come
 * between them and the queue's order is the socket's; their bytes leave in one write. ioredis's own pipelines pass
 * sendCommand such a stream (`isPipeline`, `destination`): it writes each command's bytes to it.
 */
class TurnBatch {
  readonly isPipeline = true;
  readonly destination: { readonly redis: CommandConnection };
  private commands: Command[] = [];
  private collecting = false;
  private data = '';

  constructor(connection: CommandConnection) {
    this.destination = { redis: connection };
  }

  add(command: Command): void {
    if (this.commands.length === 0) setImmediate(sendTurn, this);
    this.commands.push(command);
  }

  send(): void {
    const connection = this.destination.redis;
    const commands = this.commands;
    this.commands = [];
    this.collecting = true;
    try {
      for (const command of commands) {
        try {
          connection.sendCommand(command, this);
        } catch (err) {
          // Never left unsettled: a command sendCommand did not take has no deadline either.
          command.reject(err as Error);
        }
      }
    } finally {
      this.collecting = false;
    }
    const data = this.data;
    this.data = '';
    if (data !== '') connection.stream?.write(data);
  }

  /** ioredis's write of one command: collected while the turn's commands are sent; any later one (a command sent
   * again after a reconnect keeps the stream it was first sent with) goes to the socket at once. */
  write(bytes: string): void {
    if (this.collecting) this.data += bytes;
    else this.destination.redis.stream?.write(bytes);
  }
}

function sendTurn(batch: TurnBatch): void {
  batch.send();
}

const batches = new WeakMap<CommandConnection, TurnBatch>();

function batchOf(connection: CommandConnection): TurnBatch {
  let batch = batches.get(connection);
  if (batch === undefined) batches.set(connection, (batch = new TurnBatch(connection)));
  return batch;
}
