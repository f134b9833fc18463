// The work queue's delays for a key that failed or takes a next step (queue.ts addRateLimited,
// addPaced): client-go's DefaultControllerRateLimiter, with a token bucket per flow (a key's
// namespace) instead of one per controller; and the timers the queue and it run on (a test's clock
// in tests).

/** The clock and timers of the queue and its rate limiter. */
export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface RateLimiterOptions {
  /** First per-item delay; doubles with each failure. Default 5 ms. */
  baseDelayMs?: number;
  /** Cap of the per-item delay. Default 5 min. */
  maxDelayMs?: number;
  /** Token bucket refill rate, per flow. Default 10 per second. */
  qps?: number;
  /** Token bucket size, per flow. Default 100. */
  burst?: number;
}

/** A token bucket of one flow; a bucket refilled to its burst is dropped (an absent one is full). */
interface Bucket {
  tokens: number;
  last: number;
}

/**
 * client-go's DefaultControllerRateLimiter: the max of an ItemExponentialFailureRateLimiter and a
 * BucketRateLimiter, with one bucket per flow (a key's namespace) instead of one for the whole
 * controller. A single bucket goes into debt (rate.Limiter.Reserve) under one namespace's requeue
 * storm, and every other namespace's paced step then waits for that debt; with a bucket per flow,
 * a flow's storm delays only its own keys. The total rate stays bounded by the workers, which the
 * queue hands out in turns between flows. Exported for its tests and for callers that need a delay
 * without a queue.
 */
export class ControllerRateLimiter<K extends string> {
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  readonly #flowOf: (key: K) => string;
  readonly #failures = new Map<K, number>();
  readonly #buckets = new Map<string, Bucket>();
  /** Buckets kept after the last sweep of full ones; the next sweep runs at twice as many. */
  #sweptTo = 0;

  constructor(options: RateLimiterOptions = {}, now: () => number = realTimers.now, flowOf: (key: K) => string = () => '') {
    this.#baseDelayMs = options.baseDelayMs ?? 5;
    this.#maxDelayMs = options.maxDelayMs ?? 5 * 60_000;
    this.#qps = options.qps ?? 10;
    this.#burst = options.burst ?? 100;
    this.#now = now;
    this.#flowOf = flowOf;
  }

  /** The delay before the next attempt at key; records one more failure of key. */
  when(key: K): number {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    // 2^failures overflows to Infinity long after it passes the cap; min() handles both.
    const itemDelay = Math.min(this.#baseDelayMs * 2 ** failures, this.#maxDelayMs);
    return Math.max(itemDelay, this.#reserve(key));
  }

  numRequeues(key: K): number {
    return this.#failures.get(key) ?? 0;
  }

  forget(key: K): void {
    this.#failures.delete(key);
  }

  /** The wait of key's flow's token bucket alone (no failure recorded). */
  pace(key: K): number {
    return this.#reserve(key);
  }

  /** Buckets held: flows whose bucket is not full (a full one holds no state). */
  get bucketsHeld(): number {
    this.#sweep(true);
    return this.#buckets.size;
  }

  /** Takes one token of key's flow (possibly going into debt, like rate.Limiter.Reserve) and returns the wait. */
  #reserve(key: K): number {
    const now = this.#now();
    const flow = this.#flowOf(key);
    let bucket = this.#buckets.get(flow);
    if (bucket === undefined) {
      this.#sweep(false); // before the new bucket joins: it is full until this reserve takes its token
      bucket = { tokens: this.#burst, last: now };
      this.#buckets.set(flow, bucket);
    }
    this.#refill(bucket, now);
    bucket.tokens -= 1;
    return bucket.tokens >= 0 ? 0 : (-bucket.tokens / this.#qps) * 1000;
  }

  #refill(bucket: Bucket, now: number): void {
    bucket.tokens = Math.min(this.#burst, bucket.tokens + ((now - bucket.last) * this.#qps) / 1000);
    bucket.last = now;
  }

  /** Drops the buckets that refilled to their burst, when their count doubled since the last sweep (or always). */
  #sweep(always: boolean): void {
    if (!always && this.#buckets.size < Math.max(64, this.#sweptTo * 2)) return;
    const now = this.#now();
    for (const [flow, bucket] of this.#buckets) {
      this.#refill(bucket, now);
      if (bucket.tokens >= this.#burst) this.#buckets.delete(flow);
    }
    this.#sweptTo = this.#buckets.size;
  }
}
