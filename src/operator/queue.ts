// The work queue of the controller, with the semantics of client-go's workqueue
// (k8s.io/client-go/util/workqueue), which controller-runtime builds on (DESIGN.md section 5):
//
// - a key is deduplicated while it waits ("dirty" set);
// - a key is never handed to two workers at once: an add() while it is being processed marks it
//   dirty, and done() puts it back in the queue;
// - addAfter() delays an add (requeue-after); of two delays for one key the earlier wins;
// - addRateLimited() delays by max(per-item exponential backoff 5 ms .. 5 min, global token
//   bucket 10 qps burst 100), like DefaultControllerRateLimiter; forget() resets the item.
//
// One deliberate difference from client-go: once shut down, get() returns undefined at once even if
// keys are still queued. Reconcile is level-triggered (DESIGN.md section 5), so a dropped key costs
// nothing: the next leader lists every resource at start-up and reconciles it anyway, while handing
// out new work during SIGTERM would only delay the exit.

export interface WorkQueueMetrics {
  /** Current number of keys waiting (not counting delayed or in-flight keys). */
  depth(n: number): void;
  /** A key entered the queue (after deduplication). */
  add(): void;
  /** Seconds a key waited between entering the queue and get(). */
  queueLatency(seconds: number): void;
  /** Seconds between get() and done(). */
  workDuration(seconds: number): void;
  /** addRateLimited() was called. */
  retry(): void;
}

export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface RateLimiterOptions {
  /** First per-item delay; doubles with each failure. Default 5 ms. */
  baseDelayMs?: number;
  /** Cap of the per-item delay. Default 5 min. */
  maxDelayMs?: number;
  /** Global token bucket refill rate. Default 10 per second. */
  qps?: number;
  /** Global token bucket size. Default 100. */
  burst?: number;
}

/**
 * client-go's DefaultControllerRateLimiter: the max of an ItemExponentialFailureRateLimiter and a
 * BucketRateLimiter. Exported for its tests and for callers that need a delay without a queue.
 */
export class ControllerRateLimiter<K extends string> {
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  readonly #failures = new Map<K, number>();
  #tokens: number;
  #last: number;

  constructor(options: RateLimiterOptions = {}, now: () => number = realTimers.now) {
    this.#baseDelayMs = options.baseDelayMs ?? 5;
    this.#maxDelayMs = options.maxDelayMs ?? 5 * 60_000;
    this.#qps = options.qps ?? 10;
    this.#burst = options.burst ?? 100;
    this.#now = now;
    this.#tokens = this.#burst;
    this.#last = now();
  }

  /** The delay before the next attempt at key; records one more failure of key. */
  when(key: K): number {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    // 2^failures overflows to Infinity long after it passes the cap; min() handles both.
    const itemDelay = Math.min(this.#baseDelayMs * 2 ** failures, this.#maxDelayMs);
    return Math.max(itemDelay, this.#reserve());
  }

  numRequeues(key: K): number {
    return this.#failures.get(key) ?? 0;
  }

  forget(key: K): void {
    this.#failures.delete(key);
  }

  /** Takes one token (possibly going into debt, like rate.Limiter.Reserve) and returns the wait. */
  #reserve(): number {
    const now = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) * this.#qps) / 1000);
    this.#last = now;
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens / this.#qps) * 1000;
  }
}

export interface WorkQueueOptions {
  rateLimiter?: RateLimiterOptions;
  metrics?: WorkQueueMetrics;
  timers?: Timers;
}

interface Delayed {
  readyAt: number;
  handle: unknown;
}

export class WorkQueue<K extends string> {
  readonly #queue: K[] = [];
  /** Keys that need processing: queued, or re-added while in flight. */
  readonly #dirty = new Set<K>();
  readonly #processing = new Map<K, number>();
  readonly #addedAt = new Map<K, number>();
  readonly #delayed = new Map<K, Delayed>();
  readonly #waiters: ((key: K | undefined) => void)[] = [];
  readonly #drainWaiters: (() => void)[] = [];
  readonly #limiter: ControllerRateLimiter<K>;
  readonly #metrics: WorkQueueMetrics | undefined;
  readonly #timers: Timers;
  #shuttingDown = false;

  constructor(options: WorkQueueOptions = {}) {
    this.#timers = options.timers ?? realTimers;
    this.#metrics = options.metrics;
    this.#limiter = new ControllerRateLimiter<K>(options.rateLimiter, () => this.#timers.now());
  }

  add(key: K): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#metrics?.add();
    this.#dirty.add(key);
    if (this.#processing.has(key)) return; // done() re-queues it
    this.#enqueue(key);
  }

  addAfter(key: K, delayMs: number): void {
    if (this.#shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const readyAt = this.#timers.now() + delayMs;
    const existing = this.#delayed.get(key);
    if (existing !== undefined) {
      if (existing.readyAt <= readyAt) return; // the earlier requeue already covers this one
      this.#timers.clearTimeout(existing.handle);
    }
    const handle = this.#timers.setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, delayMs);
    this.#delayed.set(key, { readyAt, handle });
  }

  addRateLimited(key: K): void {
    this.#metrics?.retry();
    this.addAfter(key, this.#limiter.when(key));
  }

  forget(key: K): void {
    this.#limiter.forget(key);
  }

  numRequeues(key: K): number {
    return this.#limiter.numRequeues(key);
  }

  /** The next key to process, or undefined once the queue is shut down. Call done(key) after. */
  get(): Promise<K | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    const key = this.#queue.shift();
    if (key !== undefined) return Promise.resolve(this.#start(key));
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  done(key: K): void {
    const started = this.#processing.get(key);
    if (started === undefined) return;
    this.#processing.delete(key);
    this.#metrics?.workDuration((this.#timers.now() - started) / 1000);
    if (this.#dirty.has(key) && !this.#shuttingDown) this.#enqueue(key);
    if (this.#processing.size === 0) this.#drainWaiters.splice(0).forEach((resolve) => resolve());
  }

  /** Keys waiting to be handed out (not delayed, not in flight). */
  len(): number {
    return this.#queue.length;
  }

  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Stops handing out keys; ignores further adds; idle get() calls resolve to undefined. */
  shutDown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    for (const { handle } of this.#delayed.values()) this.#timers.clearTimeout(handle);
    this.#delayed.clear();
    this.#queue.length = 0;
    this.#dirty.clear();
    this.#addedAt.clear();
    this.#metrics?.depth(0);
    this.#waiters.splice(0).forEach((resolve) => resolve(undefined));
  }

  /** shutDown(), then resolves once every key handed out has been marked done. */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    if (this.#processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  #enqueue(key: K): void {
    this.#addedAt.set(key, this.#timers.now());
    const waiter = this.#waiters.shift();
    if (waiter !== undefined) {
      waiter(this.#start(key));
      return;
    }
    this.#queue.push(key);
    this.#metrics?.depth(this.#queue.length);
  }

  #start(key: K): K {
    this.#dirty.delete(key);
    const now = this.#timers.now();
    const addedAt = this.#addedAt.get(key);
    this.#addedAt.delete(key);
    if (addedAt !== undefined) this.#metrics?.queueLatency((now - addedAt) / 1000);
    this.#processing.set(key, now);
    this.#metrics?.depth(this.#queue.length);
    return key;
  }
}
