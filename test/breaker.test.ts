// The Redis circuit breaker on its own, with an injected clock: it opens on a failure, fails fast through the
// cool-down, lets exactly one probe through after it, and closes on the probe's success.
import { describe, expect, it } from 'vitest';
import { ReplyError } from 'ioredis';
import { Breaker, BreakerOpenError } from '../src/storage/breaker.js';
import { ManualClock } from '../src/util/clock.js';

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: Error) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('Breaker', () => {
  it('opens on a failure, fails fast during the cool-down, then one probe closes it', async () => {
    const clock = new ManualClock();
    const breaker = new Breaker(clock, 1000);
    const states: string[] = [];
    breaker.onChange((s) => states.push(s));
    await expect(breaker.run(() => Promise.reject(new Error('connection reset')))).rejects.toThrow('connection reset');
    expect(breaker.state).toBe('open');
    let called = 0;
    await expect(breaker.run(async () => ++called)).rejects.toBeInstanceOf(BreakerOpenError);
    expect(called).toBe(0);
    clock.advance(1000);
    expect(await breaker.run(async () => ++called)).toBe(1);
    expect(breaker.state).toBe('closed');
    expect(states).toEqual(['open', 'closed']);
  });

  it('an error reply about the data (a script error, WRONGTYPE) does not open it; write refusals and busy replies do', async () => {
    const clock = new ManualClock();
    const breaker = new Breaker(clock, 1000);
    for (const data of ['ERR user_script:1: Expected value but found invalid token', 'WRONGTYPE Operation against a key holding the wrong kind of value']) {
      await expect(breaker.run(() => Promise.reject(new ReplyError(data)))).rejects.toThrow(data);
      expect(breaker.state).toBe('closed');
    }
    for (const refusal of [
      'OOM command not allowed when used memory > maxmemory.',
      "READONLY You can't write against a read only replica.",
      'LOADING Redis is loading the dataset in memory',
    ]) {
      await expect(breaker.run(() => Promise.reject(new ReplyError(refusal)))).rejects.toThrow(refusal);
      expect(breaker.state).toBe('open');
      breaker.close();
    }
  });

  it('a failed probe keeps it open for another cool-down', async () => {
    const clock = new ManualClock();
    const breaker = new Breaker(clock, 1000);
    await breaker.run(() => Promise.reject(new Error('down'))).catch(() => {});
    clock.advance(1000);
    await expect(breaker.run(() => Promise.reject(new Error('still down')))).rejects.toThrow('still down');
    await expect(breaker.run(async () => 1)).rejects.toBeInstanceOf(BreakerOpenError);
    clock.advance(1000);
    expect(await breaker.run(async () => 2)).toBe(2);
  });

  it('never lets two probes run at once, even when a call from before the trip finishes meanwhile', async () => {
    const clock = new ManualClock();
    const breaker = new Breaker(clock, 1000);
    // A call that started while the breaker was closed and is still waiting on Redis.
    const early = deferred<string>();
    const earlyCall = breaker.run(() => early.promise);
    // Another call fails: the breaker opens; the cool-down passes; a probe goes out and waits.
    await breaker.run(() => Promise.reject(new Error('reset'))).catch(() => {});
    clock.advance(1000);
    const probe = deferred<string>();
    const probeCall = breaker.run(() => probe.promise);
    // The early call fails now, while the probe is out: that must not make room for a second probe.
    early.reject(new Error('late failure'));
    await expect(earlyCall).rejects.toThrow('late failure');
    // Its failure restarted the cool-down; once that is over too, the probe is still the only one out.
    clock.advance(1000);
    let second = 0;
    await expect(breaker.run(async () => ++second)).rejects.toBeInstanceOf(BreakerOpenError);
    expect(second).toBe(0);
    probe.resolve('ok');
    expect(await probeCall).toBe('ok');
    expect(breaker.state).toBe('closed');
  });

  it('a client that is not connected keeps it open without calling anything', async () => {
    const clock = new ManualClock();
    let connected = false;
    const breaker = new Breaker(clock, 1000, () => connected);
    let called = 0;
    await expect(breaker.run(async () => ++called)).rejects.toBeInstanceOf(BreakerOpenError);
    expect(breaker.state).toBe('open');
    connected = true;
    clock.advance(1000);
    expect(await breaker.run(async () => ++called)).toBe(1);
    expect(called).toBe(1);
  });
});
