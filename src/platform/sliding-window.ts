// Client-side limiter matched to how the platform counts: "10 requests per second" on organization
// API key creation (docs/platform-api.md, Limits), i.e. at most `limit` arrivals in any window of
// `windowMs`. The client never sees an arrival, only that it lies between the request's departure
// and its answer; so a request occupies one of `limit` slots from its departure until its answer
// has come, and the slot is free again `windowMs` after that. Then any two requests of one slot
// ARRIVE at least `windowMs` apart, whatever the network or a busy event loop on either side does:
// no window holds more than `limit` arrivals.
//
// Counting from the departures needs a margin for the difference in travel times, and on a loaded
// machine travel times differ by more than any small margin: the platform answers 429. Counting
// from the answers costs one round trip per window instead: `limit` per `windowMs` + latency.
//
// Latency credit wins most of that round trip back. Two requests of one slot: the first leaves at
// d1, arrives at A1 = d1 + L1 (outbound leg) and is answered at a1 = A1 + R1 (return leg, the
// platform's work after counting included); the second leaves at d2 and arrives at A2 = d2 + L2.
// So A2 - A1 = (d2 + L2) - (a1 - R1) = (d2 - a1) + R1 + L2. Letting the second leave at
// d2 = a1 + windowMs - credit gives A2 - A1 = windowMs - credit + R1 + L2: the arrivals are a
// window apart exactly when R1 + L2 >= credit (the platform's clock and ours tick at the same rate:
// their offset cancels). Legs are measured on the client's clock from the
// grant to the moment done() runs, so a send delayed by a busy event loop lengthens L2 and a late
// done() lengthens R1: both only widen the gap. R1 + L2 is one return leg and one outbound leg,
// about one round trip on a steady network. The credit is the smallest round trip answered in the
// last 10 windows less a margin of 10 % + 10 ms, at least 30 ms, and at most half a window
// (round-trip-credit.ts). It is unsafe only when a return leg and the next outbound leg together
// are faster than the fastest complete round trip of the last 10 s by more than that margin: the
// network or the platform suddenly sped up, every recent round trip was slowed (a stalled event
// loop), or the two legs jitter independently by more than the margin. The credit is taken when
// a request leaves, not when its predecessor was answered: the first fast answer shrinks it at
// once for every slot, so a sudden speed-up costs at most the requests already sent before that
// answer. Throughput with backlog: windowMs + rtt - credit per slot, 1,030 ms with 100 ms round
// trips (0.97 of the rate), 1,040 ms with 300 ms (0.96); with jitter, the round trips above the
// smallest one are not given back (the split between the legs is unknown).
//
// No credit while fewer than 3 x `limit` round trips were answered in the last 10
// windows or the oldest of them is less than 5 windows old (the first round of a burst also opens
// connections; a stall lengthens every round trip for seconds: the smallest round trip needs time),
// for a request without an answer from the platform (failed, aborted: done() without an answer;
// a 5xx may come from a gateway while the request still travels on), for one answered 429, and
// for 10 windows after any 429 (doubling on each further 429, up to 300): the platform counted
// more than meant, whatever the reason, so the limiter stops betting on the network.
//
// Why not a token bucket: a bucket spaced at exactly 1/rate lets 11 requests land in one second
// whenever the 11th travels faster than the 1st, and one slowed down to avoid that (9.5/s) leaves
// 5 % of the platform's budget unused for good.
//
// Waiters are served by waiter-queue.ts.
import { RoundTripCredit } from './round-trip-credit.ts';
import { realClock, WaiterQueue, type BucketClock } from './waiter-queue.ts';

/** What the platform answered a request let through: its HTTP status. */
export interface Answer {
  readonly status: number;
}

/** A request let through by a RateLimiter. */
export interface Permit {
  /** The limiter clock's instant at which the request was let through. */
  readonly grantedAt: number;
  /**
   * The request's answer has arrived (`answer`: its status), or it has failed or been abandoned
   * without one (no argument). Call once; later calls do nothing.
   */
  done(answer?: Answer): void;
}

/** What PlatformClient awaits before a rate-limited request. */
export interface RateLimiter {
  /**
   * Resolves when the request may leave; rejects with the signal's reason if it aborts first.
   * `waiter`: whose request it is, as the caller of the client passed it (CreateCallOptions), unread
   * by the client: for a limiter that serves its waiters in turns; one that does not ignores it.
   */
  take(signal?: AbortSignal, waiter?: unknown): Promise<Permit>;
  /** A new limiter in its place would behave exactly as this one from now on (it may be dropped); absent: never. */
  idle?(): boolean;
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

interface Slot {
  /** When its last request was answered; Infinity while one is in flight. */
  answeredAt: number;
  /** That answer came from the platform and was not a 429: the latency credit applies. */
  credited: boolean;
}

export class SlidingWindowLimiter implements RateLimiter {
  readonly #spanMs: number;
  readonly #clock: BucketClock;
  readonly #slots: Slot[];
  readonly #credit: RoundTripCredit;
  readonly #waiters: WaiterQueue<Permit>;

  constructor(o: SlidingWindowOptions) {
    if (!Number.isInteger(o.limit) || o.limit < 1) throw new RangeError(`limit must be a positive integer, got ${o.limit}`);
    const windowMs = o.windowMs ?? 1_000;
    const marginMs = o.marginMs ?? 0;
    if (!(windowMs > 0) || !Number.isFinite(windowMs)) throw new RangeError(`windowMs must be a positive number, got ${windowMs}`);
    if (!(marginMs >= 0) || !Number.isFinite(marginMs)) throw new RangeError(`marginMs must be >= 0, got ${marginMs}`);
    this.#spanMs = windowMs + marginMs;
    this.#clock = o.clock ?? realClock;
    this.#slots = Array.from({ length: o.limit }, () => ({ answeredAt: Number.NEGATIVE_INFINITY, credited: false }));
    this.#credit = new RoundTripCredit(o.limit, windowMs);
    this.#waiters = new WaiterQueue<Permit>(
      {
        // The slot free soonest must be free now (Infinity while every slot is in flight).
        waitMs: (now) => this.#soonest(now).freeAt - now,
        grant: (now) => this.#occupy(now),
      },
      this.#clock,
    );
  }

  take(signal?: AbortSignal): Promise<Permit> {
    return this.#waiters.take(signal);
  }

  /**
   * Dropping this limiter and making a new one would change nothing: nobody waits, no request is in
   * flight, every slot's last answer is a whole span old (its window holds no creation), and the
   * latency credit keeps nothing that still counts (round-trip-credit.ts idle). Then every slot is
   * free whatever the credit, as a new limiter's are, and stays so until it is taken.
   */
  idle(): boolean {
    const now = this.#clock.now();
    return this.#waiters.length === 0 && this.#slots.every((slot) => slot.answeredAt + this.#spanMs <= now) && this.#credit.idle(now);
  }

  /** The slot free soonest, and when, with the credit as it stands `now` (the moment a request would leave). */
  #soonest(now: number): { slot: Slot; freeAt: number } {
    const credit = this.#credit.creditMs(now);
    let best = { slot: this.#slots[0] as Slot, freeAt: Number.POSITIVE_INFINITY };
    for (const slot of this.#slots) {
      const freeAt = slot.answeredAt + this.#spanMs - (slot.credited ? credit : 0);
      if (freeAt < best.freeAt) best = { slot, freeAt };
    }
    return best;
  }

  #occupy(now: number): Permit {
    const { slot } = this.#soonest(now);
    slot.answeredAt = Number.POSITIVE_INFINITY;
    slot.credited = false;
    let open = true;
    return {
      grantedAt: now,
      done: (answer) => {
        if (!open) return;
        open = false;
        const at = this.#clock.now();
        slot.answeredAt = at;
        // A 5xx may come from a gateway while the request still travels on to the platform: no
        // proof of arrival, no credit. A 429: the platform counted more than meant.
        slot.credited = answer !== undefined && answer.status < 500 && answer.status !== 429;
        if (slot.credited) this.#credit.answered(now, at);
        if (answer?.status === 429) this.#credit.refused(at);
        this.#waiters.poke();
      },
    };
  }
}

/** The platform's limit on organization API key creation (docs/platform-api.md, Limits). */
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
