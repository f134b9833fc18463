// The organization's rate limiter, served in fair turns too.
//
// A create that has its turn in the organization's line (create-admission.ts) is read and its
// intent written, then it waits for the platform's rate limit (src/platform/sliding-window.ts),
// whose waiters go first come, first served. Up to 30 creates of one organization are admitted at
// once, so a quiet namespace's key, admitted at its fair turn, would still wait behind up to 29 of
// a flooding namespace's creates there: about 3 s at 10/s. So this wrapper hands the limiter one
// waiter at a time, the next one from the namespace that had the fewest permits in the last
// `recentMs` (5 s), a broken key first among as many, then the namespace served least lately
// (RecentShareLine below); the limiter's throughput is the same (it always has the next create
// waiting), and a quiet namespace's create is the next one it lets through. Counting permits over
// a few seconds rather than turns since the namespace started waiting (as the organization's line
// does, create-line.ts) matters for a quiet namespace's second create: one that comes right after
// its first (a key applied 2 s after another, seen late in a burst) would otherwise wait a whole
// round of every flooding namespace, 1.1 s among eleven. Over 5 s it has had fewer permits than each
// flood, so it goes next; a namespace cannot take more than the others' share either, as every
// permit it takes counts against it for 5 s. What a namespace that starts waiting can have before
// the others is bounded by the window: the permits the others had in it.
//
// Which key a take() is for comes from the async context of its reconcile (sendsFor, around the
// create): the platform client knows nothing of namespaces. A take() outside any (another caller
// of the limiter) waits in a namespace of its own.
//
// The next permit must also come soon. The platform counts 10 creates in any second, and the
// limiter frees each of its 10 slots a second after that slot's answer: a backlog that began with
// 10 creates at once keeps them in a clump, 10 permits at one instant then none for a second, for
// as long as it lasts. A quiet namespace's create that arrives just after a clump is next, and still
// waits up to a second for the next clump (measured: 0.9-1.4 s of a ten-flood run's slowest keys).
// So while creates of more than one namespace share the organization, permits are spread: one at
// most every `spacingMs` (a little under the window over the limit: 90 ms), and a clump spreads
// out over one round of the window. The rate is the same (each slot still goes again a window after its answer);
// what it costs is one round's spreading, under a second, when a backlog begins. A namespace alone
// is not spread (nobody waits behind its clump; the convergence keeps its figure): a burst
// of up to 10 creates still goes at once.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Permit, RateLimiter } from '../../../platform/index.ts';
import { realClock, type BucketClock } from '../../../platform/waiter-queue.ts';
import { PRIORITIES, namespaceOf, type Priority } from './create-line.ts';

const sender = new AsyncLocalStorage<{ key: string; priority: Priority }>();

/** Runs `fn` (a create of `key`, a work-queue key `kind/namespace/name`) with its limiter waits in that key's fair turns. */
export function sendsFor<T>(key: string, priority: Priority, fn: () => Promise<T>): Promise<T> {
  return sender.run({ key, priority }, fn);
}

interface Waiter {
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

interface Flow {
  /** Waiting items, one insertion-ordered set per priority rank. */
  readonly items: Set<string>[];
  size: number;
  /** When its permits of the window were handed out, oldest first. */
  readonly permits: number[];
  /** The line's serial number of its last permit (0: none): the older goes first on a tie. */
  lastTurn: number;
}

/**
 * The limiter's waiters, one flow per namespace: the next item is from the flow with the fewest
 * permits in the last `windowMs`, then the most urgent, then the one served least lately.
 */
class RecentShareLine {
  readonly #windowMs: number;
  readonly #now: () => number;
  readonly #flows = new Map<string, Flow>();
  readonly #where = new Map<string, { flow: Flow; rank: number }>();
  #serial = 0;

  constructor(windowMs: number, now: () => number) {
    this.#windowMs = windowMs;
    this.#now = now;
  }

  get size(): number {
    return this.#where.size;
  }

  add(item: string, priority: Priority): void {
    const namespace = namespaceOf(item);
    let flow = this.#flows.get(namespace);
    if (flow === undefined) {
      flow = { items: PRIORITIES.map(() => new Set<string>()), size: 0, permits: [], lastTurn: 0 };
      this.#flows.set(namespace, flow);
    }
    const rank = PRIORITIES.indexOf(priority);
    flow.items[rank]?.add(item);
    flow.size++;
    this.#where.set(item, { flow, rank });
  }

  delete(item: string): boolean {
    const at = this.#where.get(item);
    if (at === undefined) return false;
    this.#where.delete(item);
    at.flow.items[at.rank]?.delete(item);
    at.flow.size--;
    return true;
  }

  /** The next item, taken out of the line and counted as its namespace's permit now. */
  next(): string | undefined {
    this.#forgetOld();
    let best: { flow: Flow; rank: number } | undefined;
    for (const flow of this.#flows.values()) {
      if (flow.size === 0) continue;
      const rank = flow.items.findIndex((set) => set.size > 0);
      if (
        best === undefined ||
        flow.permits.length < best.flow.permits.length ||
        (flow.permits.length === best.flow.permits.length && (rank < best.rank || (rank === best.rank && flow.lastTurn < best.flow.lastTurn)))
      )
        best = { flow, rank };
    }
    if (best === undefined) return undefined;
    const { flow, rank } = best;
    const item = flow.items[rank]?.values().next().value as string;
    flow.items[rank]?.delete(item);
    flow.size--;
    this.#where.delete(item);
    flow.permits.push(this.#now());
    flow.lastTurn = ++this.#serial;
    return item;
  }

  /** Nothing waits and no namespace had a permit within the window: a new line would serve alike. */
  empty(): boolean {
    return this.active() === 0;
  }

  /** Namespaces with items waiting or a permit in the window. */
  active(): number {
    this.#forgetOld();
    return this.#flows.size;
  }

  /** Drops the permits older than the window, and the flows left with none and nothing waiting. */
  #forgetOld(): void {
    const since = this.#now() - this.#windowMs;
    for (const [namespace, flow] of this.#flows) {
      while (flow.permits.length > 0 && (flow.permits[0] as number) <= since) flow.permits.shift();
      if (flow.permits.length === 0 && flow.size === 0) this.#flows.delete(namespace);
    }
  }
}

export class FairLimiter implements RateLimiter {
  readonly #inner: RateLimiter;
  readonly #line: RecentShareLine;
  readonly #waiters = new Map<string, Waiter>();
  readonly #spacingMs: number;
  readonly #clock: BucketClock;
  #lastGrantAt = Number.NEGATIVE_INFINITY;
  #serial = 0;
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
      this.#waiters.size === 0 &&
      !this.#taking &&
      this.#cancelSpacing === undefined &&
      this.#lastGrantAt + this.#spacingMs <= this.#clock.now() &&
      this.#line.empty() &&
      this.#inner.idle?.() === true
    );
  }

  take(signal?: AbortSignal): Promise<Permit> {
    if (signal?.aborted === true) return Promise.reject(signal.reason);
    const context = sender.getStore();
    // Unique per take (a key makes one create at a time, but a token must never be shared).
    const token = `${context?.key ?? 'other//'}#${++this.#serial}`;
    return new Promise<Permit>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          if (!this.#line.delete(token)) return; // at the inner limiter: it rejects
          this.#waiters.delete(token);
          reject(signal?.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.#waiters.set(token, waiter);
      this.#line.add(token, context?.priority ?? 'create');
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
    const token = this.#line.next() as string;
    const waiter = this.#waiters.get(token) as Waiter;
    this.#waiters.delete(token);
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
