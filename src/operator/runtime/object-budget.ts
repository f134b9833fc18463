// How many bytes of large objects the workers may have in hand at once. A reconcile reads its
// object fresh, writes it back and parses the answer: several copies of an object a tenant may
// have made 1.5 MiB, and N workers at once (a restart reconciles every object) multiply that. So a
// reconcile of an object of LARGE_OBJECT_BYTES or more (its size as last listed or watched,
// informer-cache.ts cachedBytes) first takes its size from this budget, and gives it back when it
// ends; an object over the whole budget takes all of it, and runs alone. Smaller objects (a key as
// teams write it is 1 to 2 KiB) take nothing and never wait. Waiters are served in order.

/** An object this large or larger is counted (bytes as sent). */
export const LARGE_OBJECT_BYTES = 64 * 1024;

export class ObjectBudget {
  readonly #capacity: number;
  #free: number;
  readonly #waiting: { bytes: number; grant: () => void }[] = [];

  constructor(capacityBytes: number) {
    this.#capacity = capacityBytes;
    this.#free = capacityBytes;
  }

  /** What an object of `bytes` takes from the budget (0: small, it does not wait). */
  weight(bytes: number | undefined): number {
    return bytes === undefined || bytes < LARGE_OBJECT_BYTES ? 0 : Math.min(bytes, this.#capacity);
  }

  /** Takes `weight` (from weight()): undefined when granted at once, else a promise granted in turn. */
  take(weight: number): Promise<void> | undefined {
    if (weight === 0) return undefined;
    if (this.#waiting.length === 0 && weight <= this.#free) {
      this.#free -= weight;
      return undefined;
    }
    return new Promise((grant) => this.#waiting.push({ bytes: weight, grant }));
  }

  give(weight: number): void {
    if (weight === 0) return;
    this.#free += weight;
    for (let next = this.#waiting[0]; next !== undefined && next.bytes <= this.#free; next = this.#waiting[0]) {
      this.#waiting.shift();
      this.#free -= next.bytes;
      next.grant();
    }
  }

  /** Bytes taken now (tests, metrics). */
  inUse(): number {
    return this.#capacity - this.#free;
  }
}
