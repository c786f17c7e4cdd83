// Each Redis command's deadline (redis.commandTimeoutMs), kept by Tollgate rather than by ioredis's commandTimeout,
// because that one drops answers a late process had already received. A timer fires in the event loop's timers
// phase, before the poll phase reads sockets: on a busy machine a command's timer can come due while Redis's answer
// sits unread in the socket, and ioredis's timer rejects the command then and discards the answer, so the request is
// decided by the per-instance memory limits (which admit past a key's limit across a fleet) though Redis had decided
// it. The per-instance limits are for a Redis that does not answer, not for a process that is late to read it.
import type { Command, Redis } from 'ioredis';

/** A command's rejection when its deadline passed with no answer (the message ioredis's own timeout uses). */
export const COMMAND_TIMED_OUT = 'Command timed out';

/**
 * A command that got no answer within its deadline. `lateMs`: how late the timer that ended it fired, past its due
 * time: the lag of this process's event loop while Redis was given its last window (the breaker judges by it).
 */
export class CommandTimeoutError extends Error {
  constructor(readonly lateMs: number) {
    super(COMMAND_TIMED_OUT);
  }
}

/** How late (ms) a deadline's timer may fire, at least, before this process counts as having been behind. */
const LATE_MS = 2;

/** Commands whose deadline is set: a command is sent again after a redirection or a reconnect, and keeps its first. */
const armed = new WeakSet<Command>();

/**
 * Fails `command` once it has had `ms` to be answered, judged by a process able to see the answer come:
 * - when the timer fires, the poll phase runs once first (setImmediate runs after it): an answer already in the
 *   socket settles the command there, and only a command still unanswered then is failed;
 * - a timer that fires early (Node arms a timer on the time its turn of the event loop started, so a command sent
 *   late in a long turn is due before its `ms` have passed) waits for the rest of them;
 * - a timer that fired late (by more than a tenth of `ms`) says this process was behind, and on a loaded machine
 *   Redis, starved of the same CPU, may have been stalled with it: the command gets the time it was not watched
 *   back (as long as the timer was late, at most `ms`), counted from then. It is failed when that runs out, late or
 *   not.
 * A hung Redis in a process that is on time: failed one turn of the event loop after `ms`. A hung Redis in a process
 * that is behind: later by what the process was behind, at most `ms` more. The error says how late its last timer
 * fired, so the breaker judges Redis by the window it was last given, not by the whole wait.
 */
function arm(command: Command, ms: number): void {
  if (armed.has(command) || command.isSettled) return;
  armed.add(command);
  const tolerance = Math.max(LATE_MS, ms / 10);
  let extended = false;
  let due = 0;
  let timer: NodeJS.Timeout;
  const expired = () => {
    const now = performance.now();
    if (now < due - LATE_MS) {
      timer = setTimeout(expired, due - now);
      return;
    }
    const lateMs = now - due;
    setImmediate(() => {
      if (command.isSettled) return;
      if (lateMs > tolerance && !extended) {
        extended = true;
        start(Math.min(ms, lateMs));
      } else command.reject(new CommandTimeoutError(lateMs));
    });
  };
  const start = (windowMs: number) => {
    due = performance.now() + windowMs;
    timer = setTimeout(expired, windowMs);
  };
  start(ms);
  // The timer ends when the command settles. A cluster client's reject may instead send the command to another node
  // (MOVED, ASK, a connection lost): it is not settled then, and its deadline runs on.
  const { resolve, reject } = command;
  command.resolve = (result: unknown) => {
    const settled = resolve(result);
    if (command.isSettled) clearTimeout(timer);
    return settled;
  };
  command.reject = (err: Error) => {
    reject(err);
    if (command.isSettled) clearTimeout(timer);
  };
}

/**
 * Gives every command sent on `connection` a deadline of `ms` (the connection is made without ioredis's
 * commandTimeout). On a cluster, called for each node's connection: the cluster client sends every command through one.
 */
export function giveCommandsDeadline(connection: Redis, ms: number): void {
  const send = connection.sendCommand;
  connection.sendCommand = function (this: Redis, command, stream) {
    arm(command, ms);
    return send.call(this, command, stream);
  };
}
