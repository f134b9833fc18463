// Client-side limiter matched to how the platform counts: "10 requests per second" on organization
// API key creation (platform-api.md, Limits), i.e. at most `limit` arrivals in any window of
// `windowMs`. A request may leave when fewer than `limit` requests left in the last
// `windowMs + marginMs`: the margin absorbs the difference in travel time between the first and
// the last request of a window (an arrival is a departure plus its own latency).
//
// Why not a token bucket: a bucket spaced at exactly 1/rate lets 11 requests land in one second
// whenever the 11th travels faster than the 1st (half the time, with symmetric jitter), and one
// slowed down to avoid that (9.5/s) leaves 5 % of the platform's budget unused for good. The
// sliding window's cost is the margin alone: 10 per 1,025 ms is 97.6 % of 10/s.
//
// Waiters are served by waiter-queue.ts.
import { realClock, WaiterQueue, type BucketClock } from './waiter-queue.ts';

/** What PlatformClient awaits before a rate-limited request. */
export interface RateLimiter {
  /**
   * Resolves when the request may leave, with the limiter clock's instant at which it was let
   * through; rejects with the signal's reason if it aborts first.
   */
  take(signal?: AbortSignal): Promise<number>;
}

export interface SlidingWindowOptions {
  /** Requests allowed per window. */
  limit: number;
  /** The platform's window. Default 1,000 ms. */
  windowMs?: number;
  /** Added to the window on the client's side. Default 25 ms. */
  marginMs?: number;
  clock?: BucketClock;
}

export class SlidingWindowLimiter implements RateLimiter {
  readonly #limit: number;
  readonly #spanMs: number;
  /** Grant times of the last `limit` requests, oldest at #next (a ring buffer). */
  readonly #grants: number[];
  #next = 0;
  readonly #waiters: WaiterQueue;

  constructor(o: SlidingWindowOptions) {
    if (!Number.isInteger(o.limit) || o.limit < 1) throw new RangeError(`limit must be a positive integer, got ${o.limit}`);
    const windowMs = o.windowMs ?? 1_000;
    const marginMs = o.marginMs ?? 25;
    if (!(windowMs > 0) || !Number.isFinite(windowMs)) throw new RangeError(`windowMs must be a positive number, got ${windowMs}`);
    if (!(marginMs >= 0) || !Number.isFinite(marginMs)) throw new RangeError(`marginMs must be >= 0, got ${marginMs}`);
    this.#limit = o.limit;
    this.#spanMs = windowMs + marginMs;
    this.#grants = new Array<number>(o.limit).fill(Number.NEGATIVE_INFINITY);
    this.#waiters = new WaiterQueue({
      // The oldest of the last `limit` grants must have left the span.
      waitMs: (now) => (this.#grants[this.#next] as number) + this.#spanMs - now,
      grant: (now) => {
        this.#grants[this.#next] = now;
        this.#next = (this.#next + 1) % this.#limit;
      },
    }, o.clock ?? realClock);
  }

  take(signal?: AbortSignal): Promise<number> {
    return this.#waiters.take(signal);
  }
}

/** The platform's limit on organization API key creation (platform-api.md, Limits). */
export const ORG_KEY_CREATIONS_PER_SECOND = 10;

/** One organization's limiter: at most 10 creations in any 1,025 ms. */
export function orgKeyCreationLimiter(clock?: BucketClock): SlidingWindowLimiter {
  return new SlidingWindowLimiter({ limit: ORG_KEY_CREATIONS_PER_SECOND, ...(clock !== undefined ? { clock } : {}) });
}

let processWide: SlidingWindowLimiter | undefined;

/**
 * The limiter every PlatformClient uses unless given one: one per process, so clients built per
 * credentials Secret still share the platform's budget on org key creation.
 */
export function defaultOrgKeyLimiter(): RateLimiter {
  processWide ??= orgKeyCreationLimiter();
  return processWide;
}
