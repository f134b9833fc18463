// The second limiter of the controller (the first is the queue's, runtime/queue.ts, for failures):
// a refusal by a remote system (401, 403, 429, an outage) is retried after seconds to minutes, never
// in a hot loop: 1 s doubling per refusal up to a ceiling, and never sooner than the remote asked
// (Retry-After). It owns the refusal count of each key; a success forgets it.

export interface RefusalLimiterOptions {
  /** First delay; doubles with each refusal. Default 1 s. */
  baseDelayMs?: number;
  /** Ceiling of the delay (a Retry-After may ask for more). Default 5 min. */
  maxDelayMs?: number;
}

export class RefusalLimiter<K extends string> {
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #refusals = new Map<K, number>();

  constructor(options: RefusalLimiterOptions = {}) {
    this.#baseDelayMs = options.baseDelayMs ?? 1_000;
    this.#maxDelayMs = options.maxDelayMs ?? 300_000;
  }

  /** The delay before the next attempt at key; records one more refusal of key. */
  when(key: K, minDelayMs = 0): number {
    const refusals = (this.#refusals.get(key) ?? 0) + 1;
    this.#refusals.set(key, refusals);
    return Math.max(minDelayMs, Math.min(this.#maxDelayMs, this.#baseDelayMs * 2 ** (refusals - 1)));
  }

  forget(key: K): void {
    this.#refusals.delete(key);
  }
}
