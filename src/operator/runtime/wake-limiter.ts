// How often a change of an input may wake a key (an object it refers to: a credentials Secret).
// An input's change wakes its keys at once, even out of a refusal backoff (controller.ts), so
// whoever may write the input could otherwise buy a full reconcile per write: a Secret rewritten
// every half second was a pass every half second, each reading the resource and its Secrets.
// A token bucket per key, like client-go's BucketRateLimiter but per item: a few changes
// in a row (credentials broken, then fixed) wake at once; past the burst, at most one wake per
// interval, and the last change of a storm always wakes its key (one trailing wake, with the
// latest event), so nothing is missed, only merged.

export interface WakeLimits {
  /** Wakes at once in a row before the rate applies. */
  burst: number;
  /** One more wake per this long. */
  everyMs: number;
}

export const DEFAULT_WAKE_LIMITS: WakeLimits = { burst: 3, everyMs: 5_000 };

/** Time and timers; tests pass a clock they move themselves. */
export interface WakeClock {
  now(): number;
  /** Runs `fn` after `ms`; returns a function that cancels it. */
  schedule(fn: () => void, ms: number): () => void;
}

const realWakeClock: WakeClock = {
  now: () => Date.now(),
  schedule(fn, ms) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

interface Bucket {
  tokens: number;
  at: number;
  /** The trailing wake, with the latest event's callback. */
  pending?: { cancel: () => void; wake: () => void };
}

/** Buckets kept before idle (full, nothing pending) ones are dropped: one per key woken lately. */
const PRUNE_ABOVE = 1_024;

export class WakeLimiter {
  readonly #limits: WakeLimits;
  readonly #clock: WakeClock;
  readonly #buckets = new Map<string, Bucket>();
  #stopped = false;
  /** The size past which idle buckets are dropped: twice what was left after the last prune (amortized O(1) per wake). */
  #pruneAbove = PRUNE_ABOVE;

  constructor(limits: WakeLimits = DEFAULT_WAKE_LIMITS, clock: WakeClock = realWakeClock) {
    this.#limits = limits;
    this.#clock = clock;
  }

  /** Runs `wake` now if the key has a token left, else once its next token comes (the latest `wake` of those that wait). */
  admit(key: string, wake: () => void): void {
    if (this.#stopped) return;
    if (this.#buckets.size > this.#pruneAbove) {
      this.#prune();
      this.#pruneAbove = Math.max(PRUNE_ABOVE, 2 * this.#buckets.size);
    }
    const bucket = this.#refill(key);
    if (bucket.pending !== undefined) {
      bucket.pending.wake = wake;
      return;
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      wake();
      return;
    }
    const delay = Math.ceil((1 - bucket.tokens) * this.#limits.everyMs);
    const cancel = this.#clock.schedule(() => {
      const pending = bucket.pending;
      bucket.pending = undefined;
      if (this.#stopped || pending === undefined) return;
      this.#refill(key).tokens -= 1;
      pending.wake();
    }, delay);
    bucket.pending = { cancel, wake };
  }

  /** How many keys have a bucket (tests: bounded). */
  get size(): number {
    return this.#buckets.size;
  }

  stop(): void {
    this.#stopped = true;
    for (const bucket of this.#buckets.values()) bucket.pending?.cancel();
    this.#buckets.clear();
  }

  #refill(key: string): Bucket {
    const now = this.#clock.now();
    let bucket = this.#buckets.get(key);
    if (bucket === undefined) {
      bucket = { tokens: this.#limits.burst, at: now };
      this.#buckets.set(key, bucket);
      return bucket;
    }
    bucket.tokens = Math.min(this.#limits.burst, bucket.tokens + (now - bucket.at) / this.#limits.everyMs);
    bucket.at = now;
    return bucket;
  }

  /** Drops the buckets that are full again with nothing pending: a new bucket is the same. */
  #prune(): void {
    const now = this.#clock.now();
    for (const [key, bucket] of this.#buckets) {
      if (bucket.pending === undefined && bucket.tokens + (now - bucket.at) / this.#limits.everyMs >= this.#limits.burst) this.#buckets.delete(key);
    }
  }
}
