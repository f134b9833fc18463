// Client-side limiter matched to how the platform counts: "10 requests per second" on organization
// API key creation (platform-api.md, Limits), i.e. at most `limit` arrivals in any window of
// `windowMs`. The client never sees an arrival, only that it lies between the request's departure
// and its answer; so a request occupies one of `limit` slots from its departure until its answer
// has come, and the slot is free again `windowMs` after that. Then any two requests of one slot
// ARRIVE at least `windowMs` apart, whatever the network or a busy event loop on either side does:
// no window holds more than `limit` arrivals.
//
// The first version counted from the departures, with a 25 ms margin for the difference in travel
// times; on a loaded machine travel times differed by more than that and the platform answered
// 429 (3 of 25 in a test, one per 1,000 keys in the benchmark). Counting from the answers
// costs one round trip per window instead of a fixed margin: 10 per 1,000 ms + latency.
//
// Why not a token bucket: a bucket spaced at exactly 1/rate lets 11 requests land in one second
// whenever the 11th travels faster than the 1st, and one slowed down to avoid that (9.5/s) leaves
// 5 % of the platform's budget unused for good.
//
// Waiters are served by waiter-queue.ts.
import { realClock, WaiterQueue, type BucketClock } from './waiter-queue.ts';

/** A request let through by a RateLimiter. */
export interface Permit {
  /** The limiter clock's instant at which the request was let through. */
  readonly grantedAt: number;
  /** The request's answer has arrived, or it has failed or been abandoned. Call once; later calls do nothing. */
  done(): void;
}

/** What PlatformClient awaits before a rate-limited request. */
export interface RateLimiter {
  /** Resolves when the request may leave; rejects with the signal's reason if it aborts first. */
  take(signal?: AbortSignal): Promise<Permit>;
}

export interface SlidingWindowOptions {
  /** Requests allowed per window. */
  limit: number;
  /** The platform's window. Default 1,000 ms. */
  windowMs?: number;
  /** Added to the window on the client's side. Default 0. */
  marginMs?: number;
  clock?: BucketClock;
}

export class SlidingWindowLimiter implements RateLimiter {
  readonly #spanMs: number;
  readonly #clock: BucketClock;
  /** Per slot: when its last request was answered; Infinity while one is in flight. */
  readonly #freedAt: number[];
  readonly #waiters: WaiterQueue<Permit>;

  constructor(o: SlidingWindowOptions) {
    if (!Number.isInteger(o.limit) || o.limit < 1) throw new RangeError(`limit must be a positive integer, got ${o.limit}`);
    const windowMs = o.windowMs ?? 1_000;
    const marginMs = o.marginMs ?? 0;
    if (!(windowMs > 0) || !Number.isFinite(windowMs)) throw new RangeError(`windowMs must be a positive number, got ${windowMs}`);
    if (!(marginMs >= 0) || !Number.isFinite(marginMs)) throw new RangeError(`marginMs must be >= 0, got ${marginMs}`);
    this.#spanMs = windowMs + marginMs;
    this.#clock = o.clock ?? realClock;
    this.#freedAt = new Array<number>(o.limit).fill(Number.NEGATIVE_INFINITY);
    this.#waiters = new WaiterQueue<Permit>({
      // The slot answered longest ago must be a span behind (Infinity while every slot is in flight).
      waitMs: (now) => Math.min(...this.#freedAt) + this.#spanMs - now,
      grant: (now) => this.#occupy(now),
    }, this.#clock);
  }

  take(signal?: AbortSignal): Promise<Permit> {
    return this.#waiters.take(signal);
  }

  #occupy(now: number): Permit {
    const slot = this.#freedAt.indexOf(Math.min(...this.#freedAt));
    this.#freedAt[slot] = Number.POSITIVE_INFINITY;
    let open = true;
    return {
      grantedAt: now,
      done: () => {
        if (!open) return;
        open = false;
        this.#freedAt[slot] = this.#clock.now();
        this.#waiters.poke();
      },
    };
  }
}

/** The platform's limit on organization API key creation (platform-api.md, Limits). */
export const ORG_KEY_CREATIONS_PER_SECOND = 10;

/** One organization's limiter: at most 10 creations arriving in any second. */
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
