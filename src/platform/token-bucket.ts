// A token bucket: requests spaced evenly at a rate, with an optional burst; waiters are served by
// waiter-queue.ts. (The limiter on the platform's organization key creation is sliding-window.ts,
// which matches how the platform counts.)
import type { Permit, RateLimiter } from './sliding-window.ts';
import { realClock, WaiterQueue, type BucketClock } from './waiter-queue.ts';

export type { BucketClock } from './waiter-queue.ts';

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

export class TokenBucket implements RateLimiter {
  readonly #perMs: number;
  readonly #burst: number;
  readonly #clock: BucketClock;
  readonly #waiters: WaiterQueue<Permit>;
  #tokens: number;
  #last: number;

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
    this.#waiters = new WaiterQueue<Permit>(
      {
        waitMs: (now) => {
          this.#refill(now);
          return this.#tokens >= 1 ? 0 : (1 - this.#tokens) / this.#perMs;
        },
        grant: (now) => {
          this.#tokens -= 1;
          // A bucket counts departures only: nothing to do when the request is answered.
          return { grantedAt: now, done: () => undefined };
        },
      },
      this.#clock,
    );
  }

  #refill(t: number): void {
    this.#tokens = Math.min(this.#burst, this.#tokens + (t - this.#last) * this.#perMs);
    this.#last = t;
  }

  /** Takes a token if one is available now and nobody is waiting; never waits. */
  tryTake(): boolean {
    return this.#waiters.tryTake();
  }

  /** Waits for a token, first come first served. Rejects with the signal's reason if it aborts. */
  take(signal?: AbortSignal): Promise<Permit> {
    return this.#waiters.take(signal);
  }
}
