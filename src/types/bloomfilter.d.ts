// Types for bloomfilter (it ships none): the parts the key filter uses (src/keys/known-hashes.ts).
declare module 'bloomfilter' {
  export class BloomFilter {
    /** `m` bits (rounded up to a multiple of 32), `k` hash functions. */
    constructor(m: number, k: number);
    /** The bit array, `m / 32` words. */
    readonly buckets: Uint32Array;
    readonly m: number;
    readonly k: number;
    add(v: string): void;
    /** false: certainly never added; true: probably added. */
    test(v: string): boolean;
  }
}
