// A minimal Redis client (RESP2, one command at a time) for the soak's own redis-server: readiness (PING), the
// keyspace size (DBSIZE) and memory (INFO memory) in the samples, and SHUTDOWN NOSAVE at the end. No dependency.
import { connect } from 'node:net';

function encode(args) {
  let out = `*${args.length}\r\n`;
  for (const a of args) {
    const s = String(a);
    out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  }
  return out;
}

/** Parses one reply from buf at offset; returns [value, nextOffset] or undefined when incomplete. */
function parse(buf, off) {
  const eol = buf.indexOf('\r\n', off);
  if (eol < 0) return undefined;
  const type = String.fromCharCode(buf[off]);
  const line = buf.toString('utf8', off + 1, eol);
  const next = eol + 2;
  switch (type) {
    case '+':
      return [line, next];
    case '-':
      return [new Error(line), next];
    case ':':
      return [Number(line), next];
    case '$': {
      const len = Number(line);
      if (len < 0) return [null, next];
      if (buf.length < next + len + 2) return undefined;
      return [buf.toString('utf8', next, next + len), next + len + 2];
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return [null, next];
      const items = [];
      let at = next;
      for (let i = 0; i < n; i++) {
        const r = parse(buf, at);
        if (!r) return undefined;
        items.push(r[0]);
        at = r[1];
      }
      return [items, at];
    }
    default:
      throw new Error(`unexpected RESP reply type ${JSON.stringify(type)}`);
  }
}

/** Sends one command to 127.0.0.1:port on a fresh connection; resolves the reply. Rejects after timeoutMs. */
export function redisCommand(port, args, timeoutMs = 2000) {
  return new Promise((resolve, reject) => {
    const sock = connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (err, value) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value);
    };
    const timer = setTimeout(() => finish(new Error(`redis ${args[0]}: no answer within ${timeoutMs} ms`)), timeoutMs);
    sock.once('error', (err) => finish(err));
    sock.once('close', () => finish(new Error(`redis ${args[0]}: connection closed`)));
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      let r;
      try {
        r = parse(buf, 0);
      } catch (err) {
        return finish(err);
      }
      if (!r) return;
      if (r[0] instanceof Error) finish(r[0]);
      else finish(undefined, r[0]);
    });
    sock.write(encode(args));
  });
}

/** Fields of an INFO section as an object of strings. */
export async function redisInfo(port, section) {
  const text = await redisCommand(port, ['INFO', section]);
  const out = {};
  for (const line of String(text).split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}
