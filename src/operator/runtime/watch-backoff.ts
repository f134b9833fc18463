// The pause before an informer's next LIST or WATCH after a failure (client-go's reflector backoff:
// 800 ms doubling to 30 s, reset after two quiet minutes). Exponential, capped, with jitter that only
// lengthens a pause, so at the cap an informer sends at most one request per `maxMs`. It is reset
// only by a watch that stayed open a while (reflector.ts), never by one that opened and failed at
// once: client-node's ListWatch reset its delay on every start, so an apiserver refusing a namespace
// got a request (and a log line) every second from every informer.

export interface WatchBackoffOptions {
  /** The first pause. Default 1 s. */
  initialMs?: number;
  /** The cap. Default 60 s. */
  maxMs?: number;
  /** Each pause lengthened by up to this fraction of itself, at random. Default 0.1. */
  jitter?: number;
  random?: () => number;
}

export class WatchBackoff {
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #jitter: number;
  readonly #random: () => number;
  #failures = 0;

  constructor(options: WatchBackoffOptions = {}) {
    this.#initialMs = options.initialMs ?? 1_000;
    this.#maxMs = options.maxMs ?? 60_000;
    this.#jitter = options.jitter ?? 0.1;
    this.#random = options.random ?? Math.random;
    if (!(this.#initialMs > 0) || !(this.#maxMs >= this.#initialMs))
      throw new Error(`watch backoff: need 0 < initial (${this.#initialMs}) <= max (${this.#maxMs})`);
  }

  /** The pause before the next attempt, counting one more failure. */
  next(): number {
    const base = Math.min(this.#maxMs, this.#initialMs * 2 ** Math.min(this.#failures, 40));
    this.#failures++;
    return Math.round(base * (1 + this.#jitter * this.#random()));
  }

  /** Failures counted since the last reset. */
  get failures(): number {
    return this.#failures;
  }

  reset(): void {
    this.#failures = 0;
  }
}
