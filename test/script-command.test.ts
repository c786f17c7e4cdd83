// The limit check's prebuilt script command (src/storage/script-command.ts): the bytes it writes are the RESP encoding
// of EVAL/EVALSHA with the arguments in order (the caller's, then the pre-encoded ones), EVAL on a socket's first call,
// one resend after NOSCRIPT, and a turn's batched commands sent in queue order in one write.
import { describe, expect, it } from 'vitest';
import type { Command } from 'ioredis';
import { encodeArgs, LuaScript, NO_ARGS, type CommandConnection } from '../src/storage/script-command.js';

/** The RESP array of bulk strings Redis reads: what any client must write for these arguments. */
const resp = (parts: ReadonlyArray<string | number>): string =>
  `*${parts.length}\r\n${parts.map((p) => `$${Buffer.byteLength(String(p))}\r\n${p}\r\n`).join('')}`;

/** A connection that records what each command writes (to one socket) and answers with `answer`. */
function fakeConnection(answer: (written: string, n: number) => unknown): CommandConnection & { written: string[]; socketWrites: string[] } {
  const socket = { write: (s: string) => void conn.socketWrites.push(s) };
  const conn = {
    written: [] as string[],
    socketWrites: [] as string[],
    status: 'ready',
    stream: socket as never,
    sendCommand(command: Command, stream?: { write(s: string): void }) {
      const bytes = command.toWritable(socket) as string;
      conn.written.push(bytes);
      if (stream) stream.write(bytes);
      else socket.write(bytes);
      const reply = answer(bytes, conn.written.length);
      queueMicrotask(() => (reply instanceof Error ? command.reject(reply) : command.resolve(reply as Buffer)));
      return command.promise;
    },
  };
  return conn;
}

describe('the prebuilt script command', () => {
  const lua = "return {'admitted', tonumber(ARGV[1])}";
  const tail = encodeArgs([5, 60_000, 'ünï']);

  it('writes EVAL with the source on a socket first, EVALSHA after; arguments in order, the encoded ones last', async () => {
    const script = new LuaScript(lua);
    const conn = fakeConnection(() => [Buffer.from('admitted'), 7]);
    const args = [2, 'k:{a}', 'k:{a}:x', '', 3];
    expect(await script.run(conn, args, tail, false)).toEqual(['admitted', 7]);
    await script.run(conn, args, NO_ARGS, false);
    expect(conn.written).toEqual([resp(['eval', lua, ...args, 5, 60_000, 'ünï']), resp(['evalsha', script.sha, ...args])]);
  });

  it('answers NOSCRIPT by sending the source once more', async () => {
    const script = new LuaScript(lua);
    const conn = fakeConnection((_w, n) => (n === 2 ? new Error('NOSCRIPT No matching script. Please use EVAL.') : [Buffer.from('limited'), 1]));
    await script.run(conn, [0], NO_ARGS, false);
    expect(await script.run(conn, [0], NO_ARGS, false)).toEqual(['limited', 1]);
    expect(conn.written.map((w) => w.split('\r\n')[2])).toEqual(['eval', 'evalsha', 'eval']);
  });

  it("passes other errors on, and sends a turn's batched commands in the order given, in one write", async () => {
    const script = new LuaScript(lua);
    const conn = fakeConnection((w) => (w.includes('boom') ? new Error('ERR boom') : [Buffer.from('admitted'), 0]));
    await expect(script.run(conn, ['boom'], NO_ARGS, false)).rejects.toThrow('ERR boom');
    conn.socketWrites.length = 0;
    const replies = await Promise.all(['a', 'b', 'c'].map((k) => script.run(conn, [1, k], NO_ARGS, true)));
    expect(replies).toHaveLength(3);
    expect(conn.socketWrites).toEqual([['a', 'b', 'c'].map((k) => resp(['evalsha', script.sha, 1, k])).join('')]);
  });
});
