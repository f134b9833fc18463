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

export interface Gate {
  /** Milliseconds until one more request may go; 0 or less: now. */
  waitMs(now: number): number;
  /** One request goes now. */
  grant(now: number): void;
}

interface Waiter {
  resolve: (grantedAt: number) => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class WaiterQueue {
  readonly #gate: Gate;
  readonly #clock: BucketClock;
  readonly #queue: Waiter[] = [];
  #cancelTimer: (() => void) | undefined;

  constructor(gate: Gate, clock: BucketClock) {
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

  /**
   * Resolves when the caller may go, with the clock instant at which it was let through; rejects
   * with the signal's reason if it aborts first.
   */
  take(signal?: AbortSignal): Promise<number> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const now = this.#takeNow();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise<number>((resolve, reject) => {
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

  #takeNow(): number | undefined {
    if (this.#queue.length > 0) return undefined;
    const now = this.#clock.now();
    if (this.#gate.waitMs(now) > 0) return undefined;
    this.#gate.grant(now);
    return now;
  }

  #pump(): void {
    if (this.#cancelTimer !== undefined) return;
    let now = this.#clock.now();
    while (this.#queue.length > 0 && this.#gate.waitMs(now) <= 0) {
      const waiter = this.#queue.shift() as Waiter;
      this.#gate.grant(now);
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.resolve(now);
      now = this.#clock.now();
    }
    if (this.#queue.length === 0) return;
    this.#cancelTimer = this.#clock.schedule(() => {
      this.#cancelTimer = undefined;
      this.#pump();
    }, Math.max(1, Math.ceil(this.#gate.waitMs(now))));
  }

  #stopTimer(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
  }
}
