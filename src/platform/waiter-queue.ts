// The waiting half of the client-side limiters (token-bucket.ts, sliding-window.ts): callers wait
// first come, first served, a waiter whose signal aborts leaves the line, and ONE timer releases
// them. Each limiter supplies the gate: how long until one more request may go, and the grant.
//
// A waiter's token is taken at the moment it is released, never computed up front: when the event
// loop is busy, timers that fire late fire together, and precomputed release times would let the
// requests leave in a clump the platform counts as a burst.

export interface BucketClock {
  /** Monotonic milliseconds. */
  now(): number;
  /** Runs `fn` after `ms`; returns a function that cancels it. */
  schedule(fn: () => void, ms: number): () => void;
}

export const realClock: BucketClock = {
  now: () => performance.now(),
  schedule(fn, ms) {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};

export interface Gate<T> {
  /** Milliseconds until one more request may go; 0 or less: now; Infinity: not before a poke(). */
  waitMs(now: number): number;
  /** One request goes now; what the caller receives. */
  grant(now: number): T;
}

interface Waiter<T> {
  resolve: (granted: T) => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class WaiterQueue<T> {
  readonly #gate: Gate<T>;
  readonly #clock: BucketClock;
  readonly #queue: Waiter<T>[] = [];
  #cancelTimer: (() => void) | undefined;

  constructor(gate: Gate<T>, clock: BucketClock) {
    this.#gate = gate;
    this.#clock = clock;
  }

  /** Callers waiting. */
  get length(): number {
    return this.#queue.length;
  }

  /** Goes at once if nobody waits and the gate allows it; never waits. */
  tryTake(): boolean {
    return this.#takeNow() !== undefined;
  }

  /** Resolves when the caller may go, with the gate's grant; rejects with the signal's reason if it aborts first. */
  take(signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const granted = this.#takeNow();
    if (granted !== undefined) return Promise.resolve(granted.value);
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
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

  /** The gate may open sooner than it said (a request it was waiting on has finished): look again. */
  poke(): void {
    if (this.#queue.length === 0) return;
    this.#stopTimer();
    this.#pump();
  }

  #takeNow(): { value: T } | undefined {
    if (this.#queue.length > 0) return undefined;
    const now = this.#clock.now();
    if (this.#gate.waitMs(now) > 0) return undefined;
    return { value: this.#gate.grant(now) };
  }

  #pump(): void {
    if (this.#cancelTimer !== undefined) return;
    let now = this.#clock.now();
    while (this.#queue.length > 0 && this.#gate.waitMs(now) <= 0) {
      const waiter = this.#queue.shift() as Waiter<T>;
      const granted = this.#gate.grant(now);
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve(granted);
      now = this.#clock.now();
    }
    if (this.#queue.length === 0) return;
    const wait = this.#gate.waitMs(now);
    // Infinity: the gate waits for something other than time (a poke() will come).
    if (!Number.isFinite(wait)) return;
    this.#cancelTimer = this.#clock.schedule(
      () => {
        this.#cancelTimer = undefined;
        this.#pump();
      },
      Math.max(1, Math.ceil(wait)),
    );
  }

  #stopTimer(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
  }
}
