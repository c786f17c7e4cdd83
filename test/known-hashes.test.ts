// The key filter on its own (src/keys/known-hashes.ts): never a "no" it cannot stand behind (before its first
// build, while one spans a reconnect of the change feed, after a failed one), hashes the feed names go in at once
// (also during a build), junk is ignored, a failed build is tried again, an overfull filter is rebuilt larger.
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { filterShape, KnownHashes, MIN_CAPACITY, type HashSource } from '../src/keys/known-hashes.js';

const hash = () => randomBytes(32).toString('hex');

/** A store of `hashes`; `fail` makes the next reads reject; `hold` keeps forEachHash open until released. */
interface TestSource extends HashSource {
  hashes: string[];
  fail: boolean;
  reads: number;
  hold: Promise<void> | undefined;
}

function source(hashes: string[]): TestSource {
  const s: TestSource = {
    hashes,
    fail: false,
    reads: 0,
    hold: undefined,
    async keyCount() {
      if (s.fail) throw new Error('store down (test)');
      return s.hashes.length;
    },
    async forEachHash(each: (h: readonly string[]) => void) {
      s.reads++;
      if (s.fail) throw new Error('store down (test)');
      if (s.hold) await s.hold;
      for (let i = 0; i < s.hashes.length; i += 1000) each(s.hashes.slice(i, i + 1000));
    },
  };
  return s;
}

describe('KnownHashes', () => {
  it('says "maybe" to everything until built; then "no" to made-up hashes and "maybe" to stored ones', async () => {
    const stored = Array.from({ length: 5000 }, hash);
    const filter = new KnownHashes(source(stored));
    expect(filter.isCertain).toBe(false);
    expect(filter.mayOpenAKey(hash())).toBe(true);
    filter.rebuild();
    await filter.settled();
    expect(filter.isCertain).toBe(true);
    for (const h of stored) expect(filter.mayOpenAKey(h)).toBe(true);
    let maybes = 0;
    for (let i = 0; i < 20_000; i++) if (filter.mayOpenAKey(hash())) maybes++;
    // Sized for MIN_CAPACITY at 0.1%, holding 5,000: far fewer than 0.1% of made-up hashes pass.
    expect(maybes).toBeLessThan(20);
    expect(filter.bytes).toBe(Math.ceil(filterShape(MIN_CAPACITY).bits / 32) * 4);
  });

  it('takes hashes from the change feed at once, also while a build is reading the store (none lost at the swap)', async () => {
    const src = source(Array.from({ length: 100 }, hash));
    const filter = new KnownHashes(src);
    filter.rebuild();
    await filter.settled();
    const early = hash();
    filter.add(early);
    expect(filter.mayOpenAKey(early)).toBe(true);
    let release!: () => void;
    src.hold = new Promise<void>((r) => (release = r));
    filter.rebuild();
    await sleep(10);
    const during = hash();
    filter.add(during);
    release();
    await filter.settled();
    expect(filter.mayOpenAKey(during)).toBe(true);
  });

  it('ignores what is not a SHA-256 hex hash', async () => {
    const filter = new KnownHashes(source([]));
    filter.rebuild();
    await filter.settled();
    for (const junk of ['', 'x', 'A'.repeat(64), `${'a'.repeat(64)}0`, 'a'.repeat(63), '0'.repeat(100_000)]) {
      filter.add(junk);
      expect(filter.mayOpenAKey(junk)).toBe(false);
    }
  });

  it('a reconnect of the change feed makes it uncertain, also when it comes during a build; the next build makes it certain again', async () => {
    const src = source(Array.from({ length: 100 }, hash));
    const filter = new KnownHashes(src);
    filter.rebuild();
    await filter.settled();
    filter.changesMayBeMissed();
    expect(filter.isCertain).toBe(false);
    expect(filter.mayOpenAKey(hash())).toBe(true);
    let release!: () => void;
    src.hold = new Promise<void>((r) => (release = r));
    filter.rebuild();
    await sleep(10);
    filter.changesMayBeMissed();
    release();
    await filter.settled();
    expect(filter.isCertain).toBe(false);
    src.hold = undefined;
    filter.rebuild();
    await filter.settled();
    expect(filter.isCertain).toBe(true);
  });

  it('a failed build leaves it uncertain, reported, and is tried again until the store answers', async () => {
    const src = source(Array.from({ length: 10 }, hash));
    src.fail = true;
    const outcomes: string[] = [];
    const filter = new KnownHashes(src, (o) => outcomes.push('error' in o ? 'error' : 'built'));
    filter.rebuild();
    await filter.settled();
    expect(filter.isCertain).toBe(false);
    expect(outcomes).toEqual(['error']);
    src.fail = false;
    // The retry comes after 1 s.
    for (let i = 0; i < 300 && !filter.isCertain; i++) await sleep(10);
    expect(filter.isCertain).toBe(true);
    expect(outcomes).toEqual(['error', 'built']);
    filter.close();
  });

  it("the change feed coming back does not wait for a failed build's retry", async () => {
    const src = source(Array.from({ length: 10 }, hash));
    src.fail = true;
    const filter = new KnownHashes(src);
    filter.rebuild();
    await filter.settled();
    src.fail = false;
    filter.rebuild();
    await filter.settled();
    expect(filter.isCertain).toBe(true);
    filter.close();
  });

  it('a build waits at least as long as the last one took: back-to-back requests make one more build, not one each', async () => {
    const src = source(Array.from({ length: 10 }, hash));
    const filter = new KnownHashes(src);
    let release!: () => void;
    src.hold = new Promise<void>((r) => (release = r));
    filter.rebuild();
    setTimeout(() => release(), 100);
    await filter.settled();
    src.hold = undefined;
    expect(src.reads).toBe(1);
    const ended = Date.now();
    for (let i = 0; i < 20; i++) filter.rebuild();
    expect(src.reads).toBe(1);
    await filter.settled();
    expect(src.reads).toBe(2);
    // A bound: timing (the rebuild's pause, longer under load).
    expect(Date.now() - ended).toBeGreaterThanOrEqual(90);
    filter.close();
  });

  it('is rebuilt larger once the feed has added more hashes than it was sized for', async () => {
    const src = source([]);
    const filter = new KnownHashes(src);
    filter.rebuild();
    await filter.settled();
    const small = filter.bytes;
    for (let i = 0; i <= MIN_CAPACITY; i++) {
      const h = hash();
      src.hashes.push(h);
      filter.add(h);
    }
    await filter.settled();
    expect(src.reads).toBe(2);
    expect(filter.bytes).toBeGreaterThan(small);
    expect(filter.isCertain).toBe(true);
  });
});
