// The organization's rate limiter, its waiters served in fair turns too.
//
// A create admitted at its turn (create-admission.ts) then waits for the platform's rate limit
// (src/platform/sliding-window.ts), whose waiters go first come, first served: a quiet namespace's
// create would wait there behind every create a flooding namespace has admitted. So this wrapper
// hands the limiter one waiter at a time, from the namespace with the fewest permits in the last
// `recentMs` (a broken key first among as many, then the namespace served least lately). The
// limiter's throughput is the same. Counted over a recent window rather than since the namespace
// started waiting (as the organization's line does), a quiet namespace's second create, right after
// its first, still goes before a round of every flood.
//
// While creates of more than one namespace share the organization, permits are also spread, one at
// most every `spacingMs`: a backlog otherwise keeps its permits in clumps (all slots at one instant,
// then none for a window), and a quiet namespace's create that comes just after a clump waits for
// the next one. A namespace alone is not spread: its burst goes at once. docs/design.md (the
// fairness of a create's turn) says more.
//
// Whose create a take() is for comes with it: the opaque waiter the platform client passes on
// (CreateWaiter, made by the create's turn: create-turn.ts). Any other take() waits in a flow of its own.
import type { Permit, RateLimiter } from '../../../platform/index.ts';
import { realClock, type BucketClock } from '../../../platform/waiter-queue.ts';
import { FairLine, lowestCountFirst, type TurnRule } from '../../runtime/fair-line.ts';
import { PRIORITIES, namespaceOf, rankOf, type Priority } from './create-line.ts';

/** Whose create waits at the limiter: what a create in its turn gives the platform client, which hands it to take() unread. */
export class CreateWaiter {
  /** The work-queue key (`kind/namespace/name`) of the resource whose key is created: its namespace is the flow. */
  readonly key: string;
  readonly priority: Priority;

  constructor(key: string, priority: Priority) {
    this.key = key;
    this.priority = priority;
  }
}

interface Waiter {
  readonly flow: string;
  resolve(permit: Permit): void;
  reject(reason: unknown): void;
  signal: AbortSignal | undefined;
  onAbort(): void;
}

export interface FairLimiterOptions {
  /** While more than one namespace creates, one permit at most this often. Default 0 (never spread). */
  spacingMs?: number;
  /** The window over which each namespace's permits are counted (who goes next, who is creating). Default 5 s. */
  recentMs?: number;
  clock?: BucketClock;
}

interface Recent {
  /** When its permits of the window were handed out, oldest first. */
  readonly permits: number[];
}

/** The fewest permits in the window first; a flow is kept while it has one there. */
class FewestRecent implements TurnRule<Recent> {
  readonly #now: () => number;
  readonly before = lowestCountFirst<Recent>((flow) => flow.permits.length);

  constructor(now: () => number) {
    this.#now = now;
  }

  open(): Recent {
    return { permits: [] };
  }

  served(flow: Recent): void {
    flow.permits.push(this.#now());
  }

  keep(flow: Recent): boolean {
    return flow.permits.length > 0;
  }
}

/** The limiter's waiters, one flow per namespace, by FewestRecent. */
class RecentShareLine {
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #line: FairLine<Waiter, Recent>;

  constructor(windowMs: number, now: () => number) {
    this.#windowMs = windowMs;
    this.#now = now;
    this.#line = new FairLine<Waiter, Recent>(new FewestRecent(now), (waiter) => waiter.flow, PRIORITIES.length);
  }

  get size(): number {
    return this.#line.size;
  }

  add(waiter: Waiter, priority: Priority): void {
    this.#line.add(waiter, rankOf(priority));
  }

  delete(waiter: Waiter): boolean {
    return this.#line.delete(waiter);
  }

  /** The next waiter, taken out of the line and counted as its namespace's permit now. */
  next(): Waiter | undefined {
    this.#forgetOld();
    return this.#line.next();
  }

  /** Nothing waits and no namespace had a permit within the window: a new line would serve alike. */
  empty(): boolean {
    return this.active() === 0;
  }

  /** Namespaces with waiters or a permit in the window. */
  active(): number {
    this.#forgetOld();
    return this.#line.flowsKept;
  }

  /** Drops the permits older than the window, and the flows left with none and nothing waiting. */
  #forgetOld(): void {
    const since = this.#now() - this.#windowMs;
    for (const { state } of this.#line.flows()) {
      while (state.permits.length > 0 && (state.permits[0] as number) <= since) state.permits.shift();
    }
    this.#line.forget();
  }
}

export class FairLimiter implements RateLimiter {
  readonly #inner: RateLimiter;
  readonly #line: RecentShareLine;
  readonly #spacingMs: number;
  readonly #clock: BucketClock;
  #lastGrantAt = Number.NEGATIVE_INFINITY;
  /** One waiter is at the inner limiter. */
  #taking = false;
  /** The next hand-off waits for the spacing. */
  #cancelSpacing: (() => void) | undefined;

  constructor(inner: RateLimiter, options: FairLimiterOptions = {}) {
    this.#inner = inner;
    this.#spacingMs = options.spacingMs ?? 0;
    this.#clock = options.clock ?? realClock;
    this.#line = new RecentShareLine(options.recentMs ?? 5_000, () => this.#clock.now());
  }

  /**
   * A new FairLimiter over a new inner limiter would behave exactly as this one from now on, so it
   * may be dropped (manager.ts orgKeyLimiters): nobody waits or is at the inner limiter, no hand-off
   * waits for the spacing, the last permit is a spacing old, no namespace's permits are within the
   * window, and the inner limiter is idle (sliding-window.ts: nothing in its window). An inner
   * limiter that cannot tell is never idle.
   */
  idle(): boolean {
    return (
      !this.#taking &&
      this.#cancelSpacing === undefined &&
      this.#lastGrantAt + this.#spacingMs <= this.#clock.now() &&
      this.#line.empty() &&
      this.#inner.idle?.() === true
    );
  }

  /** `waiter`: a CreateWaiter, for a create's fair turn; anything else waits in a flow of its own. */
  take(signal?: AbortSignal, waiter?: unknown): Promise<Permit> {
    if (signal?.aborted === true) return Promise.reject(signal.reason);
    const create = waiter instanceof CreateWaiter ? waiter : undefined;
    return new Promise<Permit>((resolve, reject) => {
      const waiting: Waiter = {
        flow: create === undefined ? '' : namespaceOf(create.key),
        resolve,
        reject,
        signal,
        onAbort: () => {
          if (!this.#line.delete(waiting)) return; // at the inner limiter: it rejects
          reject(signal?.reason);
        },
      };
      signal?.addEventListener('abort', waiting.onAbort, { once: true });
      this.#line.add(waiting, create?.priority ?? 'create');
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#taking || this.#cancelSpacing !== undefined || this.#line.size === 0) return;
    const waitMs = this.#lastGrantAt + this.#spacingMs - this.#clock.now();
    // Spread while more than one namespace creates: waits or had a permit in the window.
    if (waitMs > 0 && this.#line.active() > 1) {
      // The turn is chosen when the wait ends: a repair that arrives meanwhile still goes first.
      this.#cancelSpacing = this.#clock.schedule(() => {
        this.#cancelSpacing = undefined;
        this.#pump();
      }, Math.ceil(waitMs));
      return;
    }
    const waiter = this.#line.next() as Waiter;
    this.#taking = true;
    const settle = (): void => {
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      this.#taking = false;
      this.#pump();
    };
    this.#inner.take(waiter.signal).then(
      (permit) => {
        this.#lastGrantAt = this.#clock.now();
        settle();
        waiter.resolve(permit);
      },
      (error: unknown) => {
        settle();
        waiter.reject(error);
      },
    );
  }
}
