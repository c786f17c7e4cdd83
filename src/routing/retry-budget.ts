// A service's retry budget: retries stay within a share of its requests over a sliding window (20% over 10 s),
// with a floor (3 per second) so a quiet service can still retry, as Envoy's retry budgets and Finagle's do. A
// failing backend then sees at most 1.2 times the traffic it would see without retries, never a storm.
const BUCKETS = 10;
const BUCKET_MS = 1000;

export class RetryBudget {
  private readonly requests = new Array<number>(BUCKETS).fill(0);
  private readonly retries = new Array<number>(BUCKETS).fill(0);
  private bucketAt = 0;

  constructor(
    private readonly ratio = 0.2,
    private readonly minPerSecond = 3,
  ) {}

  /** A first try went out. */
  request(now: number): void {
    this.requests[this.slot(now)]!++;
  }

  /** Takes one retry from the budget: false when the budget is spent (the try is not repeated). */
  tryRetry(now: number): boolean {
    const slot = this.slot(now);
    const requests = this.requests.reduce((a, b) => a + b, 0);
    const retries = this.retries.reduce((a, b) => a + b, 0);
    if (retries >= requests * this.ratio && this.retries[slot]! >= this.minPerSecond) return false;
    this.retries[slot]!++;
    return true;
  }

  private slot(now: number): number {
    const at = Math.floor(now / BUCKET_MS);
    if (at !== this.bucketAt) {
      // Clear the buckets that were skipped since the last call (all of them after a long pause).
      for (let b = Math.max(this.bucketAt + 1, at - BUCKETS + 1); b <= at; b++) {
        this.requests[b % BUCKETS] = 0;
        this.retries[b % BUCKETS] = 0;
      }
      this.bucketAt = at;
    }
    return at % BUCKETS;
  }
}
