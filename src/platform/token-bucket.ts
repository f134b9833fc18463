// A token bucket: requests spaced evenly at a rate, with an optional burst. (The limiter on the
// platform's organization key creation is sliding-window.ts, which matches how the platform counts.)
//
// Waiters are released one by one by a single timer that takes each token at the moment it
// releases the waiter. Computing every waiter's release time up front would be simpler, but when
// the event loop is busy, timers that fire late fire together, and the requests would leave in a
// clump the platform counts as a burst (seen in the suite: one 429 among 25 "spaced" requests).

export interface TokenBucketOptions {
  ratePerSecond: number;
  /**
   * Tokens that may accumulate while idle. Default 1: requests are spaced evenly at 1/rate, which
   * stays under the limit whatever window the platform measures in (a bucket of 10 could send 10
   * at the end of one second and 10 more at the start of the next).
   */
  burst?: number;
  /** Injectable clock and timer, for tests. */
  clock?: BucketClock;
}

export interface BucketClock {
  /** Monotonic milliseconds. */
  now(): number;
  /** Runs `fn` after `ms`; returns a function that cancels it. */
  schedule(fn: () => void, ms: number): () => void;
}

const realClock: BucketClock = {
  now: () => performance.now(),
  schedule(fn, ms) {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};

interface Waiter {
  resolve: () => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class TokenBucket {
  readonly #perMs: number;
  readonly #burst: number;
  readonly #clock: BucketClock;
  #tokens: number;
  #last: number;
  /** First come, first served. */
  readonly #queue: Waiter[] = [];
  #cancelTimer: (() => void) | undefined;

  constructor(o: TokenBucketOptions) {
    if (!(o.ratePerSecond > 0) || !Number.isFinite(o.ratePerSecond)) {
      throw new RangeError(`ratePerSecond must be a positive number, got ${o.ratePerSecond}`);
    }
    const burst = o.burst ?? 1;
    if (!(burst >= 1) || !Number.isFinite(burst)) throw new RangeError(`burst must be >= 1, got ${burst}`);
    this.#perMs = o.ratePerSecond / 1000;
    this.#burst = burst;
    this.#clock = o.clock ?? realClock;
    this.#tokens = burst;
    this.#last = this.#clock.now();
  }

  #refill(): void {
    const t = this.#clock.now();
    this.#tokens = Math.min(this.#burst, this.#tokens + (t - this.#last) * this.#perMs);
    this.#last = t;
  }

  /** Takes a token if one is available now and nobody is waiting; never waits. */
  tryTake(): boolean {
    if (this.#queue.length > 0) return false;
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /** Waits for a token, first come first served. Rejects with the signal's reason if it aborts. */
  take(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.tryTake()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.#queue.indexOf(waiter);
          if (i >= 0) this.#queue.splice(i, 1);
          if (this.#queue.length === 0) this.#stopTimer();
          reject(signal?.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.#queue.push(waiter);
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#cancelTimer !== undefined) return;
    this.#refill();
    while (this.#queue.length > 0 && this.#tokens >= 1) {
      const waiter = this.#queue.shift() as Waiter;
      this.#tokens -= 1;
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve();
    }
    if (this.#queue.length === 0) return;
    const wait = Math.max(1, Math.ceil((1 - this.#tokens) / this.#perMs));
    this.#cancelTimer = this.#clock.schedule(() => {
      this.#cancelTimer = undefined;
      this.#pump();
    }, wait);
  }

  #stopTimer(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
  }
}
